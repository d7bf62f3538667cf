package import Foundation
import ParleyStore
package import ParleyWire

/// A thread's root as a reply's send found it.
struct ThreadRoot: Sendable {
    var key: Int64
    var publicID: String
    var alsoInConversation: Bool
}

// Threads: a reply under a message, paged like a conversation, with its own read state.
// Replies are messages of the conversation (a seq, a message.created event, every member's
// devices get them) that the conversation's history leaves out unless sent "also to the
// conversation"; they never count in the conversation's unread count, only in the thread's.

/// Threads: replies under a message, paged on their own, with a read mark and unread count per thread (docs/api.md, "Threads").
package struct Threads: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Threads: replies under a message, paged on their own, with a read mark and unread count per thread (docs/api.md, "Threads").
    package var threads: Threads { Threads(core: self) }
}

extension Threads {
    /// A page of a thread's replies, paged by seq like a conversation's history (`before`,
    /// `after`; oldest first). Deleted replies stay as tombstones.
    package func replies(_ caller: Caller, conversation id: ConversationID, root rootID: MessageID, before: Int64?, after: Int64?,

                              limit: Int?) async throws -> HistoryPage {
        let limit = try Validate.limit(limit, in: Limits.historyPage, default: 50)
        guard before == nil || after == nil else { throw ChatError.invalid("give at most one of before and after") }
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let (_, root) = try Chat.messageRow(db, access: access, id: rootID)
                return try Chat.historyPage(db, scope: "m.thread_id = \(root)", access: access, caller: caller, before: before, after: after,
                                            around: nil, limit: limit)
            }
        }
    }

    /// One thread as the caller sees it.
    package func thread(_ caller: Caller, conversation id: ConversationID, root rootID: MessageID) async throws -> ThreadInfo {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let (row, key) = try Chat.messageRow(db, access: access, id: rootID)
                return try Chat.threadInfo(db, row: row, root: key, access: access, caller: caller)
            }
        }
    }

    /// The conversation's threads (messages with replies), latest reply first; `before` (a
    /// time) pages on from the last thread's `lastReplyAt`.
    package func list(_ caller: Caller, conversation id: ConversationID, before: Date?, limit: Int?) async throws -> ThreadList {
        let limit = try Validate.limit(limit, in: Limits.conversationPage, default: 20)
        let cursor = before.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } ?? Int64.max
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let rows = try db.fetchAll("""
                    SELECT \(Chat.messageColumns) \(Chat.messageJoins)
                    WHERE m.conversation_id = \(access.key) AND m.reply_count > 0 AND m.last_reply_at < \(cursor)
                    ORDER BY m.last_reply_at DESC, m.id DESC LIMIT \(limit + 1)
                    """)
                let threads = try rows.prefix(limit).map { row in
                    try Chat.threadInfo(db, row: row, root: try row.get("m_key"), access: access, caller: caller)
                }
                return ThreadList(threads: threads, hasMore: rows.count > limit)
            }
        }
    }

    /// Moves the caller's read watermark in a thread (never back; clamped to the thread's
    /// newest reply).
    package func markRead(_ caller: Caller, conversation id: ConversationID, root rootID: MessageID, seq: Int64) async throws -> ThreadInfo {
        guard seq >= 0 else { throw ChatError.invalid("seq must not be negative") }
        return try await run {
            try await write(in: id) { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .keepOwnState)
                let (row, key) = try Chat.messageRow(tx, access: access, id: rootID)
                let newest = try tx.fetchValue(Int64.self, "SELECT coalesce(max(seq), 0) FROM message WHERE thread_id = \(key)") ?? 0
                let target = min(seq, newest)
                let greatest: SQL = tx.dialect == .postgres ? "greatest" : "max"
                try tx.execute("""
                    INSERT INTO thread_read (user_id, root_id, read_seq) VALUES (\(caller.userKey), \(key), \(target))
                    ON CONFLICT (user_id, root_id) DO UPDATE SET read_seq = \(greatest)(thread_read.read_seq, excluded.read_seq)
                    """)
                return try Chat.threadInfo(tx, row: row, root: key, access: access, caller: caller)
            }
        }
    }
}

extension Chat {
    /// The root a reply goes under: a message of this conversation, not deleted, not itself a reply.
    static func threadRoot(_ db: any Database, access: Access, id: MessageID, alsoInConversation: Bool) throws -> ThreadRoot {
        let (row, key) = try messageRow(db, access: access, id: id)
        guard try row.get("m_deleted_at", as: Int64?.self) == nil else { throw ChatError.messageDeleted }
        if let root = try row.get("m_thread_root", as: String?.self) {
            throw ChatError.invalid("a reply has no thread of its own; reply in its thread (threadId \(root))")
        }
        return ThreadRoot(key: key, publicID: id.rawValue, alsoInConversation: alsoInConversation)
    }

    /// The `thread` object of a reply's event: `{"lastReplyAt","replyCount","rootId"}`.
    static func threadPayloadValue(root: String, replies: Int64, lastReplyAt: Int64?) throws -> String {
        var writer = JSONWriter(capacity: 96)
        writer.object { json in
            if let lastReplyAt { json.key("lastReplyAt"); json.date(milliseconds: lastReplyAt) }
            json.key("replyCount"); json.integer(replies)
            json.key("rootId"); json.string(root)
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    static func threadInfo(_ db: any Database, row: Row, root: Int64, access: Access, caller: Caller) throws -> ThreadInfo {
        let readSeq = try db.fetchValue(Int64.self, "SELECT read_seq FROM thread_read WHERE user_id = \(caller.userKey) AND root_id = \(root)") ?? 0
        let unread = try db.fetchValue(Int.self, """
            SELECT count(*) FROM (SELECT 1 FROM message WHERE thread_id = \(root) AND seq > \(readSeq) AND author_id != \(caller.userKey)
            AND deleted_at IS NULL AND shadow = 0 AND \(notBlockedBy(caller.userKey, "message")) LIMIT \(Limits.unreadCountCap)) AS unread
            """) ?? 0
        let participating = try row.get("m_author_key", as: Int64.self) == caller.userKey
            || db.fetchOne("""
                SELECT 1 FROM message m WHERE m.thread_id = \(root) AND (m.author_id = \(caller.userKey)
                OR EXISTS (SELECT 1 FROM mention mn WHERE mn.message_id = m.id AND mn.user_id = \(caller.userKey))) LIMIT 1
                """) != nil
        guard let message = try messages(db, [row], access: access, caller: caller).first else { throw ChatError.messageNotFound }
        return ThreadInfo(root: message, unreadCount: unread, readSeq: readSeq, participating: participating)
    }
}
