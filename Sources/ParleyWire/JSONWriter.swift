/// A value that writes its own JSON with a ``JSONWriter`` instead of going through `Codable`.
public protocol JSONWritable {
    /// Writes the value (one JSON value) into `writer`.
    func writeJSON(into writer: inout JSONWriter)
}

extension JSONWritable {
    /// The value's JSON.
    public var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        writeJSON(into: &writer)
        return writer.bytes
    }
}

/// Writes JSON straight into bytes, for the responses on hot paths (history pages), where
/// Foundation's `JSONEncoder` cost more than the database. Keys are written in the order
/// given: callers write them sorted, so the output matches ``WireCoding/encoder()``.
///
/// ```swift
/// var writer = JSONWriter()
/// writer.object {
///     $0.key("id"); $0.string("m_1")
///     $0.key("seq"); $0.integer(7)
/// }
/// writer.bytes  // {"id":"m_1","seq":7}
/// ```
public struct JSONWriter: Sendable {
    /// What has been written.
    public private(set) var bytes: [UInt8] = []
    private var needsComma: [Bool] = []

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// Writes `{`, the members `body` writes, then `}`.
    public mutating func object(_ body: (inout JSONWriter) throws -> Void) rethrows {
        try container(open: UInt8(ascii: "{"), close: UInt8(ascii: "}"), body)
    }

    /// Writes `[`, the elements `body` writes, then `]`.
    public mutating func array(_ body: (inout JSONWriter) throws -> Void) rethrows {
        try container(open: UInt8(ascii: "["), close: UInt8(ascii: "]"), body)
    }

    private mutating func container(open: UInt8, close: UInt8, _ body: (inout JSONWriter) throws -> Void) rethrows {
        value()
        bytes.append(open)
        needsComma.append(false)
        try body(&self)
        needsComma.removeLast()
        bytes.append(close)
    }

    /// Writes a member name; the next value written is its value.
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        pendingValueAfterKey = true  // the value that follows gets no comma of its own
    }

    private var pendingValueAfterKey = false

    /// Writes a member name that is not known in advance (escaped as a string).
    public mutating func key(text name: String) {
        string(name)
        bytes.append(UInt8(ascii: ":"))
        pendingValueAfterKey = true
    }

    /// Writes an escaped string.
    public mutating func string(_ text: String) {
        value()
        bytes.append(UInt8(ascii: "\""))
        // Most strings need no escape: copy them whole.
        let copied: Bool? = text.utf8.withContiguousStorageIfAvailable { utf8 in
            guard !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied == true {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0a: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0d: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0c: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hex[Int(byte >> 4)], hex[Int(byte & 0xf)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Writes an integer.
    public mutating func integer(_ number: Int64) {
        value()
        if number < 0 { bytes.append(UInt8(ascii: "-")) }
        appendDigits(number.magnitude, width: 1)
    }

    /// Appends the decimal digits of `number`, left-padded with zeros to `width`.
    private mutating func appendDigits(_ number: UInt64, width: Int) {
        var divisor: UInt64 = 1
        var count = 1
        while divisor <= number / 10 {
            divisor *= 10
            count += 1
        }
        for _ in count..<max(count, width) { bytes.append(UInt8(ascii: "0")) }
        var rest = number
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ flag: Bool) {
        value()
        bytes.append(contentsOf: (flag ? "true" : "false").utf8)
    }

    /// Writes text that is already valid JSON (stored by the server itself, never client bytes
    /// that were not decoded and re-encoded first).
    public mutating func raw(_ json: String) {
        value()
        bytes.append(contentsOf: json.utf8)
    }

    /// Writes a date as ``WireCoding`` does (`"2026-11-30T11:36:56.123Z"`), from milliseconds
    /// since 1970, without building a `String`.
    public mutating func date(milliseconds: Int64) {
        value()
        let civil = WireCoding.civil(milliseconds)
        bytes.append(UInt8(ascii: "\""))
        appendDigits(UInt64(max(0, civil.year)), width: 4)
        bytes.append(UInt8(ascii: "-"))
        appendDigits(UInt64(civil.month), width: 2)
        bytes.append(UInt8(ascii: "-"))
        appendDigits(UInt64(civil.day), width: 2)
        bytes.append(UInt8(ascii: "T"))
        appendDigits(UInt64(civil.millisecondOfDay / 3_600_000), width: 2)
        bytes.append(UInt8(ascii: ":"))
        appendDigits(UInt64(civil.millisecondOfDay / 60_000 % 60), width: 2)
        bytes.append(UInt8(ascii: ":"))
        appendDigits(UInt64(civil.millisecondOfDay / 1000 % 60), width: 2)
        bytes.append(UInt8(ascii: "."))
        appendDigits(UInt64(civil.millisecondOfDay % 1000), width: 3)
        bytes.append(contentsOf: [UInt8(ascii: "Z"), UInt8(ascii: "\"")])
    }

    // MARK: - Commas

    private mutating func separate() {
        guard let last = needsComma.last else { return }
        if last { bytes.append(UInt8(ascii: ",")) }
        needsComma[needsComma.count - 1] = true
    }

    /// Before a value: a comma between array elements; none right after a key.
    private mutating func value() {
        if pendingValueAfterKey {
            pendingValueAfterKey = false
            return
        }
        separate()
    }
}
