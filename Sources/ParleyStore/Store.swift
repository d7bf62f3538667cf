/// A database: scoped transactions over one engine (SQLite now, PostgreSQL later).
///
/// Every call is `async` and runs its closure on a thread the engine owns, never on the
/// caller's (an event-loop thread must not block on disk). A `write` closure runs inside one
/// transaction: it commits when the closure returns and rolls back when it throws. Engines
/// may commit several callers' writes together (group commit); each caller still sees its
/// own closure as atomic, and `write` returns only after the commit is durable.
///
/// A `write` closure may run more than once before it commits: an engine that commits a batch
/// without a savepoint per write rolls the whole batch back when one write fails after it
/// changed something, and runs the others again (PostgreSQL, docs/decisions/0026, part 5). So
/// a closure changes nothing outside its transaction (what it must do once goes in its
/// after-commit hook), and what it takes from elsewhere it keeps for its next run.
package protocol Store: Sendable {
    /// Runs `body` in a read-only transaction that sees a consistent snapshot.
    func read<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T

    /// Runs `body` in a write transaction; returns once its effects are durable.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T

    /// Runs `body` in a write transaction, then `afterCommit` with its value once the
    /// transaction is committed and before this call returns.
    ///
    /// Engines call `afterCommit` hooks in commit order, one at a time: a hook that publishes
    /// the events the transaction appended publishes them in the order they were stored
    /// (docs/decisions/0008-publish-in-commit-order.md). A hook must be quick and must not
    /// wait for the store. It is not called when the write fails.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T

    /// Runs `body` in a write transaction that appends events to one shard of the event log
    /// only (docs/decisions/0026, part 4), then `afterCommit` as ``write(_:afterCommit:)``.
    /// An engine with a writer per shard commits it beside the other shards' writes; nil, or
    /// an engine with one writer, runs it as ``write(_:afterCommit:)``. Hooks run in commit
    /// order within a shard.
    @discardableResult
    func write<T: Sendable>(shard: Int?, _ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T

    /// ``write(shard:_:afterCommit:)`` for a write that need not begin a transaction of its own
    /// (gathered receipts, decision 0026 part 3): it waits up to `within` for the writer to
    /// begin a batch for another write and commits in it, sharing its transaction and its
    /// flush to disk, or goes alone once `within` has passed. An engine without group commit
    /// runs it at once. No default: a store that wraps another must pass it on.
    @discardableResult
    func write<T: Sendable>(shard: Int?, ridingWithin within: Duration, _ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T

    /// ``write(shard:_:afterCommit:)`` for a write that says up front which reads it makes
    /// first and what it depends on and changes (``WriteDeclaration``): an engine whose every
    /// statement is a round trip may send those reads for a whole batch before its writes run,
    /// one wait for all of them, and answer each write's read from there when no write before
    /// it in the batch could have changed it. An engine in process runs it as
    /// ``write(shard:_:afterCommit:)``. No default: a store that wraps another must pass it on.
    @discardableResult
    func write<T: Sendable>(shard: Int?, declaring declaration: WriteDeclaration, _ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T

    /// Learns how many shards the event log has, once the schema says (after migrating). An
    /// engine that commits shards in parallel starts a writer per shard, and its writer for
    /// every shard takes every shard's lock from then on; others need nothing. No default: a
    /// store that wraps another must pass it on, or the engine would lock one shard of several.
    func useLogShards(_ shards: Int) async

    /// Stops the engine's threads and closes its connections. Later calls throw.
    func close()

    /// Makes what deletes freed leave the engine's files now where the engine can (SQLite: a
    /// truncating checkpoint, so the write-ahead log no longer holds old pages). Best effort.
    func reclaim() async
}

extension Store {
    /// Engines whose files need nothing (PostgreSQL: its vacuum) do nothing.
    package func reclaim() async {}

    /// One writer for every shard (SQLite: one writer is one shard).
    @discardableResult
    package func write<T: Sendable>(shard: Int?, _ body: @escaping @Sendable (any Database) throws -> T,
                                    afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await write(body, afterCommit: afterCommit)
    }

    /// A write with no after-commit work: every engine's `write(_:)` is this.
    @discardableResult
    package func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try await write(body, afterCommit: { _ in })
    }
}

/// The SQL dialects an engine speaks, for the few statements that differ (full-text search).
package enum SQLDialect: Sendable, Hashable {
    /// SQLite (`?` placeholders, FTS5).
    case sqlite
    /// PostgreSQL (`$n` placeholders, tsvector), for the engine a later issue adds.
    case postgres
}

/// A connection inside a transaction. Only valid within the closure that received it.
package protocol Database {
    /// Which SQL the engine speaks.
    var dialect: SQLDialect { get }

    /// Runs a statement, discarding rows.
    ///
    /// - Returns: the number of rows changed.
    @discardableResult
    func execute(_ sql: SQL) throws -> Int

    /// Runs a query and returns every row.
    func fetchAll(_ sql: SQL) throws -> [Row]

    /// Runs a statement whose outcome the caller does not need before its next one. An engine
    /// may send it without waiting (PostgreSQL's pipeline: it is answered together with the
    /// next statement that waits, or when the write ends); its failure fails the write all the
    /// same, only later. Use it for statements that only change rows and whose failure the
    /// caller would not catch; the default runs it at once.
    ///
    /// - Returns: the number of rows changed when the engine ran it at once; nil when it was sent
    ///   without waiting.
    @discardableResult
    func enqueue(_ sql: SQL) throws -> Int?

    /// Runs queries that do not depend on each other's answers, in order, and returns each
    /// one's rows. An engine may send them all before reading any answer (PostgreSQL's
    /// pipeline: one wait for all of them, with anything queued before); the default runs them
    /// one by one. A failure throws as ``fetchAll(_:)``'s would, and the queries after the
    /// failed one did not run.
    func fetchEach(_ statements: [SQL]) throws -> [[Row]]
}

extension Database {
    /// Runs it at once (engines without a pipeline).
    @discardableResult
    package func enqueue(_ sql: SQL) throws -> Int? { try execute(sql) }

    /// Runs them one by one (engines without a pipeline).
    package func fetchEach(_ statements: [SQL]) throws -> [[Row]] { try statements.map { try fetchAll($0) } }

    /// The first row, or `nil`.
    package func fetchOne(_ sql: SQL) throws -> Row? { try fetchAll(sql).first }

    /// The first column of the first row as `T`, or `nil` when there is no row.
    package func fetchValue<T: DatabaseValueConvertible>(_ type: T.Type = T.self, _ sql: SQL) throws -> T? {
        guard let row = try fetchOne(sql) else { return nil }
        return try row.get(at: 0, as: T.self)
    }
}

/// What a write reads first and what it depends on and changes, said before it runs
/// (``Store/write(shard:declaring:_:afterCommit:)``, decision 0026 part 5).
///
/// An engine may run `reads` at the start of the write's batch, before the writes ahead of
/// it in the batch, and answer the write's identical statements from there. It does so only
/// when every write ahead of it declared too and none of them `changes` a key this one
/// `dependsOn`: the declaration must name every key under which another declared write could
/// change a row these reads return, in a way that matters to this write.
package struct WriteDeclaration: Sendable, Hashable {
    /// The statements the write runs first, exactly as it runs them (text and values).
    package var reads: [SQL]
    /// Keys whose rows the reads return.
    package var dependsOn: Set<String>
    /// Keys whose rows the write changes.
    package var changes: Set<String>

    package init(reads: [SQL], dependsOn: Set<String>, changes: Set<String>) {
        self.reads = reads
        self.dependsOn = dependsOn
        self.changes = changes
    }

    /// Which writes of a batch, in order, may have their reads answered before the batch runs:
    /// those declared, after only declared writes none of which changes what they depend on.
    package static func readAhead(_ declarations: [WriteDeclaration?]) -> [Bool] {
        var changed: Set<String> = []
        var undeclared = false
        return declarations.map { declaration in
            guard let declaration, !undeclared else {
                undeclared = true
                return false
            }
            defer { changed.formUnion(declaration.changes) }
            return changed.isDisjoint(with: declaration.dependsOn)
        }
    }
}

/// The names of a result's columns, shared by every row of one result (and cached with the
/// prepared statement), so reading a column by name is one dictionary lookup.
package final class ColumnNames: Sendable, Hashable {
    /// The names, in the order the query selected them.
    package let names: [String]
    /// Index by name; a name selected twice maps to nil (ambiguous: alias one of them).
    private let indexes: [String: Int?]

    /// The columns of one statement.
    package init(_ names: [String]) {
        self.names = names
        var indexes: [String: Int?] = [:]
        for (index, name) in names.enumerated() {
            indexes[name] = indexes[name] == nil ? .some(index) : .some(nil)
        }
        self.indexes = indexes
    }

    /// The index of `name`.
    ///
    /// - Throws: ``StoreError/decoding(_:)`` when no column or more than one has that name.
    @inlinable
    package func index(of name: String) throws -> Int {
        guard let found = lookup(name) else { throw StoreError.decoding("no column named \(name)") }
        guard let index = found else { throw StoreError.decoding("two columns are named \(name): alias one with AS") }
        return index
    }

    @usableFromInline
    func lookup(_ name: String) -> Int?? { indexes[name] }

    package static func == (lhs: ColumnNames, rhs: ColumnNames) -> Bool { lhs === rhs || lhs.names == rhs.names }
    package func hash(into hasher: inout Hasher) { hasher.combine(names) }
}

/// One result row. Code reads columns by name (``get(_:as:)-(String,_)``): a column added to a
/// query can never shift what another read means. Reading by position is left for the one
/// place where it is the point, ``Database/fetchValue(_:_:)`` (the first column).
package struct Row: Sendable, Hashable {
    /// The column values.
    package var values: [DatabaseValue]
    /// The columns' names.
    package let columns: ColumnNames

    /// A row of values under `columns`.
    package init(_ values: [DatabaseValue], columns: ColumnNames) {
        self.values = values
        self.columns = columns
    }

    /// The column named `name` (the name the query gave it, `AS` alias or the bare column
    /// name) as `T`.
    ///
    /// Inlinable so callers in other modules get a specialised copy: unspecialised, every
    /// column read looked up generic metadata at run time (5% of a history page in `perf`).
    ///
    /// - Throws: ``StoreError/decoding(_:)`` when there is no such column, the name is
    ///   ambiguous, or the value has another type.
    @inlinable
    package func get<T: DatabaseValueConvertible>(_ name: String, as type: T.Type = T.self) throws -> T {
        let index = try columns.index(of: name)
        guard let value = T(databaseValue: values[index]) else {
            throw StoreError.decoding("column \(name) is not a \(T.self)")
        }
        return value
    }

    /// Column `index` as `T`: for the first column of a one-column query and for tests of the
    /// engines themselves. Domain code reads by name.
    ///
    /// - Throws: ``StoreError/decoding(_:)`` when the column is missing or has another type.
    @inlinable
    package func get<T: DatabaseValueConvertible>(at index: Int, as type: T.Type = T.self) throws -> T {
        guard index < values.count, let value = T(databaseValue: values[index]) else {
            throw StoreError.decoding("column \(index) is not a \(T.self)")
        }
        return value
    }
}

/// A storage failure. The message names the statement's shape, never bound values.
package enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The engine could not open or create the database.
    case cannotOpen(String)
    /// A statement failed; `constraint` is set when a constraint (unique, check, …) refused it.
    case statement(message: String, constraint: Bool)
    /// A column had another type than the code expected.
    case decoding(String)
    /// The database was migrated by a newer version that knows migrations this one does not.
    case unknownMigrations([String])
    /// The store was closed.
    case closed
    /// The engine could not run the transaction now but may on a retry: the database was
    /// busy or locked, a serialization or deadlock failure (PostgreSQL 40001, 40P01), or the
    /// connection to the server was lost before anything was committed.
    case retryable(String)
    /// The disk (or the database's quota) is full: nothing was written, and a retry succeeds
    /// only once space is freed (SQLite's SQLITE_FULL or ENOSPC, PostgreSQL's 53100).
    case full(String)

    package var description: String {
        switch self {
        case .cannotOpen(let message): "cannot open the database: \(message)"
        case .statement(let message, _): "database error: \(message)"
        case .decoding(let message): "unexpected database value: \(message)"
        case .unknownMigrations(let names):
            "the database was written by a newer Parley (unknown migrations: \(names.joined(separator: ", "))); upgrade parley-server"
        case .closed: "the store is closed"
        case .retryable(let message): "\(message) (it may pass: try again)"
        case .full(let message): "the disk is full: \(message)"
        }
    }

    /// True when running the same transaction again may succeed: nothing was committed, and
    /// the cause was contention or a passing outage, not the transaction itself. The domain
    /// retries these a few times before answering 503 (`ChatError.storeUnavailable`).
    package var isRetryable: Bool {
        if case .retryable = self { return true }
        return false
    }

    /// True when a unique, check or foreign-key constraint refused the statement.
    package var isConstraintViolation: Bool {
        if case .statement(_, let constraint) = self { return constraint }
        return false
    }
}

/// An engine that commits many callers' writes together and counts how well that goes
/// (`/metrics`: `parley_store_writes_total`, `parley_store_commits_total`).
package protocol GroupCommitStore: Store {
    /// Writes committed so far and the transactions they took (their ratio is the batching).
    var commitStatistics: (writes: Int, transactions: Int) { get }
    /// How many times the writer waited for a database server (round trips); nil for an
    /// engine in the process (`/metrics`: `parley_store_round_trips_total`).
    var writeRoundTrips: Int? { get }
    /// How many batches were rolled back whole because one write failed after it changed
    /// something, and run again without it; nil for an engine that never does
    /// (`/metrics`: `parley_store_batches_run_again_total`).
    var batchesRunAgain: Int? { get }
}

extension GroupCommitStore {
    /// In the process: no round trips.
    package var writeRoundTrips: Int? { nil }
    /// A savepoint per write: a batch is never run again.
    package var batchesRunAgain: Int? { nil }
}
