import Foundation
import ParleyWire

/// The checks every input goes through before anything is written. Each throws a 400
/// `invalid_request` whose message names the field and the rule.
enum Validate {
    /// A username is a handle (`ana`, `ana.b-2`) or an e-mail address (`ana@example.com`), for
    /// apps whose sign-in form asks for an e-mail. Both are stored as given and compared,
    /// searched and kept unique case-insensitively (the key is the lowercased name).
    static func username(_ name: String) throws -> (display: String, key: String) {
        let scalars = name.unicodeScalars
        if scalars.contains("@") {
            guard isEmailAddress(name) else {
                throw ChatError.invalid("username '\(name.prefix(64))' is not an e-mail address: local@domain.tld, at most \(Limits.emailUsernameMax) characters, "
                    + "the local part letters, digits and . _ % + -, the domain letters, digits and - in dot-separated labels")
            }
            return (name, name.lowercased())
        }
        guard Limits.username.contains(scalars.count) else {
            throw ChatError.invalid("username must be \(Limits.username.lowerBound)–\(Limits.username.upperBound) characters (or an e-mail address)")
        }
        guard scalars.allSatisfy({ $0.isASCII && (isAlphanumeric($0) || "._-".unicodeScalars.contains($0)) }),
              let first = scalars.first, isAlphanumeric(first) else {
            throw ChatError.invalid("username may use letters, digits, '.', '_' and '-', and must start with a letter or digit (or be an e-mail address)")
        }
        return (name, name.lowercased())
    }

    /// An ASCII e-mail address of the common shape (RFC 5321's dot-atom local part without
    /// quoting, a domain of at least two LDH labels): what sign-up forms accept, no more.
    static func isEmailAddress(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count <= Limits.emailUsernameMax, let at = bytes.firstIndex(of: UInt8(ascii: "@")),
              bytes.lastIndex(of: UInt8(ascii: "@")) == at else { return false }
        let local = bytes[..<at], domain = bytes[(at + 1)...]
        guard (1...64).contains(local.count), local.first != UInt8(ascii: "."), local.last != UInt8(ascii: "."),
              !local.indices.dropFirst().contains(where: { local[$0] == UInt8(ascii: ".") && local[$0 - 1] == UInt8(ascii: ".") }),
              local.allSatisfy({ isASCIIAlphanumeric($0) || Array("._%+-".utf8).contains($0) }) else { return false }
        let labels = domain.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard labels.count >= 2 else { return false }
        return labels.allSatisfy { label in
            (1...63).contains(label.count) && label.first != UInt8(ascii: "-") && label.last != UInt8(ascii: "-")
                && label.allSatisfy { isASCIIAlphanumeric($0) || $0 == UInt8(ascii: "-") }
        }
    }

    static func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// A username given to look someone up: only its shape is checked loosely, so a bad one is
    /// simply "not found" (reported back as invalid), never a 400 for the whole request.
    static func usernameKey(_ name: String) -> String? {
        guard let (_, key) = try? username(name) else { return nil }
        return key
    }

    static func password(_ password: String, username: String?) throws {
        guard Limits.passwordBytes.contains(password.utf8.count) else {
            throw ChatError.invalid("password must be \(Limits.passwordBytes.lowerBound)–\(Limits.passwordBytes.upperBound) bytes")
        }
        guard !password.allSatisfy(\.isWhitespace) else { throw ChatError.invalid("password must not be only spaces") }
        if let username, password.lowercased() == username.lowercased() {
            throw ChatError.invalid("password must differ from the username")
        }
    }

    static func displayName(_ name: String) throws -> String {
        try trimmedText(name, field: "displayName", length: Limits.displayName)
    }

    static func device(_ label: String?) throws -> String {
        guard let label else { return "unnamed device" }
        return try trimmedText(label, field: "device", length: 1...Limits.deviceMax)
    }

    static func title(_ title: String) throws -> String {
        try trimmedText(title, field: "title", length: Limits.title)
    }

    /// A name shown to people: trimmed, `length` characters (Unicode scalars), no control characters.
    static func trimmedText(_ text: String, field: String, length: ClosedRange<Int>) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard length.contains(trimmed.unicodeScalars.count) else {
            throw ChatError.invalid("\(field) must be \(length.lowerBound)–\(length.upperBound) characters")
        }
        try noControlCharacters(trimmed, field: field)
        return trimmed
    }

    /// Returns the stored (encoded) form.
    static func customData(_ value: JSONValue, field: String = "customData") throws -> String {
        guard value.depth <= JSONValue.maxDepth else { throw ChatError.invalid("\(field) nests deeper than \(JSONValue.maxDepth) levels") }
        let text = try value.encoded()
        guard text.utf8.count <= Limits.customDataBytes else {
            throw ChatError.invalid("\(field) must encode to at most \(Limits.customDataBytes) bytes")
        }
        return text
    }

    static func clientID(_ id: String) throws {
        guard Limits.clientID.contains(id.utf8.count),
              id.unicodeScalars.allSatisfy({ $0.isASCII && (isAlphanumeric($0) || "-_.:".unicodeScalars.contains($0)) }) else {
            throw ChatError.invalid("clientId must be 1–64 characters from A-Z a-z 0-9 - _ . : (a UUID works)")
        }
    }

    static func content(_ content: MessageContent) throws {
        switch content {
        case .text(let text), .markdown(let text), .system(let text):
            let field = content.typeName
            // 10,000 scalars are at most 40,000 UTF-8 bytes: the count bounds the size too.
            guard Limits.textCharacters.contains(text.unicodeScalars.count) else {
                throw ChatError.invalid("\(field) must be 1–\(Limits.textCharacters.upperBound) characters")
            }
            guard !text.allSatisfy(\.isWhitespace) else { throw ChatError.invalid("\(field) must not be only spaces") }
        case .location(let location):
            guard location.latitude.isFinite, (-90...90).contains(location.latitude),
                  location.longitude.isFinite, (-180...180).contains(location.longitude) else {
                throw ChatError.invalid("latitude must be -90…90 and longitude -180…180")
            }
            if let name = location.name { try attachmentText(name, field: "name") }
            if let text = location.caption { try caption(text) }
        case .photo(let media), .video(let media), .file(let media):
            try attachment(media)
            guard media.voice == nil, media.waveform == nil else { throw ChatError.invalid("voice and waveform are for audio only") }
        case .audio(let media):
            try attachment(media)
            try voice(media)
        case .poll(let poll):
            try pollText(poll.question, field: "question", limit: Limits.pollQuestion)
            guard Limits.pollOptions.contains(poll.options.count) else {
                throw ChatError.invalid("a poll offers \(Limits.pollOptions.lowerBound)–\(Limits.pollOptions.upperBound) options")
            }
            for option in poll.options { try pollText(option, field: "each option", limit: Limits.pollOption) }
            let distinct = Set(poll.options.map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
            guard distinct.count == poll.options.count else { throw ChatError.invalid("a poll's options must all be different") }
        case .custom(let type, let payload):
            guard Limits.customType.contains(type.utf8.count),
                  type.unicodeScalars.allSatisfy({ $0.isASCII && (isAlphanumeric($0) || "-_.".unicodeScalars.contains($0)) }) else {
                throw ChatError.invalid("customType must be 1–64 characters from A-Z a-z 0-9 - _ .")
            }
            guard payload.depth <= JSONValue.maxDepth else { throw ChatError.invalid("payload nests deeper than \(JSONValue.maxDepth) levels") }
            guard try payload.encoded().utf8.count <= Limits.customPayloadBytes else {
                throw ChatError.invalid("payload must encode to at most \(Limits.customPayloadBytes) bytes")
            }
        }
    }

    /// A poll's question or option: `limit` characters, not only spaces, no control characters.
    private static func pollText(_ text: String, field: String, limit: ClosedRange<Int>) throws {
        guard limit.contains(text.unicodeScalars.count), !text.allSatisfy(\.isWhitespace) else {
            throw ChatError.invalid("\(field) must be \(limit.lowerBound)–\(limit.upperBound) characters, not only spaces")
        }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ChatError.invalid("\(field) must not contain control characters or line breaks")
        }
    }

    /// A poll's closing time, when it has one: after `now` and at most a year ahead.
    static func pollCloses(_ content: MessageContent, now: Int64) throws {
        guard case .poll(let poll) = content, let closesAt = poll.closesAt else { return }
        let at = Int64((closesAt.timeIntervalSince1970 * 1000).rounded(.down))
        guard at > now, at - now <= Int64(Limits.pollOpenSeconds) * 1000 else {
            throw ChatError.invalid("closesAt must be in the future and at most \(Limits.pollOpenSeconds / 86_400) days ahead")
        }
    }

    /// One emoji: a single grapheme cluster of emoji scalars (with skin tones, joiners,
    /// keycaps, flag tags), at most ``Limits/emojiBytes`` bytes. A variation selector after an
    /// emoji that shows as emoji anyway is dropped, so "👍" and "👍\u{FE0F}" are one reaction.
    ///
    /// - Returns: the emoji as stored.
    static func emoji(_ text: String) throws -> String {
        let problem = ChatError.invalid("emoji must be one emoji (a single character such as 👍 or 👨‍👩‍👧, at most \(Limits.emojiBytes) bytes)")
        guard !text.isEmpty, text.utf8.count <= Limits.emojiBytes, text.count == 1 else { throw problem }
        let scalars = Array(text.unicodeScalars)
        let allowed = scalars.allSatisfy { scalar in
            scalar.properties.isEmoji || scalar.properties.isEmojiModifier || [0x200D, 0xFE0F, 0x20E3].contains(scalar.value)
                || (0xE0020...0xE007F).contains(scalar.value)
        }
        // Digits, # and * are "emoji" only as keycaps or with the emoji variation selector.
        let shownAsEmoji = scalars.contains { $0.properties.isEmojiPresentation }
            || scalars.contains { $0.value == 0xFE0F || $0.value == 0x20E3 }
        guard allowed, shownAsEmoji, let first = scalars.first, first.properties.isEmoji else { throw problem }
        var kept = String.UnicodeScalarView()
        for (index, scalar) in scalars.enumerated() {
            if scalar.value == 0xFE0F, index > 0, scalars[index - 1].properties.isEmojiPresentation,
               index + 1 == scalars.count || scalars[index + 1].value != 0x20E3 { continue }
            kept.append(scalar)
        }
        return String(kept)
    }

    /// A note for people (a ban's reason, a report's note): 1–`max` characters, not only
    /// spaces, line breaks allowed, no other control characters; trimmed.
    static func note(_ text: String, field: String, max: Int) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.unicodeScalars.count <= max else { throw ChatError.invalid("\(field) must be 1–\(max) characters") }
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && $0 != "\n" }) else {
            throw ChatError.invalid("\(field) must not contain control characters other than line breaks")
        }
        return trimmed
    }

    static func metadata(_ metadata: [String: String]?) throws {
        guard let metadata else { return }
        guard metadata.count <= Limits.metadataEntries else {
            throw ChatError.invalid("metadata may have at most \(Limits.metadataEntries) entries")
        }
        for (key, value) in metadata {
            guard Limits.metadataKey.contains(key.utf8.count), value.utf8.count <= Limits.metadataValue else {
                throw ChatError.invalid("metadata keys must be 1–\(Limits.metadataKey.upperBound) bytes and values at most \(Limits.metadataValue) bytes")
            }
        }
    }

    static func names(_ names: [String], field: String) throws {
        guard names.count <= Limits.namesPerRequest else {
            throw ChatError.invalid("\(field) may list at most \(Limits.namesPerRequest) entries")
        }
        guard names.allSatisfy({ $0.utf8.count <= 256 }) else { throw ChatError.invalid("\(field) has an entry longer than 256 bytes") }
    }

    static func limit(_ value: Int?, in range: ClosedRange<Int>, default defaultValue: Int) throws -> Int {
        guard let value else { return defaultValue }
        guard range.contains(value) else { throw ChatError.invalid("limit must be \(range.lowerBound)–\(range.upperBound)") }
        return value
    }

    private static func attachment(_ media: Attachment) throws {
        guard Limits.attachmentID.contains(media.attachmentID.utf8.count), isToken(media.attachmentID) else {
            throw ChatError.invalid("attachmentId must be 1–128 characters from A-Z a-z 0-9 - _")
        }
        if let thumbnail = media.thumbnailID, !(Limits.attachmentID.contains(thumbnail.utf8.count) && isToken(thumbnail)) {
            throw ChatError.invalid("thumbnailId must be 1–128 characters from A-Z a-z 0-9 - _")
        }
        for (text, field) in [(media.name, "name"), (media.mimeType, "mimeType")] {
            if let text { try attachmentText(text, field: field) }
        }
        if let text = media.caption { try caption(text) }
        if let size = media.sizeBytes, size < 0 { throw ChatError.invalid("sizeBytes must not be negative") }
        if let width = media.width, !(1...100_000).contains(width) { throw ChatError.invalid("width must be 1–100000") }
        if let height = media.height, !(1...100_000).contains(height) { throw ChatError.invalid("height must be 1–100000") }
        if let duration = media.durationSeconds, !(duration.isFinite && duration >= 0 && duration <= 86_400) {
            throw ChatError.invalid("durationSeconds must be 0–86400")
        }
    }

    /// A voice message's fields: `voice` needs a duration over 0; a waveform has at most
    /// ``Limits/waveformValues`` values of 0–255 and belongs to a voice message.
    private static func voice(_ media: Attachment) throws {
        if media.voice == true, !((media.durationSeconds ?? 0) > 0) {
            throw ChatError.invalid("a voice message needs durationSeconds over 0")
        }
        guard let waveform = media.waveform else { return }
        guard media.voice == true else { throw ChatError.invalid("waveform is for voice messages (voice: true)") }
        guard (1...Limits.waveformValues).contains(waveform.count) else {
            throw ChatError.invalid("waveform must have 1–\(Limits.waveformValues) values")
        }
        guard waveform.allSatisfy({ (0...255).contains($0) }) else { throw ChatError.invalid("waveform values must be 0–255") }
    }

    private static func attachmentText(_ text: String, field: String) throws {
        guard !text.isEmpty, text.unicodeScalars.count <= Limits.attachmentText else {
            throw ChatError.invalid("\(field) must be 1–\(Limits.attachmentText) characters")
        }
        try noControlCharacters(text, field: field)
    }

    /// A caption: 1–``Limits/attachmentText`` characters, not only spaces; line breaks and
    /// tabs are kept (a caption is a short message), other control characters refused.
    private static func caption(_ text: String) throws {
        guard !text.isEmpty, text.unicodeScalars.count <= Limits.attachmentText else {
            throw ChatError.invalid("caption must be 1–\(Limits.attachmentText) characters")
        }
        guard !text.allSatisfy(\.isWhitespace) else { throw ChatError.invalid("caption must not be only spaces") }
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control && !"\n\t".unicodeScalars.contains($0) }) else {
            throw ChatError.invalid("caption must not contain control characters other than line breaks and tabs")
        }
    }

    private static func noControlCharacters(_ text: String, field: String) throws {
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ChatError.invalid("\(field) must not contain control characters")
        }
    }

    private static func isToken(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0.isASCII && (isAlphanumeric($0) || $0 == "-" || $0 == "_") }
    }

    private static func isAlphanumeric(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
    }
}
