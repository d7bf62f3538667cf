import Foundation
import ParleyStore
import ParleySync

/// Test mode's faults (docs/test-mode.md): the store answers as an unreachable database does
/// until a time, and a webhook endpoint's deliveries fail. Set through `/v1/test/faults/…`.
final class TestFaults: Sendable {
    /// Set while the store-fault route itself runs, so a test can bring the store back early
    /// (its app secret is read from the store it made unavailable).
    @TaskLocal static var bypassingStoreFault = false

    private let state = LockedValue<(storeDownUntil: ContinuousClock.Instant?, failingWebhooks: Set<String>)>((nil, []))

    /// The store is down for `duration` from now (0: back at once).
    func storeDown(for duration: Duration) {
        state.withLock { $0.storeDownUntil = duration > .zero ? .now + duration : nil }
    }

    /// Whether the store is down now.
    var storeIsDown: Bool {
        state.withLock { state in
            guard let until = state.storeDownUntil else { return false }
            if ContinuousClock.now < until { return true }
            state.storeDownUntil = nil
            return false
        }
    }

    /// Makes deliveries to a webhook endpoint (`wh_…`) fail as a receiver answering 503 would, or not.
    func setWebhookFailing(_ endpoint: String, _ failing: Bool) {
        state.withLock { state in
            if failing { state.failingWebhooks.insert(endpoint) } else { state.failingWebhooks.remove(endpoint) }
        }
    }

    /// No fault any more (test mode's reset).
    func clear() { state.withLock { $0 = (nil, []) } }

    /// Whether deliveries to `endpoint` fail now.
    func webhookFails(_ endpoint: String) -> Bool { state.withLock { $0.failingWebhooks.contains(endpoint) } }
}

/// The store of a server in test mode: the real one, except that while ``TestFaults`` says the
/// store is down every read and write fails as when the database cannot be reached (retried,
/// then answered 503 `store_unavailable`), and nothing is changed.
final class TestFaultStore: GroupCommitStore {
    let base: any GroupCommitStore
    let faults: TestFaults

    init(_ base: any GroupCommitStore, faults: TestFaults) {
        self.base = base
        self.faults = faults
    }

    private func check() throws {
        if !TestFaults.bypassingStoreFault, faults.storeIsDown { throw StoreError.retryable("test mode: the store was made unavailable (POST /v1/test/faults/store)") }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try check()
        return try await base.read(body)
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T {
        try check()
        return try await base.write(body)
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T, afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try check()
        return try await base.write(body, afterCommit: afterCommit)
    }

    func write<T: Sendable>(shard: Int?, _ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try check()
        return try await base.write(shard: shard, body, afterCommit: afterCommit)
    }

    func write<T: Sendable>(shard: Int?, ridingWithin within: Duration, _ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try check()
        return try await base.write(shard: shard, ridingWithin: within, body, afterCommit: afterCommit)
    }

    func write<T: Sendable>(shard: Int?, declaring declaration: WriteDeclaration, _ body: @escaping @Sendable (any Database) throws -> T,
                            afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
        try check()
        return try await base.write(shard: shard, declaring: declaration, body, afterCommit: afterCommit)
    }

    func useLogShards(_ shards: Int) async { await base.useLogShards(shards) }
    func close() { base.close() }
    func reclaim() async { await base.reclaim() }
    var commitStatistics: (writes: Int, transactions: Int) { base.commitStatistics }
    var writeRoundTrips: Int? { base.writeRoundTrips }
    var batchesRunAgain: Int? { base.batchesRunAgain }
}
