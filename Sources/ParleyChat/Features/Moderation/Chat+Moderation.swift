import Foundation
import ParleyCrypto
import ParleyStore
import ParleySync
package import ParleyWire

// Moderation (docs/api.md, "Moderation"): owners and admins of groups and channels — and the
// app's backend — are moderators. They delete any message, remove, ban and mute members, set
// slow mode and work through reports; each of those is an event with its actor. Shadow bans
// (the app's) and blocks (a user's) make a message one only its author sees.

extension Moderation {

    // MARK: - Bans

    /// Bans someone from a group or channel (moderators): they are removed at once — their
    /// sockets stop receiving it with the `member.removed` that follows `member.banned` — and
    /// cannot join or be added again until `until` or until unbanned.
    ///
    /// - Throws: 403 for a non-moderator, a direct conversation, or a target who outranks the
    ///   caller; 404 `user_not_found`.
    package func ban(_ caller: Caller, conversation id: ConversationID, _ request: BanRequest) async throws -> Ban {
        let reason = try request.reason.map { try Validate.note($0, field: "reason", max: 500) }
        let now = nowMilliseconds
        let until = request.until.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
        if let until, until <= now { throw ChatError.invalid("until must be in the future (leave it out for a ban until lifted)") }
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .moderate)
                let target = try Chat.targetUser(tx, app: caller.appID, id: request.userID)
                guard target != caller.userKey else { throw ChatError.invalid("you cannot ban yourself") }
                let role = try tx.fetchValue(String.self, "SELECT role FROM member WHERE conversation_id = \(access.key) AND user_id = \(target)")
                    .map { try Chat.stored($0, as: MemberRole.self) }
                if let role { try Chat.requireOutranks(access, role) }
                try tx.execute("DELETE FROM ban WHERE conversation_id = \(access.key) AND user_id = \(target)")
                try tx.execute("""
                    INSERT INTO ban (conversation_id, user_id, actor_id, reason, until, created_at)
                    VALUES (\(access.key), \(target), \(caller.userKey), \(reason), \(until), \(now))
                    """)
                var payload = EventPayload()
                payload.until = until
                payload.reason = reason
                try tx.append(conversation: access.key, kind: .memberBanned, actor: caller.userKey, user: target, payload: payload, now: now)
                if role != nil {
                    try tx.execute("DELETE FROM member WHERE conversation_id = \(access.key) AND user_id = \(target)")
                    try tx.execute("UPDATE conversation SET member_count = member_count - 1 WHERE id = \(access.key)")
                    try tx.append(conversation: access.key, kind: .memberRemoved, actor: caller.userKey, user: target, now: now)
                }
                guard let ban = try Chat.bans(tx, conversation: access.key, user: target, now: now).first else { throw ChatError.internalError }
                return ban
            }
        }
    }

    /// Lifts a ban (moderators). Lifting one that is not there changes nothing.
    package func unban(_ caller: Caller, conversation id: ConversationID, user: UserID) async throws {
        let now = nowMilliseconds
        try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .moderate)
                let target = try Chat.targetUser(tx, app: caller.appID, id: user)
                if try tx.execute("DELETE FROM ban WHERE conversation_id = \(access.key) AND user_id = \(target)") > 0 {
                    try tx.append(conversation: access.key, kind: .memberUnbanned, actor: caller.userKey, user: target, now: now)
                }
            }
        }
    }

    /// The bans in force (moderators), newest first.
    package func bans(_ caller: Caller, conversation id: ConversationID) async throws -> BanList {
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .moderate)
                return BanList(bans: try Chat.bans(db, conversation: access.key, user: nil, now: now))
            }
        }
    }

    // MARK: - Moderators' mutes

    /// Mutes a member (moderators): they keep reading but may not post (403 `member_muted`)
    /// until `until` or until unmuted.
    package func muteMember(_ caller: Caller, conversation id: ConversationID, user: UserID, _ request: MuteMemberRequest) async throws -> Member {
        let now = nowMilliseconds
        let until = request.until.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } ?? Chat.forever
        guard until > now else { throw ChatError.invalid("until must be in the future (leave it out to mute until unmuted)") }
        return try await changeMute(caller, conversation: id, user: user, until: until, now: now)
    }

    /// Ends a moderator's mute of a member.
    package func unmuteMember(_ caller: Caller, conversation id: ConversationID, user: UserID) async throws -> Member {
        try await changeMute(caller, conversation: id, user: user, until: nil, now: nowMilliseconds)
    }

    private func changeMute(_ caller: Caller, conversation id: ConversationID, user: UserID, until: Int64?, now: Int64) async throws -> Member {
        try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .moderate)
                guard let row = try tx.fetchOne("""
                    SELECT mb.user_id, mb.role, mb.posting_muted_until FROM member mb JOIN account u ON u.id = mb.user_id
                    WHERE mb.conversation_id = \(access.key) AND u.public_id = \(user.rawValue)
                    """) else { throw ChatError.userNotFound }
                let target: Int64 = try row.get("user_id")
                guard target != caller.userKey else { throw ChatError.invalid("you cannot mute yourself here; to stop pushes use PUT /v1/conversations/{id}/mute") }
                try Chat.requireOutranks(access, try Chat.stored(try row.get("role"), as: MemberRole.self))
                let was = try row.get("posting_muted_until", as: Int64?.self).map { $0 > now } ?? false
                if until != nil || was {
                    try tx.execute("UPDATE member SET posting_muted_until = \(until) WHERE conversation_id = \(access.key) AND user_id = \(target)")
                    if let until {
                        var payload = EventPayload()
                        payload.until = until >= Chat.forever ? nil : until
                        try tx.append(conversation: access.key, kind: .memberMuted, actor: caller.userKey, user: target, payload: payload, now: now)
                    } else {
                        try tx.append(conversation: access.key, kind: .memberUnmuted, actor: caller.userKey, user: target, now: now)
                    }
                }
                return try Chat.member(tx, conversation: access.key, user: target)
            }
        }
    }

    // MARK: - Blocks

    /// Blocks someone: from now on the caller receives nothing they write in a direct
    /// conversation (their messages there are shown only to them, never pushed); elsewhere
    /// their messages reach the caller as stubs and their reactions, typing and presence not
    /// at all, live and in every read; they cannot add the caller to conversations, and are
    /// not told (decision 0027). Blocking again changes nothing.
    package func block(_ caller: Caller, user: UserID) async throws {
        let now = nowMilliseconds
        let blocked = try await run {
            try await write { tx in
                let target = try Chat.targetUser(tx, app: caller.appID, id: user)
                guard target != caller.userKey else { throw ChatError.invalid("you cannot block yourself") }
                let count = try tx.fetchValue(Int.self, "SELECT count(*) FROM block WHERE blocker_id = \(caller.userKey)") ?? 0
                guard count < Limits.blocksPerUser else { throw ChatError.conflict("you have blocked \(Limits.blocksPerUser) people; unblock someone first") }
                try tx.execute("""
                    INSERT INTO block (blocker_id, blocked_id, created_at) VALUES (\(caller.userKey), \(target), \(now)) ON CONFLICT DO NOTHING
                    """)
                return try Chat.blockedIDs(tx, viewer: caller.userKey)
            }
        }
        bus?.publish([.blocksChanged(user: caller.userKey, blocked: blocked.sorted())])
    }

    /// Ends a block (changes nothing when there is none).
    package func unblock(_ caller: Caller, user: UserID) async throws {
        let blocked = try await run {
            try await write { tx in
                let target = try Chat.targetUser(tx, app: caller.appID, id: user)
                try tx.execute("DELETE FROM block WHERE blocker_id = \(caller.userKey) AND blocked_id = \(target)")
                return try Chat.blockedIDs(tx, viewer: caller.userKey)
            }
        }
        bus?.publish([.blocksChanged(user: caller.userKey, blocked: blocked.sorted())])
    }

    /// The people the caller blocked, most recent first.
    package func blocks(_ caller: Caller) async throws -> BlockList {
        try await run {
            try await store.read { db in
                BlockList(users: try db.fetchAll("""
                    SELECT \(Chat.userColumns) FROM block b JOIN account u ON u.id = b.blocked_id
                    WHERE b.blocker_id = \(caller.userKey) ORDER BY b.created_at DESC
                    """).map(Chat.user))
            }
        }
    }

    // MARK: - Shadow bans (the app's backend)

    /// Shadow-bans a user of the app (or lifts it): from then on their messages are shown only
    /// to themselves — never to anyone else, never pushed, never sent to webhooks. They are not told.
    package func setShadowBan(_ server: ServerApp, username: String, banned: Bool) async throws {
        let now = nowMilliseconds
        try await run {
            try await write { tx in
                let key = try Chat.userKey(tx, app: server.app.id, username: username)
                try tx.execute("UPDATE account SET shadow_banned_at = \(banned ? now : nil) WHERE id = \(key)")
            }
        }
    }

    // MARK: - Reports

    /// Reports a message to the conversation's moderators (any member, once per message).
    ///
    /// - Throws: 409 `conflict` for a second report of the same message by the same person.
    package func report(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, _ request: ReportRequest) async throws -> Report {
        let note = try request.note.map { try Validate.note($0, field: "note", max: 1000) }
        let now = nowMilliseconds
        let publicID = Crypto.randomID(prefix: "rp_")
        let (report, announced): (Report, Bool) = try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .report)
                let (_, key) = try Chat.messageRow(tx, access: access, id: messageID)
                guard try tx.execute("""
                    INSERT INTO report (public_id, conversation_id, message_id, reporter_id, reason, note, created_at)
                    VALUES (\(publicID), \(access.key), \(key), \(caller.userKey), \(request.reason.rawValue), \(note), \(now))
                    ON CONFLICT DO NOTHING
                    """) > 0 else { throw ChatError.conflict("you reported this message already; the moderators have it") }
                let report = try Chat.reports(tx, access: access, filter: "r.public_id = \(publicID)", viewer: caller, limit: 1).first
                    ?? { throw ChatError.internalError }()
                // Each moderator's own devices hear of it (nobody else learns who reported what).
                var payload = EventPayload()
                payload.reportID = publicID
                payload.reason = request.reason.rawValue
                let moderators: [Int64] = try tx.fetchAll("""
                    SELECT user_id FROM member WHERE conversation_id = \(access.key) AND role IN ('owner', 'admin') ORDER BY user_id
                    """).map { try $0.get("user_id") }
                for moderator in moderators where moderator != caller.userKey {
                    try tx.append(conversation: access.key, kind: .reportCreated, actor: caller.userKey, message: key, user: moderator,
                                  payload: payload, now: now, activity: false)
                }
                // The app's backend hears it at once (App Review: "timely responses to concerns").
                let announced = try Webhooks.enqueue(tx, app: caller.appID, type: WebhookEventType.reportCreated.rawValue,
                                                     data: Webhooks.json(report), now: now)
                return (report, announced)
            }
        }
        if announced { core.webhooks.signal() }
        return report
    }

    /// The conversation's reports (moderators): open ones (or `resolved`), oldest first;
    /// `after` pages on from a report id.
    package func reports(_ caller: Caller, conversation id: ConversationID, resolved: Bool, after: String?, limit: Int?) async throws -> ReportList {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 50)
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .moderate)
                var filter: SQL = resolved ? "r.resolved_at IS NOT NULL" : "r.resolved_at IS NULL"
                if let after {
                    guard after.utf8.count <= 64, let key = try db.fetchValue(Int64.self, "SELECT id FROM report WHERE public_id = \(after) AND conversation_id = \(access.key)") else {
                        throw ChatError.reportNotFound
                    }
                    filter = filter + " AND r.id > \(key)"
                }
                let found = try Chat.reports(db, access: access, filter: filter, viewer: caller, limit: limit + 1)
                return ReportList(reports: Array(found.prefix(limit)), hasMore: found.count > limit)
            }
        }
    }

    /// Resolves a report (moderators): dismiss it, delete the message, or delete it and ban its
    /// author. Resolving a resolved report again is 409.
    package func resolveReport(_ caller: Caller, conversation id: ConversationID, report reportID: String, _ request: ResolveReportRequest) async throws -> Report {
        let note = try request.note.map { try Validate.note($0, field: "note", max: 1000) }
        let now = nowMilliseconds
        let reportFilter: SQL = "r.public_id = \(reportID)"
        let (target, author) = try await run {
            try await store.read { db -> (MessageID, UserID) in
                let access = try Chat.access(db, caller: caller, id: id, for: .moderate)
                guard reportID.utf8.count <= 64, let row = try db.fetchOne("""
                    SELECT m.public_id AS message, u.public_id AS author, r.resolved_at FROM report r JOIN message m ON m.id = r.message_id
                    JOIN account u ON u.id = m.author_id WHERE r.public_id = \(reportID) AND r.conversation_id = \(access.key)
                    """) else { throw ChatError.reportNotFound }
                guard try row.get("resolved_at", as: Int64?.self) == nil else { throw ChatError.conflict("the report was resolved already") }
                return (MessageID(rawValue: try row.get("message")), UserID(rawValue: try row.get("author")))
            }
        }
        // The actions are the moderators' own, with their events and authority checks.
        if request.resolution != .dismissed { _ = try await core.delete(caller, conversation: id, messages: [target]) }
        if request.resolution == .authorBanned, author != caller.userID {
            _ = try await ban(caller, conversation: id, BanRequest(userID: author, reason: note ?? "reported"))
        }
        let (report, waited, announced): (Report, [Int64], Bool) = try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .moderate)
                // Every open report of the message is settled by this action.
                let settled = try tx.fetchAll("""
                    UPDATE report SET resolved_by = \(caller.userKey), resolved_at = \(now), resolution = \(request.resolution.rawValue),
                                      resolution_note = \(note)
                    WHERE resolved_at IS NULL AND (public_id = \(reportID)
                          OR (\(request.resolution == .dismissed ? 0 : 1) = 1 AND message_id = (SELECT message_id FROM report WHERE public_id = \(reportID))))
                    RETURNING public_id, created_at
                    """)
                var announced = false
                for row in settled {
                    let settledID: String = try row.get("public_id")
                    guard let report = try Chat.reports(tx, access: access, filter: "r.public_id = \(settledID)", viewer: caller, limit: 1).first else { continue }
                    announced = try Webhooks.enqueue(tx, app: caller.appID, type: WebhookEventType.reportResolved.rawValue,
                                                     data: Webhooks.json(report), now: now) || announced
                }
                let report = try Chat.reports(tx, access: access, filter: reportFilter, viewer: caller, limit: 1).first ?? { throw ChatError.reportNotFound }()
                return (report, try settled.map { now - (try $0.get("created_at", as: Int64.self)) }, announced)
            }
        }
        for milliseconds in waited { core.reportResolution.observe(.milliseconds(max(0, milliseconds))) }
        if announced { core.webhooks.signal() }
        return report
    }

    /// The app's reports across its conversations (the app's backend, and `parley-server admin
    /// reports`): open ones (or resolved), oldest first; `after` pages on from a report id.
    package func appReports(_ server: ServerApp, resolved: Bool, after: String?, limit: Int?) async throws -> ReportList {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 50)
        let app = server.app.id
        return try await run {
            try await store.read { db in
                var filter: SQL = resolved ? "r.resolved_at IS NOT NULL" : "r.resolved_at IS NULL"
                if let after {
                    guard after.utf8.count <= 64, let key = try db.fetchValue(Int64.self, """
                        SELECT r.id FROM report r JOIN conversation c ON c.id = r.conversation_id WHERE r.public_id = \(after) AND c.app_id = \(app)
                        """) else { throw ChatError.reportNotFound }
                    filter = filter + " AND r.id > \(key)"
                }
                let rows = try db.fetchAll("""
                    SELECT r.public_id, c.public_id AS conversation FROM report r JOIN conversation c ON c.id = r.conversation_id
                    WHERE c.app_id = \(app) AND \(filter) ORDER BY r.id LIMIT \(limit + 1)
                    """)
                var reports: [Report] = []
                for row in rows.prefix(limit) {
                    let access = try Chat.access(db, caller: server.caller, id: ConversationID(rawValue: try row.get("conversation")), for: .moderate)
                    let reportID: String = try row.get("public_id")
                    reports += try Chat.reports(db, access: access, filter: "r.public_id = \(reportID)", viewer: server.caller, limit: 1)
                }
                return ReportList(reports: reports, hasMore: rows.count > limit)
            }
        }
    }

    /// Open reports in every app and how long the oldest has waited (`/metrics`).
    package func openReports() async throws -> (open: Int, oldestSeconds: Double) {
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                let row = try db.fetchOne("SELECT count(*) AS open, min(created_at) AS oldest FROM report WHERE resolved_at IS NULL")
                let oldest = try row?.get("oldest", as: Int64?.self)
                return (Int(try row?.get("open", as: Int64.self) ?? 0), oldest.map { Double(max(0, now - $0)) / 1000 } ?? 0)
            }
        }
    }
}

extension Chat {
    /// "Until lifted" for bans and moderators' mutes, in milliseconds (9999-12-31T23:59:59Z).
    static let forever: Int64 = 253_402_300_799_000

    // MARK: - On the send path

    /// Refuses a post by a muted member, or one inside slow mode (moderators are exempt).
    static func checkPosting(_ access: Access, now: Int64) throws {
        guard !access.isModerator else { return }
        if let until = access.postingMutedUntil, until > now {
            throw ChatError.memberMuted(until: until >= forever ? nil : WireCoding.formatMilliseconds(until))
        }
        if access.slowModeSeconds > 0, let last = access.lastPostedAt {
            let wait = last + access.slowModeSeconds * 1000 - now
            if wait > 0 {
                throw ChatError.rateLimited(retryAfter: Int((wait + 999) / 1000),
                                            "slow mode: one message per \(access.slowModeSeconds) s here")
            }
        }
    }

    /// Whether a new message of the caller's is a shadow one: their account is shadow-banned,
    /// or the other person of a direct conversation blocked them.
    static func isShadow(_ db: any Database, access: Access) throws -> Bool {
        if access.shadowBanned { return true }
        guard access.kind == .direct else { return false }
        return try db.fetchOne("""
            SELECT 1 FROM member mb JOIN block b ON b.blocker_id = mb.user_id AND b.blocked_id = \(access.userKey)
            WHERE mb.conversation_id = \(access.key) AND mb.user_id != \(access.userKey)
            """) != nil
    }

    /// Refuses joining or adding someone banned (a ban past its end is removed).
    static func refuseBanned(_ db: any Database, conversation: Int64, user: Int64, now: Int64) throws {
        guard let row = try db.fetchOne("SELECT until FROM ban WHERE conversation_id = \(conversation) AND user_id = \(user)") else { return }
        if let until = try row.get("until", as: Int64?.self), until <= now {
            try db.execute("DELETE FROM ban WHERE conversation_id = \(conversation) AND user_id = \(user)")
            return
        }
        let until = try row.get("until", as: Int64?.self)
        throw ChatError.userBanned(until: until.map(WireCoding.formatMilliseconds))
    }

    static func bans(_ db: any Database, conversation: Int64, user: Int64?, now: Int64) throws -> [Ban] {
        let filter: SQL = user.map { "AND b.user_id = \($0)" } ?? ""
        return try db.fetchAll("""
            SELECT u.public_id, u.username, u.display_name, a.public_id AS actor, b.reason, b.until, b.created_at
            FROM ban b JOIN account u ON u.id = b.user_id LEFT JOIN account a ON a.id = b.actor_id
            WHERE b.conversation_id = \(conversation) \(filter) AND (b.until IS NULL OR b.until > \(now))
            ORDER BY b.created_at DESC LIMIT 1000
            """).map { row in
            Ban(user: Sender(id: UserID(rawValue: try row.get("public_id")), username: try row.get("username"), displayName: try row.get("display_name")),
                bannedBy: try row.get("actor", as: String?.self).map(UserID.init(rawValue:)), reason: try row.get("reason"),
                until: try row.get("until", as: Int64?.self).map(date), createdAt: date(try row.get("created_at")))
        }
    }

    /// Owners act on anyone; admins on plain members only (``AccessRules/outranks(_:_:)``).
    static func requireOutranks(_ access: Access, _ target: MemberRole) throws {
        guard AccessRules.outranks(access.standing, target) else {
            throw ChatError.forbidden("only owners, or admins acting on plain members, may do this")
        }
    }

    static func targetUser(_ db: any Database, app: Int64, id: UserID) throws -> Int64 {
        guard id.rawValue.utf8.count <= 64, let key = try db.fetchValue(Int64.self, """
            SELECT id FROM account WHERE app_id = \(app) AND public_id = \(id.rawValue) AND is_system = 0
            """) else { throw ChatError.userNotFound }
        return key
    }

    static func reports(_ db: any Database, access: Access, filter: SQL, viewer: Caller, limit: Int) throws -> [Report] {
        let rows = try db.fetchAll("""
            SELECT r.public_id AS r_id, r.reason AS r_reason, r.note AS r_note, r.created_at AS r_created_at, r.resolved_at AS r_resolved_at,
                   r.resolution AS r_resolution, r.resolution_note AS r_resolution_note, rb.public_id AS r_resolved_by,
                   p.public_id AS p_id, p.username AS p_username, p.display_name AS p_display_name, \(Chat.messageColumns)
            FROM report r JOIN message m ON m.id = r.message_id JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id
            JOIN account p ON p.id = r.reporter_id LEFT JOIN account rb ON rb.id = r.resolved_by
            WHERE r.conversation_id = \(access.key) AND \(filter) ORDER BY r.id LIMIT \(limit)
            """)
        return try rows.map { row in
            let resolvedAt = try row.get("r_resolved_at", as: Int64?.self)
            return Report(
                id: try row.get("r_id"), conversationID: access.id, message: try Chat.message(row, caller: viewer.userKey),
                reporter: Sender(id: UserID(rawValue: try row.get("p_id")), username: try row.get("p_username"), displayName: try row.get("p_display_name")),
                reason: ReportReason(rawValue: try row.get("r_reason")) ?? .other, note: try row.get("r_note"), createdAt: date(try row.get("r_created_at")),
                state: resolvedAt == nil ? "open" : "resolved", resolvedBy: try row.get("r_resolved_by", as: String?.self).map(UserID.init(rawValue:)),
                resolvedAt: resolvedAt.map(date), resolution: try row.get("r_resolution", as: String?.self).flatMap(ReportResolution.init(rawValue:)),
                resolutionNote: try row.get("r_resolution_note"))
        }
    }
}
