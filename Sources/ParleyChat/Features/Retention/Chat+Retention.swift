import Foundation
import ParleyStore
package import ParleyWire

/// What one retention sweep removed.
package struct RetentionSweep: Sendable, Hashable {
    /// Messages removed.
    package var messages: Int
    /// Conversations they were in.
    package var conversations: Int
}

// Retention (docs/api.md, "Retention"): messages older than a policy's days are deleted for
// real — the row, its full-text entry, its reactions, mentions, reports and pins, its
// attachments' references (a file no other message uses is then collected), and its events —
// and one `messages.expired` event says what went, so devices drop them too.

/// Retention: an app's and a conversation's policy, and the sweep that removes what is older (docs/api.md, "Retention").
package struct Retention: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Retention: an app's and a conversation's policy, and the sweep that removes what is older (docs/api.md, "Retention").
    package var retention: Retention { Retention(core: self) }
}

extension Retention {
    /// The app's policy: keep messages `days` days (0: forever) in every conversation without
    /// a policy of its own.
    package func setPolicy(_ server: ServerApp, _ policy: RetentionPolicy) async throws -> RetentionPolicy {
        guard (0...36_500).contains(policy.days) else { throw ChatError.invalid("days must be 0 (keep forever) to 36500") }
        try await run {
            try await store.write { db in
                try db.execute("UPDATE app SET retention_days = \(policy.days == 0 ? nil : Int64(policy.days)) WHERE id = \(server.app.id)")
            }
        }
        return policy
    }

    /// The app's policy.
    package func policy(_ server: ServerApp) async throws -> RetentionPolicy {
        try await run {
            try await store.read { db in
                RetentionPolicy(days: Int(try db.fetchValue(Int64.self, "SELECT coalesce(retention_days, 0) FROM app WHERE id = \(server.app.id)") ?? 0))
            }
        }
    }

    /// Removes every message older than its conversation's policy, a batch per transaction.
    /// Safe on several nodes at once: on PostgreSQL a conversation is swept by one node at a
    /// time (an advisory lock), and a batch that finds its rows gone removes nothing.
    @discardableResult
    package func sweep() async throws -> RetentionSweep {
        let now = nowMilliseconds
        let policies = try await run {
            try await store.read { db -> [(key: Int64, cutoff: Int64)] in
                try db.fetchAll("""
                    SELECT c.id, coalesce(c.retention_days, a.retention_days) AS days FROM conversation c JOIN app a ON a.id = c.app_id
                    WHERE c.kind <> 'pusher' AND coalesce(c.retention_days, a.retention_days) > 0
                    """).map { row in
                    (try row.get("id"), now - (try row.get("days", as: Int64.self)) * 86_400_000)
                }
            }
        }
        var sweep = RetentionSweep(messages: 0, conversations: 0)
        for policy in policies {
            var removedHere = 0
            while true {
                let removed = try await run { try await write { tx in try Chat.expire(tx, conversation: policy.key, before: policy.cutoff, now: now) } }
                removedHere += removed
                if removed < Chat.retentionBatch { break }
            }
            if removedHere > 0 {
                sweep.messages += removedHere
                sweep.conversations += 1
            }
        }
        if sweep.messages > 0 { try await compactAfterRetention() }
        return sweep
    }

    /// After a sweep removed something, SQLite's free pages and the full-text index still hold
    /// the removed words: merge the index and checkpoint, so the file holds only what is kept
    /// (secure_delete zeroes what a delete frees). PostgreSQL's dead rows go with its vacuum.
    func compactAfterRetention() async throws {
        let sqlite = try await run {
            try await store.write { db -> Bool in
                guard db.dialect == .sqlite else { return false }
                try db.execute("INSERT INTO message_fts (message_fts) VALUES ('optimize')")
                return true
            }
        }
        guard sqlite else { return }
        await store.reclaim()
    }
}

extension Chat {
    /// Messages removed per transaction.
    static let retentionBatch = 500

    /// One batch of a conversation's messages created before `cutoff`: gone, with one event.
    static func expire(_ tx: Transaction, conversation: Int64, before cutoff: Int64, now: Int64) throws -> Int {
        if tx.dialect == .postgres {
            guard try tx.fetchValue(Bool.self, "SELECT pg_try_advisory_xact_lock(30000, \(conversation)::integer)") == true else { return 0 }
        }
        let rows = try tx.fetchAll("""
            SELECT id, seq, content FROM message WHERE conversation_id = \(conversation) AND created_at < \(cutoff)
            ORDER BY seq LIMIT \(retentionBatch)
            """)
        guard let through = try rows.last?.get("seq", as: Int64.self) else { return 0 }
        let keys: [Int64] = try rows.map { try $0.get("id") }
        for row in rows {
            let key: Int64 = try row.get("id")
            if let content = try row.get("content", as: String?.self),
               let value = try? JSONDecoder().decode(MessageContent.self, from: Data(content.utf8)) {
                try FullTextSearch.unindex(tx, message: key, text: value.searchableText)
            }
            try setMedia(tx, message: key, keys: [], now: now)
        }
        try tx.execute("DELETE FROM reaction WHERE message_id IN (\(list: keys))")
        try tx.execute("DELETE FROM poll_vote WHERE message_id IN (\(list: keys))")
        try tx.execute("DELETE FROM mention WHERE message_id IN (\(list: keys))")
        try tx.execute("DELETE FROM report WHERE message_id IN (\(list: keys))")
        try tx.execute("DELETE FROM thread_read WHERE root_id IN (\(list: keys))")
        // Replies newer than their expired root stay, in a thread that has no root any more.
        try tx.execute("UPDATE message SET thread_id = NULL WHERE thread_id IN (\(list: keys))")
        try tx.execute("DELETE FROM event WHERE message_id IN (\(list: keys))")
        try tx.execute("UPDATE conversation SET last_message_id = NULL WHERE id = \(conversation) AND last_message_id IN (\(list: keys))")
        try tx.execute("DELETE FROM message WHERE id IN (\(list: keys))")
        var payload = EventPayload()
        payload.count = keys.count
        payload.throughSeq = through
        try tx.append(conversation: conversation, kind: .messagesExpired, actor: nil, payload: payload, now: now, activity: false)
        return keys.count
    }
}
