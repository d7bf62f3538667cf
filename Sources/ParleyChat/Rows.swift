import Foundation
import ParleyStore
import ParleyWire

// Reading rows into API models. Each `…Columns` list and its reader belong together: the
// reader takes columns by position, starting at `offset`.

extension Chat {
    static let userColumns: SQL = "u.public_id, u.username, u.display_name, u.is_guest, u.created_at, u.custom_data"

    static func user(_ row: Row, at offset: Int = 0) throws -> User {
        User(id: UserID(rawValue: try row.get(offset)), username: try row.get(offset + 1), displayName: try row.get(offset + 2),
             isGuest: try row.get(offset + 3), createdAt: date(try row.get(offset + 4)),
             customData: try row.get(offset + 5, as: String?.self).map { try JSONValue.decode($0) })
    }

    static func fetchUser(_ db: any Database, key: Int64) throws -> User {
        guard let row = try db.fetchOne("SELECT \(userColumns) FROM account u WHERE u.id = \(key)") else { throw ChatError.userNotFound }
        return try user(row)
    }

    /// Columns of a message joined with its author (`m`, `u`) and conversation (`c`).
    static let messageColumns: SQL = """
        m.public_id, c.public_id, m.seq, u.public_id, u.username, u.display_name, m.client_id, m.created_at, m.edited_at,
        m.deleted_at, m.content, m.metadata, m.reply_to, m.author_id
        """
    static let messageJoins: SQL = "FROM message m JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id"

    /// Reads a message; `status` is filled for the caller's own messages from the other
    /// members' lowest watermarks (nil watermarks: not computed, e.g. channels).
    static func message(_ row: Row, at offset: Int = 0, caller: Int64? = nil, lowest: (delivered: Int64, read: Int64)? = nil) throws -> Message {
        try record(row, at: offset, caller: caller, lowest: lowest).message()
    }

    /// Reads a message row without decoding its stored JSON.
    static func record(_ row: Row, at offset: Int = 0, caller: Int64? = nil, lowest: (delivered: Int64, read: Int64)? = nil) throws -> MessageRecord {
        let seq: Int64 = try row.get(offset + 2)
        let authorKey: Int64 = try row.get(offset + 13)
        var status: DeliveryStatus?
        if let caller, caller == authorKey {
            if let lowest {
                status = seq <= lowest.read ? .read : seq <= lowest.delivered ? .delivered : .sent
            } else {
                status = .sent
            }
        }
        return MessageRecord(
            id: try row.get(offset), conversationID: try row.get(offset + 1), seq: seq,
            senderID: try row.get(offset + 3), senderUsername: try row.get(offset + 4), senderDisplayName: try row.get(offset + 5),
            clientID: try row.get(offset + 6), sentAt: try row.get(offset + 7), editedAt: try row.get(offset + 8),
            deletedAt: try row.get(offset + 9), contentJSON: try row.get(offset + 10), metadataJSON: try row.get(offset + 11),
            replyTo: try row.get(offset + 12), status: status)
    }
}
