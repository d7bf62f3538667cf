import Foundation
public import ParleyWire
import ParleySync
#if canImport(SQLite3)
import SQLite3
#else
import CParleySQLite
#endif

/// What the user has seen, kept on the device so an app shows it without a network: the
/// conversation list (with the user's drafts, receipts and unread counts), the newest
/// messages of each conversation (with their reactions, pins, polls, previews and thread
/// counts) and of its threads, members with their receipts, and how far the live stream was
/// applied. A
/// ``ParleyClient`` given one writes through it — every list and history page it reads, every
/// live event in position order — and reads it back with
/// ``ParleyClient/cachedConversations(archived:)``, ``ParleyClient/cachedHistory(of:before:limit:)``
/// and ``ParleyClient/searchLocally(_:limit:)``; ``ConversationListModel`` and ``MessagesModel``
/// show it first at a cold start.
///
/// One SQLite file (the system's SQLite; on Linux libsqlite3), in rollback-journal mode with
/// `secure_delete` on: a deleted or expired message's text is overwritten in the file, not
/// just unlinked from it. A file written by another version of this store, or one that cannot
/// be read, is replaced by an empty one (the client fills it again); opening never fails for
/// what is in the file, only when the file cannot be created.
///
/// ```swift
/// let local = try LocalStore(path: documents.appendingPathComponent("parley.sqlite").path)
/// let client = ParleyClient(server: url, appKey: key, store: FileStateStore(path: statePath), localStore: local)
/// let list = await client.cachedConversations()      // at once, from disk, even offline
/// ```
public final class LocalStore: @unchecked Sendable {
    // @unchecked: the database handle is used only inside `lock`.

    /// How much the store keeps; past it the oldest goes first.
    public struct Budget: Sendable, Hashable {
        /// Messages kept per conversation (the newest). Default: 200 — four screens of history.
        public var messagesPerConversation: Int
        /// Conversations kept (pinned ones, then the most recently active). Default: 500.
        public var conversations: Int
        /// The file's size; past it the oldest messages of the whole store go first. Default: 64 MiB.
        public var bytes: Int64

        /// A budget; each argument sets the property of the same name.
        public init(messagesPerConversation: Int = 200, conversations: Int = 500, bytes: Int64 = 64 << 20) {
            self.messagesPerConversation = max(1, messagesPerConversation)
            self.conversations = max(1, conversations)
            self.bytes = max(1 << 20, bytes)
        }
    }

    /// Why the store could not be opened or written.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What SQLite said, and what was being done.
        public var description: String
    }

    /// The file.
    public let path: String
    /// What it keeps.
    public let budget: Budget
    /// The layout this build writes; a file with another is rebuilt.
    static let schemaVersion: Int32 = 1
    private let lock = LockedValue(())
    private var db: OpaquePointer?

    /// Opens (or creates) the store at `path`; its directory is created when missing (0700)
    /// and the file is readable by its owner only.
    ///
    /// - Throws: ``Failure`` when no file can be created there.
    public init(path: String, budget: Budget = Budget()) throws {
        self.path = path
        self.budget = budget
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        do {
            try open()
        } catch {
            // Not a database of ours (damaged, or another program's): start again.
            close()
            Self.removeFiles(path)
            try open()
        }
    }

    deinit { close() }

    private func open() throws {
        var handle: OpaquePointer?
        guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(handle)
            throw Failure(description: "cannot open \(path): \(message)")
        }
        db = handle
        chmod(path, 0o600)
        try execute("PRAGMA secure_delete = ON; PRAGMA journal_mode = DELETE; PRAGMA synchronous = NORMAL")
        let version = try integer("PRAGMA user_version") ?? 0
        if version != Int64(Self.schemaVersion) {
            if version != 0 {
                // Another version's layout: what it holds is only a copy of the server's.
                close()
                Self.removeFiles(path)
                try open()
                return
            }
            try execute("""
                PRAGMA auto_vacuum = INCREMENTAL;
                BEGIN;
                CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE conversation (id TEXT PRIMARY KEY, json BLOB NOT NULL, pinned_rank INTEGER, last_position INTEGER NOT NULL,
                                           archived INTEGER NOT NULL);
                CREATE TABLE message (id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, sent_at REAL NOT NULL,
                                      sender_id TEXT NOT NULL, json BLOB NOT NULL, text TEXT,
                                      in_conversation INTEGER NOT NULL, thread_root TEXT);
                CREATE INDEX message_place ON message (conversation_id, in_conversation, seq);
                CREATE INDEX message_thread ON message (thread_root, seq) WHERE thread_root IS NOT NULL;
                CREATE TABLE member (conversation_id TEXT NOT NULL, user_id TEXT NOT NULL, json BLOB NOT NULL,
                                     PRIMARY KEY (conversation_id, user_id));
                CREATE INDEX message_age ON message (sent_at);
                PRAGMA user_version = \(Self.schemaVersion);
                COMMIT;
                """)
            if try integer("PRAGMA auto_vacuum") != 2 { try execute("VACUUM") }  // set before the first table, or by one VACUUM
        }
    }

    private func close() {
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    private static func removeFiles(_ path: String) {
        for suffix in ["", "-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    // MARK: - What the client knows

    /// The user whose copy this is (a store of another user is emptied when someone signs in).
    public var userID: UserID? {
        lock.withLock { _ in (try? text("SELECT value FROM meta WHERE name = 'user'")).flatMap { $0 }.map(UserID.init(rawValue:)) }
    }

    /// The last event position applied.
    public var position: Int64? {
        lock.withLock { _ in (try? text("SELECT value FROM meta WHERE name = 'position'")).flatMap { $0 }.flatMap { Int64($0) } }
    }

    /// Empties the store (another user signed in, the user signed out, or the server said
    /// `resync`: what is kept may have gaps). The file shrinks back.
    public func reset(user: UserID? = nil) throws {
        try lock.withLock { _ in
            try execute("BEGIN; DELETE FROM message; DELETE FROM member; DELETE FROM conversation; DELETE FROM meta; COMMIT")
            if let user { try run("INSERT INTO meta (name, value) VALUES ('user', ?)", [.text(user.rawValue)]) }
            try execute("PRAGMA incremental_vacuum")
        }
    }

    // MARK: - Writing what was read

    /// Keeps conversations as the server listed them (replacing earlier copies), then holds
    /// the conversation budget.
    public func save(conversations: [Conversation]) throws {
        guard !conversations.isEmpty else { return }
        try transaction {
            for conversation in conversations { try self.put(conversation) }
            try self.holdConversationBudget()
        }
    }

    /// Keeps a page of a conversation's history (replacing earlier copies of its messages),
    /// then holds the budgets.
    public func save(messages: [Message]) throws {
        guard !messages.isEmpty else { return }
        try transaction {
            for message in messages { try self.put(message) }
            for conversation in Set(messages.map(\.conversationID)) { try self.holdMessageBudget(conversation) }
            try self.holdByteBudget()
        }
    }

    /// Keeps members of a conversation as the server listed them (replacing earlier copies).
    public func save(members: [Member], in conversation: ConversationID) throws {
        guard !members.isEmpty else { return }
        try transaction {
            for member in members { try self.put(member, in: conversation) }
        }
    }

    /// Applies one live event, as the chat screens do (``Swift/Array/applying(_:me:)``,
    /// ``Conversation/listed(after:me:)``), and records its position. A kind the store does
    /// not show changes nothing but the position. Idempotent: an event applied twice (a crash
    /// between this and the client saving its position) leaves the same copy.
    public func apply(_ event: ConversationEvent, me: UserID) throws {
        try transaction {
            let conversationID = event.conversationID
            if [.memberRemoved, .memberBanned].contains(event.type), event.userID == me {
                for table in ["message", "member"] {
                    try self.run("DELETE FROM \(table) WHERE conversation_id = ?", [.text(conversationID.rawValue)])
                }
                try self.run("DELETE FROM conversation WHERE id = ?", [.text(conversationID.rawValue)])
            } else {
                if let stored = try self.conversation(conversationID) {
                    try self.put(stored.listed(after: event, me: me))
                }
                try self.applyToMessages(event, me: me)
                try self.applyToMembers(event)
            }
            try self.run("INSERT INTO meta (name, value) VALUES ('position', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                         [.text(String(max(event.position, self.storedPosition() ?? 0)))])
        }
    }

    private func applyToMessages(_ event: ConversationEvent, me: UserID) throws {
        switch event.body {
        case .message, .reaction:
            var ids = [event.message?.id].compactMap { $0 }
            if let root = event.thread?.rootID { ids.append(root) }
            let stored = try ids.compactMap { try self.message($0) }
            let after = stored.applying(event, me: me)
            for message in after { try put(message) }
            // A reply only in its thread is not the conversation's, but the device keeps it for the thread.
            if event.type == .messageCreated, let reply = event.message, reply.threadID != nil, reply.alsoInConversation != true {
                try put(reply)
            }
            if event.type == .messageCreated, let message = event.message { try holdMessageBudget(message.conversationID) }
        case .expiry(let throughSeq, _):
            try run("DELETE FROM message WHERE conversation_id = ? AND seq <= ?", [.text(event.conversationID.rawValue), .integer(throughSeq)])
        case .profile(let user, _, _):
            let theirs = try messages(sql: "SELECT json FROM message WHERE conversation_id = ? AND sender_id = ?",
                                      [.text(event.conversationID.rawValue), .text(user.rawValue)])
            for message in theirs.applying(event, me: me) { try put(message) }
        case .bare, .membership, .conversation, .receipt, .deliveries, .restriction, .notifications, .state, .draft, .scheduled, .report, .unknown:
            break
        }
    }

    private func applyToMembers(_ event: ConversationEvent) throws {
        let conversation = event.conversationID.rawValue
        switch event.body {
        case .membership(let user, _) where [.memberRemoved, .memberBanned].contains(event.type):
            try run("DELETE FROM member WHERE conversation_id = ? AND user_id = ?", [.text(conversation), .text(user.rawValue)])
        case .membership(let user, let role?) where event.type == .memberUpdated:
            try change(user, in: event.conversationID) { $0.role = role }
        case .receipt(let user, let delivered, let read):
            try change(user, in: event.conversationID) { member in
                member.receipt.deliveredSeq = max(member.receipt.deliveredSeq, delivered)
                member.receipt.readSeq = max(member.receipt.readSeq, read)
            }
        case .restriction(let user, let until, _) where event.type == .memberMuted:
            try change(user, in: event.conversationID) { $0.mutedUntil = until }
        case .membership(let user, _) where event.type == .memberUnmuted:
            try change(user, in: event.conversationID) { $0.mutedUntil = nil }
        case .profile(let user, let photoURL, let displayName):
            try change(user, in: event.conversationID) { member in
                if let displayName { member.user.displayName = displayName }
                if let photoURL { member.user.photoURL = photoURL.isEmpty ? nil : photoURL }
            }
        default:
            break
        }
    }

    private func change(_ user: UserID, in conversation: ConversationID, _ edit: (inout Member) -> Void) throws {
        guard let data = try rows("SELECT json FROM member WHERE conversation_id = ? AND user_id = ?",
                                  [.text(conversation.rawValue), .text(user.rawValue)]).first else { return }
        var member = try WireCoding.decoder().decode(Member.self, from: data)
        edit(&member)
        try put(member, in: conversation)
    }

    // MARK: - Reading it back

    /// The conversations kept, as the server lists them: pinned first (by rank), then newest
    /// activity first; without the archived ones, or only those.
    public func conversations(archived: Bool = false) throws -> [Conversation] {
        try lock.withLock { _ in
            try rows("""
                SELECT json FROM conversation WHERE archived = ? ORDER BY pinned_rank IS NULL, pinned_rank, last_position DESC
                """, [.integer(archived ? 1 : 0)]).map { try WireCoding.decoder().decode(Conversation.self, from: $0) }
        }
    }

    /// The kept messages of a conversation before `seq` (the newest when nil), at most
    /// `limit`, oldest first.
    public func messages(in conversation: ConversationID, before seq: Int64? = nil, limit: Int = 50) throws -> [Message] {
        try lock.withLock { _ in
            try messages(sql: "SELECT json FROM message WHERE conversation_id = ? AND in_conversation = 1 AND seq < ? ORDER BY seq DESC LIMIT ?",
                         [.text(conversation.rawValue), .integer(seq ?? Int64.max), .integer(Int64(max(0, limit)))]).reversed()
        }
    }

    /// The kept replies in the thread under `root`, oldest first.
    public func thread(_ root: MessageID, limit: Int = 50) throws -> [Message] {
        try lock.withLock { _ in
            try messages(sql: "SELECT json FROM message WHERE thread_root = ? ORDER BY seq DESC LIMIT ?",
                         [.text(root.rawValue), .integer(Int64(max(0, limit)))]).reversed()
        }
    }

    /// The kept members of a conversation, by when they joined.
    public func members(of conversation: ConversationID) throws -> [Member] {
        try lock.withLock { _ in
            try rows("SELECT json FROM member WHERE conversation_id = ?", [.text(conversation.rawValue)])
                .map { try WireCoding.decoder().decode(Member.self, from: $0) }.sorted { $0.joinedAt < $1.joinedAt }
        }
    }

    /// Kept messages whose text has every word of `text` (any case), newest first.
    public func search(_ text: String, limit: Int = 20) throws -> [Message] {
        let words = text.lowercased().split(whereSeparator: \.isWhitespace).prefix(8).map(String.init)
        guard !words.isEmpty else { return [] }
        return try lock.withLock { _ in
            let filter = words.map { _ in "text LIKE ? ESCAPE '\\'" }.joined(separator: " AND ")
            let patterns: [Value] = words.map { word in
                .text("%" + word.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                    .replacingOccurrences(of: "_", with: "\\_") + "%")
            }
            return try messages(sql: "SELECT json FROM message WHERE \(filter) ORDER BY sent_at DESC LIMIT ?", patterns + [.integer(Int64(max(0, limit)))])
        }
    }

    // MARK: - Rows

    private func put(_ conversation: Conversation) throws {
        try run("""
            INSERT INTO conversation (id, json, pinned_rank, last_position, archived) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET json = excluded.json, pinned_rank = excluded.pinned_rank, last_position = excluded.last_position,
                                           archived = excluded.archived
            """, [.text(conversation.id.rawValue), .blob(try WireCoding.encoder().encode(conversation)),
                  conversation.pinnedRank.map { .integer(Int64($0)) } ?? .null, .integer(conversation.lastPosition),
                  .integer(conversation.archived == true ? 1 : 0)])
    }

    private func put(_ message: Message) throws {
        let text = message.deletedAt == nil && message.hidden == nil ? message.content?.searchableText.lowercased() : nil
        let inConversation = message.threadID == nil || message.alsoInConversation == true
        try run("""
            INSERT INTO message (id, conversation_id, seq, sent_at, sender_id, json, text, in_conversation, thread_root)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET json = excluded.json, text = excluded.text, seq = excluded.seq
            """, [.text(message.id.rawValue), .text(message.conversationID.rawValue), .integer(message.seq),
                  .real(message.sentAt.timeIntervalSince1970), .text(message.sender.id.rawValue),
                  .blob(try WireCoding.encoder().encode(message)), text.map { .text($0) } ?? .null,
                  .integer(inConversation ? 1 : 0), message.threadID.map { .text($0.rawValue) } ?? .null])
    }

    private func put(_ member: Member, in conversation: ConversationID) throws {
        try run("""
            INSERT INTO member (conversation_id, user_id, json) VALUES (?, ?, ?)
            ON CONFLICT (conversation_id, user_id) DO UPDATE SET json = excluded.json
            """, [.text(conversation.rawValue), .text(member.user.id.rawValue), .blob(try WireCoding.encoder().encode(member))])
    }

    private func conversation(_ id: ConversationID) throws -> Conversation? {
        try rows("SELECT json FROM conversation WHERE id = ?", [.text(id.rawValue)]).first.map { try WireCoding.decoder().decode(Conversation.self, from: $0) }
    }

    private func message(_ id: MessageID) throws -> Message? {
        try messages(sql: "SELECT json FROM message WHERE id = ?", [.text(id.rawValue)]).first
    }

    private func messages(sql: String, _ values: [Value]) throws -> [Message] {
        try rows(sql, values).map { try WireCoding.decoder().decode(Message.self, from: $0) }
    }

    private func storedPosition() throws -> Int64? {
        try text("SELECT value FROM meta WHERE name = 'position'").flatMap { Int64($0) }
    }

    private func holdMessageBudget(_ conversation: ConversationID) throws {
        try run("""
            DELETE FROM message WHERE conversation_id = ?1 AND seq < (
                SELECT seq FROM message WHERE conversation_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)
            """, [.text(conversation.rawValue), .integer(Int64(budget.messagesPerConversation - 1))])
    }

    private func holdConversationBudget() throws {
        let kept = "SELECT id FROM conversation ORDER BY pinned_rank IS NULL, pinned_rank, last_position DESC LIMIT ?"
        try run("DELETE FROM message WHERE conversation_id NOT IN (\(kept))", [.integer(Int64(budget.conversations))])
        try run("DELETE FROM member WHERE conversation_id NOT IN (\(kept))", [.integer(Int64(budget.conversations))])
        try run("DELETE FROM conversation WHERE id NOT IN (\(kept))", [.integer(Int64(budget.conversations))])
    }

    /// Past the byte budget, the oldest tenth of the messages goes, until the file fits.
    private func holdByteBudget() throws {
        for _ in 0..<10 {
            let size = (try integer("PRAGMA page_count") ?? 0) * (try integer("PRAGMA page_size") ?? 4096)
            let free = (try integer("PRAGMA freelist_count") ?? 0) * (try integer("PRAGMA page_size") ?? 4096)
            guard size - free > budget.bytes else { break }
            let count = try integer("SELECT count(*) FROM message") ?? 0
            guard count > 0 else { break }
            try run("DELETE FROM message WHERE id IN (SELECT id FROM message ORDER BY sent_at LIMIT ?)", [.integer(max(1, count / 10))])
            try execute("PRAGMA incremental_vacuum")   // the file shrinks with what left it
        }
    }

    // MARK: - SQLite

    enum Value {
        case null, integer(Int64), real(Double), text(String), blob(Data)
    }

    private func transaction(_ body: () throws -> Void) throws {
        try lock.withLock { _ in
            try execute("BEGIN IMMEDIATE")
            do {
                try body()
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
            if let pages = try? integer("PRAGMA freelist_count"), pages > 256 { try? execute("PRAGMA incremental_vacuum") }
        }
    }

    private func failure(_ what: String) -> Failure {
        Failure(description: "\(what) in \(path): \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "the store is closed")")
    }

    private func execute(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw failure("cannot run \(sql.prefix(40))") }
    }

    private func prepared(_ sql: String, _ values: [Value]) throws -> OpaquePointer {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else { throw failure("cannot prepare \(sql.prefix(40))") }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .null: sqlite3_bind_null(statement, position)
            case .integer(let number): sqlite3_bind_int64(statement, position, number)
            case .real(let number): sqlite3_bind_double(statement, position, number)
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, transient)
            case .blob(let data): _ = data.withUnsafeBytes { sqlite3_bind_blob(statement, position, $0.baseAddress, Int32($0.count), transient) }
            }
        }
        return statement
    }

    private func run(_ sql: String, _ values: [Value] = []) throws {
        let statement = try prepared(sql, values)
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw failure("cannot write") }
    }

    /// The first column of every row, as bytes.
    private func rows(_ sql: String, _ values: [Value] = []) throws -> [Data] {
        let statement = try prepared(sql, values)
        defer { sqlite3_finalize(statement) }
        var result: [Data] = []
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { return result }
            guard step == SQLITE_ROW else { throw failure("cannot read") }
            let count = Int(sqlite3_column_bytes(statement, 0))
            result.append(sqlite3_column_blob(statement, 0).map { Data(bytes: $0, count: count) } ?? Data())
        }
    }

    private func integer(_ sql: String) throws -> Int64? {
        let statement = try prepared(sql, [])
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, sqlite3_column_type(statement, 0) != SQLITE_NULL else { return nil }
        return sqlite3_column_int64(statement, 0)
    }

    private func text(_ sql: String) throws -> String? {
        try rows(sql).first.map { String(decoding: $0, as: UTF8.self) }
    }
}
