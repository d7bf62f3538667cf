extension ClientFrame {
    /// The hot commands — `message.send` with text or markdown, `receipt.delivered`,
    /// `receipt.read`, `typing.start`, `typing.stop` and `ping` — read straight from their bytes,
    /// without Foundation's `JSONDecoder` (decision 0026, part 2).
    ///
    /// Nil for any other frame, and for anything this reader is unsure of: an escape in a
    /// string, a key it does not expect, a duplicate key, a number that is not a plain integer,
    /// a missing field. The caller then decodes with `JSONDecoder`, which stays the rule for
    /// what is accepted and what each error says. Whenever this returns a frame, `JSONDecoder`
    /// returns the same one: `FrameTests` and the `wire` fuzz target check it.
    public static func fastDecoding(_ bytes: UnsafeBufferPointer<UInt8>) -> ClientFrame? {
        var reader = HotFrameReader(bytes: bytes)
        guard let fields = reader.object(depth: 0), reader.atEnd() else { return nil }
        return frame(fields)
    }

    /// The frame the fields make, when they are exactly a hot command's.
    private static func frame(_ fields: HotFrameReader.Fields) -> ClientFrame? {
        guard case .string(let type)? = fields["type"] else { return nil }
        switch type {
        case "message.send":
            guard fields.only(["type", "id", "conversationId", "message"]),
                  case .string(let id)? = fields["id"], case .string(let conversation)? = fields["conversationId"],
                  case .object(let message)? = fields["message"], message.only(["clientId", "content"]),
                  case .string(let clientID)? = message["clientId"], case .object(let content)? = message["content"],
                  case .string(let kind)? = content["type"] else { return nil }
            let body: MessageContent
            switch kind {
            case "text":
                guard content.only(["type", "text"]), case .string(let text)? = content["text"] else { return nil }
                body = .text(text)
            case "markdown":
                guard content.only(["type", "markdown"]), case .string(let text)? = content["markdown"] else { return nil }
                body = .markdown(text)
            default:
                return nil
            }
            return .send(id: id, conversationID: ConversationID(rawValue: conversation), message: SendMessageRequest(clientID: clientID, content: body))
        case "receipt.delivered", "receipt.read":
            guard fields.only(["type", "id", "conversationId", "seq"]), case .string(let id)? = fields["id"],
                  case .string(let conversation)? = fields["conversationId"], case .integer(let seq)? = fields["seq"] else { return nil }
            let conversationID = ConversationID(rawValue: conversation)
            return type == "receipt.read" ? .markRead(id: id, conversationID: conversationID, seq: seq)
                : .markDelivered(id: id, conversationID: conversationID, seq: seq)
        case "typing.start", "typing.stop":
            guard fields.only(["type", "id", "conversationId"]), case .string(let conversation)? = fields["conversationId"],
                  let id = fields.optionalString("id") else { return nil }
            return .typing(id: id, conversationID: ConversationID(rawValue: conversation), isTyping: type == "typing.start", threadID: nil)
        case "ping":
            guard fields.only(["type", "id"]), let id = fields.optionalString("id") else { return nil }
            return .ping(id: id)
        default:
            return nil
        }
    }
}

/// A strict reader of the small JSON objects the hot commands are: objects, strings without
/// escapes, and integers. It gives up (nil) on everything else rather than guess.
private struct HotFrameReader {
    enum Value {
        case string(String)
        case integer(Int64)
        case object(Fields)
    }

    /// An object's members in order; a handful, so a list beats a dictionary.
    struct Fields {
        var members: [(key: String, value: Value)] = []

        subscript(key: String) -> Value? { members.first { $0.key == key }?.value }

        /// Every key is one of `keys`.
        func only(_ keys: Set<String>) -> Bool { members.allSatisfy { keys.contains($0.key) } }

        /// A key that may be absent: `.some(nil)` when it is, nil when it is there but not a string.
        func optionalString(_ key: String) -> String?? {
            switch self[key] {
            case nil: .some(nil)
            case .string(let value)?: .some(value)
            default: nil
            }
        }
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    /// Deep enough for `message.content`; deeper is not a hot command.
    private static let maxDepth = 2
    private static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), colon = UInt8(ascii: ":"), comma = UInt8(ascii: ",")
    private static let open = UInt8(ascii: "{"), close = UInt8(ascii: "}"), minus = UInt8(ascii: "-"), zero = UInt8(ascii: "0"), nine = UInt8(ascii: "9")

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Only whitespace is left.
    mutating func atEnd() -> Bool {
        skipSpace()
        return index == bytes.count
    }

    mutating func object(depth: Int) -> Fields? {
        skipSpace()
        guard depth <= Self.maxDepth, next() == Self.open else { return nil }
        var fields = Fields()
        skipSpace()
        if peek() == Self.close {
            index += 1
            return fields
        }
        while true {
            skipSpace()
            guard let key = string() else { return nil }
            guard fields[key] == nil else { return nil }  // a duplicate: JSONDecoder's choice, not ours
            skipSpace()
            guard next() == Self.colon else { return nil }
            skipSpace()
            let value: Value
            switch peek() {
            case Self.quote:
                guard let text = string() else { return nil }
                value = .string(text)
            case Self.open:
                guard let inner = object(depth: depth + 1) else { return nil }
                value = .object(inner)
            default:
                guard let number = integer() else { return nil }
                value = .integer(number)
            }
            fields.members.append((key, value))
            skipSpace()
            switch next() {
            case Self.comma: continue
            case Self.close: return fields
            default: return nil
            }
        }
    }

    /// A string with no escape and no control character, valid UTF-8.
    private mutating func string() -> String? {
        guard next() == Self.quote else { return nil }
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            if byte == Self.quote {
                let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                index += 1
                return text
            }
            if byte == Self.backslash || byte < 0x20 { return nil }
            index += 1
        }
        return nil
    }

    /// `-?[1-9][0-9]*` or `0`, within Int64, followed by a delimiter; no fraction or exponent.
    private mutating func integer() -> Int64? {
        let negative = peek() == Self.minus
        if negative { index += 1 }
        let start = index
        var value: Int64 = 0
        while let byte = peek(), byte >= Self.zero, byte <= Self.nine {
            let digit = Int64(byte - Self.zero)
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            guard !overflowA, !overflowB else { return nil }
            value = sum
            index += 1
        }
        let digits = index - start
        guard digits > 0, !(digits > 1 && bytes[start] == Self.zero), !(negative && value == 0) else { return nil }
        switch peek() {
        case Self.comma, Self.close, 0x20, 0x09, 0x0A, 0x0D: return value
        default: return nil
        }
    }

    private mutating func skipSpace() {
        while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }
}
