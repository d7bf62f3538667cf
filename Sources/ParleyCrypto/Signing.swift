import CParleyCrypto
import Foundation

/// A private key for signing tokens (JWTs) with libcrypto: an EC P-256 key for ES256 (an APNs
/// `.p8` key) or an RSA key for RS256 (a Google service account's `private_key`), read from
/// PEM (PKCS #8, as both are issued).
package final class SigningKey: @unchecked Sendable {
    // @unchecked: the key is only read after it is loaded; EVP_PKEY signing is thread-safe.

    /// The JWT algorithm the key signs with.
    package enum Algorithm: String, Sendable {
        /// ECDSA on P-256 with SHA-256, the signature as 64 bytes r ‖ s (RFC 7518 §3.4).
        case es256 = "ES256"
        /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3).
        case rs256 = "RS256"
    }

    /// ES256 or RS256, from the key's type.
    package let algorithm: Algorithm
    private let key: OpaquePointer

    /// Reads a PEM private key.
    ///
    /// - Throws: ``SigningError`` when the text is not a PEM private key, or the key is
    ///   neither P-256 nor RSA of at least 2048 bits.
    package init(pem: String) throws(SigningError) {
        // A memory BIO reads the caller's buffer in place (it copies nothing), so the key is
        // read while the bytes are sure to be there: inside withUnsafeBytes, never after it.
        let bytes = Array(pem.utf8)
        let read: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key = read else {
            ERR_clear_error()
            throw .unreadable("not a PEM private key (-----BEGIN PRIVATE KEY-----)")
        }
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1,
                  String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1" else {
                EVP_PKEY_free(key)
                throw .unsupported("an EC key must be on P-256 (prime256v1), as APNs keys are")
            }
            algorithm = .es256
        case EVP_PKEY_RSA:
            guard EVP_PKEY_get_bits(key) >= 2048 else {
                EVP_PKEY_free(key)
                throw .unsupported("an RSA key must have at least 2048 bits")
            }
            algorithm = .rs256
        default:
            EVP_PKEY_free(key)
            throw .unsupported("the key is neither EC P-256 (ES256) nor RSA (RS256)")
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// Signs `message` (SHA-256, then the key's algorithm).
    package func sign(_ message: [UInt8]) throws(SigningError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .failed("out of memory") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1 else { throw .failed(Self.lastError()) }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else { throw .failed(Self.lastError()) }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else { throw .failed(Self.lastError()) }
        signature.removeSubrange(length...)
        return algorithm == .es256 ? try Self.rawECDSA(signature) : signature
    }

    /// A JWT (RFC 7519) of `header` and `claims`, each a JSON object's text, signed: the
    /// header's `alg` is this key's.
    package func jwt(headerFields: String, claims: String) throws(SigningError) -> String {
        let header = "{\"alg\":\"\(algorithm.rawValue)\",\"typ\":\"JWT\"" + (headerFields.isEmpty ? "" : "," + headerFields) + "}"
        let input = Crypto.base64URL(Array(header.utf8)) + "." + Crypto.base64URL(Array(claims.utf8))
        return input + "." + Crypto.base64URL(try sign(Array(input.utf8)))
    }

    /// DER `ECDSA-Sig-Value` to the 64 bytes JWS wants.
    private static func rawECDSA(_ der: [UInt8]) throws(SigningError) -> [UInt8] {
        var pointer: UnsafePointer<UInt8>? = nil
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            pointer = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &pointer, buffer.count)
        }
        guard let parsed else { throw .failed("the ECDSA signature did not parse") }
        defer { ECDSA_SIG_free(parsed) }
        var out = [UInt8](repeating: 0, count: 64)
        guard let r = ECDSA_SIG_get0_r(parsed), let s = ECDSA_SIG_get0_s(parsed),
              BN_bn2binpad(r, &out, 32) == 32,
              out.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress.map { $0 + 32 }, 32) }) == 32 else {
            throw .failed("the ECDSA signature is not on P-256")
        }
        return out
    }

    private static func lastError() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "libcrypto refused" }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// What went wrong with a signing key.
package enum SigningError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text is not a PEM private key.
    case unreadable(String)
    /// A key of a kind this does not sign with.
    case unsupported(String)
    /// libcrypto refused to sign.
    case failed(String)

    package var description: String {
        switch self {
        case .unreadable(let why), .unsupported(let why), .failed(let why): why
        }
    }
}
