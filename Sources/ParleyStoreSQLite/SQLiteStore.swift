import CParleySQLite
import Foundation
public import ParleyStore

/// The embedded engine: one SQLite file in WAL mode, one writer thread that commits many
/// callers' writes in one transaction (group commit), and a pool of reader threads.
///
/// ```
///  write(a) ─┐                       ┌─ resume a
///  write(b) ─┼─► queue ─► writer: BEGIN; a; b; c; COMMIT (one fsync) ─┼─ resume b
///  write(c) ─┘                       └─ resume c
///  read(x)  ───► queue ─► reader 1..n: BEGIN; x; COMMIT ─► resume x
/// ```
///
/// Each writer job runs inside its own SAVEPOINT, so a job that throws is rolled back alone
/// and the rest of its batch still commits. A caller is resumed only after the batch's
/// COMMIT returned, so an acknowledged write is on disk (with `synchronous=FULL`) or in the
/// operating system (with `NORMAL`): see docs/storage.md.
public final class SQLiteStore: Store {
    /// How hard SQLite works to survive power loss (PRAGMA synchronous). See docs/storage.md.
    public enum Synchronous: String, Sendable, CaseIterable {
        /// fsync the WAL on every commit: a committed write survives power loss.
        case full
        /// fsync only at checkpoints: survives kill -9, may lose the last commits on power loss.
        case normal
    }

    /// Engine settings.
    public struct Configuration: Sendable {
        /// Default: ``Synchronous/full``.
        public var synchronous: Synchronous = .full
        /// Reader threads (and connections). Default: 4.
        public var readers = 4
        /// Most writes committed in one transaction. Default: 512.
        public var maxBatch = 512
        /// The defaults.
        public init() {}
    }

    /// Process-wide SQLite settings, applied once before the first connection opens.
    private static let configured: Bool = parley_sqlite3_disable_memory_statistics() == SQLITE_OK

    /// The database file.
    public let path: String
    private let writer: WorkerThread<WriteJob>
    private let readers: WorkerThread<ReadJob>
    private let batchSizes = BatchStatistics()

    // Transaction statements go through `execute`, so they are prepared once and cached
    // like any other statement (sqlite3_exec would compile them on every call).

    /// Opens (creating if needed) the database at `path` and starts the engine's threads.
    ///
    /// - Throws: ``StoreError/cannotOpen(_:)`` when the file cannot be opened or is not SQLite.
    public init(path: String, configuration: Configuration = Configuration()) throws {
        _ = Self.configured
        self.path = path
        let writeConnection = try SQLiteConnection(path: path, readOnly: false)
        do {
            try writeConnection.run("""
                PRAGMA journal_mode = WAL;
                PRAGMA synchronous = \(configuration.synchronous.rawValue.uppercased());
                PRAGMA foreign_keys = ON;
                PRAGMA temp_store = MEMORY;
                PRAGMA cache_size = -32000;
                """)
        } catch {
            throw StoreError.cannotOpen("\(path): \(error)")
        }
        var readConnections: [SQLiteConnection] = []
        for _ in 0..<max(1, configuration.readers) {
            let connection = try SQLiteConnection(path: path, readOnly: true)
            try connection.run("PRAGMA cache_size = -16000; PRAGMA temp_store = MEMORY;")
            readConnections.append(connection)
        }
        let maxBatch = max(1, configuration.maxBatch)
        let statistics = batchSizes
        writer = WorkerThread(name: "sqlite-writer", contexts: [writeConnection], maxBatch: maxBatch) { connection, jobs in
            statistics.record(jobs.count)
            Self.commit(jobs, on: connection)
        }
        readers = WorkerThread(name: "sqlite-reader", contexts: readConnections, maxBatch: 1) { connection, jobs in
            for job in jobs { job.run(connection) }
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let job = ReadJob { connection in
                do {
                    try connection.execute("BEGIN")
                    defer { _ = try? connection.execute("COMMIT") }
                    continuation.resume(returning: try body(connection))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
            if !readers.enqueue(job) { continuation.resume(throwing: StoreError.closed) }
        }
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try await write(body, afterCommit: { _ in })
    }

    /// Hooks run on the writer thread right after COMMIT, in the order the jobs ran, which is
    /// the order their rows were written.
    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let job = WriteJob(body: body, afterCommit: afterCommit, continuation: continuation)
            if !writer.enqueue(job) { continuation.resume(throwing: StoreError.closed) }
        }
    }

    public func close() {
        writer.stop()
        readers.stop()
    }

    /// Writes committed so far and the transactions they took (their ratio is the batching).
    public var commitStatistics: (writes: Int, transactions: Int) { batchSizes.snapshot() }

    // MARK: - Group commit

    private static func commit(_ jobs: [WriteJob], on connection: SQLiteConnection) {
        do {
            try connection.execute("BEGIN IMMEDIATE")
        } catch {
            for job in jobs { job.fail(error) }
            return
        }
        if jobs.count == 1, let job = jobs.first {
            // The common case under light load: no savepoint needed.
            if job.run(connection) {
                finish([job], on: connection)
            } else if !connection.isAutocommit {
                try? connection.run("ROLLBACK")
            }
            return
        }
        var committed: [WriteJob] = []
        for (index, job) in jobs.enumerated() {
            do {
                try connection.execute("SAVEPOINT job")
            } catch {
                job.fail(error)
                continue
            }
            if job.run(connection) {
                _ = try? connection.execute("RELEASE job")
                committed.append(job)
            } else if connection.isAutocommit {
                // Some errors (I/O, full disk) make SQLite roll back the whole transaction:
                // the jobs before this one are gone too. Fail them, then carry on afresh.
                let lost = StoreError.statement(message: "transaction rolled back by another write's I/O error", constraint: false)
                for done in committed { done.fail(lost) }
                committed.removeAll()
                do {
                    try connection.execute("BEGIN IMMEDIATE")
                } catch {
                    for rest in jobs[(index + 1)...] { rest.fail(error) }
                    return
                }
            } else {
                _ = try? connection.execute("ROLLBACK TO job")
                _ = _ = try? connection.execute("RELEASE job")
            }
        }
        finish(committed, on: connection)
    }

    /// COMMITs; the jobs learn their outcome only after it returns.
    private static func finish(_ jobs: [WriteJob], on connection: SQLiteConnection) {
        do {
            try connection.execute("COMMIT")
            for job in jobs { job.succeed() }
        } catch {
            try? connection.run("ROLLBACK")
            for job in jobs { job.fail(error) }
        }
    }
}

// MARK: - Jobs

/// A write waiting for the writer thread. Only the writer thread touches `result`.
private final class WriteJob: @unchecked Sendable {
    private let body: (SQLiteConnection) throws -> Void
    private let resume: (Result<Void, any Error>) -> Void

    init<T: Sendable>(body: @escaping @Sendable (any Database) throws -> T, afterCommit: @escaping @Sendable (T) -> Void,
                      continuation: CheckedContinuation<T, any Error>) {
        let box = ResultBox<T>()
        self.body = { connection in box.value = try body(connection) }
        self.resume = { outcome in
            switch outcome {
            case .success:
                if let value = box.value {
                    afterCommit(value)
                    continuation.resume(returning: value)
                }
                else { continuation.resume(throwing: StoreError.decoding("write produced no value")) }
            case .failure(let error): continuation.resume(throwing: error)
            }
        }
    }

    /// Runs the body; false if it threw (the caller is told at once: a failure needs no commit).
    func run(_ connection: SQLiteConnection) -> Bool {
        do {
            try body(connection)
            return true
        } catch {
            resume(.failure(error))
            return false
        }
    }

    func succeed() { resume(.success(())) }
    func fail(_ error: any Error) { resume(.failure(error)) }
}

private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}

private final class ReadJob: @unchecked Sendable {
    let run: (SQLiteConnection) -> Void
    init(_ run: @escaping (SQLiteConnection) -> Void) { self.run = run }
}

/// Counts writes and transactions, for `/metrics` and the benchmark.
private final class BatchStatistics: @unchecked Sendable {
    private let lock = NSLock()
    private var writes = 0
    private var transactions = 0
    func record(_ count: Int) { lock.withLock { writes += count; transactions += 1 } }
    func snapshot() -> (writes: Int, transactions: Int) { lock.withLock { (writes, transactions) } }
}
