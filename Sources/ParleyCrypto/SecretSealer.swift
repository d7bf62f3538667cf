import CParleySodium
import Foundation

/// Seals the secrets Parley must be able to read back (an app's secret, which signs Pusher
/// requests; a webhook endpoint's signing secret) with a key kept outside the database
/// (libsodium's `crypto_secretbox`: XSalsa20-Poly1305), so a copied database or backup does
/// not give them away (issue 31, item 4). A sealed value is text:
/// `sealed:v1:<base64 of nonce and box>`.
package struct SecretSealer: Sendable {
    /// The key's length in bytes.
    package static let keyBytes = 32
    private static let prefix = "sealed:v1:"
    private let key: [UInt8]

    /// A sealer with `key` (``keyBytes`` long).
    package init?(key: [UInt8]) {
        guard key.count == Self.keyBytes, Crypto.isReady else { return nil }
        self.key = key
    }

    /// A new random key.
    package static func newKey() -> [UInt8] { Crypto.randomBytes(keyBytes) }

    /// Whether `stored` is a sealed value (else it is a secret stored before sealing).
    package static func isSealed(_ stored: String) -> Bool { stored.hasPrefix(prefix) }

    /// `secret`, sealed with a fresh nonce.
    package func seal(_ secret: String) -> String {
        let message = Array(secret.utf8)
        let nonce = Crypto.randomBytes(Int(crypto_secretbox_NONCEBYTES))
        var box = [UInt8](repeating: 0, count: message.count + Int(crypto_secretbox_MACBYTES))
        _ = crypto_secretbox_easy(&box, message, UInt64(message.count), nonce, key)
        return Self.prefix + Data(nonce + box).base64EncodedString()
    }

    /// The secret in `stored`: opened when sealed, as it is when stored before sealing.
    ///
    /// - Throws: ``SealError`` when it is sealed with another key, or damaged.
    package func open(_ stored: String) throws(SealError) -> String {
        guard Self.isSealed(stored) else { return stored }
        guard let data = Data(base64Encoded: String(stored.dropFirst(Self.prefix.count))),
              data.count >= Int(crypto_secretbox_NONCEBYTES) + Int(crypto_secretbox_MACBYTES) else { throw SealError() }
        let bytes = [UInt8](data)
        let nonce = Array(bytes.prefix(Int(crypto_secretbox_NONCEBYTES)))
        let box = Array(bytes.dropFirst(Int(crypto_secretbox_NONCEBYTES)))
        var message = [UInt8](repeating: 0, count: box.count - Int(crypto_secretbox_MACBYTES))
        guard crypto_secretbox_open_easy(&message, box, UInt64(box.count), nonce, key) == 0,
              let text = String(validating: message, as: UTF8.self) else { throw SealError() }
        return text
    }
}

/// A sealed secret that this key cannot open: sealed with another key, or damaged.
package struct SealError: Error, Sendable, CustomStringConvertible {
    package var description: String { "a sealed secret does not open with this key (another node's or an older key file?)" }
}
