import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

/// Which page of history to read.
package struct HistoryQuery: Sendable, Hashable {
    /// Messages with a seq below this (older), newest of them first in the page.
    package var before: Int64?
    /// Messages with a seq above this (newer).
    package var after: Int64?
    /// A page centred on this seq (half before it, the rest from it on).
    package var around: Int64?
    /// Page size. Default: 50; 1…200.
    package var limit: Int?
    /// True for oldest-first order in the page. Default: true.
    package var ascending: Bool

    /// A query; the defaults ask for the newest 50, oldest first.
    package init(before: Int64? = nil, after: Int64? = nil, around: Int64? = nil, limit: Int? = nil, ascending: Bool = true) {
        self.before = before
        self.after = after
        self.around = around
        self.limit = limit
        self.ascending = ascending
    }
}

extension Chat {
    // MARK: - Send

    /// Sends a message. A retry with the same `clientId` returns the stored message instead
    /// of storing a second one.
    ///
    /// - Returns: the message and whether this call created it.
    /// - Throws: 400 for invalid content; 403 `not_member` in a public channel not joined;
    ///   404 for a conversation the caller is not in; 409 `client_id_reused` when the client
    ///   id names a different message.
    package func send(_ caller: Caller, to id: ConversationID, _ request: SendMessageRequest) async throws -> (Message, created: Bool) {
        let (record, created) = try await sendRecord(caller, to: id, request)
        return (try record.message(), created)
    }

    /// ``send(_:to:_:)`` answering with the stored record, which the server writes out
    /// without a JSON decode and encode (``MessageRecord/writeJSON(into:)``).
    package func sendRecord(_ caller: Caller, to id: ConversationID, _ request: SendMessageRequest) async throws -> (MessageRecord, created: Bool) {
        var screening = try PreparedMessage(request.clientID, request.content, request.metadata, from: caller)
        let screened = try await screen(caller, conversation: id, clientID: request.clientID, messageID: nil, content: request.content)
        if screened != request.content { try screening.replace(screened) }
        let prepared = screening
        if let replyTo = request.replyTo, replyTo.rawValue.utf8.count > 64 { throw ChatError.invalid("replyTo names no message here") }
        if let root = request.threadID, root.rawValue.utf8.count > 64 { throw ChatError.invalid("threadId names no message here") }
        if request.alsoInConversation == true, request.threadID == nil {
            throw ChatError.invalid("alsoInConversation is for a reply in a thread: give threadId too")
        }
        let now = nowMilliseconds
        let publicID = Crypto.timeOrderedID(prefix: "m_", milliseconds: now)
        let previewLink = linkToPreview(prepared.value, request: request.previewLinks)
        let previewWakeup = configuration.linkPreviewWakeup
        let declaration = declaresReads ? Chat.sendDeclaration(caller, to: id, clientID: prepared.clientID) : nil
        return try await run {
            try await write(in: id, declaring: declaration) { tx -> (MessageRecord, created: Bool) in
                let access = try Chat.access(tx, caller: caller, id: id, for: .post, sending: prepared.clientID)
                var prepared = prepared
                let media = try Chat.bindMedia(tx, caller: caller, prepared: &prepared)
                if access.sentBefore, let (existing, _) = try Chat.existing(tx, caller: caller, prepared: prepared, in: access.key) {
                    return (existing, false)
                }
                try Chat.checkPosting(access, now: now)
                if let replyTo = request.replyTo,
                   try tx.fetchOne("SELECT 1 FROM message WHERE public_id = \(replyTo.rawValue) AND conversation_id = \(access.key)") == nil {
                    throw ChatError.invalid("replyTo names no message in this conversation")
                }
                let thread = try request.threadID.map {
                    try Chat.threadRoot(tx, access: access, id: $0, alsoInConversation: request.alsoInConversation ?? false)
                }
                let shadow = try Chat.isShadow(tx, access: access)
                let message = try Chat.insertMessage(tx, caller: caller, access: access, publicID: publicID, prepared: prepared,
                                                     media: media, replyTo: request.replyTo, thread: thread,
                                                     shadow: shadow, previewLink: shadow ? nil : previewLink,
                                                     previewOff: request.previewLinks == false, now: now)
                if previewLink != nil, !shadow, let wakeup = previewWakeup { tx.onCommit { wakeup.signal() } }
                return (message, true)
            }
        }
    }

    /// What a send declares (decision 0026, part 5): its first read is its access read, which
    /// may be sent ahead with its batch's others. What that read returns that a send changes is
    /// the sender's own: their member row (when they last posted, their marks), their messages
    /// (whether a client id was sent before), their attachments; so a send depends on, and
    /// changes, its sender. It also moves the conversation's last seq, which a send's access
    /// carries but no send reads (``Access/lastSeq``).
    static func sendDeclaration(_ caller: Caller, to id: ConversationID, clientID: String?) -> WriteDeclaration? {
        guard let read = accessStatement(caller: caller, id: id, sending: clientID) else { return nil }
        let sender: Set<String> = ["user:\(caller.userKey)"]
        return WriteDeclaration(reads: [read], dependsOn: sender, changes: sender)
    }

    /// Sends to a set of usernames: the direct conversation for one name, else the group
    /// with exactly those members (created when there is none). Unknown names are reported
    /// and left out.
    ///
    /// - Throws: 404 `user_not_found` when no name matches anyone (nothing is sent).
    package func sendToUsers(_ caller: Caller, _ request: SendToUsersRequest) async throws -> (SendToUsersResponse, created: Bool) {
        var screening = try PreparedMessage(request.clientID, request.content, request.metadata, from: caller)
        let screened = try await screen(caller, conversation: nil, clientID: request.clientID, messageID: nil, content: request.content)
        if screened != request.content { try screening.replace(screened) }
        let prepared = screening
        guard !request.to.isEmpty else { throw ChatError.invalid("to must name at least one username") }
        try Validate.names(request.to, field: "to")
        let now = nowMilliseconds
        let messageID = Crypto.timeOrderedID(prefix: "m_", milliseconds: now)
        let conversationID = Crypto.randomID(prefix: "c_")
        let previewLink = linkToPreview(prepared.value, request: nil)
        let previewWakeup = configuration.linkPreviewWakeup
        return try await run {
            try await write { db in
                let (keys, resolved) = try Chat.resolve(db, app: caller.appID, usernames: request.to)
                let others = keys.filter { $0 != caller.userKey }
                guard !others.isEmpty else {
                    throw resolved.invalidUsernames.isEmpty ? ChatError.invalid("send to someone other than yourself")
                                                            : ChatError.usersNotFound(resolved.invalidUsernames)
                }
                var prepared = prepared
                let media = try Chat.bindMedia(db, caller: caller, prepared: &prepared)
                // A retry of an earlier send returns it, wherever it went.
                if let (existing, key) = try Chat.existing(db, caller: caller, prepared: prepared, in: nil) {
                    let conversation = try Chat.view(db, key: key, caller: caller)
                    return (SendToUsersResponse(message: try existing.message(), conversation: conversation,
                                                invalidUsernames: resolved.invalidUsernames,
                                                note: Chat.note(conversation, others: others.count, invalid: resolved.invalidUsernames)), false)
                }
                let key = try Chat.conversationFor(db, caller: caller, others: others, newID: conversationID, now: now)
                let access = try Chat.access(db, caller: caller, id: ConversationID(rawValue: try db.fetchValue(String.self, "SELECT public_id FROM conversation WHERE id = \(key)") ?? ""),
                                             for: .post)
                try Chat.checkPosting(access, now: now)
                let shadow = try Chat.isShadow(db, access: access)
                let message = try Chat.insertMessage(db, caller: caller, access: access, publicID: messageID, prepared: prepared, media: media,
                                                     replyTo: nil, shadow: shadow, previewLink: shadow ? nil : previewLink, now: now).message()
                if previewLink != nil, !shadow, let wakeup = previewWakeup { db.onCommit { wakeup.signal() } }
                let conversation = try Chat.view(db, key: key, caller: caller)
                return (SendToUsersResponse(message: message, conversation: conversation, invalidUsernames: resolved.invalidUsernames,
                                            note: Chat.note(conversation, others: others.count, invalid: resolved.invalidUsernames)), true)
            }
        }
    }

    /// Where a send to usernames went when some matched nobody, in words (Magnet's semantics,
    /// said plainly: the message went to the chat of the names that exist).
    static func note(_ conversation: Conversation, others: Int, invalid: [String]) -> String? {
        guard !invalid.isEmpty else { return nil }
        let place = conversation.kind == .direct ? "the direct chat with \(conversation.peer?.username ?? "them")"
                                                 : "the group of the \(others + 1) of you who exist"
        return "sent to \(place); not found: \(invalid.joined(separator: ", "))"
    }

    // MARK: - Read

    /// A page of history. Deleted messages appear as tombstones (no content) in their place.
    package func history(_ caller: Caller, id: ConversationID, _ query: HistoryQuery) async throws -> HistoryPage {
        let limit = try Validate.limit(query.limit, in: Limits.historyPage, default: 50)
        guard [query.before, query.after, query.around].compactMap({ $0 }).count <= 1 else {
            throw ChatError.invalid("give at most one of before, after and around")
        }
        for value in [query.before, query.after, query.around].compactMap({ $0 }) where value < 0 {
            throw ChatError.invalid("seq values are not negative")
        }
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                // Replies in a thread only are the thread's (``Threads/replies``), not the conversation's.
                let page = try Chat.historyPage(db, scope: "m.conversation_id = \(access.key) AND m.in_conversation = 1", access: access,
                                                caller: caller, before: query.before, after: query.after, around: query.around, limit: limit)
                if query.ascending { return page }
                return HistoryPage(records: page.records.reversed(), hasOlder: page.hasOlder, hasNewer: page.hasNewer)
            }
        }
    }

    /// One message.
    package func message(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID) async throws -> Message {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let (row, _) = try Chat.messageRow(db, access: access, id: messageID)
                guard let message = try Chat.messages(db, [row], access: access, caller: caller).first else { throw ChatError.messageNotFound }
                return message
            }
        }
    }

    /// The conversation's history as events after `afterSeq`, oldest first (receipt changes,
    /// which take no seq, are only in the feed). Message events carry the message as it is now.
    package func events(_ caller: Caller, conversation id: ConversationID, afterSeq: Int64, limit: Int?) async throws -> EventRecordPage {
        let limit = try Validate.limit(limit, in: Limits.historyPage, default: 100)
        guard afterSeq >= 0 else { throw ChatError.invalid("after must not be negative") }
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let rows = try db.fetchAll("""
                    SELECT \(Chat.eventColumns) FROM event e \(Chat.eventJoins)
                    WHERE e.conversation_id = \(access.key) AND e.seq > \(afterSeq)
                      AND (e.recipient_id IS NULL OR e.recipient_id = \(caller.userKey)) ORDER BY e.seq LIMIT \(limit + 1)
                    """)
                let records = try Chat.storedEvents(db, rows.prefix(limit), viewer: caller.userKey,
                                                    hiding: try Chat.blockedKeys(db, viewer: caller.userKey)).map(\.record)
                return EventRecordPage(records: records, hasMore: rows.count > limit)
            }
        }
    }

    /// Every event after `cursor` that the caller's devices receive, in position order:
    /// what a device that was offline (or a second device of the same account) fetches to
    /// catch up, whatever conversations the changes were in.
    ///
    /// A member receives a conversation's events from the `member.added` that made them a
    /// member up to and including the `member.removed` that ended it, exactly as the live
    /// socket delivers them (docs/protocol.md). An event with one recipient (its kind's
    /// audience, or a shadow message's) goes to that member alone, live and here alike.
    package func feed(_ caller: Caller, after given: LogCursor, limit: Int?) async throws -> EventRecordPage {
        let limit = try Validate.limit(limit, in: Limits.historyPage, default: 100)
        // `0` is the start whatever the number of shards.
        let cursor = given == LogCursor(position: 0) ? LogCursor(shards: logShards) : given
        guard cursor.shards == logShards else {
            throw ChatError.invalid("this server's log has \(logShards) shard\(logShards == 1 ? "" : "s"): after needs one position per shard (it has \(cursor.shards))")
        }
        return try await run {
            try await store.read { db in
                let rows = try Chat.feedRows(db, user: caller.userKey, after: cursor, limit: limit + 1)
                let records = try Chat.storedEvents(db, rows.prefix(limit), viewer: caller.userKey,
                                                    hiding: try Chat.blockedKeys(db, viewer: caller.userKey)).map(\.record)
                return EventRecordPage(records: records, hasMore: rows.count > limit)
            }
        }
    }

    /// Rows of `eventColumns` for ``feed(_:after:limit:)``.
    static func feedRows(_ db: any Database, user: Int64, after cursor: LogCursor, limit: Int) throws -> [Row] {
        // The spans a user sees: each current membership from its join on, and each membership
        // that ended after `cursor` from the join before its removal up to the removal. Then
        // one index range per span (event_by_position), merged by position.
        try db.fetchAll("""
            WITH span (conversation_id, since, until) AS (
                SELECT conversation_id, joined_position, \(Int64.max) FROM member WHERE user_id = \(user)
                UNION ALL
                SELECT r.conversation_id,
                       coalesce((SELECT max(j.position) FROM event j WHERE j.type = 'member.added' AND j.user_id = \(user)
                                 AND j.conversation_id = r.conversation_id AND j.position < r.position), 0),
                       r.position
                FROM event r WHERE r.type = 'member.removed' AND r.user_id = \(user) AND \(EventLog.after("r.position", cursor)))
            SELECT \(Chat.eventColumns) FROM span s
            JOIN event e ON e.conversation_id = s.conversation_id AND \(EventLog.after("e.position", cursor))
                 AND e.position >= s.since AND e.position <= s.until
            \(Chat.eventJoins)
            WHERE (e.recipient_id IS NULL OR e.recipient_id = \(user)
                   OR EXISTS (SELECT 1 FROM event_recipient r WHERE r.position = e.position AND r.user_id = \(user)))
            ORDER BY e.position LIMIT \(limit)
            """)
    }

    // MARK: - Events inside a transaction

    /// Columns of an event (`e`) with its conversation (`c`), actor (`a`), the user it is
    /// about (`t`) and, for message events, the message as it is now (``messageColumns``,
    /// NULL otherwise): one row per event, no query per message.
    static let eventColumns: SQL = """
        e.position AS e_position, c.public_id AS e_conversation_id, e.seq AS e_seq, e.type AS e_type, a.public_id AS e_actor_id,
        e.message_id AS e_message_key, t.public_id AS e_user_id, e.role AS e_role, e.payload AS e_payload,
        e.created_at AS e_created_at, e.conversation_id AS e_conversation_key, c.kind AS e_conversation_kind,
        e.user_id AS e_user_key, e.recipient_id AS e_recipient, e.actor_id AS e_actor_key, \(messageColumns)
        """
    static let eventJoins: SQL = """
        JOIN conversation c ON c.id = e.conversation_id
        LEFT JOIN account a ON a.id = e.actor_id LEFT JOIN account t ON t.id = e.user_id
        LEFT JOIN message m ON m.id = e.message_id LEFT JOIN account u ON u.id = m.author_id
        """

    /// Events from rows of `eventColumns`; message events carry the message as it is now.
    /// With a `viewer`, the viewer's own messages carry their status (REST); without, no
    /// message carries one (the socket, where one frame goes to every member).
    ///
    /// - Throws: ``StoreError/decoding(_:)`` for a stored kind, role or event type this
    ///   binary does not know (never relabelled as another).
    ///
    /// For a reader who blocked people (`hiding`, ``blockedKeys(_:viewer:)``): their messages
    /// are stubs and their reactions are left out (decision 0027).
    static func storedEvents(_ db: any Database, _ rows: ArraySlice<Row>, viewer: Int64?, hiding: Set<Int64> = []) throws -> [AppendedEvent] {
        var lowestByConversation: [Int64: (delivered: Int64, read: Int64)?] = [:]
        return try rows.compactMap { row in
            let conversationKey: Int64 = try row.get("e_conversation_key")
            if !hiding.isEmpty, let actor = try row.get("e_actor_key", as: Int64?.self), hiding.contains(actor),
               try stored(try row.get("e_type"), as: EventKind.self).rule?.shape == .reaction {
                return nil
            }
            let kind = try stored(try row.get("e_conversation_kind"), as: ConversationKind.self)
            var record = EventRecord(
                position: try row.get("e_position"), conversationID: try row.get("e_conversation_id"), seq: try row.get("e_seq", as: Int64?.self),
                type: try stored(try row.get("e_type"), as: EventKind.self), actorID: try row.get("e_actor_id", as: String?.self),
                createdAt: try row.get("e_created_at"), userID: try row.get("e_user_id", as: String?.self),
                role: try row.get("e_role", as: String?.self).map { try stored($0, as: MemberRole.self) },
                payload: try EventPayload(stored: try row.get("e_payload", as: String?.self)))
            if try row.get("e_message_key", as: Int64?.self) != nil {
                var lowest: (delivered: Int64, read: Int64)?
                if let viewer, try row.get("m_author_key", as: Int64.self) == viewer {
                    if lowestByConversation[conversationKey] == nil {
                        lowestByConversation[conversationKey] = .some(try lowestWatermarks(db, conversation: conversationKey, kind: kind, except: viewer))
                    }
                    lowest = lowestByConversation[conversationKey] ?? nil
                }
                record.message = try Chat.record(row, caller: viewer, lowest: lowest, hiding: hiding)
            }
            let event = AppendedEvent(record: record, conversationKey: conversationKey, conversationKind: kind,
                                      userKey: try row.get("e_user_key", as: Int64?.self), recipient: try row.get("e_recipient", as: Int64?.self))
            return event
        }
    }

    /// Full-text search over the messages of the caller's conversations (or one of them),
    /// best match first. Deleted messages are never found; edited ones by their new text.
    package func search(_ caller: Caller, query: String, conversation id: ConversationID?, filters: SearchFilters = SearchFilters(),
                        cursor: String? = nil, limit: Int?) async throws -> SearchResults {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 20)
        guard query.unicodeScalars.count <= Limits.searchQuery.upperBound else { throw ChatError.invalid("q must be at most 256 characters") }
        // Words are runs of letters, digits and marks — what the tokenizer indexes — so
        // anything else (punctuation, control characters, NUL) only separates words.
        let words = Array(Chat.searchWords(query).prefix(16))
        guard !words.isEmpty || !filters.isEmpty else {
            guard !query.isEmpty else { throw ChatError.invalid("give q (1–256 characters) or at least one filter") }
            return SearchResults(messages: [])
        }
        let offset = try Chat.searchOffset(cursor)
        if let kind = filters.kind, !Chat.searchKinds.contains(kind) {
            throw ChatError.invalid("kind must be one of \(Chat.searchKinds.sorted().joined(separator: ", "))")
        }
        if let from = filters.from { try Validate.names([from], field: "from") }
        if let thread = filters.threadID, !(1...64).contains(thread.rawValue.utf8.count) { throw ChatError.invalid("threadId is not a message id") }
        return try await run {
            try await store.read { db in
                var scope: SQL = "JOIN member mb ON mb.conversation_id = m.conversation_id AND mb.user_id = \(caller.userKey) AND \(Chat.visible(to: caller.userKey))"
                // A blocked person's messages are never found (a result with nothing to show is no result).
                scope = scope + " AND \(Chat.notBlockedBy(caller.userKey))"
                if let id {
                    let access = try Chat.access(db, caller: caller, id: id, for: .read)
                    scope = scope + " AND m.conversation_id = \(access.key)"
                }
                guard let filtered = try Chat.searchFilters(db, filters, app: caller.appID) else { return SearchResults(messages: []) }
                scope = scope + filtered
                let rows = try words.isEmpty
                    ? db.fetchAll("""
                        SELECT \(Chat.messageColumns) \(Chat.messageJoins) \(scope)
                        WHERE m.deleted_at IS NULL ORDER BY m.id DESC LIMIT \(limit + 1) OFFSET \(offset)
                        """)
                    : FullTextSearch.matches(db, words: words, scope: scope, limit: limit + 1, offset: offset)
                let next = rows.count > limit && offset + limit < Limits.maxOffset ? "o\(offset + limit)" : nil
                return SearchResults(messages: try rows.prefix(limit).map { try Chat.message($0, caller: caller.userKey) }, nextCursor: next)
            }
        }
    }

    /// The content types a search may keep (`kind`).
    static let searchKinds: Set<String> = ["text", "markdown", "photo", "video", "audio", "file", "location", "custom", "system"]

    /// A search page's start from its cursor (`o<offset>`, as ``search(_:query:conversation:filters:cursor:limit:)`` gives).
    static func searchOffset(_ cursor: String?) throws -> Int {
        guard let cursor else { return 0 }
        guard cursor.first == "o", let offset = Int(cursor.dropFirst()), (0...Limits.maxOffset).contains(offset) else {
            throw ChatError.invalid("cursor must be a nextCursor from a previous page")
        }
        return offset
    }

    /// The conditions `filters` add to a search's scope; nil when nothing can match (a `from`
    /// that names nobody).
    static func searchFilters(_ db: any Database, _ filters: SearchFilters, app: Int64) throws -> SQL? {
        var sql: SQL = ""
        if let from = filters.from {
            guard let author = try db.fetchValue(Int64.self, "SELECT id FROM account WHERE app_id = \(app) AND lower(username) = \(from.lowercased())") else {
                return nil
            }
            sql = sql + " AND m.author_id = \(author)"
        }
        if let before = filters.before { sql = sql + " AND m.created_at < \(Int64((before.timeIntervalSince1970 * 1000).rounded()))" }
        if let after = filters.after { sql = sql + " AND m.created_at >= \(Int64((after.timeIntervalSince1970 * 1000).rounded()))" }
        if let kind = filters.kind {
            let type: SQL = db.dialect == .postgres ? "(m.content::jsonb ->> 'type')" : "json_extract(m.content, '$.type')"
            sql = sql + " AND \(type) = \(kind)"
        }
        if let has = filters.hasAttachment {
            sql = sql + " AND \(has ? "" as SQL : "NOT " as SQL)EXISTS (SELECT 1 FROM message_attachment ma WHERE ma.message_id = m.id)"
        }
        if let thread = filters.threadID { sql = sql + " AND m.thread_root = \(thread.rawValue)" }
        return sql
    }

    /// Whether the tokenizer keeps `scalar` in a word: a letter, a digit or a mark. Of ASCII,
    /// only the letters and digits are (answered without a look at the Unicode tables).
    static func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII {
            let value = scalar.value
            return (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value)
        }
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
             .decimalNumber, .letterNumber, .otherNumber, .nonspacingMark, .spacingMark, .enclosingMark:
            return true
        default:
            return false
        }
    }

    /// The words of a search query, as the full-text tokenizer would split them.
    static func searchWords(_ query: String) -> [String] {
        var words: [String] = []
        var current = String.UnicodeScalarView()
        for scalar in query.unicodeScalars {
            if isWordScalar(scalar) {
                current.append(scalar)
            } else {
                if !current.isEmpty { words.append(String(current)) }
                current = String.UnicodeScalarView()
            }
        }
        if !current.isEmpty { words.append(String(current)) }
        return words
    }

    // MARK: - Edit and delete

    /// Replaces a message's content (its author only).
    ///
    /// - Throws: 403 for someone else's message; 409 for a deleted one.
    package func edit(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, _ request: EditMessageRequest) async throws -> Message {
        var screening = try PreparedMessage("edit", request.content, request.metadata, from: caller)
        let screened = try await screen(caller, conversation: id, clientID: nil, messageID: messageID, content: request.content)
        if screened != request.content { try screening.replace(screened) }
        let prepared = screening
        let now = nowMilliseconds
        let previewLink = linkToPreview(prepared.value, request: nil)
        let previewWakeup = configuration.linkPreviewWakeup
        return try await run {
            try await write(in: id) { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .editOwnMessage)
                let (row, key) = try Chat.messageRow(db, access: access, id: messageID)
                let old = try Chat.message(row)
                try access.require(try row.get("m_author_key", as: Int64.self) == caller.userKey ? .editOwnMessage : .editOthersMessage)
                guard old.deletedAt == nil, let oldContent = old.content else { throw ChatError.conflict("the message was deleted") }
                if case .poll = oldContent { throw ChatError.conflict("a poll cannot be edited once sent: close it and send a new one") }
                if case .poll = prepared.value { throw ChatError.invalid("a message cannot be edited into a poll: send the poll as a new message") }
                var prepared = prepared
                let media = try Chat.bindMedia(db, caller: caller, prepared: &prepared)
                try Chat.setMedia(db, message: key, keys: media, now: now)
                try db.execute("""
                    UPDATE message SET content = \(prepared.content), metadata = \(prepared.metadata), edited_at = \(now) WHERE id = \(key)
                    """)
                try FullTextSearch.unindex(db, message: key, text: oldContent.searchableText)
                try FullTextSearch.index(db, message: key, text: prepared.value.searchableText)
                // Another link (or none) now: the old preview goes (a job for the old link no
                // longer stands), and the new link is previewed unless the sender turned
                // previews off for this message.
                if LinkPreview.firstLink(in: oldContent) != LinkPreview.firstLink(in: prepared.value) {
                    try db.execute("UPDATE message SET link_preview = NULL, link_preview_key = NULL WHERE id = \(key)")
                    if let previewLink, try row.get("m_shadow", as: Int64.self) == 0,
                       try db.fetchValue(Int64.self, "SELECT link_preview_off FROM message WHERE id = \(key)") == 0 {
                        try Chat.enqueuePreview(db, message: key, app: caller.appID, link: previewLink, now: now)
                        if let wakeup = previewWakeup { db.onCommit { wakeup.signal() } }
                    }
                }
                let mentions = try Chat.resolveMentions(db, text: prepared.searchable, conversation: access.key, app: caller.appID)
                _ = try Chat.storeMentions(db, message: key, conversation: access.key, author: try row.get("m_author_key"),
                                           mentions: mentions, replacing: true)
                try db.append(conversation: access.key, kind: .messageEdited, actor: caller.userKey, message: key, now: now,
                              activity: try row.get("m_in_conversation", as: Int64.self) != 0)
                return try Chat.reload(db, access: access, key: key, caller: caller)
            }
        }
    }

    /// Deletes messages, all or none: each must exist and be the caller's own, unless the
    /// caller is an owner or admin (a moderator). Already deleted ones are left as they are.
    ///
    /// - Returns: the tombstones.
    package func delete(_ caller: Caller, conversation id: ConversationID, messages ids: [MessageID]) async throws -> [Message] {
        guard (1...Limits.namesPerRequest).contains(ids.count) else { throw ChatError.invalid("ids must list 1–\(Limits.namesPerRequest) messages") }
        let now = nowMilliseconds
        return try await run {
            try await write(in: id) { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .deleteOwnMessage)
                var targets: [(key: Int64, message: Message)] = []
                for messageID in ids where !targets.contains(where: { $0.message.id == messageID }) {
                    let (row, key) = try Chat.messageRow(db, access: access, id: messageID)
                    try access.require(try row.get("m_author_key", as: Int64.self) == caller.userKey ? .deleteOwnMessage : .deleteOthersMessage)
                    targets.append((key, try Chat.message(row)))
                }
                for target in targets where target.message.deletedAt == nil {
                    try Chat.tombstone(db, conversation: access.key, message: target.key, content: target.message.content, actor: caller.userKey,
                                       activity: target.message.threadID == nil || target.message.alsoInConversation == true, now: now)
                }
                return try targets.map { try Chat.reload(db, access: access, key: $0.key, caller: caller) }
            }
        }
    }

    // MARK: - Inside a transaction

    /// Makes a message a tombstone, announced with `message.deleted`: it keeps nothing of what
    /// was said or added to it (content, metadata, reactions, mentions, pin, search entries,
    /// attachments), and a deleted reply no longer counts in its thread (the event says the
    /// new count).
    static func tombstone(_ db: Transaction, conversation: Int64, message key: Int64, content: MessageContent?, actor: Int64,
                          activity: Bool, now: Int64) throws {
        try db.execute("""
            UPDATE message SET content = NULL, metadata = NULL, deleted_at = \(now), reactions = NULL, mentions = NULL, poll = NULL,
                               pinned_at = NULL, pinned_by = NULL, link_preview = NULL, link_preview_key = NULL
            WHERE id = \(key)
            """)
        try db.execute("DELETE FROM reaction WHERE message_id = \(key)")
        try db.execute("DELETE FROM poll_vote WHERE message_id = \(key)")
        try db.execute("DELETE FROM mention WHERE message_id = \(key)")
        if let content { try FullTextSearch.unindex(db, message: key, text: content.searchableText) }
        try Chat.setMedia(db, message: key, keys: [], now: now)
        var payload = EventPayload()
        if let root = try db.fetchOne("""
            UPDATE message SET reply_count = reply_count - 1
            WHERE id = (SELECT thread_id FROM message WHERE id = \(key)) RETURNING public_id, reply_count, last_reply_at
            """) {
            payload.threadJSON = try Chat.threadPayloadValue(root: try root.get("public_id"), replies: try root.get("reply_count"),
                                                             lastReplyAt: try root.get("last_reply_at"))
        }
        try db.append(conversation: conversation, kind: .messageDeleted, actor: actor, message: key, payload: payload, now: now, activity: activity)
    }

    /// A validated message, encoded once before the transaction.
    struct PreparedMessage: Sendable {
        var clientID: String
        var value: MessageContent
        var content: String
        var metadata: String?
        var searchable: String
        /// A poll's results before anyone voted (``PollResults``, canonical JSON); nil otherwise.
        var pollJSON: String?

        init(_ clientID: String, _ content: MessageContent, _ metadata: [String: String]?, from caller: Caller) throws {
            if case .system = content, !caller.actsAsApp {
                throw ChatError.forbidden("system messages come from the app's backend (POST /v1/server/conversations/{id}/messages without 'from')")
            }
            try Validate.clientID(clientID)
            try Validate.content(content)
            try Validate.metadata(metadata)
            self.clientID = clientID
            value = content
            self.content = try Self.encode(content)
            self.metadata = try metadata.map { try Self.encode($0) }
            searchable = content.searchableText
            pollJSON = try Polls.initialResults(content)
        }

        /// Swaps in content the server completed (attachment details; see ``Chat/bindMedia``).
        mutating func replace(_ content: MessageContent) throws {
            value = content
            self.content = try Self.encode(content)
            searchable = content.searchableText
            pollJSON = try Polls.initialResults(content)
        }

        private static func encode(_ value: some Encodable) throws -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return String(decoding: try encoder.encode(value), as: UTF8.self)
        }
    }

    /// The caller's earlier message with this client id, if the send is a retry, and the
    /// conversation it is in. `conversation` is where the retry is aimed (nil: anywhere, for
    /// sends to usernames).
    ///
    /// - Throws: 409 `client_id_reused` when the id names a message with other content or in
    ///   another conversation.
    static func existing(_ db: any Database, caller: Caller, prepared: PreparedMessage, in conversation: Int64?) throws -> (MessageRecord, Int64)? {
        guard let row = try db.fetchOne("""
            SELECT \(messageColumns) \(messageJoins)
            WHERE m.author_id = \(caller.userKey) AND m.client_id = \(prepared.clientID)
            """) else { return nil }
        let storedIn: Int64 = try row.get("m_conversation_key")
        let editedOrDeleted = try row.get("m_edited_at", as: Int64?.self) != nil || row.get("m_deleted_at", as: Int64?.self) != nil
        let sameContent = try row.get("m_content", as: String?.self) == prepared.content && row.get("m_metadata", as: String?.self) == prepared.metadata
        let same = (conversation ?? storedIn) == storedIn && (editedOrDeleted || sameContent)
        guard same else { throw ChatError.clientIDReused }
        return (try record(row, caller: caller.userKey), storedIn)
    }

    /// Stores a new message and appends its `message.created`, handing the write path the
    /// record it built (the send is the hot path: its event is not read back).
    static func insertMessage(_ tx: Transaction, caller: Caller, access: Access, publicID: String, prepared: PreparedMessage,
                              media: [Int64], replyTo: MessageID?, thread: ThreadRoot? = nil, shadow: Bool = false,
                              previewLink: String? = nil, previewOff: Bool = false, now: Int64) throws -> MessageRecord {
        // The seq from the conversation's counter (EventLog rule 1), the message, its event
        // (which moves the conversation's activity), the sender's own watermarks, the
        // full-text entry, and the attachments when there are any. On PostgreSQL the first
        // five are one statement (each statement costs PostgreSQL an execution of its own) and
        // the rest travel in the pipeline (Database.enqueue): a send waits once here, and for
        // a reply or a mention once more.
        try Validate.pollCloses(prepared.value, now: now)
        // A reply counts in its root (whose row lock orders concurrent replies) and is read by its author.
        var payload = EventPayload()
        if let thread, !shadow {
            guard let replies = try tx.fetchValue(Int64.self, """
                UPDATE message SET reply_count = reply_count + 1, last_reply_at = \(now) WHERE id = \(thread.key) RETURNING reply_count
                """) else { throw ChatError.messageNotFound }
            payload.threadJSON = try threadPayloadValue(root: thread.publicID, replies: replies, lastReplyAt: now)
        }
        // Mentions cost nothing unless the text has an `@` before a name.
        let mentions = shadow ? [] : try resolveMentions(tx, text: prepared.searchable, conversation: access.key, app: caller.appID)
        let activity = !shadow && (thread == nil || thread?.alsoInConversation == true)
        func values(seq: SQL) -> SQL {
            """
            \(publicID), \(access.key), \(seq), \(caller.userKey), \(prepared.clientID), \(prepared.content),
            \(prepared.metadata), \(replyTo?.rawValue), \(now), \(thread?.key), \(thread?.publicID),
            \(thread == nil || thread?.alsoInConversation == true ? 1 : 0), \(shadow ? 1 : 0), \(prepared.pollJSON), \(previewOff ? 1 : 0)
            """
        }
        let messageColumns: SQL = """
            public_id, conversation_id, seq, author_id, client_id, content, metadata, reply_to, created_at,
            thread_id, thread_root, in_conversation, shadow, poll, link_preview_off
            """
        let columns: SQL = "message (\(messageColumns))"
        let seq: Int64
        let key: Int64
        let position: Int64
        switch tx.dialect {
        case .postgres:
            // A send that moves the conversation's activity (most) moves it in the counter's
            // update, with the message's key and the event's position drawn there.
            let counted: SQL = activity ? """
                counter AS (\(try tx.counterMovingActivity(conversation: access.key))),
                inserted AS (INSERT INTO message (id, \(messageColumns)) SELECT counter.message_id, \(values(seq: "counter.last_seq")) FROM counter
                             RETURNING id, seq)
                """ : """
                counter AS (\(EventLog.nextSeqStatement(conversation: access.key))),
                inserted AS (INSERT INTO \(columns) SELECT \(values(seq: "counter.last_seq")) FROM counter RETURNING id, seq)
                """
            // The sender has seen their own message on the device that sent it.
            var rows: SQL = counted + """
                ,
                marked AS (UPDATE member SET delivered_seq = counter.last_seq, read_seq = counter.last_seq, last_posted_at = \(now)
                           FROM counter WHERE member.conversation_id = \(access.key) AND member.user_id = \(caller.userKey))
                """
            if let search = FullTextSearch.postgresInsertingEntry(text: prepared.searchable) { rows = rows + ", " + search }
            guard let appended = try tx.appendInserting(rows, conversation: access.key, kind: .messageCreated, actor: caller.userKey, recipient: shadow ? caller.userKey : nil,
                payload: payload, now: now, activity: activity, activityMoved: activity) else { throw ChatError.conversationNotFound }
            (seq, key, position) = (appended.seq, appended.message, appended.position)
        case .sqlite:
            seq = try EventLog.nextSeq(tx, conversation: access.key)
            guard let inserted = try tx.fetchValue(Int64.self, "INSERT INTO \(columns) VALUES (\(values(seq: "\(seq)"))) RETURNING id") else {
                throw ChatError.internalError
            }
            key = inserted
            position = try tx.append(conversation: access.key, kind: .messageCreated, seq: seq, actor: caller.userKey, message: key,
                                     payload: payload, now: now, activity: activity).position
        }
        if let thread, !shadow {
            try tx.enqueue("""
                INSERT INTO thread_read (user_id, root_id, read_seq) VALUES (\(caller.userKey), \(thread.key), \(seq))
                ON CONFLICT (user_id, root_id) DO UPDATE SET read_seq = excluded.read_seq
                """)
        }
        let mentionsJSON = try storeMentions(tx, message: key, conversation: access.key, author: caller.userKey, mentions: mentions, replacing: false)
        // Nobody else can have this seq delivered yet: a new message is always "sent".
        let record = MessageRecord(id: publicID, conversationID: access.id.rawValue, seq: seq, senderID: caller.userID.rawValue,
                                   senderUsername: access.callerUsername, senderDisplayName: access.callerDisplayName,
                                   clientID: prepared.clientID, sentAt: now, editedAt: nil, deletedAt: nil, contentJSON: prepared.content,
                                   metadataJSON: prepared.metadata, replyTo: replyTo?.rawValue, status: .sent, mentionsJSON: mentionsJSON,
                                   threadRoot: thread?.publicID, alsoInConversation: thread?.alsoInConversation ?? false,
                                   senderPhotoURL: avatarURL(access.callerPhoto), pollJSON: prepared.pollJSON)
        // The write path's event is built here, not read back (decision 0026).
        var shared = record
        shared.status = nil
        let event = EventRecord(position: position, conversationID: access.id.rawValue, seq: seq, type: .messageCreated,
                                actorID: caller.userID.rawValue, createdAt: now, message: shared, payload: payload)
        tx.provide(AppendedEvent(record: event, conversationKey: access.key, conversationKind: access.kind, userKey: nil,
                                 recipient: shadow ? caller.userKey : nil))
        if tx.dialect == .sqlite {
            // The sender has seen their own message on the device that sent it (PostgreSQL: above).
            try tx.enqueue("""
                UPDATE member SET delivered_seq = \(seq), read_seq = \(seq), last_posted_at = \(now)
                WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                """)
            try FullTextSearch.index(tx, message: key, text: prepared.searchable)
        }
        if !media.isEmpty { try setMedia(tx, message: key, keys: media, now: now) }
        if let previewLink { try enqueuePreview(tx, message: key, app: caller.appID, link: previewLink, now: now) }
        return record
    }

    /// The direct conversation with one person, or the group of exactly these people.
    static func conversationFor(_ db: Transaction, caller: Caller, others: [Int64], newID: String, now: Int64) throws -> Int64 {
        if others.count == 1, let peer = others.first {
            let directKey = "\(min(caller.userKey, peer)):\(max(caller.userKey, peer))"
            if let existing = try db.fetchValue(Int64.self, "SELECT id FROM conversation WHERE app_id = \(caller.appID) AND direct_key = \(directKey)") {
                return existing
            }
            return try insertConversation(db, app: caller.appID, publicID: newID, kind: .direct, title: nil, customData: nil,
                                          directKey: directKey, creator: caller.userKey, members: [(caller.userKey, .member), (peer, .member)], now: now)
        }
        let everyone = [caller.userKey] + others
        if let existing = try db.fetchValue(Int64.self, """
            SELECT c.id FROM conversation c JOIN member mb ON mb.conversation_id = c.id
            WHERE c.app_id = \(caller.appID) AND c.kind = 'group' AND c.member_count = \(everyone.count) AND mb.user_id IN (\(list: everyone))
            GROUP BY c.id HAVING count(*) = \(everyone.count) ORDER BY c.last_position DESC LIMIT 1
            """) {
            return existing
        }
        return try insertConversation(db, app: caller.appID, publicID: newID, kind: .group, title: nil, customData: nil, directKey: nil,
                                      creator: caller.userKey, members: [(caller.userKey, .owner)] + others.map { ($0, .member) }, now: now)
    }

    static func messageRow(_ db: any Database, access: Access, id: MessageID) throws -> (Row, Int64) {
        let visible: SQL = access.asApp ? "1 = 1" : Chat.visible(to: access.userKey)
        guard id.rawValue.utf8.count <= 64, let row = try db.fetchOne("""
            SELECT \(messageColumns) \(messageJoins) WHERE m.public_id = \(id.rawValue) AND m.conversation_id = \(access.key) AND \(visible)
            """) else { throw ChatError.messageNotFound }
        return (row, try row.get("m_key"))
    }

    static func reload(_ db: any Database, access: Access, key: Int64, caller: Caller) throws -> Message {
        guard let row = try db.fetchOne("SELECT \(messageColumns) \(messageJoins) WHERE m.id = \(key)"),
              let message = try messages(db, [row], access: access, caller: caller).first else { throw ChatError.messageNotFound }
        return message
    }
}

extension Chat {
    /// A page of the messages in `scope` (a conversation's, a thread's) the caller may see, in
    /// seq order: after `after`, around `around` (half before it, the rest from it), or before
    /// `before` (the newest when nil); with the caller's reactions and whether there are older
    /// and newer ones.
    static func historyPage(_ db: any Database, scope: SQL, access: Access, caller: Caller, before: Int64?, after: Int64?, around: Int64?,
                            limit: Int) throws -> HistoryPage {
        let visible = Chat.visible(to: caller.userKey)
        func page(_ filter: SQL, descending: Bool, count: Int) throws -> [Row] {
            try db.fetchAll("""
                SELECT \(Chat.messageColumns) \(Chat.messageJoins) WHERE \(scope) AND \(visible) AND \(filter)
                ORDER BY m.seq \(descending ? "DESC" as SQL : "ASC") LIMIT \(count)
                """)
        }
        func exists(_ filter: SQL) throws -> Bool {
            try db.fetchOne("SELECT 1 FROM message m WHERE \(scope) AND \(visible) AND \(filter) LIMIT 1") != nil
        }
        let rows: [Row]
        if let after {
            rows = try page("m.seq > \(after)", descending: false, count: limit)
        } else if let around {
            let older = try page("m.seq < \(around)", descending: true, count: limit / 2)
            rows = older.reversed() + (try page("m.seq >= \(around)", descending: false, count: limit - older.count))
        } else {
            rows = try page("m.seq < \(before ?? Int64.max)", descending: true, count: limit).reversed()
        }
        let lowest = try Chat.lowestWatermarksIfNeeded(db, rows: rows, conversation: access.key, kind: access.kind, caller: caller.userKey)
        let hiding = try Chat.blockedKeys(db, viewer: caller.userKey)
        var records = try rows.map { try Chat.record($0, caller: caller.userKey, lowest: lowest, hiding: hiding) }
        try Chat.fillMyReactions(db, &records, keys: try rows.map { try $0.get("m_key") }, viewer: caller.userKey)
        let hasOlder = try records.first.map { try exists("m.seq < \($0.seq)") } ?? false
        let hasNewer = try records.last.map { try exists("m.seq > \($0.seq)") } ?? false
        return HistoryPage(records: records, hasOlder: hasOlder, hasNewer: hasNewer)
    }
}
