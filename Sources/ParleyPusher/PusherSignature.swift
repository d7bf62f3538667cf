import Foundation
import ParleyCrypto
import ParleyNet

/// Pusher's two signatures (docs/pusher.md, "Signatures"), both HMAC-SHA256 in lower-case hex
/// under the app secret, compared in constant time:
///
/// - a subscription's `auth` is `<key>:<hex>` over `<socket_id>:<channel>[:<channel_data>]`,
///   a sign-in's over `<socket_id>::user::<user_data>`, made by the app's backend;
/// - an HTTP API request carries `auth_key`, `auth_timestamp`, `auth_version=1.0`,
///   `body_md5` (hex MD5 of a non-empty body) and `auth_signature` over
///   `<METHOD>\n<path>\n<every other query parameter, keys lower-cased, sorted, key=value joined by &>`,
///   with the values as they are, not escaped.
package enum PusherSignature: Sendable {
    /// The hex HMAC-SHA256 of `message` under `secret`.
    package static func sign(_ message: String, secret: String) -> String {
        Crypto.hmacSHA256(key: Array(secret.utf8), message: Array(message.utf8)).hexString
    }

    /// Whether `auth` (`key:signature`) signs `message` for this app.
    package static func verifyAuth(_ auth: String, message: String, key: String, secret: String) -> Bool {
        let parts = auth.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return false }
        let expected = Array(sign(message, secret: secret).utf8)
        let given = Array(parts[1].utf8)
        // Both checks always run, so the time does not say which one failed.
        let keyMatches = Crypto.constantTimeEqual(Array(parts[0].utf8), Array(key.utf8))
        let signatureMatches = given.count == expected.count && Crypto.constantTimeEqual(given, expected)
        return keyMatches && signatureMatches
    }

    /// Why an HTTP API request's signature is refused.
    package enum Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// A required parameter is missing.
        case missing(String)
        /// `auth_key` is not this app's key.
        case wrongKey
        /// `auth_version` is not 1.0.
        case wrongVersion(String)
        /// `auth_timestamp` is not a number or is too far from now.
        case stale(Int64)
        /// `body_md5` does not match the body.
        case bodyMismatch
        /// The signature does not match.
        case badSignature(expectedOver: String)
        /// The query string is not a valid form.
        case badQuery(String)

        package var description: String {
            switch self {
            case .missing(let name): "the request has no '\(name)' parameter: sign it as Pusher's HTTP API requires (docs/pusher.md)"
            case .wrongKey: "auth_key is not this app's key"
            case .wrongVersion(let version): "auth_version '\(version.prefix(16))' is not supported: use 1.0"
            case .stale(let seconds): "auth_timestamp is \(seconds) s from the server's clock (at most \(PusherProtocol.timestampWindow) s): check the clock"
            case .bodyMismatch: "body_md5 is not the MD5 of the body"
            case .badSignature(let over): "invalid signature: expected the HMAC-SHA256 hex digest of \(over.debugDescription) under the app secret"
            case .badQuery(let problem): "the query string is not valid: \(problem)"
            }
        }
    }

    /// Checks a signed HTTP API request.
    ///
    /// - Parameters:
    ///   - query: the raw query string (without `?`), nil for none.
    ///   - now: seconds since 1970.
    /// - Throws: ``Refusal`` naming what is wrong.
    package static func verifyRequest(method: String, path: String, query: Substring?, body: [UInt8], key: String, secret: String,
                                     now: Int64) throws(Refusal) {
        let parameters: [String: String]
        do {
            parameters = try FormBody(parsing: Array((query ?? "").utf8)).fields
        } catch {
            throw .badQuery(error.description)
        }
        guard let givenSignature = parameters["auth_signature"] else { throw .missing("auth_signature") }
        guard let givenKey = parameters["auth_key"] else { throw .missing("auth_key") }
        guard let timestampText = parameters["auth_timestamp"] else { throw .missing("auth_timestamp") }
        guard let version = parameters["auth_version"] else { throw .missing("auth_version") }
        guard Crypto.constantTimeEqual(Array(givenKey.utf8), Array(key.utf8)) else { throw .wrongKey }
        guard version == "1.0" else { throw .wrongVersion(version) }
        guard let timestamp = Int64(timestampText) else { throw .stale(Int64.max) }
        guard abs(now - timestamp) <= PusherProtocol.timestampWindow else { throw .stale(abs(now - timestamp)) }
        if !body.isEmpty {
            guard let md5 = parameters["body_md5"] else { throw .missing("body_md5") }
            guard Crypto.constantTimeEqual(Array(md5.utf8), Array(Crypto.md5(body).hexString.utf8)) else { throw .bodyMismatch }
        }
        let signed = stringToSign(method: method, path: path, parameters: parameters)
        let expected = Array(sign(signed, secret: secret).utf8)
        let given = Array(givenSignature.utf8)
        guard given.count == expected.count, Crypto.constantTimeEqual(given, expected) else { throw .badSignature(expectedOver: signed) }
    }

    /// `<METHOD>\n<path>\n<sorted query without auth_signature>`.
    package static func stringToSign(method: String, path: String, parameters: [String: String]) -> String {
        let query = parameters.filter { $0.key != "auth_signature" }
            .map { (key: $0.key.lowercased(), value: $0.value) }
            .sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }
            .joined(separator: "&")
        return "\(method.uppercased())\n\(path)\n\(query)"
    }
}
