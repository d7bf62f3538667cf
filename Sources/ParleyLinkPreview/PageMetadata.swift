package import Foundation

/// What a page says about itself in its `<head>`: OpenGraph (`og:*`), Twitter cards, the
/// plain `<title>` and description, and where its oEmbed description is. Read from bytes a
/// stranger's server sent: the reader stops at the body (or at ``maxScanned`` bytes), skips
/// comments, scripts and styles, never builds a tree, and cuts every value it keeps.
package struct PageMetadata: Sendable, Hashable {
    /// The page's title.
    package var title: String?
    /// Its description.
    package var description: String?
    /// Its site's name.
    package var siteName: String?
    /// Its image, resolved against the page's URL (http or https only).
    package var image: String?
    /// Its JSON oEmbed description's URL, resolved against the page's URL.
    package var oEmbed: String?

    /// The most bytes of a page read.
    package static let maxScanned = 512 * 1024
    /// The most characters kept of a title, a description and a site name.
    package static let maxTitle = 300
    package static let maxDescription = 600
    package static let maxSiteName = 100

    /// Nothing known yet.
    package init() {}

    /// Whether the page said anything a preview can show.
    package var isEmpty: Bool { title == nil && description == nil && image == nil }

    /// Reads `html`, the page at `base`.
    package static func parse(_ html: some Collection<UInt8>, base: URL?) -> PageMetadata {
        var reader = HeadReader(bytes: Array(html.prefix(maxScanned)))
        var og: [String: String] = [:]
        var named: [String: String] = [:]
        var title: String?
        var oEmbed: String?
        while let tag = reader.nextTag() {
            switch tag.name {
            case "meta":
                guard let content = tag.attributes["content"] else { continue }
                if let property = tag.attributes["property"]?.lowercased(), og[property] == nil { og[property] = content }
                if let name = tag.attributes["name"]?.lowercased(), named[name] == nil { named[name] = content }
            case "title" where title == nil:
                title = reader.text(until: "title")
            case "link":
                let rel = tag.attributes["rel"]?.lowercased() ?? ""
                let type = tag.attributes["type"]?.lowercased() ?? ""
                if oEmbed == nil, rel.split(separator: " ").contains("alternate"), type == "application/json+oembed",
                   let href = tag.attributes["href"] {
                    oEmbed = resolve(href, base: base)
                }
            case "body", "/head":
                reader.stop()
            default:
                continue
            }
        }
        var page = PageMetadata()
        page.title = clean(og["og:title"] ?? named["twitter:title"] ?? og["twitter:title"] ?? title, limit: maxTitle)
        page.description = clean(og["og:description"] ?? named["twitter:description"] ?? og["twitter:description"] ?? named["description"],
                                 limit: maxDescription)
        page.siteName = clean(og["og:site_name"] ?? named["application-name"], limit: maxSiteName)
        let image = og["og:image:secure_url"] ?? og["og:image"] ?? og["og:image:url"] ?? named["twitter:image"] ?? og["twitter:image"]
        page.image = image.flatMap { resolve(decodeEntities($0).trimmingCharacters(in: .whitespacesAndNewlines), base: base) }
        page.oEmbed = oEmbed
        return page
    }

    /// A page's bytes as UTF-8: pages in ISO-8859-1 or Windows-1252 (said by the
    /// `Content-Type` header's `charset`, or a `<meta charset>` / `http-equiv` in the first
    /// 1,024 bytes) are converted; UTF-8 and anything else are read as UTF-8.
    package static func utf8(_ page: [UInt8], contentType: String?) -> [UInt8] {
        func charset(in text: String) -> String? {
            guard let range = text.range(of: "charset=", options: .caseInsensitive) else { return nil }
            let rest = text[range.upperBound...].drop { $0 == "\"" || $0 == "'" || $0 == " " }
            return String(rest.prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }).lowercased()
        }
        let declared = contentType.flatMap(charset(in:)) ?? charset(in: String(decoding: page.prefix(1024), as: UTF8.self))
        guard let declared, ["iso-8859-1", "latin1", "iso8859-1", "windows-1252", "cp1252", "us-ascii"].contains(declared),
              page.contains(where: { $0 >= 0x80 }),
              let text = String(bytes: page, encoding: .windowsCP1252) else { return page }
        return Array(text.utf8)
    }

    /// Adds what an oEmbed JSON document says where the page said nothing (title, provider,
    /// thumbnail); a document that is not a JSON object changes nothing.
    package mutating func merge(oEmbedJSON json: some Collection<UInt8>, base: URL?) {
        guard json.count <= 64 * 1024,
              let object = try? JSONSerialization.jsonObject(with: Data(json), options: []) as? [String: Any] else { return }
        func string(_ key: String) -> String? { object[key] as? String }
        if title == nil { title = PageMetadata.clean(string("title"), limit: PageMetadata.maxTitle) }
        if siteName == nil { siteName = PageMetadata.clean(string("provider_name"), limit: PageMetadata.maxSiteName) }
        if description == nil, let author = string("author_name") {
            description = PageMetadata.clean("by " + author, limit: PageMetadata.maxDescription)
        }
        if image == nil, let thumbnail = string("thumbnail_url") { image = PageMetadata.resolve(thumbnail, base: base) }
    }

    /// `reference` made absolute against `base`; nil unless it is http or https with a host
    /// and no user name or password.
    package static func resolve(_ reference: String, base: URL?) -> String? {
        guard !reference.isEmpty, reference.utf8.count <= 2048,
              let url = URL(string: reference, relativeTo: base)?.absoluteURL,
              let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = url.host, !host.isEmpty, url.user == nil, url.password == nil else { return nil }
        return url.absoluteString
    }

    /// Entities decoded, whitespace collapsed, cut to `limit` characters; nil when nothing is left.
    static func clean(_ value: String?, limit: Int) -> String? {
        guard let value else { return nil }
        let decoded = decodeEntities(value)
        var words: [Substring] = []
        var count = 0
        for word in decoded.split(whereSeparator: { $0.isWhitespace || $0.unicodeScalars.allSatisfy { $0.properties.generalCategory == .control } }) {
            words.append(word)
            count += word.count + 1
            if count > limit + 1 { break }
        }
        var text = words.joined(separator: " ")
        guard !text.isEmpty else { return nil }
        if text.count > limit { text = String(text.prefix(limit - 1)) + "…" }
        return text
    }

    /// HTML character references: the common named ones and numeric ones (a number that is
    /// no character, or a control character, becomes U+FFFD).
    static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[rest.index(after: amp)...]
            guard let semicolon = after.prefix(12).firstIndex(of: ";") else {
                out += "&"
                rest = after
                continue
            }
            let name = after[..<semicolon]
            var decoded: String?
            if name.hasPrefix("#") {
                let digits = name.dropFirst()
                let value = digits.first == "x" || digits.first == "X" ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits)
                if let value {
                    if let scalar = Unicode.Scalar(value), value >= 0x20 || value == 0x09 || value == 0x0a, !(0x7f...0x9f).contains(value) {
                        decoded = String(Character(scalar))
                    } else {
                        decoded = "\u{FFFD}"
                    }
                }
            } else {
                decoded = named[String(name)]
            }
            if let decoded {
                out += decoded
                rest = after[after.index(after: semicolon)...]
            } else {
                out += "&"
                rest = after
            }
        }
        out += rest
        return out
    }

    private static let named: [String: String] = [
        "amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": " ", "ndash": "–", "mdash": "—",
        "hellip": "…", "lsquo": "‘", "rsquo": "’", "ldquo": "“", "rdquo": "”", "copy": "©", "reg": "®", "trade": "™",
        "middot": "·", "bull": "•", "laquo": "«", "raquo": "»",
    ]
}

/// A forward-only reader of the tags in a document's head.
struct HeadReader {
    struct Tag {
        /// Lowercased; a closing tag starts with `/`.
        var name: String
        /// Lowercased names, raw values (entities are decoded later, where a value is used).
        var attributes: [String: String]
    }

    let bytes: [UInt8]
    var index = 0
    /// The most attributes of one tag read, and the most bytes of one value.
    static let maxAttributes = 32
    static let maxValue = 4096

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func stop() { index = bytes.count }

    /// The next tag, skipping text, comments, doctype and processing instructions, and the
    /// insides of `script`, `style`, `noscript` and `template`.
    mutating func nextTag() -> Tag? {
        while index < bytes.count {
            guard let open = bytes[index...].firstIndex(of: UInt8(ascii: "<")) else {
                stop()
                return nil
            }
            index = open + 1
            if starts(with: "!--") {
                skip(past: "-->")
                continue
            }
            guard index < bytes.count else { return nil }
            let first = bytes[index]
            if first == UInt8(ascii: "!") || first == UInt8(ascii: "?") {
                skip(past: ">")
                continue
            }
            let closing = first == UInt8(ascii: "/")
            if closing { index += 1 }
            let name = readName()
            guard !name.isEmpty else { continue }
            let attributes = closing ? [:] : readAttributes()
            if !closing, ["script", "style", "noscript", "template"].contains(name) {
                skip(pastClosing: name)
                continue
            }
            return Tag(name: closing ? "/" + name : name, attributes: attributes)
        }
        return nil
    }

    /// The text up to `</name>` (for `<title>`), at most ``maxValue`` bytes of it.
    mutating func text(until name: String) -> String {
        let start = index
        skip(pastClosing: name)
        let end = max(start, min(index, bytes.count))
        var text = Array(bytes[start..<end])
        if let close = lastIndex(of: Array("</".utf8), in: text) { text = Array(text[..<close]) }
        return String(decoding: text.prefix(Self.maxValue), as: UTF8.self)
    }

    private func lastIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var i = haystack.count - needle.count
        while i >= 0 {
            if Array(haystack[i..<(i + needle.count)]) == needle { return i }
            i -= 1
        }
        return nil
    }

    private func starts(with text: String) -> Bool { starts(with: Array(text.utf8)) }

    private func starts(with needle: [UInt8]) -> Bool {
        guard index + needle.count <= bytes.count else { return false }
        for (offset, byte) in needle.enumerated() where bytes[index + offset] | 0x20 != byte | 0x20 { return false }
        return true
    }

    private mutating func skip(past terminator: String) {
        let needle = Array(terminator.utf8)
        while index < bytes.count {
            if starts(with: needle) {
                index += needle.count
                return
            }
            index += 1
        }
    }

    private mutating func skip(pastClosing name: String) {
        let needle = Array(("/" + name).utf8)
        while index < bytes.count {
            guard let open = bytes[index...].firstIndex(of: UInt8(ascii: "<")) else {
                stop()
                return
            }
            index = open + 1
            if starts(with: needle) {
                index += name.utf8.count + 1
                skip(past: ">")
                return
            }
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7a) || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "_")
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0a || byte == 0x0c || byte == 0x0d
    }

    private mutating func readName() -> String {
        let start = index
        while index < bytes.count, Self.isNameByte(bytes[index]), index - start < 64 { index += 1 }
        return String(decoding: bytes[start..<index], as: UTF8.self).lowercased()
    }

    private mutating func readAttributes() -> [String: String] {
        var attributes: [String: String] = [:]
        while index < bytes.count {
            while index < bytes.count, Self.isSpace(bytes[index]) || bytes[index] == UInt8(ascii: "/") { index += 1 }
            guard index < bytes.count else { break }
            if bytes[index] == UInt8(ascii: ">") {
                index += 1
                break
            }
            let name = readName()
            if name.isEmpty {
                index += 1  // a byte no name starts with: step over it
                continue
            }
            while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
            var value = ""
            if index < bytes.count, bytes[index] == UInt8(ascii: "=") {
                index += 1
                while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
                value = readValue()
            }
            if attributes.count < Self.maxAttributes, attributes[name] == nil { attributes[name] = value }
        }
        return attributes
    }

    private mutating func readValue() -> String {
        guard index < bytes.count else { return "" }
        let quote = bytes[index]
        let start: Int
        if quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") {
            index += 1
            start = index
            while index < bytes.count, bytes[index] != quote { index += 1 }
            let value = bytes[start..<index]
            if index < bytes.count { index += 1 }
            return String(decoding: value.prefix(Self.maxValue), as: UTF8.self)
        }
        start = index
        while index < bytes.count, !Self.isSpace(bytes[index]), bytes[index] != UInt8(ascii: ">") { index += 1 }
        return String(decoding: bytes[start..<index].prefix(Self.maxValue), as: UTF8.self)
    }
}
