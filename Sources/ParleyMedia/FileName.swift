/// Makes a client-supplied file name safe to store and to send back in a
/// `Content-Disposition` header.
package enum FileName: Sendable {
    /// The longest stored name, in UTF-8 bytes (what file systems allow).
    package static let maxBytes = 255

    /// Why a name was refused.
    package enum Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// Empty after removing directories, or only dots.
        case empty
        /// Longer than ``FileName/maxBytes`` UTF-8 bytes.
        case tooLong
        /// Holds a control character (NUL, newline, …).
        case controlCharacter

        package var description: String {
            switch self {
            case .empty: "name must be a file name, not empty, '.' or '..'"
            case .tooLong: "name must be at most \(FileName.maxBytes) UTF-8 bytes"
            case .controlCharacter: "name must not contain control or text-direction characters"
            }
        }
    }

    /// The last path component of `name` (directories given with `/` or `\` are dropped, so
    /// `../../etc/passwd` becomes `passwd`), with leading dots and surrounding spaces removed.
    ///
    /// - Throws: ``Problem`` when nothing usable is left, the name is too long, or it holds a
    ///   control character (those are refused rather than silently changed).
    package static func sanitize(_ name: String) throws(Problem) -> String {
        // Bidirectional overrides are refused too: they make `cod.exe` look like `exe.doc`.
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || (0x202A...0x202E).contains($0.value)
                                                 || (0x2066...0x2069).contains($0.value) }) {
            throw .controlCharacter
        }
        let last = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var trimmed = Substring(last)
        while let first = trimmed.first, first == "." || first == " " { trimmed = trimmed.dropFirst() }
        while let end = trimmed.last, end == " " { trimmed = trimmed.dropLast() }
        guard !trimmed.isEmpty else { throw .empty }
        guard trimmed.utf8.count <= maxBytes else { throw .tooLong }
        return String(trimmed)
    }

    /// A `Content-Disposition` value (RFC 6266): an ASCII fallback `filename` with anything
    /// outside printable ASCII, quotes and backslashes replaced by `_`, and the exact name as
    /// UTF-8 in `filename*` (RFC 8187) when the two differ.
    package static func contentDisposition(_ disposition: String, name: String?) -> String {
        guard let name else { return disposition }
        let fallback = String(decoding: name.utf8.map { byte -> UInt8 in
            (0x20...0x7E).contains(byte) && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") ? byte : UInt8(ascii: "_")
        }, as: UTF8.self)
        var value = "\(disposition); filename=\"\(fallback)\""
        if fallback != name {
            let unreserved = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$&+-.^_`|~".utf8)
            let digits = Array("0123456789ABCDEF".utf8)
            var encoded: [UInt8] = []
            for byte in name.utf8 {
                if unreserved.contains(byte) {
                    encoded.append(byte)
                } else {
                    encoded += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 15)]]
                }
            }
            value += "; filename*=UTF-8''" + String(decoding: encoded, as: UTF8.self)
        }
        return value
    }
}
