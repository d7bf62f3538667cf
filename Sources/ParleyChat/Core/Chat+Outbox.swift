package import Foundation
package import ParleyStore

/// One piece of work in an outbox: what a feature wrote in a change's transaction, to be done
/// after it (a push notification to send, a webhook to deliver).
package struct OutboxItem: Sendable, Hashable {
    /// The row's key.
    package var id: Int64
    /// Which outbox (`push`, `webhook`, …).
    package var kind: String
    /// What the feature wrote, as it wrote it.
    package var payload: [UInt8]
    /// Attempts made before this one.
    package var attempts: Int
    /// When the change that caused it committed.
    package var createdAt: Date
}

/// The outboxes (docs/decisions/0018-positions-across-nodes.md, "Outboxes across nodes").
///
/// A feature adds rows from a ``TransactionHook`` (``Outbox/add(_:kind:payload:now:)``), so a
/// row exists exactly when its change committed: a crash after the commit still does the work
/// after restart. A worker on any node claims due rows for a lease (``Chat/claimOutbox(kind:holder:limit:lease:)``);
/// on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so nodes claiming at once take different rows
/// and no row is worked on by two of them while its lease lasts. A row done is removed
/// (``Chat/finishOutbox(_:holder:)``), one to try later goes back with a due time
/// (``Chat/retryOutbox(_:holder:after:)``), one given up on is kept as failed
/// (``Chat/failOutbox(_:holder:)``). A worker that dies mid-lease leaves its rows to be
/// claimed again when the lease ends: the work is at least once, and exactly once unless a
/// worker dies between doing it and recording that it did.
package enum Outbox: Sendable {
    /// Adds a row to the `kind` outbox, due at `due` (default: now). Call inside a write's
    /// transaction.
    package static func add(_ db: any Database, kind: String, payload: [UInt8], now: Int64, due: Int64? = nil) throws {
        try db.execute("INSERT INTO outbox (kind, payload, due_at, created_at) VALUES (\(kind), \(payload), \(due ?? now), \(now))")
    }
}

extension Chat {
    /// Claims up to `limit` due rows of the `kind` outbox for `holder` until `lease` from now:
    /// rows nobody holds (or whose holder's lease ran out), oldest due first.
    package func claimOutbox(kind: String, holder: String, limit: Int, lease: Duration) async throws -> [OutboxItem] {
        let now = nowMilliseconds
        let until = now + Chat.milliseconds(lease)
        return try await run {
            try await store.write { db in
                let lock: SQL = db.dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : ""
                let rows = try db.fetchAll("""
                    SELECT id, kind, payload, attempts, created_at FROM outbox
                    WHERE kind = \(kind) AND failed_at IS NULL AND lane IS NULL AND due_at <= \(now)
                      AND (claimed_until IS NULL OR claimed_until < \(now))
                    ORDER BY due_at, id LIMIT \(limit)
                    """ + lock)
                let items = try rows.map { row in
                    OutboxItem(id: try row.get("id"), kind: try row.get("kind"), payload: try row.get("payload"),
                               attempts: Int(try row.get("attempts", as: Int64.self)), createdAt: Chat.date(try row.get("created_at")))
                }
                guard !items.isEmpty else { return [] }
                try db.execute("UPDATE outbox SET claimed_by = \(holder), claimed_until = \(until) WHERE id IN (\(list: items.map(\.id)))")
                return items
            }
        }
    }

    /// Removes rows `holder` has done (rows another holder took over meanwhile stay).
    package func finishOutbox(_ ids: [Int64], holder: String) async throws {
        guard !ids.isEmpty else { return }
        try await run {
            try await store.write { db in _ = try db.execute("DELETE FROM outbox WHERE id IN (\(list: ids)) AND claimed_by = \(holder)") }
        }
    }

    /// Puts a row back to be tried again `after` from now, one attempt more.
    package func retryOutbox(_ id: Int64, holder: String, after: Duration) async throws {
        let due = nowMilliseconds + Chat.milliseconds(after)
        try await run {
            try await store.write { db in
                _ = try db.execute("""
                    UPDATE outbox SET attempts = attempts + 1, due_at = \(due), claimed_by = NULL, claimed_until = NULL
                    WHERE id = \(id) AND claimed_by = \(holder)
                    """)
            }
        }
    }

    /// Puts a row back due `after` from now without counting an attempt: the work could not
    /// even be tried here (no file descriptor for a socket), which says nothing of the far end.
    package func postponeOutbox(_ id: Int64, holder: String, after: Duration) async throws {
        let due = nowMilliseconds + Chat.milliseconds(after)
        try await run {
            try await store.write { db in
                _ = try db.execute("""
                    UPDATE outbox SET due_at = \(due), claimed_by = NULL, claimed_until = NULL WHERE id = \(id) AND claimed_by = \(holder)
                    """)
            }
        }
    }

    /// Keeps a row as failed: never claimed again (a feature may list and replay its failures).
    package func failOutbox(_ id: Int64, holder: String) async throws {
        let now = nowMilliseconds
        try await run {
            try await store.write { db in
                _ = try db.execute("""
                    UPDATE outbox SET attempts = attempts + 1, failed_at = \(now), claimed_by = NULL, claimed_until = NULL
                    WHERE id = \(id) AND claimed_by = \(holder)
                    """)
            }
        }
    }

    /// When the next row of the `kind` outbox that nobody holds falls due (nil when there is
    /// none), for a worker to sleep until then. One step of the `(kind, due_at)` index: held
    /// rows are skipped, and a held row whose lease ran out counts as due.
    package func nextOutboxDue(kind: String) async throws -> Date? {
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                try db.fetchValue(Int64.self, """
                    SELECT due_at FROM outbox
                    WHERE kind = \(kind) AND failed_at IS NULL AND lane IS NULL AND (claimed_until IS NULL OR claimed_until < \(now))
                    ORDER BY due_at LIMIT 1
                    """).map(Chat.date)
            }
        }
    }

    /// Each outbox kind's rows waiting (not failed for good), and how overdue its oldest due
    /// one is, in seconds (0 when none is due yet): `/metrics`' outbox depths (issue 31, item 7).
    package func outboxDepths() async throws -> [(kind: String, waiting: Int, overdueSeconds: Double)] {
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                try db.fetchAll("""
                    SELECT kind, count(*) AS waiting, min(due_at) AS oldest FROM outbox WHERE failed_at IS NULL GROUP BY kind ORDER BY kind
                    """).map { row in
                    let oldest = try row.get("oldest", as: Int64?.self) ?? now
                    return (try row.get("kind", as: String.self), Int(try row.get("waiting", as: Int64.self)), Double(max(0, now - oldest)) / 1000)
                }
            }
        }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
