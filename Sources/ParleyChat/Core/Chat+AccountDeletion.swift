import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

// Deleting an account (docs/api.md, "Deleting your account"; docs/trust-and-safety.md): by
// the user themselves (`DELETE /v1/me`, App Store guideline 5.1.1(v)) or by the app's backend
// (`DELETE /v1/server/users/{username}`). Both end the same way: signed out everywhere, push
// devices gone, out of every group and channel, the username free, the face gone, the app's
// backend told (`user.deleted`); with `erase`, every message the user sent becomes a tombstone.

/// The `data` of a `user.deleted` webhook.
package struct DeletedUserNotice: Encodable, Sendable {
    /// The user's id (it stays the id of "Deleted user" in old messages).
    var id: UserID
    /// The username it had (free again now).
    var username: String
    /// Whether their messages were erased.
    var erased: Bool
    /// `user` when they deleted the account themselves, `app` when the app's backend did.
    var deletedBy: String
}

extension Chat {
    /// How recent a session must be to delete an account that has no password (milliseconds).
    static let recentSignInWindow: Int64 = 10 * 60 * 1000

    /// Messages erased per transaction while an account is deleted with `erase`.
    static let eraseBatch = 200

    /// Deletes the caller's own account.
    ///
    /// An account with a password must send it; one without (a guest, or a user the app's
    /// backend made) proves itself with a session made in the last 10 minutes, except a
    /// guest, whose session is the only thing it has.
    ///
    /// - Throws: 400 when the account has a password and none was sent; 401
    ///   `wrong_credentials` for a wrong one (counted like a failed sign-in); 403
    ///   `recent_sign_in_required`; 429 after too many failures.
    package func deleteAccount(_ caller: Caller, _ request: DeleteAccountRequest, address: String) async throws {
        let now = configuration.now()
        let nowMilliseconds = nowMilliseconds
        let (username, stored, isGuest, sessionCreated): (String, String?, Bool, Int64) = try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("""
                    SELECT u.username, u.password_hash, u.is_guest, s.created_at FROM account u JOIN session s ON s.user_id = u.id
                    WHERE u.id = \(caller.userKey) AND s.id = \(caller.sessionKey)
                    """) else { throw ChatError.unauthenticated }
                return (try row.get("username"), try row.get("password_hash", as: String?.self), try row.get("is_guest", as: Int64.self) != 0,
                        try row.get("created_at"))
            }
        }
        if let stored {
            guard let password = request.password else {
                throw ChatError.invalid("password is required: send the account's password to delete it")
            }
            try await confirmPassword(password, hash: stored, username: username, app: caller.appID, address: address, now: now)
        } else if !isGuest, nowMilliseconds - sessionCreated > Self.recentSignInWindow {
            throw ChatError.recentSignInRequired
        }
        try await removeAccount(key: caller.userKey, actor: caller.userKey, erase: request.erase ?? false, deletedBy: "user")
    }

    /// Deletes the account `key`; see the file's comment. `actor` is who the
    /// `member.removed` and `message.deleted` events name.
    func removeAccount(key: Int64, actor: Int64, erase: Bool, deletedBy: String) async throws {
        let now = nowMilliseconds
        if erase {
            // Most of the erasing happens in batches, so a user with years of messages never
            // holds the writer for long; the final transaction erases whatever is left.
            while try await run({ try await self.write { db in try Chat.eraseMessages(db, author: key, limit: Chat.eraseBatch, now: now) } })
                    == Chat.eraseBatch {}
        }
        let announced: Bool = try await run {
            try await write { db in
                if erase {
                    while try Chat.eraseMessages(db, author: key, limit: Chat.eraseBatch, now: now) == Chat.eraseBatch {}
                    // Uploads never sent in a message go with the next collection too.
                    try db.execute("UPDATE attachment SET released_at = \(now) WHERE owner_id = \(key) AND refs = 0 AND released_at IS NULL")
                }
                guard let row = try db.fetchOne("SELECT public_id, username, photo_id FROM account WHERE id = \(key) AND deleted_at IS NULL") else {
                    throw ChatError.userNotFound
                }
                let conversations: [Int64] = try db.fetchAll("""
                    SELECT mb.conversation_id FROM member mb JOIN conversation c ON c.id = mb.conversation_id
                    WHERE mb.user_id = \(key) AND c.kind <> 'direct' ORDER BY mb.conversation_id
                    """).map { try $0.get("conversation_id") }
                for conversation in conversations {
                    try db.execute("DELETE FROM member WHERE conversation_id = \(conversation) AND user_id = \(key)")
                    try db.execute("UPDATE conversation SET member_count = member_count - 1 WHERE id = \(conversation)")
                    try db.append(conversation: conversation, kind: .memberRemoved, actor: actor, user: key, now: now)
                }
                try db.execute("DELETE FROM push_device WHERE user_id = \(key)")
                try db.execute("DELETE FROM draft WHERE user_id = \(key)")
                try db.execute("DELETE FROM scheduled_message WHERE user_id = \(key)")
                try db.execute("DELETE FROM session WHERE user_id = \(key)")
                try Chat.swapPhotoReference(db, old: try row.get("photo_id", as: Int64?.self), new: nil, now: now)
                try db.execute("""
                    UPDATE account SET username = 'deleted-' || public_id, username_key = '~' || public_id, display_name = 'Deleted user',
                                       display_key = 'deleted user', custom_data = NULL, password_hash = NULL, photo_id = NULL, photo_public = NULL, external_id = NULL,
                                       deleted_at = \(now), deactivated_at = coalesce(deactivated_at, \(now))
                    WHERE id = \(key)
                    """)
                let notice = DeletedUserNotice(id: UserID(rawValue: try row.get("public_id")), username: try row.get("username"), erased: erase,
                                               deletedBy: deletedBy)
                return try Webhooks.enqueue(db, app: try db.fetchValue(Int64.self, "SELECT app_id FROM account WHERE id = \(key)") ?? 0,
                                            type: WebhookEventType.userDeleted.rawValue, data: Webhooks.json(notice), now: now)
            }
        }
        sessions.remove(user: key)
        bus?.publish([.signedOut(user: key, only: nil, except: nil)])
        if announced { webhooks.signal() }
    }

    /// Makes up to `limit` of the author's messages tombstones; returns how many it did.
    static func eraseMessages(_ db: Transaction, author: Int64, limit: Int, now: Int64) throws -> Int {
        let rows = try db.fetchAll("""
            SELECT id, conversation_id, content, thread_id, in_conversation FROM message
            WHERE author_id = \(author) AND deleted_at IS NULL ORDER BY id LIMIT \(limit)
            """)
        for row in rows {
            let content = try row.get("content", as: String?.self).flatMap { try? JSONDecoder().decode(MessageContent.self, from: Data($0.utf8)) }
            let inThread = try row.get("thread_id", as: Int64?.self) != nil
            try tombstone(db, conversation: try row.get("conversation_id"), message: try row.get("id"), content: content, actor: author,
                          activity: !inThread || (try row.get("in_conversation", as: Int64.self)) != 0, now: now)
        }
        return rows.count
    }
}
