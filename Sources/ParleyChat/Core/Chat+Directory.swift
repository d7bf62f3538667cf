import Foundation
import ParleyStore
package import ParleyWire

extension UserSort {
    var orderBy: SQL {
        switch self {
        case .username: "u.username_key ASC"
        case .usernameDescending: "u.username_key DESC"
        case .displayName: "u.display_key ASC, u.username_key ASC"
        case .displayNameDescending: "u.display_key DESC, u.username_key DESC"
        case .createdAt: "u.created_at ASC, u.id ASC"
        case .createdAtDescending: "u.created_at DESC, u.id DESC"
        }
    }
}

extension Chat {
    /// Searches the app's users (guests excluded) whose username or display name starts with
    /// `query` (case-insensitive); an empty query lists everyone.
    ///
    /// - Throws: 400 for a limit outside 1…100, an offset outside 0…10000 or a query over 254 characters (the longest username, an e-mail address).
    package func searchUsers(_ caller: Caller, query: String, limit: Int?, offset: Int?, sort: UserSort) async throws -> UserPage {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 20)
        let offset = offset ?? 0
        guard (0...Limits.maxOffset).contains(offset) else { throw ChatError.invalid("offset must be 0–\(Limits.maxOffset)") }
        guard query.unicodeScalars.count <= Limits.emailUsernameMax else { throw ChatError.invalid("query must be at most \(Limits.emailUsernameMax) characters") }
        let prefix = query.trimmingCharacters(in: .whitespaces).lowercased()
        // Every key starting with `prefix` sorts between it and prefix + U+10FFFF.
        let upper = prefix + "\u{10FFFF}"
        let filter: SQL = prefix.isEmpty
            ? "u.app_id = \(caller.appID) AND u.is_guest = 0"
            : """
              u.app_id = \(caller.appID) AND u.is_guest = 0 AND ((u.username_key >= \(prefix) AND u.username_key < \(upper))
                  OR (u.display_key >= \(prefix) AND u.display_key < \(upper)))
              """
        return try await run {
            try await store.read { db in
                let total = try db.fetchValue(Int.self, "SELECT count(*) FROM account u WHERE \(filter)") ?? 0
                let rows = try db.fetchAll("SELECT \(Chat.userColumns) FROM account u WHERE \(filter) ORDER BY \(sort.orderBy) LIMIT \(limit) OFFSET \(offset)")
                let users = try rows.map { try Chat.user($0) }
                let next = offset + users.count < total && !users.isEmpty ? offset + users.count : nil
                return UserPage(users: users, total: total, nextOffset: next)
            }
        }
    }

    /// One user of the caller's app.
    ///
    /// - Throws: 404 `user_not_found` (also for users of other apps).
    package func user(_ caller: Caller, id: UserID) async throws -> User {
        try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("SELECT \(Chat.userColumns) FROM account u WHERE u.public_id = \(id.rawValue) AND u.app_id = \(caller.appID)") else {
                    throw ChatError.userNotFound
                }
                return try Chat.user(row)
            }
        }
    }

    /// Looks up usernames; answers the users found (in the order asked, without repeats)
    /// and the names that match nobody.
    package func resolveUsers(_ caller: Caller, usernames: [String]) async throws -> ResolveUsersResponse {
        try Validate.names(usernames, field: "usernames")
        return try await run {
            try await store.read { db in try Chat.resolve(db, app: caller.appID, usernames: usernames).response }
        }
    }

    /// Resolves names inside a transaction: keys of users found, the response shape.
    static func resolve(_ db: any Database, app: Int64, usernames: [String]) throws -> (keys: [Int64], response: ResolveUsersResponse) {
        var seen = Set<String>()
        var keys: [Int64] = []
        var users: [User] = []
        var invalid: [String] = []
        for name in usernames {
            guard let key = Validate.usernameKey(name) else {
                invalid.append(name)
                continue
            }
            guard seen.insert(key).inserted else { continue }
            if let row = try db.fetchOne("SELECT \(userColumns), u.id AS user_key FROM account u WHERE u.app_id = \(app) AND u.username_key = \(key)") {
                users.append(try user(row))
                keys.append(try row.get("user_key"))
            } else {
                invalid.append(name)
            }
        }
        return (keys, ResolveUsersResponse(users: users, invalidUsernames: invalid))
    }
}
