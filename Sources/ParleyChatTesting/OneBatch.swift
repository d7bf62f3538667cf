import Foundation
package import ParleyStorePostgres

extension PostgresStore {
    /// Runs `writes` as one batch of the writer of `shard` (nil: the writer for every shard),
    /// in the order given, and returns their tasks: the writer is held by a write of its own
    /// until each has started and waits in its queue, one after the other, then let go.
    /// For tests of what a batch does with the writes in it.
    package func inOneBatch<T: Sendable>(shard: Int? = nil, _ writes: [@Sendable () async throws -> T]) async throws -> [Task<T, any Error>] {
        let (entered, inside) = AsyncStream.makeStream(of: Void.self)
        let gate = DispatchSemaphore(value: 0)
        let holder = Task { try await write(shard: shard, { _ in inside.yield(); gate.wait() }, afterCommit: { _ in }) }
        for await _ in entered { break }
        var tasks: [Task<T, any Error>] = []
        for write in writes {
            tasks.append(Task { try await write() })
            // The next starts once this one waits, so the queue keeps the order given.
            let deadline = ContinuousClock.now + .seconds(10)
            while queuedWrites(shard: shard) < tasks.count, ContinuousClock.now < deadline { await Task.yield() }
        }
        let queued = queuedWrites(shard: shard)
        gate.signal()
        try await holder.value
        guard queued == writes.count else { throw BatchNotFormed(queued: queued, expected: writes.count) }
        return tasks
    }

    /// ``inOneBatch(shard:_:)`` could not queue every write before letting the writer go.
    package struct BatchNotFormed: Error, CustomStringConvertible {
        package var queued: Int
        package var expected: Int
        package var description: String { "only \(queued) of \(expected) writes waited for the writer within 10 s" }
    }
}
