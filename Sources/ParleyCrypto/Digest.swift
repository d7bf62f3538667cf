import CParleyCrypto
import CParleySodium

/// SHA-256 over data that arrives in pieces (an upload streamed to disk), from OpenSSL's
/// libcrypto, which uses the CPU's SHA instructions where there are any (about 1.5 GB/s on
/// the machines this runs on, five times libsodium's portable code).
///
/// ```swift
/// var hasher = SHA256()
/// for chunk in chunks { hasher.update(chunk) }
/// let hex = hasher.finalize().hexString
/// ```
package struct SHA256: Sendable {
    /// Owns the OpenSSL context; a hasher is used by one task at a time.
    private final class Context: @unchecked Sendable {
        // @unchecked: the OpenSSL context is used by one task at a time (a hasher is not shared while hashing), and freed once in deinit.
        let pointer: OpaquePointer?
        init() {
            pointer = EVP_MD_CTX_new()
            EVP_DigestInit_ex(pointer, EVP_sha256(), nil)
        }
        deinit { EVP_MD_CTX_free(pointer) }
    }

    private let context = Context()

    /// A hasher with nothing fed yet.
    package init() {}

    /// Feeds bytes.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        EVP_DigestUpdate(context.pointer, base, bytes.count)
    }

    /// Feeds bytes.
    package mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The 32-byte digest. The hasher must not be fed afterwards.
    package mutating func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context.pointer, &out, &length)
        return out
    }

    /// The digest of one buffer.
    package static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }
}

extension Crypto {
    /// HMAC-SHA-256 of `message` under `key` (RFC 2104), from libsodium.
    package static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        precondition(isReady, "libsodium failed to initialise")
        var state = crypto_auth_hmacsha256_state()
        var out = [UInt8](repeating: 0, count: 32)
        crypto_auth_hmacsha256_init(&state, key, key.count)
        crypto_auth_hmacsha256_update(&state, message, UInt64(message.count))
        crypto_auth_hmacsha256_final(&state, &out)
        return out
    }

    /// URL-safe base64 without padding (RFC 4648 §5).
    package static func base64URLEncoded(_ bytes: [UInt8]) -> String { base64URL(bytes) }
}

extension Array where Element == UInt8 {
    /// Lower-case hexadecimal, two digits a byte.
    package var hexString: String {
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

extension Crypto {
    /// MD5 of `bytes`, from libcrypto. Only for protocols that name it as a checksum (Pusher's
    /// `body_md5`); never for anything that must resist forgery.
    package static func md5(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        var length: UInt32 = 0
        bytes.withUnsafeBytes { buffer in
            _ = EVP_Digest(buffer.baseAddress, buffer.count, &out, &length, EVP_md5(), nil)
        }
        return out
    }
}
