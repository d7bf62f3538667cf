import CParleySQLite
import Foundation
package import ParleyStore

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
package final class SQLiteStore: GroupCommitStore {
    /// One writer is one shard: nothing to start (``Chat`` never makes a SQLite log of several).
    package func useLogShards(_ shards: Int) async {}

    /// How hard SQLite works to survive power loss (PRAGMA synchronous). See docs/storage.md.
    package enum Synchronous: String, Sendable, CaseIterable {
        /// fsync the WAL on every commit: a committed write survives power loss.
        case full
        /// fsync only at checkpoints: survives kill -9, may lose the last commits on power loss.
        case normal
    }

    /// Engine settings.
    package struct Configuration: Sendable {
        /// Default: ``Synchronous/full``.
        package var synchronous: Synchronous = .full
        /// Reader threads (and connections). Default: 4.
        package var readers = 4
        /// Most writes committed in one transaction. Default: 512.
        package var maxBatch = 512
        /// The defaults.
        package init() {}
    }

    /// Process-wide SQLite settings, applied once before the first connection opens.
    private static let configured: Bool = parley_sqlite3_disable_memory_statistics() == SQLITE_OK

    /// The database file.
    package let path: String
    private let writer: WorkerThread<WriteJob>
    private let readers: WorkerThread<ReadJob<SQLiteConnection>>
    private let batchSizes = BatchStatistics()

    // Transaction statements go through `execute`, so they are prepared once and cached
    // like any other statement (sqlite3_exec would compile them on every call).

    /// Opens (creating if needed) the database at `path` and starts the engine's threads.
    ///
    /// - Throws: ``StoreError/cannotOpen(_:)`` when the file cannot be opened or is not SQLite.
    package init(path: String, configuration: Configuration = Configuration()) throws {
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
                PRAGMA secure_delete = ON;
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

    package func read<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try await readers.read { (connection: SQLiteConnection) in
            try connection.execute("BEGIN")
            defer { _ = try? connection.execute("COMMIT") }
            return try body(connection)
        }
    }

    /// Hooks run on the writer thread right after COMMIT, in the order the jobs ran, which is
    /// the order their rows were written.
    @discardableResult
    package func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer.write(body, afterCommit: afterCommit)
    }

    /// In process, a read costs no wait: the declaration changes nothing.
    @discardableResult
    package func write<T: Sendable>(shard: Int?, declaring declaration: WriteDeclaration, _ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer.write(body, afterCommit: afterCommit)
    }

    /// One writer: a riding write goes with its next batch, whatever the shard.
    @discardableResult
    package func write<T: Sendable>(shard: Int?, ridingWithin within: Duration, _ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer.write(body, ridingWithin: within, afterCommit: afterCommit)
    }

    package func close() {
        writer.stop()
        readers.stop()
    }

    /// A truncating checkpoint on a connection of its own (the writer's run inside
    /// transactions, where SQLite refuses one): the database file gets the log's pages and the
    /// log is emptied, so pages a delete zeroed are no longer beside their old contents.
    package func reclaim() async {
        let path = path
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                if let connection = try? SQLiteConnection(path: path, readOnly: false) {
                    _ = try? connection.run("PRAGMA busy_timeout = 2000; PRAGMA wal_checkpoint(TRUNCATE);")
                }
                continuation.resume()
            }
        }
    }

    /// Writes committed so far and the transactions they took (their ratio is the batching).
    package var commitStatistics: (writes: Int, transactions: Int) { batchSizes.snapshot() }

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
            _ = try StoreMetrics.timedCommit { try connection.execute("COMMIT") }
            for job in jobs { job.succeed() }
        } catch {
            try? connection.run("ROLLBACK")
            for job in jobs { job.fail(error) }
        }
    }
}
