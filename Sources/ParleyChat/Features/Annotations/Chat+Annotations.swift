import Foundation
import ParleyStore
package import ParleyWire

// Reactions, pins and mentions: what people add to a message without writing a new one.
// Reactions and pins are events with a position and no seq, which move neither unread counts
// nor the conversation's place in the list; what a history page shows of them is kept on the
// message row, so a page costs no join (docs/decisions/0021-annotations-without-seq.md).

/// Annotations: reactions, pins and mentions, which mark messages without being part of the history (decision 0021).
package struct Annotations: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Annotations: reactions, pins and mentions, which mark messages without being part of the history (decision 0021).
    package var annotations: Annotations { Annotations(core: self) }
}

extension Annotations {
    // MARK: - Reactions

    /// Adds the caller's reaction to a message (idempotent: a second identical call changes
    /// nothing and appends no event).
    ///
    /// - Returns: the message with its counts and the caller's reactions, and whether this
    ///   call added the reaction.
    /// - Throws: 400 for anything but one emoji; 404 for a message not in the conversation;
    ///   409 `message_deleted`; 409 `too_many_reactions` past ``Limits/emojiPerMessage`` or
    ///   ``Limits/reactionsPerUser``.
    package func react(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, emoji: String) async throws -> (Message, changed: Bool) {
        try await changeReaction(caller, conversation: id, message: messageID, emoji: try Validate.emoji(emoji), adding: true)
    }

    /// Takes the caller's reaction back (idempotent, as ``react(_:conversation:message:emoji:)``).
    package func unreact(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, emoji: String) async throws -> (Message, changed: Bool) {
        try await changeReaction(caller, conversation: id, message: messageID, emoji: try Validate.emoji(emoji), adding: false)
    }

    private func changeReaction(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, emoji: String,
                                adding: Bool) async throws -> (Message, changed: Bool) {
        let now = nowMilliseconds
        return try await run {
            try await write(in: id) { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .react)
                let (_, key) = try Chat.messageRow(tx, access: access, id: messageID)
                // The message row is the lock every change of its counts takes first, so two
                // nodes reacting at once apply one after the other (PostgreSQL; SQLite has one writer).
                let lock: SQL = tx.dialect == .postgres ? " FOR UPDATE" : ""
                guard let row = try tx.fetchOne("SELECT deleted_at, reactions FROM message WHERE id = \(key)" + lock) else {
                    throw ChatError.messageNotFound
                }
                guard try row.get("deleted_at", as: Int64?.self) == nil else { throw ChatError.messageDeleted }
                var counts = try Chat.reactionCounts(try row.get("reactions", as: String?.self))
                let changed: Bool
                if adding {
                    let index = counts.firstIndex { $0.emoji == emoji }
                    if index == nil && counts.count >= Limits.emojiPerMessage {
                        throw ChatError.tooManyReactions("a message carries at most \(Limits.emojiPerMessage) different emoji; react with one it has")
                    }
                    let mine = try tx.fetchValue(Int.self, "SELECT count(*) FROM reaction WHERE message_id = \(key) AND user_id = \(caller.userKey)") ?? 0
                    changed = try tx.execute("""
                        INSERT INTO reaction (message_id, user_id, emoji, created_at) VALUES (\(key), \(caller.userKey), \(emoji), \(now))
                        ON CONFLICT DO NOTHING
                        """) > 0
                    if changed {
                        guard mine < Limits.reactionsPerUser else {
                            throw ChatError.tooManyReactions("one person may react to a message at most \(Limits.reactionsPerUser) times; take one back first")
                        }
                        if let index { counts[index].count += 1 } else { counts.append(ReactionCount(emoji: emoji, count: 1)) }
                    }
                } else {
                    changed = try tx.execute("DELETE FROM reaction WHERE message_id = \(key) AND user_id = \(caller.userKey) AND emoji = \(emoji)") > 0
                    if changed, let index = counts.firstIndex(where: { $0.emoji == emoji }) {
                        counts[index].count -= 1
                        if counts[index].count <= 0 { counts.remove(at: index) }
                    }
                }
                if changed {
                    try tx.execute("UPDATE message SET reactions = \(try Chat.reactionsJSON(counts)) WHERE id = \(key)")
                    var payload = EventPayload()
                    payload.emoji = emoji
                    try tx.append(conversation: access.key, kind: adding ? .reactionAdded : .reactionRemoved, actor: caller.userKey,
                                  message: key, user: caller.userKey, payload: payload, now: now)
                }
                return (try Chat.reload(tx, access: access, key: key, caller: caller), changed)
            }
        }
    }

    /// Who reacted to a message (with `emoji`, or with anything), oldest first.
    package func reactions(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, emoji: String?,
                          limit: Int?, offset: Int?) async throws -> ReactionPage {
        let limit = try Validate.limit(limit, in: Limits.userPage, default: 50)
        let offset = offset ?? 0
        guard (0...Limits.maxOffset).contains(offset) else { throw ChatError.invalid("offset must be 0–\(Limits.maxOffset)") }
        let emoji = try emoji.map(Validate.emoji)
        return try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let (_, key) = try Chat.messageRow(db, access: access, id: messageID)
                let filter: SQL = emoji.map { "AND r.emoji = \($0)" } ?? ""
                let rows = try db.fetchAll("""
                    SELECT r.emoji, r.created_at, u.public_id, u.username, u.display_name FROM reaction r JOIN account u ON u.id = r.user_id
                    WHERE r.message_id = \(key) \(filter) ORDER BY r.created_at, r.user_id, r.emoji LIMIT \(limit + 1) OFFSET \(offset)
                    """)
                let reactions = try rows.prefix(limit).map { row in
                    Reaction(user: Sender(id: UserID(rawValue: try row.get("public_id")), username: try row.get("username"),
                                          displayName: try row.get("display_name")),
                             emoji: try row.get("emoji"), reactedAt: Chat.date(try row.get("created_at")))
                }
                return ReactionPage(reactions: reactions, hasMore: rows.count > limit)
            }
        }
    }

    // MARK: - Pins

    /// Pins a message (any member of a direct chat, group or private channel; owners and
    /// admins of a public channel). Pinning a pinned message changes nothing.
    ///
    /// - Throws: 403 for a public channel's member; 409 `message_deleted`; 409 `conflict` past
    ///   ``Limits/pinsPerConversation``.
    package func pin(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID) async throws -> (Message, changed: Bool) {
        try await changePin(caller, conversation: id, message: messageID, pinning: true)
    }

    /// Unpins a message (as ``pin(_:conversation:message:)``).
    package func unpin(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID) async throws -> (Message, changed: Bool) {
        try await changePin(caller, conversation: id, message: messageID, pinning: false)
    }

    private func changePin(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID, pinning: Bool) async throws -> (Message, changed: Bool) {
        let now = nowMilliseconds
        return try await run {
            try await write(in: id) { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .pin)
                let (row, key) = try Chat.messageRow(tx, access: access, id: messageID)
                guard try row.get("m_deleted_at", as: Int64?.self) == nil else { throw ChatError.messageDeleted }
                let pinned = try row.get("m_pinned_at", as: Int64?.self) != nil
                guard pinned != pinning else { return (try Chat.reload(tx, access: access, key: key, caller: caller), false) }
                if pinning {
                    let count = try tx.fetchValue(Int.self, """
                        SELECT count(*) FROM message WHERE conversation_id = \(access.key) AND pinned_at IS NOT NULL
                        """) ?? 0
                    guard count < Limits.pinsPerConversation else {
                        throw ChatError.conflict("a conversation holds at most \(Limits.pinsPerConversation) pins; unpin one first")
                    }
                    try tx.execute("UPDATE message SET pinned_at = \(now), pinned_by = \(caller.userID.rawValue) WHERE id = \(key)")
                } else {
                    try tx.execute("UPDATE message SET pinned_at = NULL, pinned_by = NULL WHERE id = \(key)")
                }
                try tx.append(conversation: access.key, kind: pinning ? .messagePinned : .messageUnpinned, actor: caller.userKey,
                              message: key, now: now)
                return (try Chat.reload(tx, access: access, key: key, caller: caller), true)
            }
        }
    }

    /// A conversation's pinned messages, most recently pinned first (all of them: there are
    /// at most ``Limits/pinsPerConversation``).
    package func pins(_ caller: Caller, conversation id: ConversationID) async throws -> MessageList {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let rows = try db.fetchAll("""
                    SELECT \(Chat.messageColumns) \(Chat.messageJoins)
                    WHERE m.conversation_id = \(access.key) AND m.pinned_at IS NOT NULL AND \(Chat.visible(to: caller.userKey))
                    ORDER BY m.pinned_at DESC, m.id DESC
                    """)
                return MessageList(messages: try Chat.messages(db, rows, access: access, caller: caller), hasMore: false)
            }
        }
    }

    // MARK: - Mentions

    /// Messages that mention the caller, newest first, in conversations they are still in
    /// (deleted messages are left out). `before` pages on: the last message id of a page.
    package func mentions(_ caller: Caller, before: MessageID?, limit: Int?) async throws -> MessageList {
        let limit = try Validate.limit(limit, in: Limits.historyPage, default: 50)
        return try await run {
            try await store.read { db in
                var cursor = Int64.max
                if let before {
                    guard before.rawValue.utf8.count <= 64,
                          let key = try db.fetchValue(Int64.self, "SELECT message_id FROM mention WHERE user_id = \(caller.userKey) AND message_id = (SELECT id FROM message WHERE public_id = \(before.rawValue))") else {
                        throw ChatError.invalid("before names no message that mentions you")
                    }
                    cursor = key
                }
                let rows = try db.fetchAll("""
                    SELECT \(Chat.messageColumns) FROM mention mn
                    JOIN message m ON m.id = mn.message_id JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id
                    JOIN member mb ON mb.conversation_id = mn.conversation_id AND mb.user_id = \(caller.userKey)
                    WHERE mn.user_id = \(caller.userKey) AND mn.message_id < \(cursor) AND m.deleted_at IS NULL
                      AND \(Chat.notBlockedBy(caller.userKey))
                    ORDER BY mn.message_id DESC LIMIT \(limit + 1)
                    """)
                var records = try rows.prefix(limit).map { try Chat.record($0, caller: caller.userKey) }
                try Chat.fillMyReactions(db, &records, keys: try rows.prefix(limit).map { try $0.get("m_key") }, viewer: caller.userKey)
                return MessageList(messages: try records.map { try $0.message() }, hasMore: rows.count > limit)
            }
        }
    }
}

extension Chat {
    /// Fills each record's ``MessageRecord/myReactions`` and, for polls,
    /// ``MessageRecord/myVotes`` for `viewer`: one query for the records that have reactions
    /// at all and one for the polls, none when no record has either.
    static func fillMyReactions(_ db: any Database, _ records: inout [MessageRecord], keys: [Int64], viewer: Int64) throws {
        let polls = zip(records.indices, keys).filter { records[$0.0].pollJSON != nil }
        if !polls.isEmpty {
            let rows = try db.fetchAll("""
                SELECT message_id, option_index FROM poll_vote WHERE user_id = \(viewer) AND message_id IN (\(list: polls.map(\.1)))
                ORDER BY message_id, option_index
                """)
            var mine: [Int64: [Int]] = [:]
            for row in rows { mine[try row.get("message_id"), default: []].append(Int(try row.get("option_index", as: Int64.self))) }
            for (index, key) in polls { records[index].myVotes = mine[key] }
        }
        let reacted = zip(records.indices, keys).filter { records[$0.0].reactionsJSON != nil }
        guard !reacted.isEmpty else { return }
        let rows = try db.fetchAll("""
            SELECT message_id, emoji FROM reaction WHERE user_id = \(viewer) AND message_id IN (\(list: reacted.map(\.1)))
            ORDER BY message_id, created_at
            """)
        var mine: [Int64: [String]] = [:]
        for row in rows { mine[try row.get("message_id"), default: []].append(try row.get("emoji")) }
        for (index, key) in reacted { records[index].myReactions = mine[key] ?? [] }
    }

    static func reactionCounts(_ json: String?) throws -> [ReactionCount] {
        guard let json else { return [] }
        return try JSONDecoder().decode([ReactionCount].self, from: Data(json.utf8))
    }

    static func reactionsJSON(_ counts: [ReactionCount]) throws -> String? {
        counts.isEmpty ? nil : try canonicalJSON(counts)
    }

    /// JSON as the server stores it: sorted keys, slashes unescaped.
    static func canonicalJSON(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// The `@username`s of `text` that name members of the conversation, in order of first
    /// appearance, at most ``Limits/mentionsPerMessage``. Nothing is read when the text has
    /// no `@` before a name.
    static func resolveMentions(_ db: any Database, text: String, conversation: Int64, app: Int64) throws -> [(key: Int64, mention: Mention)] {
        let names = mentionedNames(text)
        guard !names.isEmpty else { return [] }
        let keys = names.compactMap(Validate.usernameKey)
        guard !keys.isEmpty else { return [] }
        let rows = try db.fetchAll("""
            SELECT a.id, a.public_id, a.username, a.username_key FROM account a
            JOIN member mb ON mb.user_id = a.id AND mb.conversation_id = \(conversation)
            WHERE a.app_id = \(app) AND a.username_key IN (\(list: keys))
            """)
        var byKey: [String: (Int64, Mention)] = [:]
        for row in rows {
            byKey[try row.get("username_key")] = (try row.get("id"), Mention(userID: UserID(rawValue: try row.get("public_id")), username: try row.get("username")))
        }
        var seen = Set<String>()
        return keys.compactMap { key in
            guard seen.insert(key).inserted, let found = byKey[key] else { return nil }
            return (found.0, found.1)
        }
    }

    /// The names after `@` in `text`: an `@` at the start or after a character that is not
    /// part of a word (so `bob@example.com` mentions nobody), then letters, digits, `.`, `_`,
    /// `-`, `+` and `@`, without a trailing `.` or `-` (sentence punctuation).
    static func mentionedNames(_ text: String) -> [String] {
        guard text.utf8.contains(UInt8(ascii: "@")) else { return [] }
        var names: [String] = []
        let scalars = Array(text.unicodeScalars)
        var index = 0
        func isNameScalar(_ scalar: Unicode.Scalar) -> Bool {
            scalar.isASCII && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                               || "._-+@".unicodeScalars.contains(scalar))
        }
        while index < scalars.count, names.count < Limits.mentionsPerMessage {
            defer { index += 1 }
            guard scalars[index] == "@" else { continue }
            if index > 0 {
                let before = scalars[index - 1]
                if before.properties.isAlphabetic || before.properties.numericType != nil || before == "_" || before == "@" { continue }
            }
            var end = index + 1
            while end < scalars.count, isNameScalar(scalars[end]), end - index <= Limits.emailUsernameMax { end += 1 }
            while end > index + 1, ".-+@".unicodeScalars.contains(scalars[end - 1]) { end -= 1 }
            guard end > index + 1 else { continue }
            // A name whose last character takes the next scalar into it (`@b1️⃣`: a keycap) is
            // not a name: a mention ends where a character ends.
            if end < scalars.count, scalars[end].properties.isGraphemeExtend || scalars[end].value == 0x200D {
                index = end - 1
                continue
            }
            var name = String.UnicodeScalarView()
            name.append(contentsOf: scalars[(index + 1)..<end])
            names.append(String(name))
            index = end - 1
        }
        return names
    }

    /// Stores a message's mentions: its `mentions` column and one `mention` row per person
    /// other than the author, replacing what an edit's earlier text mentioned.
    static func storeMentions(_ db: any Database, message: Int64, conversation: Int64, author: Int64,
                              mentions: [(key: Int64, mention: Mention)], replacing: Bool) throws -> String? {
        if replacing { try db.execute("DELETE FROM mention WHERE message_id = \(message)") }
        let json = mentions.isEmpty ? nil : try canonicalJSON(mentions.map(\.mention))
        if replacing || json != nil { try db.execute("UPDATE message SET mentions = \(json) WHERE id = \(message)") }
        for (key, _) in mentions where key != author {
            try db.execute("INSERT INTO mention (user_id, message_id, conversation_id) VALUES (\(key), \(message), \(conversation))")
        }
        return json
    }

    /// Messages from rows of `messageColumns`, as `caller` sees them (status of their own,
    /// their reactions).
    static func messages(_ db: any Database, _ rows: [Row], access: Access, caller: Caller) throws -> [Message] {
        let lowest = try lowestWatermarksIfNeeded(db, rows: rows, conversation: access.key, kind: access.kind, caller: caller.userKey)
        let hiding = try blockedKeys(db, viewer: caller.userKey)
        var records = try rows.map { try record($0, caller: caller.userKey, lowest: lowest, hiding: hiding) }
        try fillMyReactions(db, &records, keys: try rows.map { try $0.get("m_key") }, viewer: caller.userKey)
        return try records.map { try $0.message() }
    }
}
