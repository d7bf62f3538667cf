/// The `Range` request header for one representation of known length (RFC 9110 §14).
public enum ByteRange: Sendable, Hashable {
    /// No usable range: send the whole representation with 200. Also the answer for a
    /// syntactically invalid header (which §14.2 says to ignore) and for several ranges
    /// (which a server may decline to combine).
    case whole
    /// One satisfiable range, inclusive bounds within the length: send 206.
    case part(first: Int64, last: Int64)
    /// Well-formed but beyond the end: send 416 with `Content-Range: bytes */length`.
    case unsatisfiable

    /// Reads `header` for a representation of `length` bytes.
    public static func parse(_ header: String, length: Int64) -> ByteRange {
        let trimmed = header.trimmingOWS()
        guard trimmed.utf8.count <= 256, trimmed.lowercased().hasPrefix("bytes=") else { return .whole }
        let spec = trimmed.dropFirst(6).trimmingOWS()
        guard !spec.contains(",") else { return .whole }
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .whole }
        let firstText = parts[0].trimmingOWS(), lastText = parts[1].trimmingOWS()
        func number(_ text: Substring) -> Int64? {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return Int64(text)
        }
        if firstText.isEmpty {
            // Suffix range: the last N bytes.
            guard let suffix = number(lastText) else { return .whole }
            guard suffix > 0, length > 0 else { return .unsatisfiable }
            return .part(first: max(0, length - suffix), last: length - 1)
        }
        guard let first = number(firstText) else { return .whole }
        var last = length - 1
        if !lastText.isEmpty {
            guard let given = number(lastText), given >= first else { return .whole }
            last = min(given, length - 1)
        }
        guard first < length else { return .unsatisfiable }
        return .part(first: first, last: last)
    }
}

/// The `Content-Range` of a request that sends the end of a file (a resumed upload):
/// `bytes <first>-<last>/<total>` (RFC 9110 §14.4) where the range runs to the last byte.
public struct ContentRange: Sendable, Hashable {
    /// The first byte sent.
    public var first: Int64
    /// The last byte sent: always `total - 1`.
    public var last: Int64
    /// The whole file's size.
    public var total: Int64

    /// Creates the value.
    public init(first: Int64, last: Int64, total: Int64) {
        self.first = first
        self.last = last
        self.total = total
    }

    /// Parses the header strictly: digits only (at most 18 each), `first ≤ last = total − 1`;
    /// `nil` for anything else (`*`, a range short of the end, signs, spaces, other digits).
    public static func parse(_ header: String) -> ContentRange? {
        guard header.hasPrefix("bytes ") else { return nil }
        let parts = header.dropFirst(6).split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        func number(_ text: Substring) -> Int64? {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return Int64(text)
        }
        guard bounds.count == 2, let first = number(bounds[0]), let last = number(bounds[1]), let total = number(parts[1]),
              first <= last, last == total - 1 else { return nil }
        return ContentRange(first: first, last: last, total: total)
    }
}
