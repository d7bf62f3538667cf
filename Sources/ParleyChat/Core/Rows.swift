import Foundation
import ParleyStore
import ParleyWire

// Reading rows into API models. Each `…Columns` list and its reader belong together: the
// list names every column with a prefix of its own (`user_`, `m_`), and the reader takes them
// by those names, so the lists can be joined into one query (an event with its message)
// without two columns sharing a name.

extension Chat {
    static let userColumns: SQL = """
        u.public_id AS user_public_id, u.username AS user_username, u.display_name AS user_display_name, u.is_guest AS user_is_guest,
        u.created_at AS user_created_at, u.custom_data AS user_custom_data, u.photo_public AS user_photo
        """

    /// The path a stored photo's thumbnail is served at without a token.
    static func avatarURL(_ attachment: String?) -> String? { attachment.map { "/v1/avatars/" + $0 } }

    static func sender(_ id: String, _ username: String, _ displayName: String, _ photoURL: String?) -> Sender {
        var sender = Sender(id: UserID(rawValue: id), username: username, displayName: displayName)
        sender.photoURL = photoURL
        return sender
    }

    static func user(_ row: Row) throws -> User {
        var user = User(id: UserID(rawValue: try row.get("user_public_id")), username: try row.get("user_username"),
                        displayName: try row.get("user_display_name"), isGuest: try row.get("user_is_guest"),
                        createdAt: date(try row.get("user_created_at")),
                        customData: try row.get("user_custom_data", as: String?.self).map { try JSONValue.decode($0) })
        user.photoURL = avatarURL(try row.get("user_photo"))
        return user
    }

    static func fetchUser(_ db: any Database, key: Int64) throws -> User {
        guard let row = try db.fetchOne("SELECT \(userColumns) FROM account u WHERE u.id = \(key)") else { throw ChatError.userNotFound }
        return try user(row)
    }

    /// Columns of a message joined with its author (`m`, `u`) and conversation (`c`).
    static let messageColumns: SQL = """
        m.id AS m_key, m.public_id AS m_public_id, c.public_id AS m_conversation_id, m.conversation_id AS m_conversation_key,
        m.seq AS m_seq, u.public_id AS m_sender_id, u.username AS m_sender_username, u.display_name AS m_sender_display_name,
        m.client_id AS m_client_id, m.created_at AS m_created_at, m.edited_at AS m_edited_at, m.deleted_at AS m_deleted_at,
        m.content AS m_content, m.metadata AS m_metadata, m.reply_to AS m_reply_to, m.author_id AS m_author_key,
        m.reactions AS m_reactions, m.mentions AS m_mentions, m.pinned_at AS m_pinned_at, m.pinned_by AS m_pinned_by,
        m.thread_root AS m_thread_root, m.in_conversation AS m_in_conversation, m.reply_count AS m_reply_count,
        m.last_reply_at AS m_last_reply_at, m.shadow AS m_shadow, u.photo_public AS m_sender_photo, m.poll AS m_poll,
        m.link_preview AS m_link_preview
        """

    /// Messages `viewer` may see: all but others' shadow messages (a shadow-banned author's,
    /// or one sent to someone who blocked its author), which only their author sees.
    static func visible(to viewer: Int64, _ alias: SQL = "m") -> SQL {
        "(\(alias).shadow = 0 OR \(alias).author_id = \(viewer))"
    }
    /// Messages whose author `viewer` did not block (search and mentions leave the others out).
    static func notBlockedBy(_ viewer: Int64, _ alias: SQL = "m") -> SQL {
        "NOT EXISTS (SELECT 1 FROM block bl WHERE bl.blocker_id = \(viewer) AND bl.blocked_id = \(alias).author_id)"
    }
    static let messageJoins: SQL = "FROM message m JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id"

    /// Reads a message; `status` is filled for the caller's own messages from the other
    /// members' lowest watermarks (nil watermarks: not computed, e.g. channels).
    static func message(_ row: Row, caller: Int64? = nil, lowest: (delivered: Int64, read: Int64)? = nil, hiding: Set<Int64> = []) throws -> Message {
        try record(row, caller: caller, lowest: lowest, hiding: hiding).message()
    }

    /// Reads a message row without decoding its stored JSON; a message by someone in
    /// `hiding` (the people the reader blocked, ``blockedKeys(_:viewer:)``) is its stub.
    static func record(_ row: Row, caller: Int64? = nil, lowest: (delivered: Int64, read: Int64)? = nil,
                       hiding: Set<Int64> = []) throws -> MessageRecord {
        let authorKey: Int64 = try row.get("m_author_key")
        let record = try readRecord(row, authorKey: authorKey, caller: caller, lowest: lowest)
        return hiding.contains(authorKey) && authorKey != caller ? record.hiddenStub(.blocked) : record
    }

    /// The people `viewer` blocked (internal keys): whose messages reach them as stubs.
    static func blockedKeys(_ db: any Database, viewer: Int64) throws -> Set<Int64> {
        Set(try db.fetchAll("SELECT blocked_id FROM block WHERE blocker_id = \(viewer)").map { try $0.get("blocked_id", as: Int64.self) })
    }

    /// The people `viewer` blocked, by public id (what live frames name).
    static func blockedIDs(_ db: any Database, viewer: Int64) throws -> Set<String> {
        Set(try db.fetchAll("""
            SELECT u.public_id FROM block b JOIN account u ON u.id = b.blocked_id WHERE b.blocker_id = \(viewer)
            """).map { try $0.get("public_id", as: String.self) })
    }

    private static func readRecord(_ row: Row, authorKey: Int64, caller: Int64?, lowest: (delivered: Int64, read: Int64)?) throws -> MessageRecord {
        let seq: Int64 = try row.get("m_seq")
        var status: DeliveryStatus?
        if let caller, caller == authorKey {
            if let lowest {
                status = DeliveryStatus.of(seq: seq, lowestDelivered: lowest.delivered, lowestRead: lowest.read)
            } else {
                status = .sent
            }
        }
        return MessageRecord(
            id: try row.get("m_public_id"), conversationID: try row.get("m_conversation_id"), seq: seq,
            senderID: try row.get("m_sender_id"), senderUsername: try row.get("m_sender_username"),
            senderDisplayName: try row.get("m_sender_display_name"), clientID: try row.get("m_client_id"),
            sentAt: try row.get("m_created_at"), editedAt: try row.get("m_edited_at"), deletedAt: try row.get("m_deleted_at"),
            contentJSON: try row.get("m_content"), metadataJSON: try row.get("m_metadata"), replyTo: try row.get("m_reply_to"),
            status: status, reactionsJSON: try row.get("m_reactions"), mentionsJSON: try row.get("m_mentions"),
            pinnedAt: try row.get("m_pinned_at"), pinnedBy: try row.get("m_pinned_by"), threadRoot: try row.get("m_thread_root"),
            alsoInConversation: try row.get("m_in_conversation", as: Int64.self) != 0, replyCount: Int(try row.get("m_reply_count", as: Int64.self)),
            lastReplyAt: try row.get("m_last_reply_at"), senderPhotoURL: avatarURL(try row.get("m_sender_photo")),
            pollJSON: try row.get("m_poll"), linkPreviewJSON: try row.get("m_link_preview"))
    }

    /// A stored name of a closed set (a conversation kind, a role, an event type). A value
    /// this binary does not know means the database was written by a newer one or damaged:
    /// it is an error, never silently relabelled as some other value.
    static func stored<Value: RawRepresentable>(_ raw: String, as type: Value.Type) throws -> Value where Value.RawValue == String {
        guard let value = Value(rawValue: raw) else { throw StoreError.decoding("unknown stored \(Value.self) '\(raw)'") }
        return value
    }

    /// A stored event type. Clients decode kinds they do not know as `.unknown`; the server
    /// wrote every stored one, so an unknown one here is damage and an error.
    static func stored(_ raw: String, as type: EventKind.Type) throws -> EventKind {
        let kind = EventKind(rawValue: raw)
        guard kind.isKnown else { throw StoreError.decoding("unknown stored event type '\(raw)'") }
        return kind
    }
}
