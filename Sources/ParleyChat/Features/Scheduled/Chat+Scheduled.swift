package import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

/// Scheduled messages (docs/api.md, "Scheduled messages"): written now, sent at their time as
/// a normal send by their author, exactly once (the send is idempotent by its client id, so a
/// node that dies between sending and recording sends nothing twice when another takes over).
package struct Scheduling: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Scheduled messages.
    package var scheduling: Scheduling { Scheduling(core: self) }
}

extension Scheduling {
    /// Schedules a message (`POST /v1/conversations/{id}/scheduled`). The caller must be able
    /// to post there now; whether they still can is checked again at its time.
    ///
    /// - Throws: 400 for a time not ahead or more than a year ahead, content a send would
    ///   refuse, or an attachment; 409 past ``Limits/scheduledPerUser`` or for a client id
    ///   already scheduled or sent; 403/404 as a send.
    package func schedule(_ caller: Caller, conversation id: ConversationID, _ request: ScheduleMessageRequest) async throws -> ScheduledMessage {
        let now = nowMilliseconds
        let at = Chat.milliseconds(request.sendAt)
        guard at > now else { throw ChatError.invalid("sendAt must be in the future") }
        guard at <= now + 366 * 86_400_000 else { throw ChatError.invalid("sendAt is at most a year ahead") }
        try Self.check(request.message.content)
        _ = try Chat.PreparedMessage(request.message.clientID, request.message.content, request.message.metadata, from: caller)
        if request.message.alsoInConversation == true, request.message.threadID == nil {
            throw ChatError.invalid("alsoInConversation is for a reply in a thread: give threadId too")
        }
        let publicID = Crypto.timeOrderedID(prefix: "sm_", milliseconds: now)
        let stored = try Self.encode(request.message)
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .post)
                let waiting = try tx.fetchValue(Int64.self, """
                    SELECT count(*) FROM scheduled_message WHERE user_id = \(caller.userKey) AND status = 'scheduled'
                    """) ?? 0
                guard waiting < Int64(Limits.scheduledPerUser) else {
                    throw ChatError.conflict("at most \(Limits.scheduledPerUser) messages wait to be sent; cancel one first")
                }
                let clientID = request.message.clientID
                guard try tx.fetchOne("SELECT 1 FROM message WHERE author_id = \(caller.userKey) AND client_id = \(clientID)") == nil,
                      try tx.fetchOne("""
                        SELECT 1 FROM scheduled_message WHERE user_id = \(caller.userKey) AND client_id = \(clientID) AND status IN ('scheduled', 'sent')
                        """) == nil else {
                    throw ChatError.conflict("a message with this clientId was already sent or scheduled; give a new one")
                }
                try tx.execute("""
                    INSERT INTO scheduled_message (public_id, user_id, conversation_id, client_id, request, send_at, status, created_at, updated_at)
                    VALUES (\(publicID), \(caller.userKey), \(access.key), \(clientID), \(stored), \(at), 'scheduled', \(now), \(now))
                    """)
                let scheduled = ScheduledMessage(id: publicID, conversationID: access.id, sendAt: Chat.date(at), message: request.message,
                                                 status: .scheduled, createdAt: Chat.date(now))
                try Self.announce(tx, scheduled, conversation: access.key, user: caller.userKey, now: now)
                return scheduled
            }
        }
    }

    /// The caller's messages still to be sent, soonest first, then the ones that failed at their
    /// time, until the caller dismisses them (`GET /v1/scheduled`), in one conversation or all.
    /// A failure is listed because its author may no longer be a member, and so not hear its
    /// `scheduled.updated`.
    package func scheduled(_ caller: Caller, conversation id: ConversationID?) async throws -> ScheduledList {
        try await run {
            try await store.read { db in
                var filter: SQL = ""
                if let id {
                    let access = try Chat.access(db, caller: caller, id: id, for: .keepOwnState)
                    filter = "AND s.conversation_id = \(access.key)"
                }
                let rows = try db.fetchAll("""
                    SELECT s.*, c.public_id AS conversation_public_id FROM scheduled_message s JOIN conversation c ON c.id = s.conversation_id
                    WHERE s.user_id = \(caller.userKey) AND s.status IN ('scheduled', 'failed') \(filter)
                    ORDER BY CASE WHEN s.status = 'scheduled' THEN 0 ELSE 1 END, s.send_at, s.id
                    """)
                return ScheduledList(scheduled: try rows.map(Self.scheduled))
            }
        }
    }

    /// Changes a scheduled message's time or content while it waits (`PATCH /v1/scheduled/{id}`).
    ///
    /// - Throws: 404 for one that is not the caller's; 409 once sent, failed or cancelled; 400
    ///   as ``schedule(_:conversation:_:)``.
    package func edit(_ caller: Caller, id: String, _ request: EditScheduledRequest) async throws -> ScheduledMessage {
        guard request.sendAt != nil || request.content != nil else { throw ChatError.invalid("give sendAt, content or both") }
        let now = nowMilliseconds
        if let sendAt = request.sendAt {
            let at = Chat.milliseconds(sendAt)
            guard at > now else { throw ChatError.invalid("sendAt must be in the future") }
            guard at <= now + 366 * 86_400_000 else { throw ChatError.invalid("sendAt is at most a year ahead") }
        }
        if let content = request.content {
            try Self.check(content)
            _ = try Chat.PreparedMessage("check", content, nil, from: caller)
        }
        return try await run {
            try await write { tx in
                var scheduled = try Self.waiting(tx, caller: caller, id: id)
                if let sendAt = request.sendAt { scheduled.sendAt = Chat.date(Chat.milliseconds(sendAt)) }
                if let content = request.content { scheduled.message.content = content }
                try tx.execute("""
                    UPDATE scheduled_message SET request = \(try Self.encode(scheduled.message)), send_at = \(Chat.milliseconds(scheduled.sendAt)),
                    updated_at = \(now) WHERE public_id = \(id) AND status = 'scheduled'
                    """)
                try Self.announce(tx, scheduled, conversation: try Self.conversationKey(tx, id), user: caller.userKey, now: now)
                return scheduled
            }
        }
    }

    /// Cancels a scheduled message, or dismisses one that failed (`DELETE /v1/scheduled/{id}`).
    ///
    /// - Throws: 404 for one that is not the caller's; 409 once sent or cancelled.
    package func cancel(_ caller: Caller, id: String) async throws {
        let now = nowMilliseconds
        try await run {
            try await write { tx in
                var scheduled = try Self.waiting(tx, caller: caller, id: id, orFailed: true)
                try tx.execute("UPDATE scheduled_message SET status = 'cancelled', updated_at = \(now) WHERE public_id = \(id)")
                scheduled.status = .cancelled
                try Self.announce(tx, scheduled, conversation: try Self.conversationKey(tx, id), user: caller.userKey, now: now)
            }
        }
    }

    /// When the next scheduled message is due, if any.
    package func nextDue() async throws -> Date? {
        try await run {
            try await store.read { db in
                // A row or none (min() over no rows would be one NULL).
                try db.fetchValue(Int64.self, "SELECT send_at FROM scheduled_message WHERE status = 'scheduled' ORDER BY send_at LIMIT 1").map(Chat.date)
            }
        }
    }

    /// Sends what is due, as its authors, claiming up to `limit` for `holder` first (so nodes
    /// sharing a database take different ones): each sent one records its message, each its
    /// author can no longer post records why, and both tell the author's devices. Returns how
    /// many it settled. A storage failure leaves the rest to be claimed again after the lease.
    package func sendDue(holder: String, limit: Int = 50, lease: Duration = .seconds(30)) async throws -> Int {
        let now = nowMilliseconds
        let until = now + Chat.milliseconds(lease)
        let claimed: [(key: Int64, publicID: String, user: Int64, userID: String, app: Int64, conversation: String, request: String)] = try await run {
            try await store.write { db in
                let lock: SQL = db.dialect == .postgres ? " FOR UPDATE OF s SKIP LOCKED" : ""
                let rows = try db.fetchAll("""
                    SELECT s.id, s.public_id, s.user_id, s.request, u.public_id AS user_public_id, u.app_id, c.public_id AS conversation_public_id
                    FROM scheduled_message s JOIN account u ON u.id = s.user_id JOIN conversation c ON c.id = s.conversation_id
                    WHERE s.status = 'scheduled' AND s.send_at <= \(now) AND (s.claimed_until IS NULL OR s.claimed_until < \(now))
                    ORDER BY s.send_at, s.id LIMIT \(limit)
                    """ + lock)
                guard !rows.isEmpty else { return [] }
                let keys: [Int64] = try rows.map { try $0.get("id") }
                try db.execute("UPDATE scheduled_message SET claimed_by = \(holder), claimed_until = \(until) WHERE id IN (\(list: keys))")
                return try rows.map { row in
                    (try row.get("id"), try row.get("public_id"), try row.get("user_id"), try row.get("user_public_id"), try row.get("app_id"),
                     try row.get("conversation_public_id"), try row.get("request"))
                }
            }
        }
        var settled = 0
        for item in claimed {
            let caller = Caller(appID: item.app, userKey: item.user, userID: UserID(rawValue: item.userID), sessionKey: 0)
            let request = try Self.decode(item.request)
            let outcome: Result<Message, ChatError>
            do {
                outcome = .success(try await core.send(caller, to: ConversationID(rawValue: item.conversation), request).0)
            } catch let error as ChatError where error.status < 500 && error.status != 429 {
                // The author can no longer post there (removed, banned, muted, …): for good.
                // Slow mode and the server's own failures leave it claimed: tried again after the lease.
                outcome = .failure(error)
            }
            try await settle(item.key, publicID: item.publicID, holder: holder, caller: caller, outcome: outcome)
            settled += 1
        }
        return settled
    }

    /// Records how a claimed one ended and tells its author's devices.
    private func settle(_ key: Int64, publicID: String, holder: String, caller: Caller, outcome: Result<Message, ChatError>) async throws {
        let now = nowMilliseconds
        try await run {
            try await write { tx in
                switch outcome {
                case .success(let message):
                    try tx.execute("""
                        UPDATE scheduled_message SET status = 'sent', message_public_id = \(message.id.rawValue), claimed_by = NULL,
                        claimed_until = NULL, updated_at = \(now) WHERE id = \(key) AND claimed_by = \(holder)
                        """)
                case .failure(let error):
                    try tx.execute("""
                        UPDATE scheduled_message SET status = 'failed', error = \(String(error.message.prefix(300))), claimed_by = NULL,
                        claimed_until = NULL, updated_at = \(now) WHERE id = \(key) AND claimed_by = \(holder)
                        """)
                }
                guard let row = try tx.fetchOne("""
                    SELECT s.*, c.public_id AS conversation_public_id FROM scheduled_message s JOIN conversation c ON c.id = s.conversation_id
                    WHERE s.id = \(key)
                    """) else { return }
                try Self.announce(tx, try Self.scheduled(row), conversation: try row.get("conversation_id"), user: caller.userKey, now: now)
            }
        }
    }

    // MARK: - Rows

    /// Attachments are sent when the file is at hand, not scheduled (an upload not sent would
    /// be collected before its time).
    private static func check(_ content: MessageContent) throws {
        switch content {
        case .photo, .video, .audio, .file:
            throw ChatError.invalid("a scheduled message carries no attachment: send the file when it is due")
        case .system:
            throw ChatError.invalid("system messages come from the app's backend, not a schedule")
        case .text, .markdown, .location, .poll, .custom:
            break
        }
    }

    private static func waiting(_ db: any Database, caller: Caller, id: String, orFailed: Bool = false) throws -> ScheduledMessage {
        guard id.utf8.count <= 64, let row = try db.fetchOne("""
            SELECT s.*, c.public_id AS conversation_public_id FROM scheduled_message s JOIN conversation c ON c.id = s.conversation_id
            WHERE s.public_id = \(id) AND s.user_id = \(caller.userKey)
            """) else { throw ChatError(.notFound, "no scheduled message \(id) of yours") }
        let scheduled = try Self.scheduled(row)
        guard scheduled.status == .scheduled || (orFailed && scheduled.status == .failed) else {
            throw ChatError.conflict("it was \(scheduled.status.rawValue) already")
        }
        return scheduled
    }

    private static func conversationKey(_ db: any Database, _ id: String) throws -> Int64 {
        try db.fetchValue(Int64.self, "SELECT conversation_id FROM scheduled_message WHERE public_id = \(id)") ?? 0
    }

    /// A row of `scheduled_message` joined with its conversation's `public_id` as `conversation_public_id`.
    static func scheduled(_ row: Row) throws -> ScheduledMessage {
        ScheduledMessage(id: try row.get("public_id"), conversationID: ConversationID(rawValue: try row.get("conversation_public_id")),
                         sendAt: Chat.date(try row.get("send_at")), message: try decode(try row.get("request")),
                         status: ScheduledStatus(rawValue: try row.get("status")) ?? .failed, error: try row.get("error"),
                         messageID: try row.get("message_public_id", as: String?.self).map(MessageID.init(rawValue:)),
                         createdAt: Chat.date(try row.get("created_at")))
    }

    private static func encode(_ request: SendMessageRequest) throws -> String {
        String(decoding: try WireCoding.encoder().encode(request), as: UTF8.self)
    }

    private static func decode(_ text: String) throws -> SendMessageRequest {
        try WireCoding.decoder().decode(SendMessageRequest.self, from: Data(text.utf8))
    }

    /// The `scheduled.updated` event: no seq, only to the author's devices.
    private static func announce(_ tx: Transaction, _ scheduled: ScheduledMessage, conversation: Int64, user: Int64, now: Int64) throws {
        var payload = EventPayload()
        payload.scheduledJSON = String(decoding: try WireCoding.encoder().encode(scheduled), as: UTF8.self)
        try tx.append(conversation: conversation, kind: .scheduledUpdated, actor: user, user: user, payload: payload, now: now)
    }
}
