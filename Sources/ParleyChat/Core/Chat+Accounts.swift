import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

extension Chat {
    /// Registers a user with a username and password and signs them in on this device.
    ///
    /// - Throws: 400 for a username, password or display name outside the rules
    ///   (``Limits``); 409 `username_taken`; 429 when `address` created too many accounts.
    package func register(_ request: RegisterRequest, app: AppRef, address: String) async throws -> SignedIn {
        let (username, key) = try Validate.username(request.username)
        try Validate.password(request.password, username: username)
        let displayName = try Validate.displayName(request.displayName ?? username)
        let device = try Validate.device(request.device)
        try await checkSignUpBudget(address: address)
        // A cheap check first, so a taken name costs no password hash; the UNIQUE constraint
        // below is what actually guarantees it.
        let taken: Bool = try await run {
            try await store.read { db in try db.fetchOne("SELECT 1 FROM account WHERE app_id = \(app.id) AND username_key = \(key)") != nil }
        }
        if taken { throw ChatError.usernameTaken }
        let password = request.password
        let cost = configuration.passwordCost
        let hash = try await onPasswordLane { try Crypto.hashPassword(password, cost: cost) }
        await signUpsByAddress.count(address, now: configuration.now())
        return try await createUser(app: app, username: username, key: key, displayName: displayName, passwordHash: hash, device: device)
    }

    /// Creates an anonymous account with only a display name (the Pusher tutorial's senders)
    /// and signs it in. Its username is generated (`guest-…`).
    ///
    /// - Throws: 400 for a bad display name; 429 when `address` created too many accounts.
    package func signInAsGuest(_ request: GuestSignInRequest, app: AppRef, address: String) async throws -> SignedIn {
        let displayName = try Validate.displayName(request.displayName)
        let device = try Validate.device(request.device)
        try await checkSignUpBudget(address: address)
        await signUpsByAddress.count(address, now: configuration.now())
        let username = Crypto.randomID(prefix: "guest-", length: 12)
        return try await createUser(app: app, username: username, key: username, displayName: displayName, passwordHash: nil, device: device)
    }

    /// Signs in with a username and password; returns a new session for this device.
    ///
    /// - Throws: 401 `wrong_credentials` (the same for an unknown name and a wrong password);
    ///   429 `rate_limited` with a retry time after too many failures for the account or address.
    package func signIn(_ request: SignInRequest, app: AppRef, address: String) async throws -> SignedIn {
        let device = try Validate.device(request.device)
        guard request.username.utf8.count <= 256, request.password.utf8.count <= Limits.passwordBytes.upperBound else {
            throw ChatError.wrongCredentials
        }
        let key = request.username.lowercased()
        let accountKey = "\(app.id):\(key)"
        let now = configuration.now()
        if let seconds = await failedSignInsByAccount.check(accountKey, now: now) {
            throw ChatError.rateLimited(retryAfter: seconds)
        }
        if let seconds = await failedSignInsByAddress.check(address, now: now) {
            throw ChatError.rateLimited(retryAfter: seconds)
        }
        let found: (key: Int64, hash: String?, deactivated: Bool)? = try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("""
                    SELECT id, password_hash, deactivated_at FROM account WHERE app_id = \(app.id) AND username_key = \(key) AND is_system = 0
                    """) else {
                    return nil
                }
                return (try row.get("id"), try row.get("password_hash", as: String?.self), try row.get("deactivated_at", as: Int64?.self) != nil)
            }
        }
        let password = request.password
        let storedHash = found?.hash
        let decoy = decoyPasswordHash
        let verified = try await onPasswordLane { Crypto.verifyPassword(password, hash: storedHash ?? decoy.value) }
        guard verified, let userKey = found?.key, let storedHash else {
            await failedSignInsByAccount.count(accountKey, now: now)
            await failedSignInsByAddress.count(address, now: now)
            throw ChatError.wrongCredentials
        }
        await failedSignInsByAccount.clear(accountKey)
        // Only the right password learns that the account is deactivated.
        if found?.deactivated == true { throw ChatError.userDeactivated }
        let cost = configuration.passwordCost
        let newHash: String? = Crypto.passwordNeedsRehash(storedHash, cost: cost)
            ? try await onPasswordLane { try Crypto.hashPassword(password, cost: cost) } : nil
        let nowMilliseconds = nowMilliseconds
        let lifetime = configuration.sessionLifetime
        return try await run {
            try await store.write { db in
                if let newHash { try db.execute("UPDATE account SET password_hash = \(newHash) WHERE id = \(userKey)") }
                let session = try Chat.createSession(db, userKey: userKey, device: device, now: nowMilliseconds, lifetime: lifetime)
                return SignedIn(user: try Chat.fetchUser(db, key: userKey), session: session)
            }
        }
    }

    /// Resolves a bearer token to the signed-in user.
    ///
    /// - Throws: 401 `unauthenticated` for an unknown, expired or signed-out token, or a
    ///   token of another app than `app`.
    package func authenticate(token: String, app: AppRef) async throws -> Caller {
        if JWTVerifier.looksLikeJWT(token) { return try await authenticateJWT(token, app: app) }
        guard (16...128).contains(token.utf8.count) else { throw ChatError.unauthenticated }
        let hash = Crypto.secretHash(token)
        let now = nowMilliseconds
        if let caller = sessions.get(hash, now: now) {
            guard caller.appID == app.id else { throw ChatError.unauthenticated }
            return caller
        }
        let found: (Caller, Int64)? = try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("""
                    SELECT s.id AS session_key, s.expires_at, u.id AS user_key, u.public_id, u.app_id FROM session s JOIN account u ON u.id = s.user_id
                    WHERE s.token_hash = \(hash)
                    """) else { return nil }
                let caller = Caller(appID: try row.get("app_id"), userKey: try row.get("user_key"), userID: UserID(rawValue: try row.get("public_id")),
                                    sessionKey: try row.get("session_key"))
                return (caller, try row.get("expires_at"))
            }
        }
        guard let (caller, expiresAt) = found, expiresAt > now else { throw ChatError.unauthenticated }
        sessions.put(hash, .init(caller: caller, expiresAt: expiresAt, cachedAt: now))
        guard caller.appID == app.id else { throw ChatError.unauthenticated }
        return caller
    }

    /// Signs out this device's session, or every session of the user.
    package func signOut(_ caller: Caller, everywhere: Bool) async throws {
        try await run {
            try await store.write { db in
                if everywhere {
                    try db.execute("DELETE FROM session WHERE user_id = \(caller.userKey)")
                } else {
                    try db.execute("DELETE FROM session WHERE id = \(caller.sessionKey)")
                }
            }
        }
        if everywhere { sessions.remove(user: caller.userKey) } else { sessions.remove(session: caller.sessionKey) }
        bus?.publish([.signedOut(user: caller.userKey, only: everywhere ? nil : caller.sessionKey, except: nil)])
    }

    /// Changes the caller's password after checking the current one, and signs out every
    /// other session of the account (a changed password should lock out a stolen token).
    ///
    /// - Throws: 401 `wrong_credentials` for a wrong current password (counted like a failed
    ///   sign-in, so it cannot be used to guess); 400 for a new password outside the rules;
    ///   403 for guests, who have no password; 429 after too many failures.
    package func changePassword(_ caller: Caller, _ request: ChangePasswordRequest, address: String) async throws {
        let now = configuration.now()
        let (username, stored): (String, String?) = try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("SELECT username, password_hash FROM account WHERE id = \(caller.userKey)") else {
                    throw ChatError.unauthenticated
                }
                return (try row.get("username"), try row.get("password_hash", as: String?.self))
            }
        }
        guard let stored else {
            throw ChatError.forbidden("this account has no password: a guest registers instead, and an app's own users sign in through the app")
        }
        try Validate.password(request.newPassword, username: username)
        try await confirmPassword(request.currentPassword, hash: stored, username: username, app: caller.appID, address: address, now: now)
        let newPassword = request.newPassword
        let cost = configuration.passwordCost
        let hash = try await onPasswordLane { try Crypto.hashPassword(newPassword, cost: cost) }
        try await run {
            try await store.write { db in
                try db.execute("UPDATE account SET password_hash = \(hash) WHERE id = \(caller.userKey)")
                try db.execute("DELETE FROM session WHERE user_id = \(caller.userKey) AND id != \(caller.sessionKey)")
            }
        }
        sessions.remove(user: caller.userKey)
        bus?.publish([.signedOut(user: caller.userKey, only: nil, except: caller.sessionKey)])
    }

    /// Checks that `password` is the account's (a signed-in user proving they are at the
    /// keyboard), on the same budget as sign-in: a stolen token cannot be used to guess it.
    ///
    /// - Throws: 401 `wrong_credentials` (counted as a failed sign-in); 429 after too many.
    func confirmPassword(_ password: String, hash stored: String, username: String, app: Int64, address: String, now: Date) async throws {
        let accountKey = "\(app):\(username.lowercased())"
        if let seconds = await failedSignInsByAccount.check(accountKey, now: now) { throw ChatError.rateLimited(retryAfter: seconds) }
        if let seconds = await failedSignInsByAddress.check(address, now: now) { throw ChatError.rateLimited(retryAfter: seconds) }
        let verified = password.utf8.count <= Limits.passwordBytes.upperBound
            ? try await onPasswordLane { Crypto.verifyPassword(password, hash: stored) } : false
        guard verified else {
            await failedSignInsByAccount.count(accountKey, now: now)
            await failedSignInsByAddress.count(address, now: now)
            throw ChatError.wrongCredentials
        }
        await failedSignInsByAccount.clear(accountKey)
    }

    /// The caller's sessions (devices), newest first, without tokens.
    package func listSessions(_ caller: Caller) async throws -> SessionList {
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                let rows = try db.fetchAll("""
                    SELECT public_id, device, created_at, expires_at FROM session
                    WHERE user_id = \(caller.userKey) AND expires_at > \(now) ORDER BY created_at DESC, id DESC
                    """)
                return SessionList(sessions: try rows.map { row in
                    Session(token: nil, id: try row.get("public_id"), device: try row.get("device"), createdAt: Chat.date(try row.get("created_at")),
                            expiresAt: Chat.date(try row.get("expires_at")))
                })
            }
        }
    }

    /// The caller's own account.
    package func me(_ caller: Caller) async throws -> User {
        try await run { try await store.read { db in try Chat.fetchUser(db, key: caller.userKey) } }
    }

    /// Changes the caller's display name and custom data (absent fields are kept).
    package func updateProfile(_ caller: Caller, _ request: UpdateProfileRequest) async throws -> User {
        let (displayName, customData) = try Chat.validate(request)
        let now = nowMilliseconds
        return try await run {
            try await write { db in
                if let displayName {
                    try db.execute("UPDATE account SET display_name = \(displayName), display_key = \(displayName.lowercased()) WHERE id = \(caller.userKey)")
                }
                if let customData { try db.execute("UPDATE account SET custom_data = \(customData) WHERE id = \(caller.userKey)") }
                let user = try Chat.fetchUser(db, key: caller.userKey)
                if displayName != nil { try Chat.announceProfile(db, user: user, key: caller.userKey, now: now) }
                return user
            }
        }
    }

    // MARK: - Helpers

    private func checkSignUpBudget(address: String) async throws {
        if let seconds = await signUpsByAddress.check(address, now: configuration.now()) {
            throw ChatError.rateLimited(retryAfter: seconds)
        }
    }

    private func createUser(app: AppRef, username: String, key: String, displayName: String, passwordHash: String?,
                            device: String) async throws -> SignedIn {
        let id = Crypto.randomID(prefix: "u_")
        let now = nowMilliseconds
        let lifetime = configuration.sessionLifetime
        let isGuest = passwordHash == nil
        let (signedIn, announced): (SignedIn, Bool) = try await run {
            try await store.write { db in
                do {
                    try db.execute("""
                        INSERT INTO account (app_id, public_id, username, username_key, display_name, display_key, password_hash, is_guest, created_at)
                        VALUES (\(app.id), \(id), \(username), \(key), \(displayName), \(displayName.lowercased()), \(passwordHash), \(isGuest), \(now))
                        """)
                } catch let error as StoreError where error.isConstraintViolation {
                    throw ChatError.usernameTaken
                }
                guard let userKey = try db.fetchValue(Int64.self, "SELECT id FROM account WHERE public_id = \(id)") else {
                    throw ChatError.internalError
                }
                let session = try Chat.createSession(db, userKey: userKey, device: device, now: now, lifetime: lifetime)
                let user = try Chat.fetchUser(db, key: userKey)
                let announced = try Webhooks.enqueue(db, app: app.id, type: WebhookEventType.userCreated.rawValue, data: Webhooks.json(user), now: now)
                return (SignedIn(user: user, session: session), announced)
            }
        }
        if announced { webhooks.signal() }
        return signedIn
    }

    static func createSession(_ db: any Database, userKey: Int64, device: String, now: Int64, lifetime: TimeInterval) throws -> Session {
        let token = "pt_" + Crypto.randomToken()
        let id = Crypto.randomID(prefix: "s_")
        let expiresAt = now + Int64(lifetime * 1000)
        try db.execute("""
            INSERT INTO session (public_id, token_hash, user_id, device, created_at, expires_at)
            VALUES (\(id), \(Crypto.secretHash(token)), \(userKey), \(device), \(now), \(expiresAt))
            """)
        // Past the cap, the oldest sessions are signed out (a lost phone cannot pin a slot).
        try db.execute("""
            DELETE FROM session WHERE user_id = \(userKey) AND id NOT IN
                (SELECT id FROM session WHERE user_id = \(userKey) ORDER BY created_at DESC, id DESC LIMIT \(Limits.sessionsPerUser))
            """)
        try db.execute("DELETE FROM session WHERE user_id = \(userKey) AND expires_at <= \(now)")
        return Session(token: token, id: id, device: device, createdAt: date(now), expiresAt: date(expiresAt))
    }
}
