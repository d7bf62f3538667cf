import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

/// A conversation as one caller stands in it, read inside a transaction: what the paths that
/// act on it need, and the caller's ``Standing``, which ``require(_:)`` asks ``AccessRules`` about.
struct Access {
    var key: Int64
    var id: ConversationID
    var kind: ConversationKind
    var role: MemberRole?
    /// The conversation's last seq. A send's access read ahead of its batch
    /// (``Chat/sendDeclaration(_:to:clientID:)``) may be behind sends before it in the batch:
    /// nothing a send does reads it.
    var lastSeq: Int64
    var memberCount: Int
    /// The caller's names, for the sender of a message they send.
    var callerUsername: String
    var callerDisplayName: String
    /// Who the caller is here.
    var standing: Standing
    /// When the caller's ban ends (milliseconds; nil: until lifted), for ``Standing/banned``.
    var bannedUntil: Int64?
    /// The caller's key.
    var userKey: Int64 = 0
    /// Slow mode, seconds (0: off).
    var slowModeSeconds: Int64 = 0
    /// A moderator's mute of the caller (milliseconds), if any.
    var postingMutedUntil: Int64?
    /// When the caller last posted here (milliseconds).
    var lastPostedAt: Int64?
    /// The caller's account is shadow-banned.
    var shadowBanned = false
    /// The caller's profile photo (public attachment id).
    var callerPhoto: String?
    /// Whether the caller already sent a message with the client id a send gave
    /// ``Chat/access(_:caller:id:for:now:sending:)`` (found in the same read, so a send that is
    /// not a retry reads nothing more to know it).
    var sentBefore = false
    /// The caller's watermarks here, read with the rest (nil when not a member): a receipt
    /// moves them from these without reading them again (one round trip fewer on PostgreSQL).
    var watermarks: (delivered: Int64, read: Int64)?

    /// The app's backend (``Caller/actsAsApp``): it may do what an owner may, member or not.
    var asApp: Bool { standing == .app }

    /// Owners and admins of groups and channels, and the app: those who moderate.
    var isModerator: Bool { AccessRules.decide(.moderate, in: kind, as: standing) == .allow }

    /// Throws the documented refusal unless the caller may do `action` here (docs/access.md).
    func require(_ action: ConversationAction) throws {
        if let refusal = AccessRules.decide(action, in: kind, as: standing).error(bannedUntil: bannedUntil) { throw refusal }
    }

    /// Whether the caller may do `action` here.
    func may(_ action: ConversationAction) -> Bool { AccessRules.decide(action, in: kind, as: standing) == .allow }
}

extension Chat {
    // MARK: - Create and read

    /// Creates a conversation, or for `direct` finds the existing one with that person.
    ///
    /// - Returns: the conversation and whether it was created by this call.
    /// - Throws: 400 for a direct conversation without exactly one other person or a channel
    ///   without a title; 404 `user_not_found` naming unknown usernames.
    package func createConversation(_ caller: Caller, _ request: CreateConversationRequest) async throws -> (Conversation, created: Bool) {
        let names = request.members ?? []
        let (title, customData) = try Chat.validate(request)
        switch request.kind {
        case .direct:
            guard names.count == 1 else { throw ChatError.invalid("a direct conversation names exactly one other member") }
            guard title == nil else { throw ChatError.invalid("a direct conversation has no title") }
        case .public, .private:
            guard title != nil else { throw ChatError.invalid("a channel needs a title") }
        case .group:
            break
        }
        let now = nowMilliseconds
        let publicID = Crypto.randomID(prefix: "c_")
        return try await run {
            try await write { db in
                let (keys, resolved) = try Chat.resolve(db, app: caller.appID, usernames: names)
                guard resolved.invalidUsernames.isEmpty else { throw ChatError.usersNotFound(resolved.invalidUsernames) }
                let others = keys.filter { $0 != caller.userKey }
                if request.kind == .direct {
                    guard let peer = others.first else { throw ChatError.invalid("a direct conversation is with someone else") }
                    let directKey = "\(min(caller.userKey, peer)):\(max(caller.userKey, peer))"
                    if let existing = try db.fetchValue(Int64.self, "SELECT id FROM conversation WHERE app_id = \(caller.appID) AND direct_key = \(directKey)") {
                        return (try Chat.view(db, key: existing, caller: caller), false)
                    }
                    let key = try Chat.insertConversation(db, app: caller.appID, publicID: publicID, kind: .direct, title: nil,
                                                          customData: customData, directKey: directKey, creator: caller.userKey,
                                                          members: [(caller.userKey, .member), (peer, .member)], now: now)
                    return (try Chat.view(db, key: key, caller: caller), true)
                }
                let capacity = request.kind == .public ? Limits.channelMembers : Limits.groupMembers
                guard others.count + 1 <= capacity else { throw ChatError.invalid("a \(request.kind.rawValue) conversation holds at most \(capacity) members") }
                try Chat.refuseBlockingAdder(db, adder: caller, users: others)
                let key = try Chat.insertConversation(db, app: caller.appID, publicID: publicID, kind: request.kind, title: title,
                                                      customData: customData, directKey: nil, creator: caller.userKey,
                                                      members: [(caller.userKey, .owner)] + others.map { ($0, .member) }, now: now)
                return (try Chat.view(db, key: key, caller: caller), true)
            }
        }
    }

    /// The caller's conversations: pinned ones first (by rank), then the rest by newest
    /// activity, leaving out archived ones; with `archived`, only the archived ones, by newest
    /// activity. `before` is the previous page's `nextCursor`. `fields` keeps those whose custom
    /// data has each name at that value (top-level strings, numbers and booleans, compared as
    /// text: `1` matches `1` and `"1"`).
    package func listConversations(_ caller: Caller, limit: Int?, before cursor: String?, fields: [String: String] = [:],
                                   archived: Bool = false) async throws -> ConversationPage {
        let limit = try Validate.limit(limit, in: Limits.conversationPage, default: 30)
        guard fields.count <= 4 else { throw ChatError.invalid("filter by at most 4 customData fields") }
        for (name, value) in fields {
            guard (1...64).contains(name.utf8.count) else { throw ChatError.invalid("a customData field's name is 1–64 bytes") }
            guard value.utf8.count <= 1_000 else { throw ChatError.invalid("customData.\(name) is at most 1,000 bytes") }
        }
        let filter: SQL = fields.sorted { $0.key < $1.key }.reduce("") { sql, field in
            sql + " AND EXISTS (SELECT 1 FROM conversation_field f WHERE f.conversation_id = c.id AND f.name = \(field.key) AND f.value = \(field.value))"
        }
        // A cursor is a position (in the unpinned part) or `p` and a rank (in the pinned part).
        var position = Int64.max
        var rank: Int64? = archived ? nil : Int64.min
        if let cursor {
            if !archived, cursor.hasPrefix("p"), let after = Int64(cursor.dropFirst()) {
                rank = after
            } else if let at = Int64(cursor), at > 0 {
                position = at
                rank = nil
            } else {
                throw ChatError.invalid("before must be a nextCursor from a previous page")
            }
        }
        let (before, afterRank) = (position, rank)
        let now = Chat.nowWallClock
        let place: SQL = archived ? "AND \(Chat.archivedSQL(now: now))" : "AND mb.pinned_rank IS NULL AND NOT \(Chat.archivedSQL(now: now))"
        let shards = logShards
        return try await run {
            try await store.read { db in
                let live = try EventLog.committedCursor(db, shards: shards)
                var conversations: [Conversation] = []
                var next: String?
                if let afterRank {
                    let pinned: [(key: Int64, rank: Int64)] = try db.fetchAll("""
                        SELECT c.id, mb.pinned_rank FROM member mb JOIN conversation c ON c.id = mb.conversation_id
                        WHERE mb.user_id = \(caller.userKey) AND mb.pinned_rank IS NOT NULL AND mb.pinned_rank > \(afterRank) \(filter)
                        ORDER BY mb.pinned_rank, c.id LIMIT \(limit + 1)
                        """).map { (try $0.get("id"), try $0.get("pinned_rank")) }
                    conversations = try pinned.prefix(limit).map { try Chat.view(db, key: $0.key, caller: caller) }
                    if conversations.count == limit, let last = pinned.prefix(limit).last {
                        let others = try db.fetchAll("""
                            SELECT c.id FROM member mb JOIN conversation c ON c.id = mb.conversation_id
                            WHERE mb.user_id = \(caller.userKey) \(place) \(filter) LIMIT 1
                            """)
                        let more = pinned.count > limit || !others.isEmpty
                        return ConversationPage(conversations: conversations, nextCursor: more ? "p\(last.rank)" : nil, liveCursor: live)
                    }
                }
                let room = limit - conversations.count
                let keys: [Int64] = try db.fetchAll("""
                    SELECT c.id FROM member mb JOIN conversation c ON c.id = mb.conversation_id
                    WHERE mb.user_id = \(caller.userKey) AND c.last_position < \(before) \(place) \(filter)
                    ORDER BY c.last_position DESC LIMIT \(room + 1)
                    """).map { try $0.get("id") }
                let rest = try keys.prefix(room).map { try Chat.view(db, key: $0, caller: caller) }
                if keys.count > room { next = rest.last.map { String($0.lastPosition) } }
                return ConversationPage(conversations: conversations + rest, nextCursor: next, liveCursor: live)
            }
        }
    }

    /// The app's public channels whose title starts with `query`, by title: those the caller
    /// may see (docs/access.md: not the ones they are banned from). `offset` and `nextOffset`
    /// count every matching channel, seen or not, so pages neither skip nor repeat one.
    package func listChannels(_ caller: Caller, query: String, limit: Int?, offset: Int?) async throws -> ChannelPage {
        let limit = try Validate.limit(limit, in: Limits.conversationPage, default: 30)
        let offset = offset ?? 0
        guard (0...Limits.maxOffset).contains(offset) else { throw ChatError.invalid("offset must be 0–\(Limits.maxOffset)") }
        guard query.unicodeScalars.count <= Limits.title.upperBound else { throw ChatError.invalid("query must be at most 128 characters") }
        let prefix = query.trimmingCharacters(in: .whitespaces).lowercased()
        let upper = prefix + "\u{10FFFF}"
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                // Read a batch at a time past the channels the caller may not see, keeping each
                // seen one's place so the next page starts right after the last one shown.
                var seen: [(key: Int64, place: Int)] = []
                var place = offset
                while seen.count <= limit {
                    let rows = try db.fetchAll("""
                        SELECT c.id, mb.role, b.user_id AS ban_user, b.until AS ban_until FROM conversation c
                        LEFT JOIN member mb ON mb.conversation_id = c.id AND mb.user_id = \(caller.userKey)
                        LEFT JOIN ban b ON b.conversation_id = c.id AND b.user_id = \(caller.userKey)
                        WHERE c.app_id = \(caller.appID) AND c.kind = 'public' AND c.title_key >= \(prefix) AND c.title_key < \(upper)
                        ORDER BY c.title_key, c.id LIMIT \(limit + 1) OFFSET \(place)
                        """)
                    for row in rows where seen.count <= limit {
                        let standing = try Chat.standing(row, caller: caller, now: now)
                        if AccessRules.decide(.see, in: .public, as: standing) == .allow { seen.append((try row.get("id"), place)) }
                        place += 1
                    }
                    if rows.count <= limit { break }
                }
                let channels = try seen.prefix(limit).map { try Chat.view(db, key: $0.key, caller: caller) }
                return ChannelPage(channels: channels, nextOffset: seen.count > limit ? seen[limit].place : nil)
            }
        }
    }

    /// One conversation as the caller sees it.
    ///
    /// - Throws: 404 `conversation_not_found` unless the caller is a member (or it is a public channel).
    package func conversation(_ caller: Caller, id: ConversationID) async throws -> Conversation {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .see)
                return try Chat.view(db, key: access.key, caller: caller)
            }
        }
    }

    /// Changes the title, custom data, slow mode or retention, each as docs/access.md allows
    /// (owners and admins; in a direct conversation either person may change custom data, and
    /// only the app's backend the retention).
    package func updateConversation(_ caller: Caller, id: ConversationID, _ request: UpdateConversationRequest) async throws -> Conversation {
        let title = try request.title.map(Validate.title)
        let customData = try request.customData.map { try Validate.customData($0) }
        if let slow = request.slowModeSeconds, !(0...3600).contains(slow) { throw ChatError.invalid("slowModeSeconds must be 0–3600") }
        if let days = request.retentionDays, !(-1...36_500).contains(days) {
            throw ChatError.invalid("retentionDays must be 1–36500, 0 (keep forever) or -1 (the app's policy)")
        }
        let now = nowMilliseconds
        return try await run {
            try await write { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .see)
                var actions: [ConversationAction] = []
                if title != nil { actions.append(.changeTitle) }
                if customData != nil { actions.append(.changeCustomData) }
                if request.slowModeSeconds != nil { actions.append(.changeSlowMode) }
                if request.retentionDays != nil { actions.append(.changeRetention) }
                // An empty change is held to the least of them, as a change of custom data.
                for action in actions.isEmpty ? [.changeCustomData] : actions { try access.require(action) }
                if let title { try db.execute("UPDATE conversation SET title = \(title), title_key = \(title.lowercased()) WHERE id = \(access.key)") }
                if let customData {
                    try db.execute("UPDATE conversation SET custom_data = \(customData) WHERE id = \(access.key)")
                    try Chat.writeFields(db, conversation: access.key, customData: try JSONValue.decode(customData))
                }
                if let slow = request.slowModeSeconds {
                    try db.execute("UPDATE conversation SET slow_mode_seconds = \(Int64(slow)) WHERE id = \(access.key)")
                }
                var payload = EventPayload()
                payload.title = title
                payload.customDataJSON = customData
                payload.slowModeSeconds = request.slowModeSeconds
                if let days = request.retentionDays {
                    try db.execute("UPDATE conversation SET retention_days = \(days < 0 ? nil : Int64(days)) WHERE id = \(access.key)")
                    payload.retentionDays = max(days, 0)
                }
                try db.append(conversation: access.key, kind: .conversationUpdated, actor: caller.userKey, payload: payload, now: now)
                return try Chat.view(db, key: access.key, caller: caller)
            }
        }
    }

    // MARK: - Membership

    /// Joins a public channel (no-op if already a member).
    ///
    /// - Throws: 404 for anything but a public channel the caller is not in.
    package func join(_ caller: Caller, id: ConversationID) async throws -> Conversation {
        let now = nowMilliseconds
        return try await run {
            try await write { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .join, now: now)
                if access.role == nil {
                    try Chat.refuseBanned(db, conversation: access.key, user: caller.userKey, now: now)
                    guard access.memberCount < Limits.channelMembers else { throw ChatError.conflict("the channel is full") }
                    try Chat.addMember(db, conversation: access.key, user: caller.userKey, role: .member, actor: caller.userKey, now: now)
                }
                return try Chat.view(db, key: access.key, caller: caller)
            }
        }
    }

    /// Adds people by username (owners and admins; only owners may add admins).
    ///
    /// - Returns: the members added (people already in are skipped).
    /// - Throws: 404 `user_not_found` naming unknown usernames (nobody is added then).
    package func addMembers(_ caller: Caller, id: ConversationID, _ request: AddMembersRequest) async throws -> MemberList {
        try Validate.names(request.usernames, field: "usernames")
        let role = request.role ?? .member
        guard role != .owner else { throw ChatError.invalid("add people as member or admin; promote to owner afterwards") }
        let now = nowMilliseconds
        return try await run {
            try await write { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .addMembers)
                if role == .admin, !AccessRules.outranks(access.standing, .admin) { throw ChatError.forbidden("only owners may add admins") }
                let (keys, resolved) = try Chat.resolve(db, app: caller.appID, usernames: request.usernames)
                guard resolved.invalidUsernames.isEmpty else { throw ChatError.usersNotFound(resolved.invalidUsernames) }
                var added: [Int64] = []
                for key in keys where try db.fetchOne("SELECT 1 FROM member WHERE conversation_id = \(access.key) AND user_id = \(key)") == nil {
                    try Chat.refuseBanned(db, conversation: access.key, user: key, now: now)
                    added.append(key)
                }
                try Chat.refuseBlockingAdder(db, adder: caller, users: added)
                let capacity = access.kind == .public ? Limits.channelMembers : Limits.groupMembers
                guard access.memberCount + added.count <= capacity else {
                    throw ChatError.conflict("a \(access.kind.rawValue) conversation holds at most \(capacity) members")
                }
                for key in added {
                    try Chat.addMember(db, conversation: access.key, user: key, role: role, actor: caller.userKey, now: now)
                }
                return MemberList(members: try added.map { try Chat.member(db, conversation: access.key, user: $0) })
            }
        }
    }

    /// Removes a member; removing oneself is leaving.
    ///
    /// - Throws: 403 when the caller does not outrank the member or the conversation is
    ///   direct; 409 when the last owner would leave others behind; 404 `user_not_found` for
    ///   someone who is not a member.
    package func removeMember(_ caller: Caller, id: ConversationID, user: UserID) async throws {
        let now = nowMilliseconds
        try await run {
            try await write { db in
                let access = try Chat.access(db, caller: caller, id: id, for: user == caller.userID ? .leave : .removeMembers)
                guard let target = try db.fetchOne("""
                    SELECT mb.user_id, mb.role FROM member mb JOIN account u ON u.id = mb.user_id
                    WHERE mb.conversation_id = \(access.key) AND u.public_id = \(user.rawValue)
                    """) else { throw ChatError.userNotFound }
                let targetKey: Int64 = try target.get("user_id")
                let targetRole = try Chat.stored(try target.get("role"), as: MemberRole.self)
                if targetKey != caller.userKey {
                    guard AccessRules.outranks(access.standing, targetRole) else {
                        throw ChatError.forbidden("only owners, or admins removing plain members, may remove someone")
                    }
                } else if targetRole == .owner, access.memberCount > 1 {
                    let owners = try db.fetchValue(Int.self, "SELECT count(*) FROM member WHERE conversation_id = \(access.key) AND role = 'owner'") ?? 0
                    if owners == 1 { throw ChatError.conflict("you are the last owner; make another member owner before leaving") }
                }
                try db.execute("DELETE FROM member WHERE conversation_id = \(access.key) AND user_id = \(targetKey)")
                try db.execute("UPDATE conversation SET member_count = member_count - 1 WHERE id = \(access.key)")
                try db.append(conversation: access.key, kind: .memberRemoved, actor: caller.userKey, user: targetKey, now: now)
            }
        }
    }

    /// Changes a member's role (owners only).
    ///
    /// - Throws: 409 when that would leave no owner.
    package func updateMember(_ caller: Caller, id: ConversationID, user: UserID, _ request: UpdateMemberRequest) async throws -> Member {
        let now = nowMilliseconds
        return try await run {
            try await write { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .changeRoles)
                guard let target = try db.fetchOne("""
                    SELECT mb.user_id, mb.role FROM member mb JOIN account u ON u.id = mb.user_id
                    WHERE mb.conversation_id = \(access.key) AND u.public_id = \(user.rawValue)
                    """) else { throw ChatError.userNotFound }
                let targetKey: Int64 = try target.get("user_id")
                if try target.get("role", as: String.self) == MemberRole.owner.rawValue, request.role != .owner {
                    let owners = try db.fetchValue(Int.self, "SELECT count(*) FROM member WHERE conversation_id = \(access.key) AND role = 'owner'") ?? 0
                    if owners == 1 { throw ChatError.conflict("a conversation needs an owner; promote someone else first") }
                }
                try db.execute("UPDATE member SET role = \(request.role.rawValue) WHERE conversation_id = \(access.key) AND user_id = \(targetKey)")
                try db.append(conversation: access.key, kind: .memberUpdated, actor: caller.userKey, user: targetKey, role: request.role, now: now)
                return try Chat.member(db, conversation: access.key, user: targetKey)
            }
        }
    }

    /// Members by join order, a page at a time.
    package func members(_ caller: Caller, id: ConversationID, limit: Int?, offset: Int?) async throws -> MemberList {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 100)
        let offset = offset ?? 0
        guard offset >= 0 else { throw ChatError.invalid("offset must not be negative") }
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let keys: [Int64] = try db.fetchAll("""
                    SELECT user_id FROM member WHERE conversation_id = \(access.key) ORDER BY joined_at, user_id LIMIT \(limit) OFFSET \(offset)
                    """).map { try $0.get("user_id") }
                return MemberList(members: try keys.map { try Chat.member(db, conversation: access.key, user: $0) })
            }
        }
    }

    // MARK: - Inside a transaction

    /// Finds a conversation and the caller's standing in it, and requires that they may do
    /// `action` there (docs/access.md): anyone who may not see it — outside a public channel,
    /// anyone not a member — gets the 404 `conversation_not_found` of an id that does not
    /// exist; a path that does more than `action` asks ``Access/require(_:)`` for each.
    ///
    /// `now` (milliseconds) decides whether a ban has ended, the wall clock by default.
    ///
    /// `sending` (a send's client id) also asks whether the caller sent it before
    /// (``Access/sentBefore``), in the same statement.
    static func access(_ db: any Database, caller: Caller, id: ConversationID, for action: ConversationAction,
                       now: Int64? = nil, sending clientID: String? = nil) throws -> Access {
        guard let statement = accessStatement(caller: caller, id: id, sending: clientID),
              let row = try db.fetchOne(statement) else { throw ChatError.conversationNotFound }
        return try access(row, db, caller: caller, id: id, for: action, now: now)
    }

    /// The statement of ``access(_:caller:id:for:now:sending:)``, for a write that declares it
    /// (``WriteDeclaration``); nil when the id cannot name a conversation.
    static func accessStatement(caller: Caller, id: ConversationID, sending clientID: String? = nil) -> SQL? {
        guard id.rawValue.utf8.count <= 64 else { return nil }
        let earlier: SQL = clientID.map { "(SELECT 1 FROM message WHERE author_id = \(caller.userKey) AND client_id = \($0))" } ?? "NULL"
        return """
            SELECT \(accessColumns), \(earlier) AS sent_before
            FROM conversation c
            JOIN account u ON u.id = \(caller.userKey)
            LEFT JOIN member mb ON mb.conversation_id = c.id AND mb.user_id = \(caller.userKey)
            LEFT JOIN ban b ON b.conversation_id = c.id AND b.user_id = \(caller.userKey)
            WHERE c.public_id = \(id.rawValue) AND c.app_id = \(caller.appID) AND c.kind <> 'pusher'
            """
    }

    /// The access read of ``access(_:caller:id:for:now:sending:)`` for several callers of one
    /// app in one conversation, in one statement, a row per caller found
    /// (``accesses(_:_:callers:id:for:now:)`` reads them). The receipts' write reads its members
    /// this way (decision 0026, part 3): one read per conversation instead of one per member,
    /// all of them sent together (``Database/fetchEach(_:)``). Each caller must be a different
    /// user: a row is a user's. Nil when the id cannot name a conversation.
    static func accessesStatement(callers: [Caller], id: ConversationID) throws -> SQL? {
        guard let app = callers.first?.appID, callers.allSatisfy({ $0.appID == app }),
              Set(callers.map(\.userKey)).count == callers.count else { throw ChatError.internalError }
        guard id.rawValue.utf8.count <= 64 else { return nil }
        return """
            SELECT \(accessColumns), NULL AS sent_before, u.id AS caller_key
            FROM conversation c
            JOIN account u ON u.id IN (\(list: callers.map(\.userKey)))
            LEFT JOIN member mb ON mb.conversation_id = c.id AND mb.user_id = u.id
            LEFT JOIN ban b ON b.conversation_id = c.id AND b.user_id = u.id
            WHERE c.public_id = \(id.rawValue) AND c.app_id = \(app) AND c.kind <> 'pusher'
            """
    }

    /// Each caller's access from the rows of ``accessesStatement(callers:id:)``, or the error
    /// their own read would have thrown, in the callers' order.
    static func accesses(_ rows: [Row], _ db: any Database, callers: [Caller], id: ConversationID, for action: ConversationAction,
                         now: Int64? = nil) throws -> [Result<Access, ChatError>] {
        var byCaller: [Int64: Row] = [:]
        for row in rows { byCaller[try row.get("caller_key", as: Int64.self)] = row }
        return try callers.map { caller in
            guard let row = byCaller[caller.userKey] else { return .failure(.conversationNotFound) }
            do {
                return .success(try access(row, db, caller: caller, id: id, for: action, now: now))
            } catch let refused as ChatError {
                return .failure(refused)
            }
        }
    }

    /// What every access read selects, `c` the conversation, `u` the caller's account, `mb`
    /// their member row and `b` their ban (both left joins).
    private static let accessColumns: SQL = """
        c.id, c.kind, mb.role, c.last_seq, c.member_count, u.username, u.display_name, c.slow_mode_seconds,
        mb.posting_muted_until, mb.last_posted_at, mb.delivered_seq, mb.read_seq, u.shadow_banned_at, u.photo_public,
        b.user_id AS ban_user, b.until AS ban_until,
        EXISTS (SELECT 1 FROM webhook_endpoint w WHERE w.app_id = c.app_id AND w.format = 'parley') AS app_webhooks
        """

    /// The caller's access from a row of ``accessColumns`` and `sent_before`, required to
    /// allow `action`.
    private static func access(_ row: Row, _ db: any Database, caller: Caller, id: ConversationID, for action: ConversationAction,
                               now: Int64?) throws -> Access {
        let kind = try stored(try row.get("kind"), as: ConversationKind.self)
        let role = try row.get("role", as: String?.self).map { try stored($0, as: MemberRole.self) }
        let access = Access(key: try row.get("id"), id: id, kind: kind, role: role, lastSeq: try row.get("last_seq"),
                            memberCount: try row.get("member_count"), callerUsername: try row.get("username"),
                            callerDisplayName: try row.get("display_name"),
                            standing: try standing(row, caller: caller, now: now ?? nowWallClock),
                            bannedUntil: try row.get("ban_until", as: Int64?.self),
                            userKey: caller.userKey, slowModeSeconds: try row.get("slow_mode_seconds"),
                            postingMutedUntil: try row.get("posting_muted_until"), lastPostedAt: try row.get("last_posted_at"),
                            shadowBanned: try row.get("shadow_banned_at", as: Int64?.self) != nil, callerPhoto: try row.get("photo_public"),
                            sentBefore: try row.get("sent_before", as: Int64?.self) != nil,
                            watermarks: try row.get("delivered_seq", as: Int64?.self).map { (delivered: $0, read: try row.get("read_seq", as: Int64.self)) })
        // A write learns here, in its own transaction, whether the app has endpoints its
        // events could reach, so the webhook hook writes and wakes nothing when it has none.
        if let transaction = db as? Transaction { transaction.noteWebhooks(conversation: access.key, present: try row.get("app_webhooks", as: Bool.self)) }
        try access.require(.see)
        try access.require(action)
        return access
    }

    /// The caller's standing from a row with their `role` and their ban's `ban_user` and
    /// `ban_until` (left joins: null when none).
    static func standing(_ row: Row, caller: Caller, now: Int64) throws -> Standing {
        let role = try row.get("role", as: String?.self).map { try stored($0, as: MemberRole.self) }
        let banned = try row.get("ban_user", as: Int64?.self) != nil && (try row.get("ban_until", as: Int64?.self)).map { $0 > now } ?? true
        return Standing(role: role, asApp: caller.actsAsApp, isBanned: banned)
    }

    /// The wall clock in milliseconds, where no `now` was passed in.
    static var nowWallClock: Int64 { milliseconds(TestClock.now()) }

    /// Creates a conversation with its first members. Their `member.added` events come first
    /// and `conversation.created` last, so every first member receives the creation (a member
    /// receives a conversation's events from their own `member.added` on).
    static func insertConversation(_ db: Transaction, app: Int64, publicID: String, kind: ConversationKind, title: String?,
                                   customData: String?, directKey: String?, creator: Int64, members: [(Int64, MemberRole)],
                                   now: Int64) throws -> Int64 {
        guard let key = try db.fetchValue(Int64.self, """
            INSERT INTO conversation (app_id, public_id, kind, title, title_key, custom_data, direct_key, created_by, created_at, shard)
            VALUES (\(app), \(publicID), \(kind.rawValue), \(title), \(title?.lowercased()), \(customData), \(directKey), \(creator), \(now),
                    \(Int64(Chat.shard(of: publicID, shards: db.logShards))))
            RETURNING id
            """) else { throw ChatError.internalError }
        if let customData { try writeFields(db, conversation: key, customData: try JSONValue.decode(customData)) }
        for (user, role) in members {
            try addMember(db, conversation: key, user: user, role: role, actor: creator, now: now)
        }
        try db.append(conversation: key, kind: .conversationCreated, actor: creator, now: now)
        return key
    }

    /// Refuses to put anyone who blocked `adder` into a conversation by `adder`'s hand
    /// (decision 0027): the same 403 whoever it is, naming nobody's block. The app's backend
    /// adds whom it likes.
    static func refuseBlockingAdder(_ db: any Database, adder: Caller, users: [Int64]) throws {
        guard !adder.actsAsApp, !users.isEmpty, try db.fetchOne("""
            SELECT 1 FROM block WHERE blocked_id = \(adder.userKey) AND blocker_id IN (\(list: users)) LIMIT 1
            """) != nil else { return }
        throw ChatError.forbidden("you cannot add one of these people to a conversation")
    }

    static func addMember(_ db: Transaction, conversation: Int64, user: Int64, role: MemberRole, actor: Int64, now: Int64) throws {
        // A newcomer has "read" nothing but is not behind on history from before they joined:
        // their watermarks start at the current seq, so unread counts start at zero.
        try db.execute("""
            INSERT INTO member (conversation_id, user_id, role, joined_at, delivered_seq, read_seq)
            SELECT \(conversation), \(user), \(role.rawValue), \(now), last_seq, last_seq FROM conversation WHERE id = \(conversation)
            """)
        try db.execute("UPDATE conversation SET member_count = member_count + 1 WHERE id = \(conversation)")
        let (_, position) = try db.append(conversation: conversation, kind: .memberAdded, actor: actor, user: user, role: role, now: now)
        try db.execute("UPDATE member SET joined_position = \(position) WHERE conversation_id = \(conversation) AND user_id = \(user)")
    }

    /// A conversation as `caller` sees it, with last message, unread count and peer.
    static func view(_ db: any Database, key: Int64, caller: Caller) throws -> Conversation {
        guard let row = try db.fetchOne("""
            SELECT c.public_id, c.kind, c.title, c.custom_data, c.created_at, c.last_seq, c.last_position, c.last_message_id,
                   c.member_count, mb.role, mb.delivered_seq, mb.read_seq, mb.muted_until, mb.push_level, c.slow_mode_seconds,
                   coalesce(c.retention_days, (SELECT a.retention_days FROM app a WHERE a.id = c.app_id)) AS retention_days,
                   c.photo_public, b.user_id AS ban_user, b.until AS ban_until, mb.pinned_rank,
                   CASE WHEN \(archivedSQL(now: nowWallClock)) THEN 1 ELSE 0 END AS archived,
                   CASE WHEN \(markedUnreadSQL) THEN 1 ELSE 0 END AS marked_unread,
                   d.text AS draft_text, d.client_id AS draft_client_id, d.updated_at AS draft_updated_at
            FROM conversation c LEFT JOIN member mb ON mb.conversation_id = c.id AND mb.user_id = \(caller.userKey)
            LEFT JOIN draft d ON d.user_id = mb.user_id AND d.conversation_id = c.id AND d.thread_key = 0 AND d.text != ''
                 AND (d.client_id IS NULL OR NOT EXISTS (SELECT 1 FROM message dm WHERE dm.author_id = d.user_id AND dm.client_id = d.client_id))
            LEFT JOIN ban b ON b.conversation_id = c.id AND b.user_id = \(caller.userKey)
            WHERE c.id = \(key)
            """) else { throw ChatError.conversationNotFound }
        let id = ConversationID(rawValue: try row.get("public_id"))
        let kind = try stored(try row.get("kind"), as: ConversationKind.self)
        let role = try row.get("role", as: String?.self).map { try stored($0, as: MemberRole.self) }
        var receipt: Receipt?
        var unread = 0
        if role != nil {
            let readSeq: Int64 = try row.get("read_seq")
            receipt = Receipt(userID: caller.userID, deliveredSeq: try row.get("delivered_seq"), readSeq: readSeq)
            unread = try db.fetchValue(Int.self, """
                SELECT count(*) FROM (SELECT 1 FROM message WHERE conversation_id = \(key) AND seq > \(readSeq)
                AND author_id != \(caller.userKey) AND deleted_at IS NULL AND in_conversation = 1 AND shadow = 0
                AND \(notBlockedBy(caller.userKey, "message")) LIMIT \(Limits.unreadCountCap)) AS unread
                """) ?? 0
        }
        var lastMessage: Message?
        if AccessRules.decide(.read, in: kind, as: try standing(row, caller: caller, now: nowWallClock)) == .allow,
           let messageKey = try row.get("last_message_id", as: Int64?.self),
           let messageRow = try db.fetchOne("SELECT \(messageColumns) \(messageJoins) WHERE m.id = \(messageKey)") {
            let author: Int64 = try messageRow.get("m_author_key")
            let blocked = try author != caller.userKey && db.fetchOne("""
                SELECT 1 FROM block WHERE blocker_id = \(caller.userKey) AND blocked_id = \(author)
                """) != nil
            let hiding: Set<Int64> = blocked ? [author] : []
            let lowest = author == caller.userKey ? try lowestWatermarks(db, conversation: key, kind: kind, except: caller.userKey) : nil
            lastMessage = try message(messageRow, caller: caller.userKey, lowest: lowest, hiding: hiding)
        }
        var peer: User?
        if kind == .direct, let peerRow = try db.fetchOne("""
            SELECT \(userColumns) FROM member mb JOIN account u ON u.id = mb.user_id WHERE mb.conversation_id = \(key) AND mb.user_id != \(caller.userKey)
            """) {
            peer = try user(peerRow)
        }
        var conversation = Conversation(
            id: id, kind: kind, title: try row.get("title"), customData: try row.get("custom_data", as: String?.self).map(JSONValue.decode),
            createdAt: date(try row.get("created_at")), lastSeq: try row.get("last_seq"), lastPosition: try row.get("last_position"),
            lastMessage: lastMessage, memberCount: try row.get("member_count"), role: role, unreadCount: unread, receipt: receipt, peer: peer,
            mutedUntil: try row.get("muted_until", as: Int64?.self).map(date))
        conversation.slowModeSeconds = try row.get("slow_mode_seconds", as: Int64.self) > 0 ? Int(try row.get("slow_mode_seconds", as: Int64.self)) : nil
        conversation.retentionDays = try row.get("retention_days", as: Int64?.self).flatMap { $0 > 0 ? Int($0) : nil }
        conversation.photoURL = avatarURL(try row.get("photo_public"))
        if role != nil {
            conversation.notifications = try row.get("push_level", as: String?.self).flatMap(NotificationLevel.init(rawValue:)) ?? .default(for: kind)
            conversation.pinnedRank = try row.get("pinned_rank", as: Int64?.self).map(Int.init)
            conversation.archived = try row.get("archived", as: Int64.self) == 1 ? true : nil
            conversation.markedUnread = try row.get("marked_unread", as: Int64.self) == 1 ? true : nil
            if let text = try row.get("draft_text", as: String?.self) {
                conversation.draft = Draft(text: text, clientID: try row.get("draft_client_id"), updatedAt: date(try row.get("draft_updated_at")))
            }
        }
        return conversation
    }

    static func member(_ db: any Database, conversation: Int64, user key: Int64) throws -> Member {
        guard let row = try db.fetchOne("""
            SELECT \(userColumns), mb.role, mb.joined_at, mb.delivered_seq, mb.read_seq, mb.posting_muted_until
            FROM member mb JOIN account u ON u.id = mb.user_id WHERE mb.conversation_id = \(conversation) AND mb.user_id = \(key)
            """) else { throw ChatError.userNotFound }
        let user = try user(row)
        var member = Member(user: user, role: try stored(try row.get("role"), as: MemberRole.self), joinedAt: date(try row.get("joined_at")),
                            receipt: Receipt(userID: user.id, deliveredSeq: try row.get("delivered_seq"), readSeq: try row.get("read_seq")))
        member.mutedUntil = try row.get("posting_muted_until", as: Int64?.self).map(date)
        return member
    }

    /// The lowest delivered and read watermarks of everyone but `except`: a message at or
    /// below them has reached (been read by) everyone. In every kind of conversation, so a
    /// message's REST status agrees with what `receipt.updated` (groups) and `delivery.updated`
    /// (public channels: "delivered once every recipient has it") told its author. It reads
    /// every member's row, so callers ask only when a message of `except`'s is being read
    /// (``lowestWatermarksIfNeeded(_:rows:conversation:kind:caller:)``).
    static func lowestWatermarks(_ db: any Database, conversation: Int64, kind: ConversationKind, except: Int64) throws -> (delivered: Int64, read: Int64)? {
        guard let row = try db.fetchOne("""
                SELECT min(delivered_seq) AS delivered, min(read_seq) AS read FROM member
                WHERE conversation_id = \(conversation) AND user_id != \(except)
                """),
              let delivered = try row.get("delivered", as: Int64?.self), let read = try row.get("read", as: Int64?.self) else { return nil }
        return (delivered, read)
    }

    /// ``lowestWatermarks(_:conversation:kind:except:)`` when `rows` (of ``messageColumns``)
    /// hold a message of the caller's, whose status needs them; nil otherwise.
    static func lowestWatermarksIfNeeded(_ db: any Database, rows: some Sequence<Row>, conversation: Int64, kind: ConversationKind,
                                         caller: Int64) throws -> (delivered: Int64, read: Int64)? {
        guard try rows.contains(where: { try $0.get("m_author_key", as: Int64.self) == caller }) else { return nil }
        return try lowestWatermarks(db, conversation: conversation, kind: kind, except: caller)
    }

    /// Keeps `conversation_field` to the conversation's custom data: its top-level strings,
    /// numbers (integers without a decimal point) and booleans, as text; anything else is not
    /// filterable. Replaces what was there.
    static func writeFields(_ db: any Database, conversation: Int64, customData: JSONValue?) throws {
        try db.execute("DELETE FROM conversation_field WHERE conversation_id = \(conversation)")
        guard case .object(let fields)? = customData else { return }
        for (name, value) in fields where (1...64).contains(name.utf8.count) {
            let text: String
            switch value {
            case .string(let string) where string.utf8.count <= 1_000: text = string
            case .number(let number) where number.isFinite:
                text = number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
            case .bool(let flag): text = flag ? "true" : "false"
            default: continue
            }
            try db.execute("INSERT INTO conversation_field (conversation_id, name, value) VALUES (\(conversation), \(name), \(text))")
        }
    }
}
