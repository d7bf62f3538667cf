import Foundation

/// Which network addresses outbound requests (webhooks) may reach: public ones only, unless
/// the operator allows private ones (`--webhooks-allow-private`). A webhook URL must not be a
/// way to probe the server's own network, so loopback, private, link-local, carrier-grade
/// NAT, multicast, reserved and documentation ranges are private here, and IPv6 forms that
/// embed an IPv4 address are judged by that address.
public enum AddressPolicy: Sendable {
    /// Whether an IPv4 address (4 bytes, network order) is private in the above sense.
    public static func isPrivate(ipv4 a: [UInt8]) -> Bool {
        guard a.count == 4 else { return true }
        switch (a[0], a[1]) {
        case (0, _), (10, _), (127, _): return true                   // "this network", private, loopback
        case (100, 64...127): return true                              // carrier-grade NAT
        case (169, 254): return true                                   // link-local (cloud metadata)
        case (172, 16...31): return true                               // private
        case (192, 168): return true                                   // private
        case (192, 0) where a[2] == 0 || a[2] == 2: return true        // IETF protocol, TEST-NET-1
        case (198, 18...19): return true                               // benchmarking
        case (198, 51) where a[2] == 100, (203, 0) where a[2] == 113: return true  // TEST-NET-2, -3
        case (224...255, _): return true                               // multicast, reserved, broadcast
        default: return false
        }
    }

    /// Whether an IPv6 address (16 bytes) is private in the above sense.
    public static func isPrivate(ipv6 a: [UInt8]) -> Bool {
        guard a.count == 16 else { return true }
        if a[0..<15].allSatisfy({ $0 == 0 }) { return true }                       // :: and ::1
        if a[0..<10].allSatisfy({ $0 == 0 }) && a[10] == 0xff && a[11] == 0xff {   // ::ffff:a.b.c.d
            return isPrivate(ipv4: Array(a[12..<16]))
        }
        if a[0..<12].allSatisfy({ $0 == 0 }) { return isPrivate(ipv4: Array(a[12..<16])) }  // ::a.b.c.d
        if a[0] == 0x00, a[1] == 0x64, a[2] == 0xff, a[3] == 0x9b { return isPrivate(ipv4: Array(a[12..<16])) }  // NAT64
        if a[0] == 0x20, a[1] == 0x02 { return isPrivate(ipv4: Array(a[2..<6])) }    // 6to4
        if a[0] & 0xfe == 0xfc { return true }                                     // unique local
        if a[0] == 0xfe, a[1] & 0xc0 == 0x80 { return true }                       // link-local
        if a[0] == 0xff { return true }                                            // multicast
        if a[0] == 0x20, a[1] == 0x01, a[2] == 0x0d, a[3] == 0xb8 { return true }  // documentation
        return false
    }

    /// The bytes of a literal IPv4 (`a.b.c.d`) or IPv6 (`[…]` or bare) host; nil for a name.
    /// An address literal is ASCII: anything else is a name (and read character by character
    /// it could hide a `:` inside a grapheme cluster from the splits below, while a plain
    /// search still found it).
    public static func literal(_ host: String) -> [UInt8]? {
        guard host.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
        var host = Substring(host)
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4, let bytes = Optional(parts.compactMap { UInt8($0) }), bytes.count == 4,
           parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }) {
            return bytes
        }
        guard host.contains(":") else { return nil }
        return ipv6(host)
    }

    /// Parses an IPv6 literal (with `::` and an optional trailing IPv4 part); nil if malformed.
    static func ipv6(_ text: Substring) -> [UInt8]? {
        if let percent = text.firstIndex(of: "%") { return ipv6(text[..<percent]) }
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt8]? {
            guard !part.isEmpty else { return [] }
            var bytes: [UInt8] = []
            let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains("."), !piece.contains(":"), let v4 = literal(String(piece)), v4.count == 4 {
                    bytes += v4
                } else {
                    guard (1...4).contains(piece.count), let value = UInt16(piece, radix: 16) else { return nil }
                    bytes += [UInt8(value >> 8), UInt8(value & 0xff)]
                }
            }
            return bytes
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}
