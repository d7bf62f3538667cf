/// One value of RESP2, the Redis protocol (redis.io/docs/reference/protocol-spec).
package enum RESPValue: Sendable, Hashable {
    /// `+OK`
    case simple(String)
    /// `-ERR …`
    case error(String)
    /// `:42`
    case integer(Int64)
    /// `$5 hello`; nil is the null bulk string (`$-1`).
    case bulk([UInt8]?)
    /// `*2 …`; nil is the null array (`*-1`).
    case array([RESPValue]?)

    /// The bytes of a bulk string, or nil.
    package var bytes: [UInt8]? {
        if case .bulk(let bytes) = self { return bytes }
        return nil
    }

    /// A bulk or simple string as text, or nil.
    package var text: String? {
        switch self {
        case .simple(let text): text
        case .bulk(let bytes?): String(decoding: bytes, as: UTF8.self)
        default: nil
        }
    }
}

/// Why a reply could not be parsed: the connection is out of step and must be closed.
package struct RESPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    package var description: String
}

/// Commands as RESP arrays of bulk strings (what every Redis command is on the wire).
package enum RESPCommand: Sendable {
    /// `*n $len arg …` for `arguments`.
    package static func encode(_ arguments: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + arguments.reduce(0) { $0 + $1.count + 16 })
        out += Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            out += Array("$\(argument.count)\r\n".utf8)
            out += argument
            out += [13, 10]
        }
        return out
    }

    /// A command of text arguments.
    package static func encode(_ arguments: String...) -> [UInt8] {
        encode(arguments.map { Array($0.utf8) })
    }
}

/// An incremental RESP2 reader: bytes go in as they arrive, whole values come out.
///
/// Strict, with limits: a line (a type byte, digits, CRLF) at most 64 bytes, a bulk string at
/// most `maxBulk` bytes, an array at most `maxElements` elements and `maxDepth` deep, numbers
/// without signs or digits they should not have. Anything else is a ``RESPError``.
package struct RESPParser: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    /// The largest bulk string accepted. Default: 64 MiB.
    package var maxBulk = 64 << 20
    /// The most elements one array may have. Default: 1,048,576.
    package var maxElements = 1 << 20
    /// The deepest nesting of arrays. Default: 8.
    package var maxDepth = 8

    /// An empty parser.
    package init() {}

    /// Adds bytes read from the connection.
    package mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 1 << 16, start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole value, or nil until more bytes arrive.
    ///
    /// - Throws: ``RESPError`` for bytes that are not RESP2 within the limits.
    package mutating func next() throws(RESPError) -> RESPValue? {
        var cursor = start
        guard let value = try parse(&cursor, depth: 0) else { return nil }
        start = cursor
        return value
    }

    private func parse(_ cursor: inout Int, depth: Int) throws(RESPError) -> RESPValue? {
        guard let line = try line(&cursor) else { return nil }
        guard let type = line.first else { throw RESPError(description: "an empty line where a reply was expected") }
        let rest = line.dropFirst()
        switch type {
        case UInt8(ascii: "+"): return .simple(String(decoding: rest, as: UTF8.self))
        case UInt8(ascii: "-"): return .error(String(decoding: rest, as: UTF8.self))
        case UInt8(ascii: ":"): return .integer(try number(rest, allowNegative: true))
        case UInt8(ascii: "$"):
            let length = try number(rest, allowNegative: true)
            if length == -1 { return .bulk(nil) }
            guard length >= 0, length <= maxBulk else { throw RESPError(description: "bulk string of \(length) bytes (most: \(maxBulk))") }
            let count = Int(length)
            guard buffer.count - cursor >= count + 2 else { return nil }
            guard buffer[cursor + count] == 13, buffer[cursor + count + 1] == 10 else {
                throw RESPError(description: "bulk string of \(count) bytes is not followed by CRLF")
            }
            let bytes = Array(buffer[cursor..<(cursor + count)])
            cursor += count + 2
            return .bulk(bytes)
        case UInt8(ascii: "*"):
            let count = try number(rest, allowNegative: true)
            if count == -1 { return .array(nil) }
            guard count >= 0, count <= maxElements else { throw RESPError(description: "array of \(count) elements (most: \(maxElements))") }
            guard depth < maxDepth else { throw RESPError(description: "arrays nested deeper than \(maxDepth)") }
            var elements: [RESPValue] = []
            elements.reserveCapacity(min(Int(count), 1024))
            for _ in 0..<count {
                guard let element = try parse(&cursor, depth: depth + 1) else { return nil }
                elements.append(element)
            }
            return .array(elements)
        default:
            throw RESPError(description: "unknown reply type byte 0x\(String(type, radix: 16))")
        }
    }

    /// The bytes up to the next CRLF (without it), moving `cursor` past it; nil if incomplete.
    private func line(_ cursor: inout Int) throws(RESPError) -> ArraySlice<UInt8>? {
        var index = cursor
        while index + 1 < buffer.count {
            if buffer[index] == 13 {
                guard buffer[index + 1] == 10 else { throw RESPError(description: "CR not followed by LF") }
                let line = buffer[cursor..<index]
                cursor = index + 2
                return line
            }
            guard index - cursor < 64 || (buffer[cursor] == UInt8(ascii: "+") || buffer[cursor] == UInt8(ascii: "-")) && index - cursor < 65_536 else {
                throw RESPError(description: "a reply line longer than the protocol allows")
            }
            index += 1
        }
        return nil
    }

    private func number(_ digits: ArraySlice<UInt8>, allowNegative: Bool) throws(RESPError) -> Int64 {
        var slice = digits
        var negative = false
        if allowNegative, slice.first == UInt8(ascii: "-") {
            negative = true
            slice = slice.dropFirst()
        }
        guard !slice.isEmpty, slice.count <= 18, slice.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
            throw RESPError(description: "'\(String(decoding: digits, as: UTF8.self))' is not a number")
        }
        let value = slice.reduce(Int64(0)) { $0 * 10 + Int64($1 - 48) }
        return negative ? -value : value
    }
}
