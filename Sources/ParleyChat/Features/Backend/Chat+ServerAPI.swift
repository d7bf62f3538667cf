import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire
import ParleySync

/// An app as its backend authenticated with the secret: what every server API call
/// (`/v1/server/…`, docs/server-api.md) acts as.
package struct ServerApp: Sendable, Hashable {
    /// The app.
    package var app: AppRef
    /// Its name (for logs: the secret is never logged).
    package var name: String
    /// The app's system account acting with the app's authority (``Caller/actsAsApp``).
    package var caller: Caller
}

/// How long a rotated-out secret keeps working unless the operator says otherwise.
package let defaultSecretGrace: Duration = .seconds(24 * 3600)

/// The app's backend (the server API, docs/server-api.md): its users, their sessions and passwords, conversations made as the app.
package struct AppBackend: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// The app's backend (the server API, docs/server-api.md): its users, their sessions and passwords, conversations made as the app.
    package var backend: AppBackend { AppBackend(core: self) }
}

extension AppBackend {
    /// The app whose secret this is: its current secret, or the one before it while the
    /// rotation's grace period lasts. The secret is compared as its SHA-256 hash (the stored
    /// form), so no timing reveals anything of the secret itself.
    ///
    /// - Throws: 401 `invalid_app_secret`.
    package func authenticateApp(secret: String) async throws -> ServerApp {
        guard secret.hasPrefix("sk_"), (8...128).contains(secret.utf8.count) else { throw ChatError.invalidAppSecret }
        let hash = Crypto.secretHash(secret)
        let now = nowMilliseconds
        let found: (Int64, String)? = try await run {
            try await store.read { db in
                let rows = try db.fetchAll("""
                    SELECT id, name, secret_hash, previous_secret_hash, previous_secret_until FROM app
                    WHERE secret_hash = \(hash) OR (previous_secret_hash = \(hash) AND previous_secret_until > \(now))
                    """)
                // The index lookup found the row; the comparison that decides is constant-time.
                for row in rows {
                    let current: [UInt8] = try row.get("secret_hash")
                    let previous = try row.get("previous_secret_hash", as: [UInt8]?.self)
                    let previousValid = (try row.get("previous_secret_until", as: Int64?.self) ?? 0) > now
                    if Crypto.constantTimeEqual(current, hash) || (previousValid && previous.map { Crypto.constantTimeEqual($0, hash) } == true) {
                        return (try row.get("id"), try row.get("name"))
                    }
                }
                return nil
            }
        }
        guard let (id, name) = found else { throw ChatError.invalidAppSecret }
        return ServerApp(app: AppRef(id: id), name: name, caller: try await systemCaller(app: id))
    }

    /// The app's system account as a caller with the app's authority, created on first use.
    func systemCaller(app: Int64) async throws -> Caller {
        if let cached = core.systemCallers.withLock({ $0[app] }) { return cached }
        let now = nowMilliseconds
        let caller: Caller = try await run {
            try await store.write { db in
                if let row = try db.fetchOne("SELECT id, public_id FROM account WHERE app_id = \(app) AND is_system = 1") {
                    return Caller(appID: app, userKey: try row.get("id"), userID: UserID(rawValue: try row.get("public_id")), sessionKey: 0,
                                  actsAsApp: true)
                }
                let id = Crypto.randomID(prefix: "u_")
                // "$system" is no valid username: nobody can register, resolve or sign in as it.
                guard let key = try db.fetchValue(Int64.self, """
                    INSERT INTO account (app_id, public_id, username, username_key, display_name, display_key, password_hash, is_guest,
                                         is_system, created_at)
                    VALUES (\(app), \(id), '$system', '$system', 'System', 'system', NULL, 1, 1, \(now))
                    RETURNING id
                    """) else { throw ChatError.internalError }
                return Caller(appID: app, userKey: key, userID: UserID(rawValue: id), sessionKey: 0, actsAsApp: true)
            }
        }
        core.systemCallers.withLock { $0[app] = caller }
        return caller
    }

    /// Replaces an app's secret (by name or public key), keeping the old one valid for
    /// `grace` (zero: at once, for a leaked secret).
    ///
    /// - Throws: 404 `app_not_found`.
    package func rotateSecret(app: String, grace: Duration = defaultSecretGrace) async throws -> AppCredentials {
        let secret = "sk_" + Crypto.randomToken()
        let hash = Crypto.secretHash(secret)
        let sealed = seal(secret)
        let until = nowMilliseconds + Chat.milliseconds(grace)
        return try await run {
            try await store.write { db in
                guard let row = try db.fetchOne("""
                    UPDATE app SET previous_secret_hash = secret_hash, previous_secret = secret, previous_secret_until = \(until),
                                   secret_hash = \(hash), secret = \(sealed)
                    WHERE name = \(app) OR public_key = \(app)
                    RETURNING name, public_key, created_at, pusher_id
                    """) else {
                    throw ChatError.appNotFound
                }
                return AppCredentials(name: try row.get("name"), publicKey: try row.get("public_key"), secret: secret,
                                      createdAt: Chat.date(try row.get("created_at")), pusherID: try row.get("pusher_id"))
            }
        }
    }

    // MARK: - Users

    /// Creates a user the app authenticates itself (no password), or updates the one with
    /// that username; a new user is announced to webhooks (`user.created`).
    ///
    /// - Returns: the user and whether this call created them.
    /// - Throws: 400 for a username, display name or custom data outside the rules.
    package func upsertUser(_ server: ServerApp, _ request: UpsertUserRequest) async throws -> (ServerUser, created: Bool) {
        let (username, key) = try Validate.username(request.username)
        let displayName = try request.displayName.map(Validate.displayName)
        let customData = try request.customData.map { try Validate.customData($0) }
        let now = nowMilliseconds
        let app = server.app.id
        let (user, created, announced): (ServerUser, Bool, Bool) = try await run {
            try await store.write { db in
                if let existing = try db.fetchValue(Int64.self, """
                    SELECT id FROM account WHERE app_id = \(app) AND username_key = \(key) AND is_system = 0 AND deleted_at IS NULL
                    """) {
                    if let displayName {
                        try db.execute("UPDATE account SET display_name = \(displayName), display_key = \(displayName.lowercased()) WHERE id = \(existing)")
                    }
                    if let customData { try db.execute("UPDATE account SET custom_data = \(customData) WHERE id = \(existing)") }
                    return (try Chat.serverUser(db, key: existing), false, false)
                }
                let id = Crypto.randomID(prefix: "u_")
                let name = displayName ?? username
                guard let created = try db.fetchValue(Int64.self, """
                    INSERT INTO account (app_id, public_id, username, username_key, display_name, display_key, password_hash, is_guest,
                                         custom_data, created_at)
                    VALUES (\(app), \(id), \(username), \(key), \(name), \(name.lowercased()), NULL, 0, \(customData), \(now))
                    RETURNING id
                    """) else { throw ChatError.internalError }
                let user = try Chat.serverUser(db, key: created)
                let announced = try Webhooks.enqueue(db, app: app, type: WebhookEventType.userCreated.rawValue, data: Webhooks.json(user.user), now: now)
                return (user, true, announced)
            }
        }
        if announced { core.webhooks.signal() }
        return (user, created)
    }

    /// A user of the app by username, with their account state.
    ///
    /// - Throws: 404 `user_not_found`.
    package func user(_ server: ServerApp, username: String) async throws -> ServerUser {
        try await run {
            try await store.read { db in try Chat.serverUser(db, key: try Chat.userKey(db, app: server.app.id, username: username)) }
        }
    }

    /// The app's users whose username or display name starts with `query` (every user for an
    /// empty query), by username, guests included.
    package func users(_ server: ServerApp, query: String, limit: Int?, offset: Int?) async throws -> ServerUserList {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 50)
        let offset = offset ?? 0
        guard (0...100_000).contains(offset) else { throw ChatError.invalid("offset must be 0–100000") }
        guard query.utf8.count <= 256 else { throw ChatError.invalid("query must be at most 256 bytes") }
        let prefix = query.lowercased()
        let upper = prefix + "\u{10FFFF}"
        let app = server.app.id
        return try await run {
            try await store.read { db in
                let filter: SQL = prefix.isEmpty ? "" : """
                     AND ((username_key >= \(prefix) AND username_key < \(upper)) OR (display_key >= \(prefix) AND display_key < \(upper)))
                    """
                let keys: [Int64] = try db.fetchAll("""
                    SELECT id FROM account WHERE app_id = \(app) AND is_system = 0 AND deleted_at IS NULL
                    """ + filter + " ORDER BY username_key LIMIT \(limit + 1) OFFSET \(offset)").map { try $0.get("id") }
                return ServerUserList(users: try keys.prefix(limit).map { try Chat.serverUser(db, key: $0) }, hasMore: keys.count > limit)
            }
        }
    }

    /// Deactivates (or reactivates) a user: a deactivated account is signed out everywhere at
    /// once, loses its push devices, and cannot sign in or be given a session; its messages
    /// and memberships stay.
    package func setDeactivated(_ server: ServerApp, username: String, _ deactivated: Bool) async throws -> ServerUser {
        let now = nowMilliseconds
        let app = server.app.id
        let (user, key): (ServerUser, Int64) = try await run {
            try await store.write { db in
                let key = try Chat.userKey(db, app: app, username: username)
                if deactivated {
                    try db.execute("UPDATE account SET deactivated_at = coalesce(deactivated_at, \(now)) WHERE id = \(key)")
                    try db.execute("DELETE FROM session WHERE user_id = \(key)")
                } else {
                    try db.execute("UPDATE account SET deactivated_at = NULL WHERE id = \(key)")
                }
                return (try Chat.serverUser(db, key: key), key)
            }
        }
        if deactivated { endSessions(user: key) }
        return user
    }

    /// Ends every session of a user (they sign in again; the account stays active).
    package func signOutEverywhere(_ server: ServerApp, username: String) async throws -> Int {
        let app = server.app.id
        let (count, key): (Int, Int64) = try await run {
            try await store.write { db in
                let key = try Chat.userKey(db, app: app, username: username)
                return (try db.execute("DELETE FROM session WHERE user_id = \(key)"), key)
            }
        }
        endSessions(user: key)
        return count
    }

    /// Deletes a user: they are signed out everywhere, lose their push devices and leave every
    /// group and channel (`member.removed` in each); the account keeps its row without its
    /// names or face (shown as "Deleted user", its username free again), so the messages they
    /// sent stay in the conversations' history with that name, or with `erase` become
    /// tombstones. Direct conversations keep them as a member, so the other person still has
    /// the conversation. The app's webhooks hear `user.deleted`.
    package func deleteUser(_ server: ServerApp, username: String, erase: Bool) async throws {
        let app = server.app.id
        let key: Int64 = try await run { try await store.read { db in try Chat.userKey(db, app: app, username: username) } }
        try await core.removeAccount(key: key, actor: server.caller.userKey, erase: erase, deletedBy: "app")
    }

    /// A session for a user, as a sign-in would give (for apps whose users sign in elsewhere).
    ///
    /// - Throws: 404 `user_not_found`; 403 `user_deactivated`; 400 for an expiry outside
    ///   60 seconds … the session lifetime.
    package func issueSession(_ server: ServerApp, username: String, _ request: IssueSessionRequest) async throws -> SignedIn {
        let device = try Validate.device(request.device ?? "server")
        let maximum = Int(configuration.sessionLifetime)
        let seconds = request.expiresInSeconds ?? maximum
        guard (60...max(60, maximum)).contains(seconds) else {
            throw ChatError.invalid("expiresInSeconds must be 60–\(maximum) (the server's session lifetime)")
        }
        let now = nowMilliseconds
        let app = server.app.id
        return try await run {
            try await store.write { db in
                let key = try Chat.userKey(db, app: app, username: username)
                if try db.fetchOne("SELECT deactivated_at FROM account WHERE id = \(key)")?.get("deactivated_at", as: Int64?.self) != nil {
                    throw ChatError.userDeactivated
                }
                let session = try Chat.createSession(db, userKey: key, device: device, now: now, lifetime: TimeInterval(seconds))
                return SignedIn(user: try Chat.fetchUser(db, key: key), session: session)
            }
        }
    }

    /// Sets (or resets) a user's password and signs them out everywhere: an operator's reset,
    /// or an app that lets some users sign in with a Parley password.
    ///
    /// - Throws: 404 `user_not_found`; 400 for a password outside the rules.
    package func setPassword(_ server: ServerApp, username: String, _ request: SetPasswordRequest) async throws -> ServerUser {
        let app = server.app.id
        let (key, name): (Int64, String) = try await run {
            try await store.read { db in
                let key = try Chat.userKey(db, app: app, username: username)
                return (key, try db.fetchValue(String.self, "SELECT username FROM account WHERE id = \(key)") ?? username)
            }
        }
        try Validate.password(request.password, username: name)
        let password = request.password
        let cost = configuration.passwordCost
        let hash = try await core.onPasswordLane { try Crypto.hashPassword(password, cost: cost) }
        let user: ServerUser = try await run {
            try await store.write { db in
                try db.execute("UPDATE account SET password_hash = \(hash), is_guest = 0 WHERE id = \(key)")
                try db.execute("DELETE FROM session WHERE user_id = \(key)")
                return try Chat.serverUser(db, key: key)
            }
        }
        endSessions(user: key)
        return user
    }

    /// A user of the app acting as themselves (a send "as" them): active accounts only.
    ///
    /// - Throws: 404 `user_not_found`; 403 `user_deactivated`.
    package func actingUser(_ server: ServerApp, username: String) async throws -> Caller {
        try await run {
            try await store.read { db in
                let key = try Chat.userKey(db, app: server.app.id, username: username)
                guard let row = try db.fetchOne("SELECT public_id, deactivated_at FROM account WHERE id = \(key)") else { throw ChatError.userNotFound }
                guard try row.get("deactivated_at", as: Int64?.self) == nil else { throw ChatError.userDeactivated }
                return Caller(appID: server.app.id, userKey: key, userID: UserID(rawValue: try row.get("public_id")), sessionKey: 0)
            }
        }
    }

    /// The public id of an app's user by username.
    package func userID(_ server: ServerApp, username: String) async throws -> UserID {
        try await run {
            try await store.read { db in
                let key = try Chat.userKey(db, app: server.app.id, username: username)
                return UserID(rawValue: try db.fetchValue(String.self, "SELECT public_id FROM account WHERE id = \(key)") ?? "")
            }
        }
    }

    // MARK: - Conversations

    /// Creates a conversation for the app: as `createdBy` when named (they own it), else as
    /// the app (every member a plain member).
    package func createConversation(_ server: ServerApp, _ request: ServerCreateConversationRequest) async throws -> (Conversation, created: Bool) {
        let plain = CreateConversationRequest(kind: request.kind, members: request.members, title: request.title, customData: request.customData)
        if let creator = request.createdBy {
            return try await core.createConversation(try await actingUser(server, username: creator), plain)
        }
        guard request.kind != .direct else {
            throw ChatError.invalid("a direct conversation is between two people: name one in createdBy and the other in members")
        }
        let (title, customData) = try Chat.validate(plain)
        guard request.kind == .group || title != nil else { throw ChatError.invalid("a channel needs a title") }
        let names = request.members ?? []
        try Validate.names(names, field: "members")
        let now = nowMilliseconds
        let publicID = Crypto.randomID(prefix: "c_")
        let caller = server.caller
        return try await run {
            try await write { db in
                let (keys, resolved) = try Chat.resolve(db, app: caller.appID, usernames: names)
                guard resolved.invalidUsernames.isEmpty else { throw ChatError.usersNotFound(resolved.invalidUsernames) }
                let capacity = request.kind == .public ? Limits.channelMembers : Limits.groupMembers
                guard keys.count <= capacity else { throw ChatError.invalid("a \(request.kind.rawValue) conversation holds at most \(capacity) members") }
                let key = try Chat.insertConversation(db, app: caller.appID, publicID: publicID, kind: request.kind, title: title,
                                                      customData: customData, directKey: nil, creator: caller.userKey,
                                                      members: keys.map { ($0, .member) }, now: now)
                return (try Chat.view(db, key: key, caller: caller), true)
            }
        }
    }

    /// Forgets a user's sessions on this node and tells the others (their sockets close).
    func endSessions(user key: Int64) {
        core.sessions.remove(user: key)
        bus?.publish([.signedOut(user: key, only: nil, except: nil)])
    }
}

extension AppBackend {
    /// An active user's internal key by username (test mode's faults name users so).
    package func userKey(_ server: ServerApp, username: String) async throws -> Int64 {
        try await run { try await store.read { db in try Chat.userKey(db, app: server.app.id, username: username) } }
    }
}

extension Chat {

    // MARK: - Inside a transaction

    /// An active (not deleted) non-system user's key by username.
    static func userKey(_ db: any Database, app: Int64, username: String) throws -> Int64 {
        guard let key = Validate.usernameKey(username),
              let found = try db.fetchValue(Int64.self, """
                SELECT id FROM account WHERE app_id = \(app) AND username_key = \(key) AND is_system = 0 AND deleted_at IS NULL
                """) else { throw ChatError.userNotFound }
        return found
    }

    static func serverUser(_ db: any Database, key: Int64) throws -> ServerUser {
        guard let row = try db.fetchOne("""
            SELECT \(userColumns), u.deactivated_at, (SELECT count(*) FROM session s WHERE s.user_id = u.id) AS session_count
            FROM account u WHERE u.id = \(key)
            """) else { throw ChatError.userNotFound }
        return ServerUser(user: try user(row), deactivatedAt: try row.get("deactivated_at", as: Int64?.self).map(date),
                          sessionCount: Int(try row.get("session_count", as: Int64.self)))
    }
}
