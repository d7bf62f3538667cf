import CParleyCrypto

/// The opening handshake (RFC 6455 §4).
public enum WebSocketHandshake: Sendable {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a key: base64(SHA-1(key + GUID)) (RFC 6455 §4.2.2).
    public static func acceptValue(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        input.withUnsafeBufferPointer { source in
            digest.withUnsafeMutableBufferPointer { output in
                _ = SHA1(source.baseAddress, source.count, output.baseAddress)
            }
        }
        return Base64.encode(digest)
    }

    /// Checks a client's upgrade request and returns the accept value to answer with.
    ///
    /// - Throws: 400 for a malformed handshake; 426 with `Sec-WebSocket-Version: 13` for
    ///   another version.
    static func validateClientRequest(_ head: HTTPRequestHead) throws(HTTPError) -> String {
        guard head.method == .GET, head.version == .http1_1 else {
            throw HTTPError(.badRequest, code: "bad_upgrade", message: "a WebSocket upgrade must be an HTTP/1.1 GET")
        }
        guard head.headers.contains(name: "connection", token: "upgrade") else {
            throw HTTPError(.badRequest, code: "bad_upgrade", message: "Connection: Upgrade is missing")
        }
        guard head.headers.values(of: "sec-websocket-version").map({ $0.trimmingOWS() }) == ["13"] else {
            var headers = HTTPHeaders()
            headers.add(name: "Sec-WebSocket-Version", value: "13")
            throw HTTPError(.upgradeRequired, code: "unsupported_websocket_version",
                            message: "only WebSocket version 13 is supported", headers: headers)
        }
        let keys = head.headers.values(of: "sec-websocket-key")
        guard keys.count == 1, let key = keys.first.map({ String($0.trimmingOWS()) }),
              let decoded = Base64.decode(key), decoded.count == 16
        else {
            throw HTTPError(.badRequest, code: "bad_upgrade", message: "Sec-WebSocket-Key must be 16 bytes in base64")
        }
        return acceptValue(forKey: key)
    }

    /// A fresh random `Sec-WebSocket-Key`.
    static func makeKey() -> String { Base64.encode(SecureRandom.bytes(16)) }
}

/// Cryptographically strong random bytes from OpenSSL's DRBG.
enum SecureRandom {
    static func bytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1, "RAND_bytes failed: no entropy available")
        return bytes
    }
}

/// Standard base64 (RFC 4648 §4) with padding.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(n >> 18)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], UInt8(ascii: "=")]
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < input.count {
            var n: UInt32 = 0
            var padding = 0
            for j in 0..<4 {
                let c = input[index + j]
                let value: UInt32
                switch c {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt32(c - UInt8(ascii: "A"))
                case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt32(c - UInt8(ascii: "a") + 26)
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt32(c - UInt8(ascii: "0") + 52)
                case UInt8(ascii: "+"): value = 62
                case UInt8(ascii: "/"): value = 63
                case UInt8(ascii: "=") where index + 4 == input.count && j >= 2:
                    value = 0
                    padding += 1
                default: return nil
                }
                if padding > 0, c != UInt8(ascii: "=") { return nil }
                n = n << 6 | value
            }
            out.append(UInt8(n >> 16 & 0xFF))
            if padding < 2 { out.append(UInt8(n >> 8 & 0xFF)) }
            if padding < 1 { out.append(UInt8(n & 0xFF)) }
            index += 4
        }
        return out
    }
}
