import Foundation
import ParleyChat
@testable import ParleyRedis
import Testing

private let redisURL = ProcessInfo.processInfo.environment["PARLEY_TEST_REDIS_URL"]

/// The shared budgets on a real Redis: two ``SharedRate``s, each with its own connection, are
/// two nodes.
@Suite(.enabled(if: redisURL != nil, "needs PARLEY_TEST_REDIS_URL (scripts/services.sh)"))
struct RedisCountersTests {
    private func counters() throws -> RedisCounters {
        let counters = RedisCounters(url: try RedisURL(redisURL ?? ""))
        counters.setNamespace("parley-test:\(UUID().uuidString)")
        return counters
    }

    @Test func batchedAddsReturnEveryNodesTotal() async throws {
        let a = try counters()
        let b = try counters()
        b.setNamespace(a.namespaceForTests)
        // A window long enough that a loaded CI machine cannot outlive it between the calls
        // (Redis answers TTL 0 in the last second of a key's life).
        #expect(await a.add([("x", 3), ("y", 1)], window: 600) == [3, 1])
        #expect(await b.add([("x", 4)], window: 600) == [7])
        let current = await a.current("x")
        #expect(current?.count == 7)
        #expect((1...600).contains(current?.secondsLeft ?? 0), "the window expires by itself")
    }

    @Test func aClientOnTwoNodesGetsOneBudget() async throws {
        let a = try counters()
        let b = try counters()
        b.setNamespace(a.namespaceForTests)
        // The test flushes by hand, at a wall time of its own: a background flush (after 250 ms
        // by default, reachable on a loaded machine) would count in today's window instead. The
        // window is 600 s because Redis expires it in real time, and a loaded machine once took
        // 20 s over this test (a 10-s window expired between the flushes).
        let onA = SharedRate(name: "commands-user", rate: 1.0 / 64, burst: 10, shared: a, window: 600, flushInterval: .seconds(3600))
        let onB = SharedRate(name: "commands-user", rate: 1.0 / 64, burst: 10, shared: b, window: 600, flushInterval: .seconds(3600))
        let now = ContinuousClock.now
        let wall = Date(timeIntervalSince1970: 1_800_000_000)  // a window's start
        // Budget per window: 600 / 64 + 10 = 19.4, so 20. Each node lets its burst of 10 through …
        for node in [onA, onB] { for _ in 0..<10 { #expect(node.take("42", now: now) == nil) } }
        await onA.flush(now: now, wall: wall)
        await onB.flush(now: now, wall: wall)
        // … and one more each after a refill (64 s) crosses it: refused on both for the rest of the window.
        #expect(onA.take("42", now: now + .seconds(64)) == nil)
        #expect(onB.take("42", now: now + .seconds(64)) == nil)
        await onA.flush(now: now + .seconds(64), wall: wall.addingTimeInterval(64))
        await onB.flush(now: now + .seconds(64), wall: wall.addingTimeInterval(64))
        #expect(onA.take("42", now: now + .seconds(65)) == 535, "until the window ends")
        #expect(onB.take("42", now: now + .seconds(65)) == 535, "until the window ends")
        #expect(onA.take("43", now: now + .seconds(65)) == nil, "another user is not refused")
    }
}
