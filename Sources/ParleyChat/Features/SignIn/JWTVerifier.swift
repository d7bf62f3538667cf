import Foundation
package import ParleyCrypto
import ParleyWire

// Checking a JWT (RFC 7519) the way an app's identity provider means it: a compact JWS with
// HS256, RS256 or ES256 (never `none`, never an algorithm the app did not set a key for),
// `exp` required, `nbf` and `iat` honoured, `iss` and `aud` checked when the app configured
// them, and one minute of leeway for clocks. Everything here is pure: the keys come in, a
// verdict goes out.

/// An app's keys for its users' tokens, built from its settings.
package struct JWTKeys: Sendable {
    /// The HS256 key, when the app set one.
    package var hs256: [UInt8]?
    /// Public keys by `kid` ("" for a key without one).
    package var keys: [(id: String, key: VerifyingKey)]
    /// The `iss` required, if any.
    package var issuer: String?
    /// The `aud` required, if any.
    package var audience: String?

    /// Reads a JSON Web Key Set's RSA and EC P-256 signing keys (others are skipped).
    ///
    /// - Throws: ``JWTError`` naming the key that cannot be read, or when none is usable.
    package static func keys(fromJWKS text: String) throws(JWTError) -> [(id: String, key: VerifyingKey)] {
        guard text.utf8.count <= 64 * 1024, case .object(let set)? = try? JSONValue.decode(text), case .array(let list)? = set["keys"] else {
            throw JWTError("the key set is not a JSON object with a \"keys\" list (RFC 7517 §5)")
        }
        guard list.count <= 20 else { throw JWTError("a key set may hold at most 20 keys") }
        var keys: [(id: String, key: VerifyingKey)] = []
        for (index, entry) in list.enumerated() {
            guard case .object(let key) = entry else { throw JWTError("keys[\(index)] is not an object") }
            func text(_ name: String) -> String? { if case .string(let value)? = key[name] { value } else { nil } }
            if let use = text("use"), use != "sig" { continue }
            let id = text("kid") ?? ""
            do {
                switch (text("kty"), text("alg")) {
                case ("RSA", nil), ("RSA", "RS256"?):
                    guard let n = text("n").flatMap(base64URLDecoded), let e = text("e").flatMap(base64URLDecoded) else {
                        throw JWTError("keys[\(index)] (RSA) needs n and e in base64url")
                    }
                    keys.append((id, try VerifyingKey(rsaModulus: n, exponent: e)))
                case ("EC", nil), ("EC", "ES256"?):
                    guard text("crv") == "P-256", let x = text("x").flatMap(base64URLDecoded), let y = text("y").flatMap(base64URLDecoded) else {
                        throw JWTError("keys[\(index)] (EC) must be on P-256 with x and y in base64url")
                    }
                    keys.append((id, try VerifyingKey(p256X: x, y: y)))
                default:
                    continue  // a key for another algorithm or use: not ours to check with
                }
            } catch let error as SigningError {
                throw JWTError("keys[\(index)] cannot be read: \(error)")
            } catch let error as JWTError {
                throw error
            } catch {
                throw JWTError("keys[\(index)] cannot be read")
            }
        }
        guard !keys.isEmpty else { throw JWTError("the key set has no RSA or EC P-256 signing key") }
        return keys
    }
}

/// Why a token or a key set was refused.
package struct JWTError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
    /// The token names a key (`kid`) this set does not have: worth fetching the set again.
    package var unknownKey = false
    package init(_ description: String, unknownKey: Bool = false) {
        self.description = description
        self.unknownKey = unknownKey
    }
}

/// What a valid token says.
package struct VerifiedToken: Sendable, Hashable {
    /// `sub`: who the user is at the identity provider.
    package var subject: String
    /// `name`, when given.
    package var name: String?
    /// `exp`, in milliseconds.
    package var expiresAt: Int64
}

package enum JWTVerifier {
    /// The longest token read.
    package static let maxBytes = 8 * 1024
    /// How far clocks may disagree.
    static let leewayMilliseconds: Int64 = 60_000

    /// Whether `token` has a JWT's shape (three base64url parts, the first a JSON object's).
    package static func looksLikeJWT(_ token: String) -> Bool {
        token.hasPrefix("eyJ") && token.utf8.count <= maxBytes && token.utf8.filter({ $0 == UInt8(ascii: ".") }).count == 2
    }

    /// Checks `token` with `keys` at `now` (milliseconds).
    ///
    /// - Throws: ``JWTError`` saying what is wrong with it.
    package static func verify(_ token: String, keys: JWTKeys, now: Int64) throws(JWTError) -> VerifiedToken {
        guard token.utf8.count <= maxBytes else { throw JWTError("the token is longer than \(maxBytes) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = base64URLDecoded(String(parts[0])), let claimBytes = base64URLDecoded(String(parts[1])),
              let signature = base64URLDecoded(String(parts[2])) else {
            throw JWTError("not a JWT: three base64url parts separated by dots")
        }
        guard case .object(let header)? = try? JSONValue.decode(String(decoding: headerBytes, as: UTF8.self)),
              case .object(let claims)? = try? JSONValue.decode(String(decoding: claimBytes, as: UTF8.self)) else {
            throw JWTError("the token's header and claims must be JSON objects")
        }
        guard case .string(let algorithm)? = header["alg"] else { throw JWTError("the token's header has no alg") }
        if case .array? = header["crit"] { throw JWTError("the token has critical header extensions this server does not know") }
        let signed = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        switch algorithm {
        case "HS256":
            guard let key = keys.hs256 else { throw JWTError("HS256 tokens are not accepted: the app set no HS256 key") }
            guard Crypto.constantTimeEqual(Crypto.hmacSHA256(key: key, message: signed), signature) else {
                throw JWTError("the token's signature does not verify")
            }
        case "RS256", "ES256":
            let wanted: SigningKey.Algorithm = algorithm == "RS256" ? .rs256 : .es256
            var candidates = keys.keys.filter { $0.key.algorithm == wanted }
            if case .string(let id)? = header["kid"] {
                candidates = candidates.filter { $0.id == id }
                guard !candidates.isEmpty else { throw JWTError("no key with kid '\(id.prefix(64))' in the app's key set", unknownKey: true) }
            }
            guard !candidates.isEmpty else { throw JWTError("\(algorithm) tokens are not accepted: the app's key set has no such key") }
            guard candidates.contains(where: { $0.key.verify(signed, signature: signature) }) else {
                throw JWTError("the token's signature does not verify")
            }
        default:
            throw JWTError("the algorithm '\(algorithm.prefix(16))' is not accepted (HS256, RS256 or ES256)")
        }
        func seconds(_ name: String) throws(JWTError) -> Int64? {
            guard let value = claims[name], value != .null else { return nil }
            guard case .number(let number) = value, number.isFinite, abs(number) < 1e11 else { throw JWTError("\(name) must be a NumericDate (seconds)") }
            return Int64(number * 1000)
        }
        guard let expires = try seconds("exp") else { throw JWTError("the token has no exp: tokens must expire") }
        guard now < expires + leewayMilliseconds else { throw JWTError("the token expired") }
        if let notBefore = try seconds("nbf"), now + leewayMilliseconds < notBefore { throw JWTError("the token is not valid yet (nbf)") }
        if let issued = try seconds("iat"), now + leewayMilliseconds < issued { throw JWTError("the token was issued in the future (iat)") }
        if let issuer = keys.issuer {
            guard case .string(let given)? = claims["iss"], given == issuer else { throw JWTError("the token's iss is not the app's issuer") }
        }
        if let audience = keys.audience {
            let given: [String]
            switch claims["aud"] {
            case .string(let one)?: given = [one]
            case .array(let many)?: given = many.compactMap { if case .string(let value) = $0 { value } else { nil } }
            default: given = []
            }
            guard given.contains(audience) else { throw JWTError("the token's aud does not name the app's audience") }
        }
        guard case .string(let subject)? = claims["sub"], (1...255).contains(subject.utf8.count) else {
            throw JWTError("the token needs a sub of 1–255 bytes: who the user is")
        }
        var name: String?
        if case .string(let given)? = claims["name"] {
            let trimmed = given.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { name = String(trimmed.prefix(64)) }
        }
        return VerifiedToken(subject: subject, name: name, expiresAt: expires)
    }
}

/// Decodes base64url without padding (RFC 4648 §5), or nil.
package func base64URLDecoded(_ text: String) -> [UInt8]? {
    guard text.utf8.allSatisfy({ $0.isBase64URL }) else { return nil }
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while standard.utf8.count % 4 != 0 { standard += "=" }
    return Data(base64Encoded: standard).map(Array.init)
}

extension UInt8 {
    fileprivate var isBase64URL: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
}
