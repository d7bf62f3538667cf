import Foundation
import ParleyChat
import ParleyChatTesting
import ParleyCrypto
@testable import ParleyRedis
import ParleyStore
import ParleyStorePostgres
import ParleyWire
import Testing

private let redisURL = ProcessInfo.processInfo.environment["PARLEY_TEST_REDIS_URL"]

/// Several nodes of one PostgreSQL database, each with its own store, domain and Redis bus,
/// in one process: what `--database-url` and `--redis-url` make of several servers.
@Suite(.enabled(if: TestEngine.isPostgres && redisURL != nil, "needs PARLEY_TEST_POSTGRES and PARLEY_TEST_REDIS_URL (scripts/services.sh)"))
struct RedisBusTests {
    /// What one node's receivers got: the positions of the events, in the order delivered.
    final class Recorder: @unchecked Sendable {
        private let lock = NSLock()
        private var positions: [Int64] = []
        private var waiters: [(Int64, CheckedContinuation<Void, Never>)] = []

        func record(_ publications: [Publication]) {
            let resumed: [CheckedContinuation<Void, Never>] = lock.withLock {
                for case .event(let position, _, _, _, _, _) in publications { positions.append(position) }
                let newest = positions.last ?? 0
                let ready = waiters.filter { $0.0 <= newest }.map(\.1)
                waiters.removeAll { $0.0 <= newest }
                return ready
            }
            for continuation in resumed { continuation.resume() }
        }

        var delivered: [Int64] { lock.withLock { positions } }

        /// Waits until an event at or past `position` was delivered, or `seconds` pass.
        func wait(for position: Int64, seconds: Double = 10) async -> Bool {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await withCheckedContinuation { continuation in
                        let now = self.lock.withLock { () -> Bool in
                            if (self.positions.last ?? 0) >= position { return true }
                            self.waiters.append((position, continuation))
                            return false
                        }
                        if now { continuation.resume() }
                    }
                }
                group.addTask { try? await Task.sleep(for: .seconds(seconds)) }
                await group.next()
                group.cancelAll()
            }
            // A timed-out waiter is resumed here so no continuation leaks.
            let leftover: [CheckedContinuation<Void, Never>] = lock.withLock {
                let left = waiters.filter { $0.0 == position }.map(\.1)
                waiters.removeAll { $0.0 == position }
                return left
            }
            for continuation in leftover { continuation.resume() }
            return (delivered.last ?? 0) >= position
        }
    }

    struct Node {
        let store: PostgresStore
        let bus: RedisBus?
        let chat: Chat
        let recorder = Recorder()
    }

    private func node(_ conninfo: String, channel: String, withBus: Bool = true, logShards: Int? = nil) async throws -> Node {
        var configuration = Chat.Configuration()
        configuration.passwordCost = .minimum
        configuration.logShards = logShards
        let store = try PostgresStore(url: conninfo)
        var bus: RedisBus?
        if withBus, let redisURL {
            var busConfiguration = RedisBus.Configuration()
            busConfiguration.pollInterval = .milliseconds(300)
            bus = try RedisBus(url: try RedisURL(redisURL), configuration: busConfiguration)
        }
        let chat = Chat(store: store, configuration: configuration, bus: bus)
        try await chat.migrate()
        let made = Node(store: store, bus: bus, chat: chat)
        if let bus {
            bus.subscribe { made.recorder.record($0) }
            try await bus.start(source: chat, channel: channel)
        }
        return made
    }

    private func database() throws -> (conninfo: String, drop: @Sendable () -> Void) {
        guard case .postgres(let conninfo) = TestEngine.current else { throw StoreError.cannotOpen("no PostgreSQL") }
        return try TestEngine.freshPostgresDatabase(conninfo)
    }

    private func allPositions(_ store: PostgresStore) async throws -> [Int64] {
        try await store.read { db in try db.fetchAll("SELECT position FROM event ORDER BY position").map { try $0.get("position", as: Int64.self) } }
    }

    /// On a log of one shard and of four (decision 0026, part 4): the writes come through
    /// Redis, none is taken for another log's, none waits for the poll.
    @Test(arguments: [1, 4])
    func writesOnEitherNodeReachEveryNodeOnceInPositionOrder(logShards: Int) async throws {
        let database = try database()
        defer { database.drop() }
        let channel = "parley:test:\(UUID().uuidString)"
        let a = try await node(database.conninfo, channel: channel, logShards: logShards)
        let b = try await node(database.conninfo, channel: channel, logShards: logShards)
        #expect(a.chat.logShards == logShards && b.chat.logShards == logShards)
        defer { for n in [a, b] { n.bus?.stop(); n.store.close() } }

        let app = try await a.chat.app(publicKey: try await a.chat.createApp(name: "nodes").publicKey)
        let alice = try await a.chat.register(RegisterRequest(username: "alice", password: "correct horse battery"), app: app, address: "127.0.0.1")
        let bob = try await b.chat.register(RegisterRequest(username: "bob", password: "correct horse battery"), app: app, address: "127.0.0.1")
        let aliceOnA = try await a.chat.authenticate(token: alice.session.token ?? "", app: app)
        let bobOnB = try await b.chat.authenticate(token: bob.session.token ?? "", app: app)
        let (room, _) = try await a.chat.createConversation(aliceOnA, CreateConversationRequest(kind: .group, members: ["bob"], title: "both"))

        // Both nodes write at once: their commits interleave in the log.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for n in 0..<60 {
                group.addTask {
                    _ = try await a.chat.send(aliceOnA, to: room.id, SendMessageRequest(clientID: "a\(n)", content: .text("from a \(n)")))
                }
                group.addTask {
                    _ = try await b.chat.send(bobOnB, to: room.id, SendMessageRequest(clientID: "b\(n)", content: .text("from b \(n)")))
                }
            }
            try await group.waitForAll()
        }
        let stored = try await allPositions(a.store)
        let newest = try #require(stored.last)
        for n in [a, b] {
            #expect(await n.recorder.wait(for: newest), "every node reaches the newest position")
            let delivered = n.recorder.delivered
            #expect(delivered == stored, "each event once, in position order, none missing")
        }
        #expect((b.bus?.currentStatistics.received ?? 0) > 0 && (a.bus?.currentStatistics.received ?? 0) > 0, "they came through Redis")
        for n in [a, b] {
            let statistics = try #require(n.bus?.currentStatistics)
            #expect(statistics.foreign == 0 && statistics.undecodable == 0, "every message was this log's: \(statistics)")
        }
    }

    @Test func writesThatWereNeverPublishedAreReadFromTheDatabase() async throws {
        let database = try database()
        defer { database.drop() }
        let channel = "parley:test:\(UUID().uuidString)"
        let a = try await node(database.conninfo, channel: channel)
        let b = try await node(database.conninfo, channel: channel)
        // A node that commits and dies before publishing: its writes reach no bus.
        let silent = try await node(database.conninfo, channel: channel, withBus: false)
        defer { for n in [a, b, silent] { n.bus?.stop(); n.store.close() } }

        let app = try await a.chat.app(publicKey: try await a.chat.createApp(name: "gaps").publicKey)
        let alice = try await a.chat.register(RegisterRequest(username: "alice", password: "correct horse battery"), app: app, address: "127.0.0.1")
        let aliceOnA = try await a.chat.authenticate(token: alice.session.token ?? "", app: app)
        let aliceSilent = try await silent.chat.authenticate(token: alice.session.token ?? "", app: app)
        let (room, _) = try await a.chat.createConversation(aliceOnA, CreateConversationRequest(kind: .group, title: "gaps"))

        // A gap in the middle: the next write's link shows it at once.
        _ = try await silent.chat.send(aliceSilent, to: room.id, SendMessageRequest(clientID: "lost-1", content: .text("never published")))
        _ = try await a.chat.send(aliceOnA, to: room.id, SendMessageRequest(clientID: "after", content: .text("published")))
        var stored = try await allPositions(a.store)
        for n in [a, b] {
            #expect(await n.recorder.wait(for: stored.last ?? 0))
            #expect(n.recorder.delivered == stored)
        }
        // A gap at the end: nothing follows it, so only the poll finds it.
        _ = try await silent.chat.send(aliceSilent, to: room.id, SendMessageRequest(clientID: "lost-2", content: .text("also never published")))
        stored = try await allPositions(a.store)
        for n in [a, b] {
            #expect(await n.recorder.wait(for: stored.last ?? 0), "the poll found the last write")
            #expect(n.recorder.delivered == stored)
            #expect((n.bus?.currentStatistics.repairs ?? 0) >= 1)
        }
    }

    /// A node of another log on the same channel (another database, here one of four shards):
    /// its messages are counted as foreign, not as undecodable, and none is delivered.
    @Test func aNodeOfAnotherLogOnTheSameChannelIsCountedAndNotDelivered() async throws {
        let one = try database()
        let four = try database()
        defer { one.drop(); four.drop() }
        let channel = "parley:test:\(UUID().uuidString)"
        let listener = try await node(one.conninfo, channel: channel)
        let stranger = try await node(four.conninfo, channel: channel, logShards: 4)
        defer { for n in [listener, stranger] { n.bus?.stop(); n.store.close() } }
        #expect(stranger.chat.logShards == 4 && listener.chat.logShards == 1)

        let app = try await stranger.chat.app(publicKey: try await stranger.chat.createApp(name: "strangers").publicKey)
        let alice = try await stranger.chat.register(RegisterRequest(username: "alice", password: "correct horse battery"), app: app, address: "127.0.0.1")
        let aliceThere = try await stranger.chat.authenticate(token: alice.session.token ?? "", app: app)
        let (room, _) = try await stranger.chat.createConversation(aliceThere, CreateConversationRequest(kind: .group, title: "elsewhere"))
        _ = try await stranger.chat.send(aliceThere, to: room.id, SendMessageRequest(clientID: "x", content: .text("not for you")))
        let published = try #require(stranger.bus?.currentStatistics.published)
        #expect(published >= 1)
        // Wait on the listener's count, then check nothing of it was delivered.
        let deadline = ContinuousClock.now + .seconds(10)
        while (listener.bus?.currentStatistics.foreign ?? 0) < published, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let statistics = try #require(listener.bus?.currentStatistics)
        #expect(statistics.foreign == published && statistics.undecodable == 0, "\(statistics)")
        #expect(listener.recorder.delivered.isEmpty)
    }
}
