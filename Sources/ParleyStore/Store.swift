/// A database: scoped transactions over one engine (SQLite now, PostgreSQL later).
///
/// Every call is `async` and runs its closure on a thread the engine owns, never on the
/// caller's (an event-loop thread must not block on disk). A `write` closure runs inside one
/// transaction: it commits when the closure returns and rolls back when it throws. Engines
/// may commit several callers' writes together (group commit); each caller still sees its
/// own closure as atomic, and `write` returns only after the commit is durable.
public protocol Store: Sendable {
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

    /// Stops the engine's threads and closes its connections. Later calls throw.
    func close()
}

/// The SQL dialects an engine speaks, for the few statements that differ (full-text search).
public enum SQLDialect: Sendable, Hashable {
    /// SQLite (`?` placeholders, FTS5).
    case sqlite
    /// PostgreSQL (`$n` placeholders, tsvector), for the engine a later issue adds.
    case postgres
}

/// A connection inside a transaction. Only valid within the closure that received it.
public protocol Database {
    /// Which SQL the engine speaks.
    var dialect: SQLDialect { get }

    /// Runs a statement, discarding rows.
    ///
    /// - Returns: the number of rows changed.
    @discardableResult
    func execute(_ sql: SQL) throws -> Int

    /// Runs a query and returns every row.
    func fetchAll(_ sql: SQL) throws -> [Row]
}

extension Database {
    /// The first row, or `nil`.
    public func fetchOne(_ sql: SQL) throws -> Row? { try fetchAll(sql).first }

    /// The first column of the first row as `T`, or `nil` when there is no row.
    public func fetchValue<T: DatabaseValueConvertible>(_ type: T.Type = T.self, _ sql: SQL) throws -> T? {
        guard let row = try fetchOne(sql) else { return nil }
        return try row.get(0, as: T.self)
    }
}

/// One result row; columns are read by position, in the order the query selected them.
public struct Row: Sendable, Hashable {
    /// The column values.
    public var values: [DatabaseValue]

    /// A row of values.
    public init(_ values: [DatabaseValue]) { self.values = values }

    /// Column `index` as `T`.
    ///
    /// Inlinable so callers in other modules get a specialised copy: unspecialised, every
    /// column read looked up generic metadata at run time (5% of a history page in `perf`).
    ///
    /// - Throws: ``StoreError/decoding(_:)`` when the column is missing or has another type.
    @inlinable
    public func get<T: DatabaseValueConvertible>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard index < values.count, let value = T(databaseValue: values[index]) else {
            throw StoreError.decoding("column \(index) is not a \(T.self)")
        }
        return value
    }
}

/// A storage failure. The message names the statement's shape, never bound values.
public enum StoreError: Error, Sendable, Hashable, CustomStringConvertible {
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

    public var description: String {
        switch self {
        case .cannotOpen(let message): "cannot open the database: \(message)"
        case .statement(let message, _): "database error: \(message)"
        case .decoding(let message): "unexpected database value: \(message)"
        case .unknownMigrations(let names):
            "the database was written by a newer Parley (unknown migrations: \(names.joined(separator: ", "))); upgrade parley-server"
        case .closed: "the store is closed"
        }
    }

    /// True when a unique, check or foreign-key constraint refused the statement.
    public var isConstraintViolation: Bool {
        if case .statement(_, let constraint) = self { return constraint }
        return false
    }
}
