import Foundation
package import ParleyStore
import ParleySync
import ParleyLog

/// The PostgreSQL engine: one writer connection that commits many callers' writes in one
/// transaction (group commit, as ``SQLiteStore`` does) and a pool of reader connections, over
/// libpq on threads the engine owns.
///
/// ```
///  write(a) ─┐                                        ┌─ resume a
///  write(b) ─┼─► writer: BEGIN; lock the log; a; b; COMMIT ─┼─ resume b
///  read(x)  ───► reader 1..n: BEGIN REPEATABLE READ; x; COMMIT ─► resume x
/// ```
///
/// **Positions across nodes** (docs/decisions/0018-positions-across-nodes.md): every write
/// transaction first takes one transaction-scoped advisory lock, the event log's lock, and
/// holds it to COMMIT. Writers on every node therefore commit one after another, so commit
/// order is position order, and PostgreSQL makes a commit visible before it releases its
/// locks: a snapshot always sees a prefix of the log, and "the largest position I can see" is
/// committed-up-to, as on SQLite. The lock also serialises migrations when several nodes
/// start at once.
///
/// **A log of several shards** (docs/decisions/0026, part 4) has a lock per shard (shard 0's
/// is the log's lock above, so a log of one shard is exactly the above). Each shard gets a
/// writer of its own, with its own connection, which takes only its shard's lock: writes to
/// different shards commit in parallel, from one node and from several, and within a shard the
/// rule above holds. A write that may append to any shard goes to the writer that takes every
/// shard's lock, in ascending order (no deadlock with a shard's writer, which holds one).
///
/// A lost connection (the server restarted, the network dropped) fails the batch with
/// ``StoreError/retryable(_:)`` and the next batch connects again; the domain retries and
/// then answers 503, so nothing is acknowledged that was not committed.
package final class PostgresStore: GroupCommitStore {
    /// Engine settings.
    package struct Configuration: Sendable {
        /// Reader connections. Default: 4.
        package var readers = 4
        /// Most writes committed in one transaction. Default: 512.
        package var maxBatch = 512
        /// Whether every write takes the event log's lock first. Only a test turns it off, to
        /// show the trap the lock closes (a reader passing a lower position that commits later).
        package var takesLogLock = true
        /// The defaults.
        package init() {}
    }

    /// The advisory lock every write transaction takes first (the bytes of "Parley").
    static let logLock: Int64 = 0x5061_726C_6579

    /// Where the store connects, with any password removed (for messages and logs).
    package let redactedURL: String
    private let writer: WorkerThread<WriteJob>
    /// One writer per shard once the log has several (``useLogShards(_:)``); empty before.
    private let shardWriters = LockedValue<[WorkerThread<WriteJob>]>([])
    /// What the writer for every shard begins with: the locks of every shard, ascending.
    private let beginAll: LockedValue<[String]>
    private let shardRoundTrips = LockedValue<[RoundTrips]>([])
    private let configuration: Configuration
    private let readers: WorkerThread<ReadJob<PostgresConnection>>
    private let batchSizes = BatchStatistics()
    /// Batches rolled back whole and run again (their `transactions`), and the writes in them.
    private let batchesRerun = BatchStatistics()
    /// Batches of several writes committed with a savepoint per write (after one was run again).
    private let savepointBatches = BatchStatistics()
    private let writerRoundTrips: RoundTrips
    /// Statements the writers answered from reads sent ahead of their batch (``WriteDeclaration``).
    private let answeredAhead = RoundTrips()
    private let readerRoundTrips: [RoundTrips]
    private let url: String
    /// The node's claim on the database: its connection, who to tell if it is lost, and the
    /// timer that checks it.
    private struct Claim {
        var connection: PostgresConnection?
        var lost: (@Sendable (String) -> Void)?
        var timer: (any DispatchSourceTimer)?
    }
    private let claim = LockedValue(Claim())

    /// Connects the writer and every reader to `url` (`postgres://user:password@host:port/db`
    /// or libpq's `key=value` form) and starts the engine's threads.
    ///
    /// - Throws: ``StoreError/cannotOpen(_:)`` when the server cannot be reached or refuses.
    package init(url: String, configuration: Configuration = Configuration()) throws {
        redactedURL = Self.redact(url)
        self.url = url
        // A server that does not answer must not hold a writer forever (libpq reads this
        // when a connection is opened; an explicit connect_timeout in the URL wins).
        setenv("PGCONNECT_TIMEOUT", "5", 0)
        let writeConnection: PostgresConnection
        var readConnections: [PostgresConnection] = []
        do {
            writeConnection = try PostgresConnection(conninfo: url)
            for _ in 0..<max(1, configuration.readers) { readConnections.append(try PostgresConnection(conninfo: url)) }
        } catch let error as StoreError {
            // Its cause alone: not "busy", and not "cannot open" twice.
            let cause = switch error {
            case .retryable(let message), .cannotOpen(let message): message
            default: error.description
            }
            throw StoreError.cannotOpen("\(redactedURL): \(cause)")
        }
        let statistics = batchSizes
        let runAgain = batchesRerun
        let withSavepoints = savepointBatches
        self.configuration = configuration
        writerRoundTrips = writeConnection.roundTrips
        writeConnection.answeredAhead = answeredAhead
        let beginAll = LockedValue(Self.begin(locking: configuration.takesLogLock ? [0] : []))
        self.beginAll = beginAll
        writer = WorkerThread(name: "pg-writer", contexts: [writeConnection], maxBatch: max(1, configuration.maxBatch)) { connection, jobs in
            statistics.record(jobs.count)
            Self.commit(jobs, on: connection, begin: beginAll.withLock { $0 }, runAgain: runAgain, withSavepoints: withSavepoints)
        }
        readerRoundTrips = readConnections.map(\.roundTrips)
        readers = WorkerThread(name: "pg-reader", contexts: readConnections, maxBatch: 1) { connection, jobs in
            for job in jobs { job.run(connection) }
        }
    }

    /// One snapshot for the whole closure, as SQLite's read transaction gives. BEGIN travels
    /// with the closure's first statement and COMMIT is sent without waiting for its answer
    /// (the connection's next statement reads it): a read of one statement is one round trip,
    /// where BEGIN, the statement and COMMIT were three. A connection found dead by that first
    /// statement (a server restart cuts idle connections without a word) is made again and the
    /// closure run once more, so the caller never sees it: a read changes nothing.
    package func read<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try await readers.read { (connection: PostgresConnection) in
            do {
                return try Self.readOnce(body, on: connection)
            } catch let error as StoreError where error.isRetryable && !connection.isConnected {
                return try Self.readOnce(body, on: connection)
            }
        }
    }

    private static func readOnce<T>(_ body: (any Database) throws -> T, on connection: PostgresConnection) throws -> T {
        connection.readUnanswered()
        if !connection.isConnected { try connection.connect() }
        try connection.enqueueControl(["BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"])
        let value: T
        do {
            value = try body(connection)
        } catch {
            connection.abandonPending()
            if connection.isConnected { try? connection.run("ROLLBACK") }
            throw error
        }
        try connection.sendWithoutWaiting(["COMMIT"])
        return value
    }

    /// Hooks run on the writer thread right after COMMIT, in the order the jobs ran: with the
    /// log's lock, that is the order of their positions on every node.
    @discardableResult
    package func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer.write(body, afterCommit: afterCommit)
    }

    /// A write to one shard goes to that shard's writer (once the log has several); anything
    /// else to the writer that takes every shard's lock.
    @discardableResult
    package func write<T: Sendable>(shard: Int?, _ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer(for: shard).write(body, afterCommit: afterCommit)
    }

    /// A write that rides the next batch of its shard's writer (or of the writer for every
    /// shard), or goes alone after `within`.
    @discardableResult
    package func write<T: Sendable>(shard: Int?, ridingWithin within: Duration, _ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer(for: shard).write(body, ridingWithin: within, afterCommit: afterCommit)
    }

    /// A write that declares its first reads: its batch may send them ahead
    /// (``commitWithoutSavepoints(_:on:begin:)``).
    @discardableResult
    package func write<T: Sendable>(shard: Int?, declaring declaration: WriteDeclaration, _ body: @escaping @Sendable (any Database) throws -> T,
                                   afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await writer(for: shard).write(body, declaring: declaration, afterCommit: afterCommit)
    }

    private func writer(for shard: Int?) -> WorkerThread<WriteJob> {
        guard let shard else { return writer }
        return shardWriters.withLock { $0.indices.contains(shard) ? $0[shard] : nil } ?? writer
    }

    /// Starts a writer per shard, each on a connection of its own taking its shard's lock,
    /// and makes the writer for every shard take all of them. Nothing changes for one shard.
    /// A connection that cannot be made now is made by the writer's first batch.
    package func useLogShards(_ shards: Int) async {
        guard shards > 1, shardWriters.withLock({ $0.isEmpty }) else { return }
        let locks = configuration.takesLogLock
        beginAll.withLock { $0 = Self.begin(locking: locks ? Array(0..<shards) : []) }
        var writers: [WorkerThread<WriteJob>] = []
        var trips: [RoundTrips] = []
        let statistics = batchSizes
        let runAgain = batchesRerun
        let withSavepoints = savepointBatches
        for shard in 0..<shards {
            let connection = (try? PostgresConnection(conninfo: url)) ?? PostgresConnection(unconnected: url)
            connection.answeredAhead = answeredAhead
            trips.append(connection.roundTrips)
            let begin = Self.begin(locking: locks ? [shard] : [])
            writers.append(WorkerThread(name: "pg-writer-s\(shard)", contexts: [connection], maxBatch: max(1, configuration.maxBatch)) { connection, jobs in
                statistics.record(jobs.count)
                Self.commit(jobs, on: connection, begin: begin, runAgain: runAgain, withSavepoints: withSavepoints)
            })
        }
        shardRoundTrips.withLock { $0 = trips }
        shardWriters.withLock { $0 = writers }
    }

    /// BEGIN, then each of these shards' locks in ascending order (separate statements, so the
    /// order is the order they are taken), each statement on its own: a pipeline sends them
    /// one by one (with a batch's reads ahead), else they go as one text. Shard `k`'s lock is
    /// the log's lock plus `k`.
    static func begin(locking shards: [Int]) -> [String] {
        ["BEGIN"] + shards.sorted().map { "SELECT pg_advisory_xact_lock(\(logLock + Int64($0)))" }
    }

    package func close() {
        writer.stop()
        for shardWriter in shardWriters.withLock({ $0 }) { shardWriter.stop() }
        readers.stop()
        claim.withLock { claim in
            claim.timer?.cancel()
            claim.timer = nil
            // Released now, not when the server gets round to the closed connection: a node
            // restarting on the same database must find it free.
            try? claim.connection?.run("SELECT pg_advisory_unlock_all()")
            claim.connection = nil
        }
    }

    /// The advisory lock a node holds for its life on a connection of its own (the bytes of "nodes").
    static let nodeLock: Int64 = 0x6E_6F64_6573

    /// Claims this database for this process until ``close()`` or the process ends (the
    /// server drops the connection, and with it the claim, when a process dies, even by
    /// kill -9). A node that shares the database with others (it has a bus between the
    /// nodes) claims `shared`; one that must be alone claims exclusively.
    ///
    /// - Returns: false when another process holds a claim that conflicts: an exclusive one,
    ///   or any claim when this one is exclusive.
    /// - Throws: ``StoreError`` when the server cannot be reached.
    package func claimNode(shared: Bool) throws -> Bool {
        let held = try claim.withLock { try takeClaim(&$0, shared: shared) }
        if held { watchClaim(shared: shared) }
        return held
    }

    /// Called when the claim was lost (PostgreSQL restarted) and another process took the
    /// database meanwhile, so this node could not claim it again.
    package var onClaimLost: (@Sendable (String) -> Void)? {
        get { claim.withLock { $0.lost } }
        set { claim.withLock { $0.lost = newValue } }
    }

    private func takeClaim(_ claim: inout Claim, shared: Bool) throws -> Bool {
        let connection = try PostgresConnection(conninfo: url)
        let function = shared ? "pg_try_advisory_lock_shared" : "pg_try_advisory_lock"
        let held = try connection.fetchValue(Bool.self, SQL(stringLiteral: "SELECT \(function)(\(Self.nodeLock))")) ?? false
        if held { claim.connection = connection }
        return held
    }

    /// A restart of PostgreSQL ends the claim with its connection: every 5 s the claim's
    /// connection is checked, and a lost claim taken again.
    private func watchClaim(shared: Bool) {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "parley.pg-claim"))
        timer.schedule(deadline: .now() + 5, repeating: 5)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            claim.withLock { claim in
                if let connection = claim.connection {
                    if (try? connection.fetchValue(Int64.self, "SELECT 1")) != nil { return }
                    claim.connection = nil
                    Logger.process.labelled("parley.node").warning("the node's claim on the database was lost; taking it again")
                }
                switch Result(catching: { try takeClaim(&claim, shared: shared) }) {
                case .success(true):
                    Logger.process.labelled("parley.node").info("the node's claim on the database is held again")
                case .failure:
                    return  // PostgreSQL still down: next tick
                case .success(false):
                    claim.lost?("lost the claim on \(redactedURL) when PostgreSQL restarted, and another node without --redis-url holds it now")
                    claim.lost = nil  // said once
                }
            }
        }
        claim.withLock { $0.timer = timer }
        timer.resume()
    }

    /// Writes committed so far and the transactions they took (their ratio is the batching).
    package var commitStatistics: (writes: Int, transactions: Int) { batchSizes.snapshot() }

    /// Batches rolled back whole because a write failed after it changed something, and run again.
    package var batchesRunAgain: Int? { batchesRerun.snapshot().transactions }

    /// Writes that ran once in a batch that was rolled back whole, and ran again.
    package var writesRunAgain: Int { batchesRerun.snapshot().writes }

    /// Batches of several writes committed with a savepoint per write: those run again, and
    /// the ones after them (``savepointBatchesAfterRunAgain``).
    package var batchesWithSavepoints: Int { savepointBatches.snapshot().transactions }

    /// How many times the writer has waited for PostgreSQL (round trips, every write together).
    /// How many writes wait for the writer of `shard` (nil: the writer for every shard).
    package func queuedWrites(shard: Int? = nil) -> Int { writer(for: shard).queuedCount }

    /// How many statements of writes were answered from reads sent ahead of their batch.
    package var readsAnsweredAhead: Int { answeredAhead.total }

    package var writeRoundTrips: Int? { writerRoundTrips.total + shardRoundTrips.withLock { $0.reduce(0) { $0 + $1.total } } }

    /// How many times the readers have waited for PostgreSQL (round trips, every read together).
    package var readRoundTrips: Int { readerRoundTrips.reduce(0) { $0 + $1.total } }

    /// `url` without its password.
    static func redact(_ url: String) -> String {
        guard let components = URLComponents(string: url), components.scheme != nil, components.password != nil else {
            return url.replacingOccurrences(of: #"password\s*=\s*\S+"#, with: "password=REDACTED", options: .regularExpression)
        }
        var redacted = components
        redacted.percentEncodedPassword = "REDACTED"
        return redacted.string ?? url
    }

    // MARK: - Group commit

    /// Batches committed with a savepoint per write after one was run again, before the
    /// writer tries without them once more: a stream of writes that fail after they changed
    /// something costs their neighbours a second run at most once in this many batches.
    static let savepointBatchesAfterRunAgain = 32

    /// One transaction for the batch, without a savepoint per write when the writer can
    /// (``commitWithoutSavepoints(_:on:begin:)``), else with one
    /// (``commitWithSavepoints(_:on:begin:)``).
    private static func commit(_ jobs: [WriteJob], on connection: PostgresConnection, begin: [String],
                               runAgain: BatchStatistics, withSavepoints: BatchStatistics) {
        guard jobs.count > 1, connection.batchesWithSavepoints == 0 else {
            if jobs.count > 1 {
                connection.batchesWithSavepoints -= 1
                withSavepoints.record(jobs.count)
            }
            commitWithSavepoints(jobs, on: connection, begin: begin)
            return
        }
        guard let (rest, ranTwice) = commitWithoutSavepoints(jobs, on: connection, begin: begin) else { return }
        runAgain.record(ranTwice)
        connection.batchesWithSavepoints = savepointBatchesAfterRunAgain
        if !rest.isEmpty {
            withSavepoints.record(rest.count)
            commitWithSavepoints(rest, on: connection, begin: begin)
        }
    }

    /// The declared first reads of the batch's writes that may have them answered ahead
    /// (``WriteDeclaration/readAhead(_:)``), with their write's place in the batch, to be sent
    /// in one wait where each was a wait of its own as its write ran (decision 0026, part 5).
    /// None when fewer than two: no wait saved.
    private static func readsAhead(_ jobs: [WriteJob]) -> [(write: Int, sql: SQL)] {
        let ahead = WriteDeclaration.readAhead(jobs.map(\.declaration))
        var reads: [(write: Int, sql: SQL)] = []
        for (index, job) in jobs.enumerated() where ahead[index] {
            for read in job.declaration?.reads ?? [] { reads.append((index, read)) }
        }
        return reads.count > 1 ? reads : []
    }

    /// Starts the batch's transaction with its reads ahead sent after BEGIN and the locks, all
    /// in one wait. Any failure (a refused read is one write's fault; a dead connection is
    /// nobody's) leaves no transaction open and returns false: the caller begins as usual,
    /// connecting again if it must, and each write reads as it runs, so a failure falls on the
    /// write whose read it is.
    private static func beginReadingAhead(_ reads: [(write: Int, sql: SQL)], begin: [String], on connection: PostgresConnection) -> Bool {
        guard connection.isConnected else { return false }
        do {
            try connection.enqueueControl(begin)
            try connection.readAhead(reads)
            return true
        } catch {
            rollBack(connection)
            return false
        }
    }

    /// The batch in one transaction with no savepoints: a savepoint per write is two more
    /// statements and a subtransaction, whose row locks (a foreign key's check locks its
    /// parent row) PostgreSQL keeps as MultiXacts; without them a send costs PostgreSQL about
    /// a tenth less CPU (docs/decisions/0026, part 5).
    ///
    /// A write that fails before it changed anything (a refusal after its reads, the common
    /// failure) is answered and the batch goes on. A write that fails after it changed
    /// something, or whose statement was refused (which fails the transaction), can be undone
    /// only with everything: the transaction rolls back, that write gets its error, and the
    /// writes not yet answered are returned, to be run again. Every statement in the pipeline
    /// carries the place of its write, so the failed write is known whichever wait found it.
    ///
    /// - Returns: nil when every write was answered; else the writes still to run, in order,
    ///   and how many of them had run already.
    private static func commitWithoutSavepoints(_ jobs: [WriteJob], on connection: PostgresConnection,
                                                begin: [String]) -> (rest: [WriteJob], ranTwice: Int)? {
        connection.currentWrite = 0
        let reads = readsAhead(jobs)
        if reads.isEmpty || !beginReadingAhead(reads, begin: begin, on: connection) {
            do {
                try Self.begin(begin, on: connection)
            } catch {
                rollBack(connection)
                for job in jobs { job.fail(error) }
                return nil
            }
        }
        // The writes that ran and are not answered yet, with their place in the batch.
        var ran: [(index: Int, job: WriteJob)] = []
        /// Rolls back, answers the write at `failed` with `error`, and returns every other
        /// write that ran, then `rest`.
        func runAgain(failed: Int, error: any Error, rest: ArraySlice<WriteJob>) -> (rest: [WriteJob], ranTwice: Int) {
            rollBack(connection)
            var again: [WriteJob] = []
            for entry in ran {
                if entry.index == failed { entry.job.fail(error) } else { again.append(entry.job) }
            }
            // The write this one found the failure in ran too, unless it is the one that failed.
            let current = rest.isEmpty || rest.startIndex == failed ? 0 : 1
            let ranTwice = again.count + current
            for (index, job) in zip(rest.indices, rest) {
                if index == failed { job.fail(error) } else { again.append(job) }
            }
            return (again, ranTwice)
        }
        for (index, job) in jobs.enumerated() {
            connection.currentWrite = index
            let thrown = job.attempt(connection)
            // A wait of this write that found an earlier write's statement failed (its own
            // statements were skipped with it, and it threw).
            if let earlier = connection.takeEarlierFailure() {
                return runAgain(failed: earlier.write, error: earlier.error, rest: jobs[index...])
            }
            guard let thrown else {
                ran.append((index, job))
                continue
            }
            // What is still owed is read now: an earlier write's failure there is the cause.
            if connection.owesAnswers, let found = connection.abandonPending() {
                return runAgain(failed: found.write, error: found.error, rest: jobs[index...])
            }
            if !connection.currentWriteChanged && !connection.transactionFailed && connection.isConnected {
                job.fail(thrown)
                continue
            }
            return runAgain(failed: index, error: thrown, rest: jobs[index...])
        }
        do {
            if let failure = try StoreMetrics.timedCommit({ try connection.flush(then: ["COMMIT"]) }) {
                return runAgain(failed: failure.write, error: failure.error, rest: [])
            }
        } catch {
            // COMMIT's answer never came: it may or may not have committed; the callers are
            // told to retry (every write a client retries is idempotent by its client id).
            rollBack(connection)
            for entry in ran { entry.job.fail(error) }
            return nil
        }
        connection.forgetReadAhead()
        for entry in ran { entry.job.succeed() }
        return nil
    }

    /// One transaction for the batch. Every wait for the server is a round trip, so they are
    /// merged: BEGIN, the lock and the first savepoint go together; a write's queued statements
    /// (``Database/enqueue(_:)``) travel with its next wait, and what it still owes at its end
    /// travels, with the release of its savepoint and the opening of the next, with the next
    /// write's first wait (or with COMMIT after the last). So a write is confirmed by the next
    /// one: when that finds it failed, the transaction rolls back to the failed write's
    /// savepoint, the failed write gets its error and the next, whose statements were skipped,
    /// a retryable one (``Chat/run`` tries it again in a later batch). At most one write is
    /// unconfirmed: one that made no wait of its own waits at its end.
    private static func commitWithSavepoints(_ jobs: [WriteJob], on connection: PostgresConnection, begin: [String]) {
        let several = jobs.count > 1
        connection.currentWrite = 0
        do {
            try Self.begin(several ? begin + ["SAVEPOINT job"] : begin, on: connection)
        } catch {
            rollBack(connection)
            for job in jobs { job.fail(error) }
            return
        }
        if !several, let job = jobs.first {
            if job.run(connection) { finish([(0, job)], on: connection, several: false) } else { rollBack(connection) }
            return
        }
        // The writes in the transaction, with their place in the batch; the last may be unconfirmed.
        var committed: [(index: Int, job: WriteJob)] = []
        for (index, job) in jobs.enumerated() {
            let isLast = index == jobs.count - 1
            connection.currentWrite = index
            let ran = job.run(connection)
            var earlier = connection.takeEarlierFailure()
            var own: StoreError?
            if ran && earlier == nil {
                if isLast {
                    // COMMIT carries what it owes (finish, below).
                    committed.append((index, job))
                    break
                }
                do {
                    if connection.owesForEarlierWrite {
                        // It made no wait, so the write before it is still unconfirmed: wait now.
                        if let found = try connection.flush(then: ["RELEASE job", "SAVEPOINT job"]) {
                            if found.write < index { earlier = found } else { own = found.error }
                        }
                    } else {
                        try connection.enqueueControl(["RELEASE job", "SAVEPOINT job"])
                    }
                } catch {
                    lose(committed.map(\.job) + jobs[index...], error: error, on: connection)
                    return
                }
                if earlier == nil && own == nil {
                    committed.append((index, job))
                    continue
                }
            } else if !ran, let found = connection.abandonPending(), found.write < index {
                earlier = found
            }
            // Something failed: roll back to the savepoint before it — the earlier write's, when
            // that one failed (the savepoints after it were skipped with it), else this one's.
            connection.abandonPending()
            do {
                try connection.run("ROLLBACK TO job")
            } catch {
                lose(committed.map(\.job) + (ran ? jobs[index...] : jobs[(index + 1)...]), error: error, on: connection)
                return
            }
            if let earlier, let failed = committed.popLast() {
                failed.job.fail(earlier.error)
            }
            if ran {
                job.fail(own ?? StoreError.retryable("a write committed together with this one failed; nothing of this one was stored"))
            }
        }
        finish(committed, on: connection, several: true)
    }

    /// Starts a transaction, connecting again first if the connection was lost, and once more
    /// if BEGIN finds it dead (a server restart cuts idle connections without a word): nothing
    /// has run yet, so the caller never sees that failure. The statements go as one text, in
    /// one wait.
    private static func begin(_ statements: [String], on connection: PostgresConnection) throws {
        let statement = statements.joined(separator: "; ")
        if !connection.isConnected { try connection.connect() }
        do {
            try connection.run(statement)
        } catch let error as StoreError where error.isRetryable && !connection.isConnected {
            try connection.connect()
            try connection.run(statement)
        }
    }

    /// The transaction is lost (the connection dropped): every job in it fails, retryably.
    private static func lose(_ jobs: some Sequence<WriteJob>, error: any Error, on connection: PostgresConnection) {
        rollBack(connection)
        let lost = (error as? StoreError)?.isRetryable == true
            ? error : StoreError.retryable("the transaction was lost with another write's failure: \(error)")
        for job in jobs { job.fail(lost) }
    }

    private static func rollBack(_ connection: PostgresConnection) {
        connection.forgetReadAhead()
        connection.abandonPending()
        if connection.isConnected { try? connection.run("ROLLBACK") }
    }

    /// COMMITs; the jobs learn their outcome only after it returns. A COMMIT whose answer never
    /// came (the connection dropped) may or may not have committed: the callers are told to
    /// retry, and every write the clients retry is idempotent by its client id.
    ///
    /// COMMIT travels with what the last writes still owe; when one of those statements failed,
    /// COMMIT did not run: the transaction rolls back to the failed write's savepoint (or
    /// entirely, for a batch of one), that write gets its error and any after it a retryable
    /// one, and the rest is committed.
    private static func finish(_ jobs: [(index: Int, job: WriteJob)], on connection: PostgresConnection, several: Bool) {
        var committing = jobs
        do {
            if let failure = try StoreMetrics.timedCommit({ try connection.flush(then: ["COMMIT"]) }) {
                let failedAt = committing.firstIndex { $0.index >= failure.write } ?? committing.endIndex
                let rolledBack = committing[failedAt...]
                committing.removeSubrange(failedAt...)
                for (offset, entry) in rolledBack.enumerated() {
                    entry.job.fail(offset == 0 && entry.index == failure.write ? failure.error
                                   : StoreError.retryable("a write committed together with this one failed; nothing of this one was stored"))
                }
                if several && !committing.isEmpty {
                    try connection.run("ROLLBACK TO job")
                    try StoreMetrics.timedCommit { try connection.run("COMMIT") }
                } else {
                    rollBack(connection)
                }
            }
            for entry in committing { entry.job.succeed() }
        } catch {
            rollBack(connection)
            for entry in committing { entry.job.fail(error) }
        }
    }
}

/// One-off statements outside any store (creating and dropping databases for tests and tools).
package enum PostgresAdmin: Sendable {
    /// Connects to `conninfo`, runs `text` outside a transaction, and disconnects.
    ///
    /// - Throws: ``StoreError`` when the server cannot be reached or the statement fails.
    package static func run(_ conninfo: String, _ text: String) throws {
        let connection = try PostgresConnection(conninfo: conninfo)
        try connection.run(text)
    }
}
