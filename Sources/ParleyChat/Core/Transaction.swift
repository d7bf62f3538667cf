package import ParleyStore
package import ParleyWire

/// An event as one write appended it, handed to every ``TransactionHook`` inside that write's
/// transaction and, once committed, published to the devices (docs/decisions/0013-one-write-path.md).
package struct AppendedEvent: Sendable {
    /// The event as clients see it (message events carry the message as the write left it).
    package var record: EventRecord
    /// The conversation's internal key.
    package var conversationKey: Int64
    /// The conversation's kind.
    package var conversationKind: ConversationKind
    /// The user a membership or receipt event is about (internal key).
    package var userKey: Int64?
    /// The one user who receives it, when its kind's audience is one person
    /// (``EventAudience/subject``) or it is about a shadow message (its author shadow-banned,
    /// or blocked by the other person of a direct chat: only the author sees it); nil when
    /// every member does. Stored with the event (`event.recipient_id`), so the live
    /// publication, the replay and feed, webhooks and push read the same fact.
    package var recipient: Int64?
    /// Who receives it besides ``recipient`` (``EventAudience/subjectAndAuthors``: the authors
    /// a receipt tells), stored in `event_recipient`; empty for every other event.
    package var alsoTo: [Int64] = []
    /// A named channel's event (its log is a conversation of kind `pusher`, which has no
    /// members): published to the channel's subscribers instead of to members.
    package var channelEvent: ChannelEvent? = nil
    /// The event's JSON (``EventRecord/writeJSON(into:)``), written once by the write path
    /// before the hooks run: the realtime frame and a webhook's data are both these bytes.
    package internal(set) var json: [UInt8]? = nil

    /// Creates the value; each argument sets the property of the same name.
    package init(record: EventRecord, conversationKey: Int64, conversationKind: ConversationKind, userKey: Int64?, recipient: Int64? = nil) {
        self.record = record
        self.conversationKey = conversationKey
        self.conversationKind = conversationKind
        self.userKey = userKey
        self.recipient = recipient
    }

    /// The event's JSON, from ``json`` when the write path wrote it.
    package var eventJSON: [UInt8] {
        if let json { return json }
        var writer = JSONWriter(capacity: 512)
        record.writeJSON(into: &writer)
        return writer.bytes
    }

    /// Whether the app's backend hears it: its kind's rule says so and it is everyone's to see.
    var reachesWebhooks: Bool { record.type.rule?.webhook == true && recipient == nil && channelEvent == nil }

    /// The publication that delivers it live: to its recipient alone, or to the
    /// conversation's members (subscribing a newcomer first and unsubscribing a leaver after).
    var publication: Publication {
        if let channelEvent { return .channel(channelEvent) }
        let audience: Audience = recipient.map { .users([$0] + alsoTo) } ?? .members(conversation: conversationKey)
        return .event(position: record.position, conversation: conversationKey, audience: audience,
                      joins: record.type == .memberAdded ? userKey : nil, leaves: record.type == .memberRemoved ? userKey : nil,
                      frame: json.map(EventRecord.frame(wrapping:)) ?? record.frame)
    }
}

/// Something a feature writes in the same transaction as the events that cause it: the push
/// and webhook outboxes write one row per event here, so a row exists if and only if its
/// event was committed (DESIGN.md guarantee 8).
package protocol TransactionHook: Sendable {
    /// Called inside the write's transaction, after its body, with every event it appended in
    /// position order (never called for a write that appended none). Throwing rolls the whole
    /// write back: the change, its events and every other hook's rows.
    func didAppend(_ events: [AppendedEvent], in db: any Database) throws
}

/// The event log's two rules, in one place (docs/decisions/0014-positions-and-epochs.md):
///
/// 1. **Allocation.** A conversation's next seq comes from one statement that increments its
///    counter row (`UPDATE conversation SET last_seq = last_seq + 1 … RETURNING`): the row is
///    locked until commit, so two writers can never take one seq, and a loser waits instead of
///    failing. A position is the `event` row's key, taken when the row is inserted.
/// 2. **Committed up to.** ``committedPosition(_:)`` is the position below which every event a
///    snapshot will ever see is already in it. Replay-then-live rests on it: a device replays
///    to it, then takes live events after it, and nothing can commit below it later.
///
/// On SQLite both hold by construction: one writer commits transactions one after another,
/// so commit order is position order and the largest position in a snapshot is committed-up-to.
/// An engine with concurrent writers (PostgreSQL) must keep rule 2 true as its decision says
/// (the position counter row taken in the transaction and held to commit), or replay could
/// pass over a lower position that commits later.
enum EventLog {
    /// Every event at or below this position is visible in `db`'s snapshot, and none will
    /// commit below it later.
    static func committedPosition(_ db: any Database) throws -> Int64 {
        try db.fetchValue(Int64.self, "SELECT coalesce(max(position), 0) FROM event") ?? 0
    }

    /// Rule 2 for each shard of a log of `shards` (docs/decisions/0026, part 4): the newest
    /// position of each shard in `db`'s snapshot, one index probe per shard
    /// (``shardIndexStatement(shards:)``). Within a shard, positions commit in order (the
    /// shard's lock), so each is that shard's committed-up-to.
    static func committedCursor(_ db: any Database, shards: Int) throws -> LogCursor {
        guard shards > 1 else { return LogCursor(position: try committedPosition(db)) }
        let columns = (0..<shards).map { "(\(newestStatement(shard: $0, shards: shards))) AS s\($0)" }.joined(separator: ", ")
        guard let row = try db.fetchOne(SQL(stringLiteral: "SELECT " + columns)) else { return LogCursor(shards: shards) }
        return try LogCursor(positions: try (0..<shards).map { try row.get("s\($0)", as: Int64?.self) ?? 0 })
    }

    /// The newest position of one shard, as SQL text: the shard's expression is written out
    /// (not bound) so that PostgreSQL answers it from ``shardIndexStatement(shards:)``.
    static func newestStatement(shard: Int, shards: Int) -> String {
        "SELECT coalesce(max(position), 0) FROM event WHERE position % \(shards) = \(shard)"
    }

    /// The index of a log of several shards: by shard, then position.
    static func shardIndexStatement(shards: Int) -> SQL {
        SQL(stringLiteral: "CREATE INDEX event_by_shard ON event ((position % \(shards)), position)")
    }

    /// The setting that records how many shards the log has; see ``Chat/logShards``.
    static let shardsSetting = "log.shards"

    /// `column` is after `cursor`: past the newest position of its own shard. With one shard
    /// this is `column > position`, which an index range answers.
    static func after(_ column: SQL, _ cursor: LogCursor) -> SQL {
        guard cursor.shards > 1 else { return "\(column) > \(cursor[0])" }
        var condition: SQL = "\(column) > CASE \(column) % \(Int64(cursor.shards))"
        for shard in 0..<cursor.shards { condition = "\(condition) WHEN \(Int64(shard)) THEN \(cursor[shard])" }
        return "\(condition) END"
    }

    /// Takes the conversation's next seq (rule 1).
    static func nextSeq(_ db: any Database, conversation: Int64) throws -> Int64 {
        guard let seq = try db.fetchValue(Int64.self, nextSeqStatement(conversation: conversation)) else {
            throw ChatError.conversationNotFound
        }
        return seq
    }

    /// The statement of rule 1, answering `last_seq`: alone, or as the first part of a
    /// statement that also inserts the row that takes it (PostgreSQL's `WITH … INSERT`).
    static func nextSeqStatement(conversation: Int64) -> SQL {
        "UPDATE conversation SET last_seq = last_seq + 1 WHERE id = \(conversation) RETURNING last_seq"
    }

    /// The setting that names this log's history; see ``Chat/epoch``.
    static let epochSetting = "log.epoch"
}

/// A write transaction of the domain: the database, and the events the write has appended so
/// far. Created and used only inside one ``Chat/write(_:)`` closure, on the store's writer
/// thread; it forwards ``Database`` so helpers that only read or write rows take it as is.
final class Transaction: Database {
    /// An appended event; `prebuilt` when the writer already had its record (a send), else it
    /// is read back once, with every other such event, when the write ends.
    private struct Entry {
        var position: Int64
        var prebuilt: AppendedEvent?
    }

    let db: any Database
    private var entries: [Entry] = []
    /// Whether to note the newest position before this write's first event (for ``links``).
    private let linking: Bool
    /// How many shards the log has, and the one this write may append to (nil: any; it then
    /// holds every shard's lock).
    let shards: Int
    private let shard: Int?

    /// How many shards the log has (``Chat/logShards``), for rows that record a shard.
    var logShards: Int { shards }
    /// The newest position of each shard before this write's first event in it, once noted.
    private var previous: [Int: Int64] = [:]

    /// The sequences of the message's key and the event's position (PostgreSQL), read once
    /// when the database is opened (``Chat/migrate()``).
    struct Sequences: Sendable, Equatable {
        let message: String
        let event: String
        /// ``next(_:)`` of each, built once (a send names both).
        let nextMessage: SQL
        let nextEvent: SQL

        init(message: String, event: String) {
            self.message = message
            self.event = event
            nextMessage = Self.next(message)
            nextEvent = Self.next(event)
        }

        /// `nextval` of `sequence` named as a constant, which PostgreSQL resolves once when it
        /// prepares the statement (`pg_get_serial_sequence` was a catalog scan per send).
        static func next(_ sequence: String) -> SQL {
            SQL(stringLiteral: "nextval('\(sequence.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''"))'::regclass)")
        }
    }
    /// Read by ``Chat/migrate()`` on PostgreSQL; nil on SQLite, which has no sequences.
    private let sequences: Sequences?

    init(_ db: any Database, links: Bool = false, shards: Int = 1, shard: Int? = nil, sequences: Sequences? = nil) {
        self.db = db
        self.linking = links
        self.shards = max(1, shards)
        self.shard = shards > 1 ? shard : nil
        self.sequences = sequences
    }

    /// The write's place in the log, one link per shard it appended to, when it appended
    /// events and links were asked for.
    var links: [EventLink] {
        guard linking, !entries.isEmpty else { return [] }
        var last: [Int: Int64] = [:]
        for entry in entries {
            let shard = Int(entry.position % Int64(shards))
            last[shard] = max(last[shard] ?? 0, entry.position)
        }
        return last.keys.sorted().compactMap { shard in
            guard let previous = previous[shard], let last = last[shard] else { return nil }
            return EventLink(shard: shard, shards: shards, previous: previous, last: last)
        }
    }

    /// Before the first event: the newest committed position of each shard the write may
    /// append to, read inside the transaction (under the shards' locks on PostgreSQL, alone on
    /// SQLite), so each is exactly the one before this write's.
    private func notePrevious() throws {
        guard linking, previous.isEmpty else { return }
        if shards == 1 {
            previous[0] = try EventLog.committedPosition(db)
        } else if let shard {
            previous[shard] = try db.fetchValue(Int64.self, SQL(stringLiteral: EventLog.newestStatement(shard: shard, shards: shards))) ?? 0
        } else {
            let cursor = try EventLog.committedCursor(db, shards: shards)
            for shard in 0..<shards { previous[shard] = cursor[shard] }
        }
    }

    /// An event's position, as the insert writes it: the event table's own identity in a log
    /// of one shard; in a log of several, the next of the log's counter times the shards plus
    /// the conversation's shard, so positions of every shard keep the order they were taken in.
    private func positionValue(conversation: Int64) -> SQL {
        "nextval('log_counter') * \(Int64(shards)) + (SELECT shard FROM conversation WHERE id = \(conversation))"
    }

    /// A new message's counter statement that also moves the conversation's activity to it
    /// (PostgreSQL): it takes the seq (EventLog rule 1) and draws the message's key and its
    /// event's position ahead of their inserts, so that the row it updates is updated once,
    /// where the activity was a statement of its own. It answers `last_seq`, `position` and
    /// `message_id`, for ``appendInserting(_:conversation:kind:actor:recipient:payload:now:activity:)``
    /// with the counter named `counter`.
    /// Throws if the sequences were not read (a `Chat` used before ``Chat/migrate()``).
    func counterMovingActivity(conversation: Int64) throws -> SQL {
        guard let sequences else {
            throw StoreError.decoding("the send's sequences are not known: open the database with Chat.migrate() before writing")
        }
        let position: SQL = shards > 1 ? "nextval('log_counter') * \(Int64(shards)) + shard" : sequences.nextEvent
        let message = sequences.nextMessage
        return """
            UPDATE conversation SET last_seq = last_seq + 1, last_position = \(position),
                                    last_message_id = \(message)
            WHERE id = \(conversation) RETURNING last_seq, last_position AS position, last_message_id AS message_id
            """
    }

    /// A write declared for one shard appends only there; anything else is a mistake in the
    /// domain that must not commit (its events would be out of their shard's order).
    private func checkShard(_ position: Int64) throws {
        guard let shard, Int(position % Int64(shards)) != shard else { return }
        throw StoreError.decoding("a write declared for shard \(shard) appended position \(position), of shard \(position % Int64(shards)): declare the write's conversation, or none")
    }

    var dialect: SQLDialect { db.dialect }
    @discardableResult
    func execute(_ sql: SQL) throws -> Int { try db.execute(sql) }
    func fetchAll(_ sql: SQL) throws -> [Row] { try db.fetchAll(sql) }
    @discardableResult
    func enqueue(_ sql: SQL) throws -> Int? { try db.enqueue(sql) }
    func fetchEach(_ statements: [SQL]) throws -> [[Row]] { try db.fetchEach(statements) }

    /// Whether the write appended anything.
    var hasEvents: Bool { !entries.isEmpty }

    /// Whether a conversation's app has webhook endpoints, as this write read it (its access
    /// read answers it, in this transaction, so no endpoint can appear between).
    private var webhooks: [Int64: Bool] = [:]

    /// Notes what the access read found about the conversation's app's endpoints.
    func noteWebhooks(conversation: Int64, present: Bool) { webhooks[conversation] = present }

    /// Whether the conversation's app has webhook endpoints; nil when this write did not read it.
    func hasWebhooks(conversation: Int64) -> Bool? { webhooks[conversation] }

    /// Runs `callback` once this write has committed (never if it rolls back): a hook that
    /// wrote outbox rows wakes its workers then, not before the rows are visible.
    func onCommit(_ callback: @escaping @Sendable () -> Void) {
        committedCallbacks.append(callback)
    }

    private(set) var committedCallbacks: [@Sendable () -> Void] = []

    /// Appends an event of `kind`, as its rule says (``EventKind/rules``): history takes a seq
    /// (allocated here unless the caller took it already, as a send does for its message row)
    /// and moves the conversation's activity; an annotation takes no seq and no activity. The
    /// payload is written one way (``EventPayload/stored``), and the one recipient, when its
    /// audience is one person or it is about a shadow message, is stored with it.
    ///
    /// A kind whose audience the write decides (``EventAudience/subjectAndAuthors``) names it
    /// in `recipients`: `nil` for every member, or the users (the subject first), the rest
    /// stored in `event_recipient`.
    ///
    /// `activity: false` (a reply in a thread only) leaves the conversation's place in the
    /// list and its last message as they were.
    ///
    /// - Returns: the seq (nil for an annotation) and position.
    @discardableResult
    func append(conversation: Int64, kind: EventKind, seq: Int64? = nil, actor: Int64?, message: Int64? = nil,
                user: Int64? = nil, role: MemberRole? = nil, payload: EventPayload = EventPayload(), now: Int64, activity: Bool = true,
                recipients: [Int64]? = nil, prebuilt: ((Int64) -> AppendedEvent)? = nil) throws -> (seq: Int64?, position: Int64) {
        guard let rule = kind.rule else { throw StoreError.decoding("no rule for the event kind \(kind.rawValue); declare it in EventKind.rules") }
        try notePrevious()
        let seq = rule.history ? try seq ?? EventLog.nextSeq(db, conversation: conversation) : nil
        // Who alone receives it, decided in the insert itself (no round trip on the send path).
        let recipient: SQL = switch rule.audience {
        case .subject: "\(user)"
        case .subjectAndAuthors: "\(recipients?.first)"
        case .members: message.map { "(SELECT CASE WHEN shadow = 1 THEN author_id END FROM message WHERE id = \($0))" } ?? "NULL"
        case .channel: "NULL"
        }
        let insert: SQL = shards == 1 ? """
            INSERT INTO \(Self.eventColumns)
            VALUES (\(conversation), \(seq), \(kind.rawValue), \(actor), \(message), \(user), \(role?.rawValue), \(payload.stored), \(now),
                    \(recipient))
            RETURNING position
            """ : """
            INSERT INTO \(Self.shardedEventColumns)
            VALUES (\(positionValue(conversation: conversation)), \(conversation), \(seq), \(kind.rawValue), \(actor), \(message), \(user),
                    \(role?.rawValue), \(payload.stored), \(now), \(recipient))
            RETURNING position
            """
        guard let position = try db.fetchValue(Int64.self, insert) else { throw ChatError.internalError }
        try checkShard(position)
        if rule.audience == .subjectAndAuthors, let others = recipients?.dropFirst(), !others.isEmpty {
            try db.enqueue("INSERT INTO event_recipient (position, user_id) SELECT \(position), id FROM account WHERE id IN (\(list: Array(others)))")
        }
        try appended(position: position, conversation: conversation, rule: rule, message: message, activity: activity, prebuilt: prebuilt?(position))
        return (seq, position)
    }

    /// The event table and the columns an append writes.
    private static let eventColumns: SQL = "event (conversation_id, seq, type, actor_id, message_id, user_id, role, payload, created_at, recipient_id)"
    /// The same with the position, which a log of several shards computes (``positionValue(conversation:)``).
    private static let shardedEventColumns: SQL = "event (position, conversation_id, seq, type, actor_id, message_id, user_id, role, payload, created_at, recipient_id)"

    /// Appends a history event of `kind` together with the message it is about, in one
    /// statement and one wait (PostgreSQL): `rows` is data-modifying common table expressions,
    /// one named `inserted` answering the new message's `id` and `seq` (the seq taken by
    /// EventLog rule 1 inside `rows`). Otherwise as ``append(conversation:kind:seq:actor:message:user:role:payload:now:activity:recipients:prebuilt:)``,
    /// for a kind whose audience is the members (`recipient`: the one who alone receives it,
    /// for a shadow message). The event is handed over later with ``provide(_:)``, or read back.
    /// With `activityMoved`, `rows` has ``counterMovingActivity(conversation:)`` as `counter`:
    /// the event takes the position it drew, and the activity needs no statement of its own.
    ///
    /// - Returns: the message's seq and key and the event's position; nil when `rows` inserted nothing.
    func appendInserting(_ rows: SQL, conversation: Int64, kind: EventKind, actor: Int64, recipient: Int64?,
                         payload: EventPayload, now: Int64, activity: Bool,
                         activityMoved: Bool = false) throws -> (seq: Int64, message: Int64, position: Int64)? {
        guard let rule = kind.rule, rule.history, rule.audience == .members else {
            throw StoreError.decoding("appendInserting is for history events every member receives, not \(kind.rawValue)")
        }
        let (prior, notesPrevious) = try priorInStatement()
        let insert: SQL = activityMoved ? """
            WITH \(rows)
            INSERT INTO \(Self.shardedEventColumns)
            SELECT counter.position, \(conversation), inserted.seq, \(kind.rawValue), \(actor), inserted.id, NULL, NULL,
                   \(payload.stored), \(now), \(recipient)
            FROM inserted, counter
            RETURNING position, seq, message_id, \(prior) AS previous
            """ : shards == 1 ? """
            WITH \(rows)
            INSERT INTO \(Self.eventColumns)
            SELECT \(conversation), inserted.seq, \(kind.rawValue), \(actor), inserted.id, NULL, NULL, \(payload.stored), \(now), \(recipient)
            FROM inserted
            RETURNING position, seq, message_id, \(prior) AS previous
            """ : """
            WITH \(rows)
            INSERT INTO \(Self.shardedEventColumns)
            SELECT \(positionValue(conversation: conversation)), \(conversation), inserted.seq, \(kind.rawValue), \(actor), inserted.id, NULL, NULL,
                   \(payload.stored), \(now), \(recipient)
            FROM inserted
            RETURNING position, seq, message_id, \(prior) AS previous
            """
        guard let row = try db.fetchOne(insert) else { return nil }
        let (seq, message, position): (Int64, Int64, Int64) = (try row.get("seq"), try row.get("message_id"), try row.get("position"))
        try checkShard(position)
        if notesPrevious { previous[shard ?? 0] = try row.get("previous", as: Int64?.self) ?? 0 }
        try appended(position: position, conversation: conversation, rule: rule, message: message,
                     activity: activity && !activityMoved, prebuilt: nil)
        return (seq, message, position)
    }

    /// Who hears an event whose audience the write decides (``EventAudience/subjectAndAuthors``),
    /// for ``appendToSubjectsAndAuthors(_:)``.
    enum DecidedAudience {
        /// Every member.
        case everyone
        /// The subject alone.
        case subject
        /// The subject and the users `authors` answers (one column, `author`, distinct), unless
        /// they are more than `most` or, with the subject, all `memberCount` members: then
        /// every member.
        case subjectAndAuthors(authors: SQL, most: Int, memberCount: Int)
    }

    /// The recipients `audience` names, read in a statement of their own (SQLite, in process),
    /// as ``append(conversation:kind:seq:actor:message:user:role:payload:now:activity:recipients:prebuilt:)``
    /// takes them: nil for every member, else `subject` first.
    func recipients(_ audience: DecidedAudience, subject: Int64) throws -> [Int64]? {
        switch audience {
        case .everyone: return nil
        case .subject: return [subject]
        case .subjectAndAuthors(let authors, let most, let memberCount):
            let found = try db.fetchAll(authors + " LIMIT \(Int64(most + 1))").map { try $0.get("author", as: Int64.self) }
            guard found.count <= most, found.count + 1 < memberCount else { return nil }
            return [subject] + found
        }
    }

    /// An annotation whose audience the write decides (a `receipt.updated`), appended after
    /// `rows`, data-modifying common table expressions (the watermarks it announces), in one
    /// statement (PostgreSQL): the authors it names are read, the event inserted with its
    /// recipients, and the rows changed, where they were four statements and three waits.
    /// `prebuilt` builds the event from its position and recipients (nil: every member; else
    /// the subject first).
    struct SubjectAppend {
        var rows: SQL
        var conversation: Int64
        var kind: EventKind
        var actor: Int64
        var subject: Int64
        var audience: DecidedAudience
        var payload: EventPayload
        var now: Int64
        var prebuilt: (_ position: Int64, _ recipients: [Int64]?) -> AppendedEvent
    }

    /// Appends each ``SubjectAppend``, in order. They must not depend on each other (each
    /// changes its own rows: one member's watermarks): they are sent together and answered in
    /// one wait (``Database/fetchEach(_:)``).
    ///
    /// - Returns: each one's recipients, as ``append(conversation:kind:seq:actor:message:user:role:payload:now:activity:recipients:prebuilt:)`` takes them.
    @discardableResult
    func appendToSubjectsAndAuthors(_ appends: [SubjectAppend]) throws -> [[Int64]?] {
        guard !appends.isEmpty else { return [] }
        for append in appends {
            guard let rule = append.kind.rule, !rule.history, rule.audience == .subjectAndAuthors else {
                throw StoreError.decoding("appendToSubjectsAndAuthors is for annotations whose audience the write decides, not \(append.kind.rawValue)")
            }
        }
        // Only the first statement can be the write's first event.
        let (prior, notesPrevious) = try priorInStatement()
        let statements = appends.enumerated().map { index, append in
            subjectAndAuthorsStatement(append, prior: index == 0 ? prior : "NULL")
        }
        let answers = try db.fetchEach(statements)
        var recipientsOfEach: [[Int64]?] = []
        for (index, (append, rows)) in zip(appends, answers).enumerated() {
            guard let row = rows.first, let rule = append.kind.rule else { throw ChatError.internalError }
            let position: Int64 = try row.get("position")
            try checkShard(position)
            if index == 0, notesPrevious { previous[shard ?? 0] = try row.get("previous", as: Int64?.self) ?? 0 }
            let recipients: [Int64]? = try row.get("authors", as: String?.self).map { authors in
                [append.subject] + authors.split(separator: ",").compactMap { Int64($0) }
            }
            try appended(position: position, conversation: append.conversation, rule: rule, message: nil, activity: false,
                         prebuilt: append.prebuilt(position, recipients))
            recipientsOfEach.append(recipients)
        }
        return recipientsOfEach
    }

    /// The statement of one ``SubjectAppend``, `prior` its column answering the newest
    /// position before it (``priorInStatement()``).
    private func subjectAndAuthorsStatement(_ append: SubjectAppend, prior: SQL) -> SQL {
        // `named`: the others who hear it besides the subject, NULL for every member.
        let named: SQL = switch append.audience {
        case .everyone: "named AS (SELECT NULL::bigint[] AS authors)"
        case .subject: "named AS (SELECT '{}'::bigint[] AS authors)"
        case .subjectAndAuthors(let authors, let most, let memberCount): """
            authors AS (\(authors) LIMIT \(Int64(most + 1))),
            named AS (SELECT CASE WHEN count(*) <= \(Int64(most)) AND count(*) + 1 < \(Int64(memberCount))
                                  THEN coalesce(array_agg(author), '{}') END AS authors FROM authors)
            """
        }
        // A log of one shard: the event table's identity; of several, drawn here.
        let (columns, drawn): (SQL, SQL) = shards == 1 ? (Self.eventColumns, "")
            : (Self.shardedEventColumns, positionValue(conversation: append.conversation) + ", ")
        return """
            WITH \(append.rows), \(named),
            appended AS (
                INSERT INTO \(columns)
                SELECT \(drawn)\(append.conversation), NULL, \(append.kind.rawValue), \(append.actor), NULL, \(append.subject), NULL, \(append.payload.stored), \(append.now),
                       CASE WHEN named.authors IS NULL THEN NULL ELSE \(append.subject) END
                FROM named RETURNING position),
            recipients AS (INSERT INTO event_recipient (position, user_id) SELECT appended.position, unnest(named.authors) FROM appended, named)
            SELECT appended.position, array_to_string(named.authors, ',') AS authors, \(prior) AS previous FROM appended, named
            """
    }

    /// For a statement that appends the write's first event: a column answering the newest
    /// position so far (of the write's shard), read in that statement (its snapshot does not
    /// see the row it inserts), and whether the write notes it (linking, and nothing noted yet);
    /// `NULL` otherwise. A write that may append to any shard of several reads every shard's
    /// first, in a statement of its own.
    private func priorInStatement() throws -> (column: SQL, notes: Bool) {
        if linking, previous.isEmpty, shards > 1, shard == nil { try notePrevious() }
        guard linking && previous.isEmpty else { return ("NULL", false) }
        return (shards == 1 ? "(SELECT coalesce(max(position), 0) FROM event)"
                : SQL(stringLiteral: "(\(EventLog.newestStatement(shard: shard ?? 0, shards: shards)))"), true)
    }

    /// Hands the write path an event appended without it (``appendInserting``), so it is not
    /// read back at the end of the write.
    func provide(_ event: AppendedEvent) {
        guard let index = entries.lastIndex(where: { $0.position == event.record.position }) else { return }
        entries[index].prebuilt = event
    }

    /// What follows an event's insert: the conversation's activity moves (queued: nothing
    /// waits for it), and the write remembers the event.
    private func appended(position: Int64, conversation: Int64, rule: EventRule, message: Int64?, activity: Bool,
                          prebuilt: AppendedEvent?) throws {
        if !rule.history || !activity {
            // An annotation, or a reply in a thread only: the conversation keeps its place and last message.
        } else if let message {
            try db.enqueue("UPDATE conversation SET last_position = \(position), last_message_id = \(message) WHERE id = \(conversation)")
        } else {
            try db.enqueue("UPDATE conversation SET last_position = \(position) WHERE id = \(conversation)")
        }
        entries.append(Entry(position: position, prebuilt: prebuilt))
    }

    /// The events this write appended, in position order, as they stand at the end of the
    /// write (an event read back shows the message after every change the write made).
    func appendedEvents() throws -> [AppendedEvent] {
        let missing = entries.filter { $0.prebuilt == nil }.map(\.position)
        var readBack: [Int64: AppendedEvent] = [:]
        if !missing.isEmpty {
            let rows = try db.fetchAll("""
                SELECT \(Chat.eventColumns) FROM event e \(Chat.eventJoins) WHERE e.position IN (\(list: missing)) ORDER BY e.position
                """)
            for event in try Chat.storedEvents(db, rows[...], viewer: nil) { readBack[event.record.position] = event }
        }
        return try entries.map { entry in
            guard let event = entry.prebuilt ?? readBack[entry.position] else {
                throw StoreError.decoding("event \(entry.position) was appended but cannot be read back")
            }
            return event
        }
    }
}
