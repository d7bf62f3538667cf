import Foundation
import ParleyStore
package import ParleyWire

/// Each user's own arrangement of their conversation list: conversations pinned to the top in
/// an order, archived out of the main list, marked unread (docs/api.md, "Your conversation
/// list"). Only the user and their devices see it (`state.updated`).
package struct Inbox: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Pinned, archived and marked-unread conversations.
    package var inbox: Inbox { Inbox(core: self) }

    /// Whether the member `mb` archived conversation `c` and it stays archived: no message
    /// arrived after they archived it, or they muted it.
    static func archivedSQL(now: Int64) -> SQL {
        """
        (mb.archived_seq IS NOT NULL AND (coalesce((SELECT lm.seq FROM message lm WHERE lm.id = c.last_message_id), 0) <= mb.archived_seq
         OR coalesce(mb.muted_until, 0) > \(now)))
        """
    }

    /// Whether the member `mb` marked the conversation unread and has not read past the mark.
    static let markedUnreadSQL: SQL = "(mb.unread_mark_seq IS NOT NULL AND mb.read_seq <= mb.unread_mark_seq)"

    /// The member's place for a conversation as it stands.
    static func state(_ db: any Database, conversation: Int64, user: Int64, now: Int64) throws -> (ConversationState, readSeq: Int64) {
        guard let row = try db.fetchOne("""
            SELECT mb.pinned_rank, mb.read_seq, CASE WHEN \(archivedSQL(now: now)) THEN 1 ELSE 0 END AS archived,
                   CASE WHEN \(markedUnreadSQL) THEN 1 ELSE 0 END AS marked_unread
            FROM member mb JOIN conversation c ON c.id = mb.conversation_id
            WHERE mb.conversation_id = \(conversation) AND mb.user_id = \(user)
            """) else { throw ChatError.notMember }
        let state = ConversationState(pinnedRank: try row.get("pinned_rank", as: Int64?.self).map(Int.init),
                                      archived: try row.get("archived", as: Int64.self) == 1,
                                      markedUnread: try row.get("marked_unread", as: Int64.self) == 1)
        return (state, try row.get("read_seq"))
    }
}

extension Inbox {
    /// Pins, archives or marks unread one conversation for the caller
    /// (`PATCH /v1/conversations/{id}/state`), and tells their own devices (`state.updated`,
    /// no seq). Pinning puts it above the other pinned ones and brings it out of the archive;
    /// archiving unpins it. A request that changes nothing says nothing.
    ///
    /// - Throws: 400 for none of the fields, or pinned and archived at once; 409 past ``Limits/pinnedConversations``;
    ///   403 `not_member`; 404.
    package func setState(_ caller: Caller, conversation id: ConversationID, _ request: ConversationStateRequest) async throws -> Conversation {
        guard request.pinned != nil || request.archived != nil || request.markedUnread != nil else {
            throw ChatError.invalid("give pinned, archived or markedUnread")
        }
        guard !(request.pinned == true && request.archived == true) else {
            throw ChatError.invalid("a conversation is pinned or archived, not both")
        }
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .keepOwnState)
                let (was, readSeq) = try Chat.state(tx, conversation: access.key, user: caller.userKey, now: Chat.nowWallClock)
                var columns: [SQL] = []
                var state = was
                if request.pinned == true, was.pinnedRank == nil {
                    let pinned = try tx.fetchOne("""
                        SELECT count(*) AS n, min(pinned_rank) AS top FROM member WHERE user_id = \(caller.userKey) AND pinned_rank IS NOT NULL
                        """)
                    guard try pinned?.get("n", as: Int64.self) ?? 0 < Int64(Limits.pinnedConversations) else {
                        throw ChatError.conflict("at most \(Limits.pinnedConversations) conversations are pinned; unpin one first")
                    }
                    let rank = (try pinned?.get("top", as: Int64?.self) ?? 1) - 1
                    columns.append("pinned_rank = \(rank)")
                    state.pinnedRank = Int(rank)
                } else if request.pinned == false, was.pinnedRank != nil {
                    columns.append("pinned_rank = NULL")
                    state.pinnedRank = nil
                }
                if request.archived == true, !was.archived {
                    columns.append("archived_seq = \(access.lastSeq)")
                    if state.pinnedRank != nil { columns.append("pinned_rank = NULL") }
                    state.archived = true
                    state.pinnedRank = nil
                } else if request.archived == false || (request.pinned == true && was.archived), was.archived {
                    columns.append("archived_seq = NULL")
                    state.archived = false
                }
                if request.markedUnread == true, !was.markedUnread {
                    columns.append("unread_mark_seq = \(readSeq)")
                    state.markedUnread = true
                } else if request.markedUnread == false, was.markedUnread {
                    columns.append("unread_mark_seq = NULL")
                    state.markedUnread = false
                }
                if state != was {
                    let assignments = columns.dropFirst().reduce(columns[0]) { $0 + ", " + $1 }
                    try tx.execute("UPDATE member SET " + assignments + " WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)")
                    try Self.announce(tx, state, conversation: access.key, caller: caller, now: now)
                }
                return try Chat.view(tx, key: access.key, caller: caller)
            }
        }
    }

    /// The caller's pinned conversations, top first (`GET /v1/me/pinned-conversations`).
    package func pinned(_ caller: Caller) async throws -> PinnedConversations {
        try await run {
            try await store.read { db in
                PinnedConversations(conversationIDs: try db.fetchAll("""
                    SELECT c.public_id FROM member mb JOIN conversation c ON c.id = mb.conversation_id
                    WHERE mb.user_id = \(caller.userKey) AND mb.pinned_rank IS NOT NULL ORDER BY mb.pinned_rank, c.id
                    """).map { ConversationID(rawValue: try $0.get("public_id")) })
            }
        }
    }

    /// Pins exactly `request`'s conversations in its order and unpins every other
    /// (`PUT /v1/me/pinned-conversations`): how a list reordered by dragging is saved. Each
    /// conversation whose place changed tells the caller's devices (`state.updated`).
    ///
    /// - Throws: 400 for a repeated id or more than ``Limits/pinnedConversations``; 403
    ///   `not_member` or 404 for one the caller cannot keep state in (nothing changes then).
    package func setPinned(_ caller: Caller, _ request: PinnedConversations) async throws -> PinnedConversations {
        let ids = request.conversationIDs
        guard ids.count <= Limits.pinnedConversations else { throw ChatError.invalid("at most \(Limits.pinnedConversations) conversations are pinned") }
        guard Set(ids).count == ids.count else { throw ChatError.invalid("a conversation is listed twice") }
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                var wanted: [Int64: Int] = [:]
                for (rank, id) in ids.enumerated() {
                    wanted[try Chat.access(tx, caller: caller, id: id, for: .keepOwnState).key] = rank
                }
                let current: [Int64] = try tx.fetchAll("""
                    SELECT conversation_id FROM member WHERE user_id = \(caller.userKey) AND pinned_rank IS NOT NULL
                    """).map { try $0.get("conversation_id") }
                for key in Set(current).union(wanted.keys).sorted() {
                    let (was, _) = try Chat.state(tx, conversation: key, user: caller.userKey, now: Chat.nowWallClock)
                    var state = was
                    state.pinnedRank = wanted[key]
                    if state.pinnedRank != nil { state.archived = false }
                    guard state != was else { continue }
                    if let rank = state.pinnedRank {
                        try tx.execute("""
                            UPDATE member SET pinned_rank = \(Int64(rank)), archived_seq = NULL WHERE conversation_id = \(key) AND user_id = \(caller.userKey)
                            """)
                    } else {
                        try tx.execute("UPDATE member SET pinned_rank = NULL WHERE conversation_id = \(key) AND user_id = \(caller.userKey)")
                    }
                    try Self.announce(tx, state, conversation: key, caller: caller, now: now)
                }
                return PinnedConversations(conversationIDs: ids)
            }
        }
    }

    /// The `state.updated` event of one change: no seq, only to the caller's devices.
    private static func announce(_ tx: Transaction, _ state: ConversationState, conversation: Int64, caller: Caller, now: Int64) throws {
        var payload = EventPayload()
        payload.pinnedRank = state.pinnedRank
        payload.archived = state.archived
        payload.markedUnread = state.markedUnread
        try tx.append(conversation: conversation, kind: .stateUpdated, actor: caller.userKey, user: caller.userKey, payload: payload, now: now)
    }
}
