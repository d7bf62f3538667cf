import Foundation
import ParleyStore
package import ParleyWire

// Profile and conversation photos (docs/api.md, "Photos"): a photo upload — checked, its
// metadata removed and its thumbnail made by the media pipeline — set as a face. Every user,
// sender and conversation then carries `photoURL`, a path (`/v1/avatars/a_…`) that serves the
// thumbnail without a token, as MessageKit's avatar view and `<img src>` need.

extension Attachments {
    /// Sets (or with nil removes) the caller's profile photo.
    ///
    /// - Throws: 404 for an upload that is not the caller's; 400 for one that is not a photo.
    package func setProfilePhoto(_ caller: Caller, attachment id: String?) async throws -> User {
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                let new = try id.map { try Chat.photoUpload(tx, caller: caller, id: $0) }
                let old = try tx.fetchOne("SELECT photo_id FROM account WHERE id = \(caller.userKey)")?.get("photo_id", as: Int64?.self)
                try tx.execute("UPDATE account SET photo_id = \(new?.key), photo_public = \(new?.publicID) WHERE id = \(caller.userKey)")
                try Chat.swapPhotoReference(tx, old: old, new: new?.key, now: now)
                let user = try Chat.fetchUser(tx, key: caller.userKey)
                try Chat.announceProfile(tx, user: user, key: caller.userKey, now: now)
                return user
            }
        }
    }

    /// Sets (or removes) a group's or channel's photo (owners and admins); members get a
    /// `conversation.updated` with `photoURL` ("" when removed).
    package func setConversationPhoto(_ caller: Caller, conversation id: ConversationID, attachment: String?) async throws -> Conversation {
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .changePhoto)
                let new = try attachment.map { try Chat.photoUpload(tx, caller: caller, id: $0) }
                let old = try tx.fetchOne("SELECT photo_id FROM conversation WHERE id = \(access.key)")?.get("photo_id", as: Int64?.self)
                try tx.execute("UPDATE conversation SET photo_id = \(new?.key), photo_public = \(new?.publicID) WHERE id = \(access.key)")
                try Chat.swapPhotoReference(tx, old: old, new: new?.key, now: now)
                var payload = EventPayload()
                payload.photoURL = Chat.avatarURL(new?.publicID) ?? ""
                try tx.append(conversation: access.key, kind: .conversationUpdated, actor: caller.userKey, payload: payload, now: now)
                return try Chat.view(tx, key: access.key, caller: caller)
            }
        }
    }

    /// The upload behind an avatar path, when it is someone's or some conversation's photo now.
    package func avatar(_ id: String) async throws -> StoredAttachment {
        guard Limits.attachmentID.contains(id.utf8.count) else { throw ChatError.attachmentNotFound }
        let inUse = try await run {
            try await store.read { db in
                try db.fetchOne("SELECT 1 FROM account WHERE photo_public = \(id)") != nil
                    || db.fetchOne("SELECT 1 FROM conversation WHERE photo_public = \(id)") != nil
            }
        }
        guard inUse else { throw ChatError.attachmentNotFound }
        return try await attachment(signedID: id)
    }
}

extension Chat {
    /// Tells every conversation the user is in (`user.updated`, no seq) their face and name as
    /// they are now: open chats redraw without asking. At most ``Limits/profileAnnouncements``
    /// conversations, most recently active first (older ones show it at their next read).
    static func announceProfile(_ tx: Transaction, user: User, key: Int64, now: Int64) throws {
        var payload = EventPayload()
        payload.photoURL = user.photoURL ?? ""
        payload.displayName = user.displayName
        let conversations: [Int64] = try tx.fetchAll("""
            SELECT c.id FROM member mb JOIN conversation c ON c.id = mb.conversation_id WHERE mb.user_id = \(key)
            ORDER BY c.last_position DESC LIMIT \(Limits.profileAnnouncements)
            """).map { try $0.get("id") }
        for conversation in conversations {
            try tx.append(conversation: conversation, kind: .userUpdated, actor: key, user: key, payload: payload, now: now)
        }
    }

    /// A photo upload of the caller's (or, for the app, of its app) with a thumbnail.
    static func photoUpload(_ db: any Database, caller: Caller, id: String) throws -> (key: Int64, publicID: String) {
        guard Limits.attachmentID.contains(id.utf8.count), let row = try db.fetchOne("""
            SELECT id, kind, thumb_blob, owner_id, app_id FROM attachment WHERE public_id = \(id)
            """) else { throw ChatError.attachmentNotFound }
        let owner: Int64 = try row.get("owner_id")
        guard try row.get("app_id", as: Int64.self) == caller.appID, caller.actsAsApp || owner == caller.userKey else {
            throw ChatError.attachmentNotFound
        }
        guard try row.get("kind", as: String.self) == "photo", try row.get("thumb_blob", as: String?.self) != nil else {
            throw ChatError.invalid("a profile or conversation photo is a photo upload (POST /v1/media with kind photo)")
        }
        return (try row.get("id"), id)
    }

    /// A face counts as a reference of its upload, so the media collector keeps it while in use.
    static func swapPhotoReference(_ db: any Database, old: Int64?, new: Int64?, now: Int64) throws {
        guard old != new else { return }
        if let new { try db.execute("UPDATE attachment SET refs = refs + 1, released_at = NULL WHERE id = \(new)") }
        if let old {
            try db.execute("""
                UPDATE attachment SET refs = refs - 1, released_at = CASE WHEN refs = 1 THEN \(now) ELSE released_at END WHERE id = \(old)
                """)
        }
    }
}
