import CParleyCrypto
import Foundation

/// A public key that checks JWT signatures (RFC 7515) with libcrypto: RSA for RS256 or EC
/// P-256 for ES256, built from a JSON Web Key's numbers (RFC 7517/7518: `n` and `e`, or `x`
/// and `y`), as an identity provider's JWKS publishes them.
package final class VerifyingKey: @unchecked Sendable {
    // @unchecked: the key is only read after it is built; EVP_PKEY verification is thread-safe.

    /// RS256 or ES256.
    package let algorithm: SigningKey.Algorithm
    private let key: OpaquePointer

    /// An RSA public key from its modulus and exponent (big-endian bytes).
    ///
    /// - Throws: ``SigningError`` for a modulus under 2048 bits or numbers libcrypto refuses.
    package convenience init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws(SigningError) {
        let n = Array(modulus.drop { $0 == 0 })
        guard n.count * 8 >= 2048, n.count <= 1024, !exponent.isEmpty, exponent.count <= 8 else {
            throw .unsupported("an RSA key needs a modulus of 2048–8192 bits and a short exponent")
        }
        // SubjectPublicKeyInfo { AlgorithmIdentifier rsaEncryption NULL, BIT STRING RSAPublicKey { n, e } }
        let rsaKey = DER.sequence(DER.integer(n) + DER.integer(exponent))
        let algorithm = DER.sequence([0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00])
        try self.init(spki: DER.sequence(algorithm + DER.bitString(rsaKey)), algorithm: .rs256)
    }

    /// An EC P-256 public key from its coordinates (32 bytes each).
    ///
    /// - Throws: ``SigningError`` for coordinates that are not a point on P-256.
    package convenience init(p256X x: [UInt8], y: [UInt8]) throws(SigningError) {
        guard x.count == 32, y.count == 32 else { throw .unsupported("a P-256 key's x and y are 32 bytes each") }
        // AlgorithmIdentifier { id-ecPublicKey, prime256v1 }
        let algorithm = DER.sequence([0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                                      0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07])
        try self.init(spki: DER.sequence(algorithm + DER.bitString([0x04] + x + y)), algorithm: .es256)
    }

    private init(spki: [UInt8], algorithm: SigningKey.Algorithm) throws(SigningError) {
        let parsed: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var pointer = buffer.baseAddress
            return d2i_PUBKEY(nil, &pointer, buffer.count)
        }
        guard let parsed else {
            ERR_clear_error()
            throw .unreadable("libcrypto refused the key's numbers")
        }
        key = parsed
        self.algorithm = algorithm
    }

    deinit { EVP_PKEY_free(key) }

    /// Whether `signature` signs `message` (SHA-256, then the key's algorithm; an ES256
    /// signature is the 64 bytes r ‖ s of RFC 7518 §3.4).
    package func verify(_ message: [UInt8], signature: [UInt8]) -> Bool {
        var signature = signature
        if algorithm == .es256 {
            guard signature.count == 64, let der = Self.derECDSA(signature) else { return false }
            signature = der
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else {
            ERR_clear_error()
            return false
        }
        let verified = EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
        ERR_clear_error()
        return verified
    }

    /// 64 bytes r ‖ s to a DER `ECDSA-Sig-Value`.
    private static func derECDSA(_ raw: [UInt8]) -> [UInt8]? {
        func unsigned(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            let trimmed = Array(bytes.drop { $0 == 0 })
            return trimmed.isEmpty ? [0] : trimmed
        }
        return DER.sequence(DER.integer(unsigned(raw[0..<32])) + DER.integer(unsigned(raw[32..<64])))
    }
}

/// The few DER encodings a public key needs.
enum DER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 {
            bytes.insert(UInt8(rest & 0xFF), at: 0)
            rest >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] { [0x30] + length(content.count) + content }

    /// A non-negative INTEGER from big-endian magnitude bytes.
    static func integer(_ magnitude: [UInt8]) -> [UInt8] {
        var bytes = Array(magnitude.drop { $0 == 0 })
        if bytes.isEmpty { bytes = [0] }
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return [0x02] + length(bytes.count) + bytes
    }

    static func bitString(_ content: [UInt8]) -> [UInt8] { [0x03] + length(content.count + 1) + [0x00] + content }
}
