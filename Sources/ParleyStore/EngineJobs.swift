import Foundation
package import ParleySync

// The jobs both engines queue on their worker threads (``WorkerThread``): one shape of group
// commit, whatever the connection underneath.

/// A write waiting for an engine's writer thread. Only the writer thread touches it.
package final class WriteJob: @unchecked Sendable {
    // @unchecked: made on the caller's thread and handed to the writer thread through the queue's lock; from then on only the writer thread calls `body` and `resume`, once each.
    private let body: (any Database) throws -> Void
    private let resume: (Result<Void, any Error>) -> Void

    /// What the write said it reads first (``Store/write(shard:declaring:_:afterCommit:)``).
    package let declaration: WriteDeclaration?

    package init<T: Sendable>(body: @escaping @Sendable (any Database) throws -> T, afterCommit: @escaping @Sendable (T) -> Void,
                              continuation: CheckedContinuation<T, any Error>, declaration: WriteDeclaration? = nil) {
        self.declaration = declaration
        let box = ResultBox<T>()
        self.body = { connection in box.value = try body(connection) }
        self.resume = { outcome in
            switch outcome {
            case .success:
                if let value = box.value {
                    afterCommit(value)
                    continuation.resume(returning: value)
                } else {
                    continuation.resume(throwing: StoreError.decoding("write produced no value"))
                }
            case .failure(let error): continuation.resume(throwing: error)
            }
        }
    }

    /// Runs the body; false if it threw (the caller is told at once: a failure needs no commit).
    package func run(_ connection: any Database) -> Bool {
        do {
            try body(connection)
            return true
        } catch {
            resume(.failure(error))
            return false
        }
    }

    /// Runs the body and returns its error without telling the caller, so an engine that rolls
    /// the whole batch back can run it again (``Store/write(_:)``: a body may run more than once).
    package func attempt(_ connection: any Database) -> (any Error)? {
        do {
            try body(connection)
            return nil
        } catch {
            return error
        }
    }

    /// The transaction committed: runs the after-commit hook, then resumes the caller.
    package func succeed() { resume(.success(())) }
    /// The transaction did not commit.
    package func fail(_ error: any Error) { resume(.failure(error)) }
}

private final class ResultBox<T>: @unchecked Sendable {
    // @unchecked: written by the writer thread in `body`, read by the same thread in `resume` after it: never two threads at once.
    var value: T?
}

extension WorkerThread where Job == WriteJob {
    /// Queues `body` as a write and waits for its commit (or its failure); a stopped engine
    /// answers ``StoreError/closed``.
    ///
    /// `ridingWithin`: the write may wait that long for a batch begun for another write and
    /// commit in it (``WorkerThread/enqueue(_:ridingWithin:)``); nil begins a batch at once.
    /// `declaring`: what it reads first (``WriteDeclaration``), for an engine that reads ahead.
    package func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T,
                                    ridingWithin within: Duration? = nil, declaring declaration: WriteDeclaration? = nil,
                                    afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let job = WriteJob(body: body, afterCommit: afterCommit, continuation: continuation, declaration: declaration)
            let queued = within.map { enqueue(job, ridingWithin: $0) } ?? enqueue(job)
            if !queued { continuation.resume(throwing: StoreError.closed) }
        }
    }
}

/// A read waiting for one of an engine's reader threads.
package final class ReadJob<Connection>: @unchecked Sendable {
    // @unchecked: `run` is called once, by the reader thread that dequeued the job (the queue's lock hands it over).
    package let run: (Connection) -> Void
    package init(_ run: @escaping (Connection) -> Void) { self.run = run }
}

extension WorkerThread {
    /// Runs `body` on one of the reader threads with its connection and waits for its value;
    /// a stopped engine answers ``StoreError/closed``. `body` opens and ends its own
    /// transaction, which differs by engine.
    package func read<Connection, T: Sendable>(_ body: @escaping (Connection) throws -> T) async throws -> T
    where Job == ReadJob<Connection> {
        try await withCheckedThrowingContinuation { continuation in
            let job = ReadJob<Connection> { connection in continuation.resume(with: Result { try body(connection) }) }
            if !enqueue(job) { continuation.resume(throwing: StoreError.closed) }
        }
    }
}

/// How long each engine's COMMIT takes (with its fsync), every store of the process together
/// (`/metrics`: `parley_store_commit_seconds`).
package enum StoreMetrics {
    /// COMMIT durations.
    package static let commitLatency = LatencyHistogram()

    /// Runs `commit` and counts how long it took, whether or not it succeeded.
    @inlinable
    package static func timedCommit<T>(_ commit: () throws -> T) rethrows -> T {
        let started = ContinuousClock.now
        defer { commitLatency.observe(ContinuousClock.now - started) }
        return try commit()
    }
}

/// Counts writes and transactions, for `/metrics` and the benchmark.
package final class BatchStatistics: Sendable {
    private let counts = LockedValue((writes: 0, transactions: 0))
    package init() {}
    package func record(_ count: Int) {
        counts.withLock { counts in
            counts.writes += count
            counts.transactions += 1
        }
    }
    package func snapshot() -> (writes: Int, transactions: Int) { counts.withLock { $0 } }
}
