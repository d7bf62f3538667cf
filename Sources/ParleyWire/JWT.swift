public import Foundation

// Signing in with the app's own identity (docs/trust-and-safety.md, "Sign in with your own
// accounts"): a JWT the app's identity provider issued, exchanged for a Parley session or
// used directly as the bearer token.

/// `PUT /v1/server/jwt`: how the app's tokens are checked (replaces what was set).
public struct SetJWTSettingsRequest: Hashable, Codable, Sendable {
    /// An HS256 key (at least 32 bytes): tokens signed with it are accepted.
    public var hs256Secret: String?
    /// A JSON Web Key Set (`{"keys": [...]}`, RSA and EC P-256 keys): RS256 and ES256 tokens
    /// signed by one of its keys are accepted.
    public var jwks: JSONValue?
    /// Where to fetch the JSON Web Key Set instead (`https`, or `http`; public addresses unless
    /// the operator allows private ones); fetched when set, then at most every 10 minutes or
    /// when a token names a key not yet seen (at most once a minute).
    public var jwksURL: String?
    /// When set, a token's `iss` must equal it.
    public var issuer: String?
    /// When set, a token's `aud` must be or contain it.
    public var audience: String?
    enum CodingKeys: String, CodingKey { case hs256Secret, jwks, jwksURL = "jwksUrl", issuer, audience }
    /// Creates the value; each argument sets the property of the same name.
    public init(hs256Secret: String? = nil, jwks: JSONValue? = nil, jwksURL: String? = nil, issuer: String? = nil, audience: String? = nil) {
        self.hs256Secret = hs256Secret
        self.jwks = jwks
        self.jwksURL = jwksURL
        self.issuer = issuer
        self.audience = audience
    }
}

/// The app's token settings as `GET /v1/server/jwt` shows them (never the HS256 key).
public struct JWTSettings: Hashable, Codable, Sendable {
    /// The algorithms accepted (`HS256`, `RS256`, `ES256`).
    public var algorithms: [String]
    /// The ids (`kid`) of the public keys held, `""` for a key without one.
    public var keyIDs: [String]
    /// Where the key set is fetched from.
    public var jwksURL: String?
    /// The issuer required.
    public var issuer: String?
    /// The audience required.
    public var audience: String?
    /// When the settings were set.
    public var updatedAt: Date
    enum CodingKeys: String, CodingKey { case algorithms, keyIDs = "keyIds", jwksURL = "jwksUrl", issuer, audience, updatedAt }
    /// Creates the value; each argument sets the property of the same name.
    public init(algorithms: [String], keyIDs: [String], jwksURL: String?, issuer: String?, audience: String?, updatedAt: Date) {
        self.algorithms = algorithms
        self.keyIDs = keyIDs
        self.jwksURL = jwksURL
        self.issuer = issuer
        self.audience = audience
        self.updatedAt = updatedAt
    }
}

/// `POST /v1/sessions/jwt`: a session for the user a JWT names (created on first sign-in).
public struct JWTSignInRequest: Hashable, Codable, Sendable {
    /// The token.
    public var token: String
    /// A label for this device's session.
    public var device: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(token: String, device: String? = nil) {
        self.token = token
        self.device = device
    }
}
