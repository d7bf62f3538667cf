import Foundation
import ParleyCrypto
import ParleyLog
import ParleyStore
import ParleySync
package import ParleyWire

// Sign in with the app's own identity (docs/trust-and-safety.md): an app whose users already
// have accounts (Firebase Auth, Sign in with Apple through its backend, Auth0, Supabase) hands
// Parley the JWT its identity provider issued. `POST /v1/sessions/jwt` exchanges it for a
// Parley session; a JWT is also accepted directly wherever a session token is (the realtime
// socket's `auth`, `Authorization: Bearer`), as a session that lives as long as the token.
// The user, named by `sub`, is created on first sign-in.

/// Fetches an app's JSON Web Key Set; the server gives one that goes through the outbound
/// address rules (ParleyWebhooks' `JWKSClient`).
package protocol JWKSFetcher: Sendable {
    /// The body at `url` (a 200 answer), or a thrown error saying why not.
    func fetch(url: String) async throws -> [UInt8]
}

/// Token settings: how the app's JWTs are checked (the server API sets them).
package struct JWTSignIn: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Token settings: how the app's JWTs are checked.
    package var jwt: JWTSignIn { JWTSignIn(core: self) }
}

/// One app's keys as this node holds them.
struct JWTState: Sendable {
    var keys: JWTKeys
    var jwksURL: String?
    var readAt: ContinuousClock.Instant
    var fetchedAt: ContinuousClock.Instant?
}

extension JWTSignIn {
    /// How long a node keeps an app's settings before reading them again.
    static let settingsLifetime: Duration = .seconds(10)
    /// How often a key set named by URL is fetched again.
    static let refetchAfter: Duration = .seconds(600)
    /// The soonest a key set is fetched again for a token naming an unknown key.
    static let refetchForUnknownKey: Duration = .seconds(60)

    /// Sets the app's token settings (all at once: what is not given is cleared).
    ///
    /// - Throws: 400 naming what is wrong (a short HS256 key, a key set without a usable key, a
    ///   key set URL that cannot be fetched or names a private address), or when nothing is set.
    package func set(_ server: ServerApp, _ request: SetJWTSettingsRequest) async throws -> JWTSettings {
        if let secret = request.hs256Secret, secret.utf8.count < 32 || secret.utf8.count > 512 {
            throw ChatError.invalid("hs256Secret must be 32–512 bytes (RFC 7518 §3.2: at least the hash's size)")
        }
        for (field, value) in [("issuer", request.issuer), ("audience", request.audience)] {
            if let value, !(1...512).contains(value.utf8.count) { throw ChatError.invalid("\(field) must be 1–512 bytes") }
        }
        guard request.hs256Secret != nil || request.jwks != nil || request.jwksURL != nil else {
            throw ChatError.invalid("give hs256Secret, jwks or jwksUrl: the key tokens are checked with")
        }
        guard request.jwks == nil || request.jwksURL == nil else { throw ChatError.invalid("give jwks or jwksUrl, not both") }
        var jwks: String?
        if let given = request.jwks { jwks = try given.encoded() }
        let url = try request.jwksURL.map { try Validate.webhookURL($0, allowPrivate: configuration.webhooksAllowPrivate) }
        if let url {
            guard let fetcher = configuration.jwksFetcher else { throw ChatError.forbidden("this server cannot fetch key sets") }
            do {
                jwks = String(decoding: try await fetcher.fetch(url: url), as: UTF8.self)
            } catch {
                throw ChatError.invalid("cannot fetch the key set at jwksUrl: \(error)")
            }
        }
        if let jwks {
            do { _ = try JWTKeys.keys(fromJWKS: jwks) } catch { throw ChatError.invalid("jwks: \(error.description)") }
        }
        let keySet = jwks
        let sealed = request.hs256Secret.map { seal($0) }
        let now = nowMilliseconds
        let app = server.app.id
        let settings: JWTSettings = try await run {
            try await store.write { db in
                try db.execute("DELETE FROM jwt_settings WHERE app_id = \(app)")
                try db.execute("""
                    INSERT INTO jwt_settings (app_id, hs256_key, jwks, jwks_url, issuer, audience, updated_at)
                    VALUES (\(app), \(sealed), \(keySet), \(url), \(request.issuer), \(request.audience), \(now))
                    """)
                return try Self.settings(db, app: app)
            }
        }
        core.jwtStates.withLock { _ = $0.removeValue(forKey: app) }
        return settings
    }

    /// The app's token settings (without the HS256 key).
    ///
    /// - Throws: 404 `not_found` when none are set.
    package func settings(_ server: ServerApp) async throws -> JWTSettings {
        try await run { try await store.read { db in try Self.settings(db, app: server.app.id) } }
    }

    /// Removes the app's token settings: its JWTs are refused from now on (sessions already
    /// given stay until they end).
    package func remove(_ server: ServerApp) async throws {
        let app = server.app.id
        try await run {
            try await store.write { db in
                guard try db.execute("DELETE FROM jwt_settings WHERE app_id = \(app)") > 0 else { throw Self.noSettings }
            }
        }
        core.jwtStates.withLock { _ = $0.removeValue(forKey: app) }
    }

    static let noSettings = ChatError(.notFound, "this app accepts no JWTs; PUT /v1/server/jwt sets how they are checked")

    static func settings(_ db: any Database, app: Int64) throws -> JWTSettings {
        guard let row = try db.fetchOne("SELECT hs256_key, jwks, jwks_url, issuer, audience, updated_at FROM jwt_settings WHERE app_id = \(app)") else {
            throw noSettings
        }
        let keys = try row.get("jwks", as: String?.self).flatMap { try? JWTKeys.keys(fromJWKS: $0) } ?? []
        var algorithms = Set(keys.map(\.key.algorithm.rawValue))
        if try row.get("hs256_key", as: String?.self) != nil { algorithms.insert("HS256") }
        return JWTSettings(algorithms: algorithms.sorted(), keyIDs: keys.map(\.id), jwksURL: try row.get("jwks_url"), issuer: try row.get("issuer"),
                           audience: try row.get("audience"), updatedAt: Chat.date(try row.get("updated_at")))
    }
}

extension Chat {
    /// Signs in with a JWT: a new Parley session for the user it names (created on first
    /// sign-in, as `user.created`).
    ///
    /// - Throws: 401 `invalid_token` saying what is wrong with the token; 403 `user_deactivated`;
    ///   429 `rate_limited` after too many refused tokens from one address (the sign-in budget).
    package func signIn(jwt request: JWTSignInRequest, app: AppRef, address: String = "unknown") async throws -> SignedIn {
        let device = try Validate.device(request.device)
        let clock = configuration.now()
        if let seconds = await failedSignInsByAddress.check(address, now: clock) { throw ChatError.rateLimited(retryAfter: seconds) }
        let verified: VerifiedToken
        do {
            verified = try await verifyJWT(request.token, app: app.id)
        } catch let error as ChatError where error.code == ChatError.Code.invalidToken.rawValue {
            await failedSignInsByAddress.count(address, now: clock)
            throw error
        }
        let now = nowMilliseconds
        let lifetime = min(configuration.sessionLifetime, TimeInterval(max(60_000, verified.expiresAt - now)) / 1000)
        let (signedIn, announced): (SignedIn, Bool) = try await run {
            try await store.write { db in
                let (key, announced) = try Chat.jwtUser(db, app: app.id, verified: verified, now: now)
                let session = try Chat.createSession(db, userKey: key, device: device, now: now, lifetime: lifetime)
                return (SignedIn(user: try Chat.fetchUser(db, key: key), session: session), announced)
            }
        }
        if announced { webhooks.signal() }
        return signedIn
    }

    /// A JWT used as the bearer token: the session it stands for (made on first use, lasting
    /// until the token's `exp`).
    func authenticateJWT(_ token: String, app: AppRef) async throws -> Caller {
        let hash = Crypto.secretHash(token)
        let now = nowMilliseconds
        if let caller = sessions.get(hash, now: now) {
            guard caller.appID == app.id else { throw ChatError.unauthenticated }
            return caller
        }
        let verified = try await verifyJWT(token, app: app.id)
        let expiresAt = min(verified.expiresAt, now + Int64(configuration.sessionLifetime * 1000))
        let (caller, announced): (Caller, Bool) = try await run {
            try await store.write { db in
                let (key, announced) = try Chat.jwtUser(db, app: app.id, verified: verified, now: now)
                if try db.fetchOne("SELECT 1 FROM session WHERE token_hash = \(hash)") == nil {
                    try db.execute("""
                        INSERT INTO session (public_id, token_hash, user_id, device, created_at, expires_at)
                        VALUES (\(Crypto.randomID(prefix: "s_")), \(hash), \(key), 'jwt', \(now), \(expiresAt))
                        """)
                    try db.execute("DELETE FROM session WHERE user_id = \(key) AND expires_at <= \(now)")
                }
                guard let row = try db.fetchOne("""
                    SELECT s.id, u.public_id FROM session s JOIN account u ON u.id = s.user_id WHERE s.token_hash = \(hash)
                    """) else { throw ChatError.unauthenticated }
                return (Caller(appID: app.id, userKey: key, userID: UserID(rawValue: try row.get("public_id")), sessionKey: try row.get("id")), announced)
            }
        }
        if announced { webhooks.signal() }
        sessions.put(hash, .init(caller: caller, expiresAt: expiresAt, cachedAt: now))
        return caller
    }

    /// Checks a token with the app's keys, fetching its key set again when the token names a
    /// key not seen yet (at most once a minute) or the set is old.
    private func verifyJWT(_ token: String, app: Int64) async throws -> VerifiedToken {
        var state = try await jwtState(app: app, refetch: false)
        do {
            return try JWTVerifier.verify(token, keys: state.keys, now: nowMilliseconds)
        } catch let error where error.unknownKey && state.jwksURL != nil
                    && (state.fetchedAt.map { ContinuousClock.now - $0 >= JWTSignIn.refetchForUnknownKey } ?? true) {
            state = try await jwtState(app: app, refetch: true)
            do {
                return try JWTVerifier.verify(token, keys: state.keys, now: nowMilliseconds)
            } catch {
                throw ChatError(.invalidToken, "the token is refused: \(error.description)")
            }
        } catch {
            throw ChatError(.invalidToken, "the token is refused: \(error.description)")
        }
    }

    private func jwtState(app: Int64, refetch: Bool) async throws -> JWTState {
        let now = ContinuousClock.now
        if !refetch, let known = jwtStates.withLock({ $0[app] }), now - known.readAt < JWTSignIn.settingsLifetime,
           known.jwksURL == nil || (known.fetchedAt.map { now - $0 < JWTSignIn.refetchAfter } ?? false) {
            return known
        }
        let sealer = configuration.sealer
        guard let row: (hs256: String?, jwks: String?, url: String?, issuer: String?, audience: String?) = try await run({
            try await self.store.read { db in
                try db.fetchOne("SELECT hs256_key, jwks, jwks_url, issuer, audience FROM jwt_settings WHERE app_id = \(app)").map {
                    (try $0.get("hs256_key"), try $0.get("jwks"), try $0.get("jwks_url"), try $0.get("issuer"), try $0.get("audience"))
                }
            }
        }) else {
            throw ChatError(.invalidToken, "this app accepts no JWTs (its backend sets how with PUT /v1/server/jwt)")
        }
        var jwks = row.jwks
        var fetchedAt = jwtStates.withLock { $0[app]?.fetchedAt }
        let stale = fetchedAt.map { now - $0 >= JWTSignIn.refetchAfter } ?? true
        if let url = row.url, let fetcher = configuration.jwksFetcher, refetch || stale {
            do {
                let fetched = String(decoding: try await fetcher.fetch(url: url), as: UTF8.self)
                _ = try JWTKeys.keys(fromJWKS: fetched)
                jwks = fetched
                fetchedAt = now
                let stamp = nowMilliseconds
                try await run {
                    try await self.store.write { db in
                        try db.execute("UPDATE jwt_settings SET jwks = \(fetched), updated_at = \(stamp) WHERE app_id = \(app) AND jwks_url = \(url)")
                    }
                }
            } catch {
                // The keys held keep working while the identity provider cannot be reached.
                configuration.logger.warning("cannot fetch an app's key set", metadata: ["app.id": .integer(app), "error": .string("\(error)")])
                fetchedAt = now
            }
        }
        let keys = JWTKeys(hs256: try row.hs256.map { Array(try Chat.unseal($0, with: sealer).utf8) },
                           keys: jwks.flatMap { try? JWTKeys.keys(fromJWKS: $0) } ?? [], issuer: row.issuer, audience: row.audience)
        let state = JWTState(keys: keys, jwksURL: row.url, readAt: now, fetchedAt: fetchedAt)
        jwtStates.withLock { $0[app] = state }
        return state
    }

    /// The account a token's `sub` names, created on first sign-in: the `sub` as its username
    /// when it is a valid, free one, else a name made from it. `name` becomes (and keeps) the
    /// display name. Returns the key and whether `user.created` was queued for webhooks.
    static func jwtUser(_ db: any Database, app: Int64, verified: VerifiedToken, now: Int64) throws -> (Int64, Bool) {
        let displayName = verified.name.flatMap { try? Validate.displayName($0) }
        if let row = try db.fetchOne("""
            SELECT id, display_name, deactivated_at FROM account WHERE app_id = \(app) AND external_id = \(verified.subject) AND deleted_at IS NULL
            """) {
            guard try row.get("deactivated_at", as: Int64?.self) == nil else { throw ChatError.userDeactivated }
            let key: Int64 = try row.get("id")
            if let displayName, displayName != (try row.get("display_name", as: String.self)) {
                try db.execute("UPDATE account SET display_name = \(displayName), display_key = \(displayName.lowercased()) WHERE id = \(key)")
            }
            return (key, false)
        }
        var username = "u-" + String(SHA256.hash(Array(verified.subject.utf8)).hexString.prefix(20))
        if let key = Validate.usernameKey(verified.subject),
           try db.fetchOne("SELECT 1 FROM account WHERE app_id = \(app) AND username_key = \(key)") == nil {
            username = verified.subject
        }
        let id = Crypto.randomID(prefix: "u_")
        let shown = displayName ?? username
        try db.execute("""
            INSERT INTO account (app_id, public_id, username, username_key, display_name, display_key, password_hash, is_guest, created_at, external_id)
            VALUES (\(app), \(id), \(username), \(username.lowercased()), \(shown), \(shown.lowercased()), NULL, 0, \(now), \(verified.subject))
            """)
        guard let key = try db.fetchValue(Int64.self, "SELECT id FROM account WHERE public_id = \(id)") else { throw ChatError.internalError }
        let announced = try Webhooks.enqueue(db, app: app, type: WebhookEventType.userCreated.rawValue, data: Webhooks.json(try fetchUser(db, key: key)), now: now)
        return (key, announced)
    }
}
