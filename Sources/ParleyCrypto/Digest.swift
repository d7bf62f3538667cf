import CParleySodium

/// SHA-256 over data that arrives in pieces (an upload streamed to disk), from libsodium.
///
/// ```swift
/// var hasher = SHA256()
/// for chunk in chunks { hasher.update(chunk) }
/// let hex = hasher.finalize().hexString
/// ```
public struct SHA256: Sendable {
    private var state = crypto_hash_sha256_state()

    /// A hasher with nothing fed yet.
    public init() {
        precondition(Crypto.isReady, "libsodium failed to initialise")
        crypto_hash_sha256_init(&state)
    }

    /// Feeds bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        crypto_hash_sha256_update(&state, base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
    }

    /// Feeds bytes.
    public mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest. The hasher must not be fed afterwards.
    public mutating func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_hash_sha256_final(&state, &out)
        return out
    }

    /// The digest of one buffer.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }
}

extension Crypto {
    /// HMAC-SHA-256 of `message` under `key` (RFC 2104), from libsodium.
    public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        precondition(isReady, "libsodium failed to initialise")
        var state = crypto_auth_hmacsha256_state()
        var out = [UInt8](repeating: 0, count: 32)
        crypto_auth_hmacsha256_init(&state, key, key.count)
        crypto_auth_hmacsha256_update(&state, message, UInt64(message.count))
        crypto_auth_hmacsha256_final(&state, &out)
        return out
    }

    /// URL-safe base64 without padding (RFC 4648 §5).
    public static func base64URLEncoded(_ bytes: [UInt8]) -> String { base64URL(bytes) }
}

extension Array where Element == UInt8 {
    /// Lower-case hexadecimal, two digits a byte.
    public var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
