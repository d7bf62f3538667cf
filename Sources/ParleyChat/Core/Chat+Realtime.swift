import Foundation
import ParleyStore
package import ParleyWire

/// One page of the events a reconnecting device missed, as the frames the socket sends.
package struct ReplayPage: Sendable {
    /// `(position, frame)` in position order.
    package var frames: [(position: Int64, frame: [UInt8])]
    /// More events follow.
    package var hasMore: Bool
    /// The newest position of each shard in the store when the page was read: once a page
    /// has no more, the device has everything up to here.
    package var newest: LogCursor
}

/// How a reconnecting device catches up.
package enum CatchUp: Sendable, Hashable {
    /// Replay the events after the cursor, page by page.
    case replay
    /// Too much was missed (or the cursor was never issued here): reload over REST, then
    /// continue live from `cursor`.
    case resync(cursor: LogCursor, reason: String)
}

extension Chat {
    /// How long a typing indicator lasts unless the typist repeats it.
    package static let typingLifetimeMilliseconds = 6_000


    /// The conversations whose events `caller`'s devices receive, the people the caller
    /// blocked (public ids: decision 0027), and the cursor the answer holds at (the newest
    /// of each shard in the same snapshot).
    package func memberships(_ caller: Caller) async throws -> (conversations: [Int64], blocked: Set<String>, asOf: LogCursor) {
        let shards = logShards
        return try await run {
            try await store.read { db in
                let keys = try db.fetchAll("SELECT conversation_id FROM member WHERE user_id = \(caller.userKey)").map { try $0.get("conversation_id", as: Int64.self) }
                let blocked = try Chat.blockedIDs(db, viewer: caller.userKey)
                let newest = try EventLog.committedCursor(db, shards: shards)
                return (keys, blocked, newest)
            }
        }
    }

    /// The newest position of each shard now committed: where a device that starts fresh,
    /// or reloads, continues from.
    package func committedCursor() async throws -> LogCursor {
        let shards = logShards
        return try await run { try await store.read { db in try EventLog.committedCursor(db, shards: shards) } }
    }

    /// Whether a device at `cursor` can replay what it missed: not when its cursor is of
    /// another history (`epoch` differs: a restored backup, another server), of a log with
    /// another number of shards, or was never issued here, nor when more than `maxEvents` are
    /// waiting (reloading the conversation list and the newest history is quicker).
    package func catchUp(_ caller: Caller, after cursor: LogCursor, epoch: String?, maxEvents: Int) async throws -> CatchUp {
        let current = self.epoch
        let shards = logShards
        return try await run {
            try await store.read { db in
                let newest = try EventLog.committedCursor(db, shards: shards)
                if let epoch, epoch != current {
                    return .resync(cursor: newest, reason: "the server's history changed (epoch \(epoch) is not \(current)): reload, then continue")
                }
                guard cursor.shards == shards else {
                    return .resync(cursor: newest, reason: cursor.shards == 1
                        ? "this server's log has \(shards) shards: resume with a cursor of \(shards) positions (from ready or resync), not one position"
                        : "the cursor has \(cursor.shards) positions, this server's log has \(shards) shards")
                }
                if !newest.covers(cursor) {
                    return .resync(cursor: newest, reason: "cursor \(cursor) was never issued by this server")
                }
                let waiting = try Chat.feedRows(db, user: caller.userKey, after: cursor, limit: maxEvents + 1).count
                if waiting > maxEvents {
                    return .resync(cursor: newest, reason: "more than \(maxEvents) events were missed")
                }
                return .replay
            }
        }
    }

    /// The next page of events after `cursor` for `caller`'s devices, as socket frames
    /// (messages without a per-viewer status, exactly as the live frames).
    package func replay(_ caller: Caller, after cursor: LogCursor, limit: Int) async throws -> ReplayPage {
        let shards = logShards
        return try await run {
            try await store.read { db in
                let newest = try EventLog.committedCursor(db, shards: shards)
                let rows = try Chat.feedRows(db, user: caller.userKey, after: cursor, limit: limit + 1)
                let hiding = try Chat.blockedKeys(db, viewer: caller.userKey)
                let frames = try Chat.storedEvents(db, rows.prefix(limit), viewer: nil, hiding: hiding).map { ($0.record.position, $0.record.frame) }
                return ReplayPage(frames: frames, hasMore: rows.count > limit, newest: newest)
            }
        }
    }

    /// Tells the conversation's other members' devices that the caller started or stopped
    /// typing, in the conversation or in the thread under `thread`. Nothing is stored.
    ///
    /// - Throws: 403 `not_member` in a public channel not joined; 404 (also
    ///   `message_not_found` for a thread root that is not in the conversation).
    package func typing(_ caller: Caller, conversation id: ConversationID, thread: MessageID? = nil, typing: Bool) async throws {
        let access = try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .keepOwnState)
                // In a thread: its root must be a message of this conversation the caller sees.
                if let thread { _ = try Chat.messageRow(db, access: access, id: thread) }
                return access
            }
        }
        let frame = RealtimeFrames.typing(conversationID: id.rawValue, userID: caller.userID.rawValue, typing: typing,
                                          expiresInMs: Chat.typingLifetimeMilliseconds, threadID: thread?.rawValue)
        bus?.publish([.ephemeral(audience: .membersExcept(conversation: access.key, user: caller.userKey), frame: frame)])
    }

    /// The people who see `user`'s presence: everyone sharing a direct conversation, group or
    /// private channel with them (public channels are too large to tell every member).
    package func presenceAudience(user: Int64) async throws -> [Int64] {
        try await run {
            try await store.read { db in
                try db.fetchAll("""
                    SELECT DISTINCT other.user_id FROM member mine
                    JOIN conversation c ON c.id = mine.conversation_id AND c.kind != 'public'
                    JOIN member other ON other.conversation_id = mine.conversation_id
                    WHERE mine.user_id = \(user) AND other.user_id != \(user)
                    """).map { try $0.get("user_id", as: Int64.self) }
            }
        }
    }

    /// Records that `user`'s last device disconnected now.
    ///
    /// - Returns: the time stored, in milliseconds since 1970.
    package func recordLastSeen(user: Int64) async throws -> Int64 {
        let now = nowMilliseconds
        try await run {
            try await store.write { db in try db.execute("UPDATE account SET last_seen_at = \(now) WHERE id = \(user)") }
        }
        return now
    }

    /// The presence of the people asked about who share a non-public conversation with the
    /// caller (others are left out, so presence cannot be probed for strangers; so are people
    /// the caller blocked, whose presence they do not see).
    /// `isOnline` answers for users by internal key.
    package func presence(_ caller: Caller, users ids: [UserID], isOnline: @Sendable ([Int64]) async -> Set<Int64>) async throws -> PresenceList {
        guard (1...Limits.presencePerQuery).contains(ids.count) else {
            throw ChatError.invalid("userIds must list 1–\(Limits.presencePerQuery) users")
        }
        let rows = try await run {
            try await store.read { db in
                try db.fetchAll("""
                    SELECT DISTINCT u.id, u.public_id, u.last_seen_at FROM account u
                    JOIN member other ON other.user_id = u.id
                    JOIN conversation c ON c.id = other.conversation_id AND c.kind != 'public'
                    JOIN member mine ON mine.conversation_id = other.conversation_id AND mine.user_id = \(caller.userKey)
                    WHERE u.public_id IN (\(list: ids.map(\.rawValue))) AND u.app_id = \(caller.appID)
                      AND NOT EXISTS (SELECT 1 FROM block bl WHERE bl.blocker_id = \(caller.userKey) AND bl.blocked_id = u.id)
                    """).map { (try $0.get("id", as: Int64.self), try $0.get("public_id", as: String.self), try $0.get("last_seen_at", as: Int64?.self)) }
            }
        }
        let online = await isOnline(rows.map(\.0))
        return PresenceList(users: rows.map { key, id, lastSeen in
            online.contains(key) ? Presence(userID: UserID(rawValue: id), status: .online, lastSeenAt: nil)
                                 : Presence(userID: UserID(rawValue: id), status: .offline, lastSeenAt: lastSeen.map(Chat.date))
        })
    }
}
