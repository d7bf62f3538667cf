import Foundation
@testable import ParleyChat
import Testing

/// Windows kept in memory, shared by the ``SharedRate``s given the same one: two nodes in one
/// test. (The same on Redis is in `RedisCountersTests`.)
private final class MemoryCounters: SharedCounters, @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    var reachable = true

    func add(_ key: String, window: Int) async -> Bool { await add([(key, 1)], window: window) != nil }
    func current(_ key: String) async -> (count: Int, secondsLeft: Int)? { lock.withLock { (counts[key] ?? 0, 1) } }
    func remove(_ key: String) async { _ = lock.withLock { counts.removeValue(forKey: key) } }
    func add(_ entries: [(key: String, count: Int)], window: Int) async -> [Int]? {
        lock.withLock {
            guard reachable else { return nil }
            return entries.map { entry in
                counts[entry.key, default: 0] += entry.count
                return counts[entry.key] ?? 0
            }
        }
    }
}

@Suite struct SharedRateTests {
    /// Takes until the first refusal; the number let through.
    private func drain(_ rate: SharedRate, _ key: String, now: ContinuousClock.Instant, max: Int = 1_000) -> Int {
        var taken = 0
        while taken < max, rate.take(key, now: now) == nil { taken += 1 }
        return taken
    }

    @Test func aloneItIsATokenBucket() {
        let rate = SharedRate(name: "t", rate: 5, burst: 10, shared: nil)
        let start = ContinuousClock.now
        #expect(drain(rate, "alice", now: start) == 10)
        #expect(rate.take("alice", now: start) == 1)
        #expect(drain(rate, "alice", now: start + .seconds(1)) == 5)
        #expect(drain(rate, "bob", now: start) == 10, "each key has its own bucket")
    }

    @Test func twoNodesShareOneBudget() async {
        let counters = MemoryCounters()
        let a = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        let b = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        // The window's budget is rate × window + burst = 20. Each node's bucket lets 10 through
        // at once, so a client on both got 20 before anyone counted; a third node would give 30.
        let c = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        let now = ContinuousClock.now
        #expect(drain(a, "alice", now: now) == 10)
        #expect(drain(b, "alice", now: now) == 10)
        #expect(drain(c, "alice", now: now) == 10)
        let windowStart = Date(timeIntervalSince1970: 1_800_000_000)
        await a.flush(now: now, wall: windowStart)
        await b.flush(now: now, wall: windowStart)
        await c.flush(now: now, wall: windowStart)
        // 30 taken against a budget of 20: the node whose count crossed it refuses alice until
        // the window ends, even after its own bucket refilled …
        #expect(c.take("alice", now: now + .seconds(5)) == 5, "refused for the 5 s left of the window")
        // … and the others at their next flush: one more use each, one flush interval late.
        for node in [a, b] {
            #expect(node.take("alice", now: now + .seconds(5)) == nil)
            await node.flush(now: now + .seconds(5), wall: windowStart.addingTimeInterval(5))
            #expect(node.take("alice", now: now + .seconds(5)) == 5)
        }
        #expect(a.take("alice", now: now + .seconds(10)) == nil, "the next window starts afresh")
        #expect(a.take("bob", now: now) == nil, "other keys are not refused")
    }

    @Test func withinTheBudgetNothingIsRefused() async {
        let counters = MemoryCounters()
        let a = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        let b = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        let now = ContinuousClock.now
        #expect(drain(a, "alice", now: now, max: 8) == 8)
        #expect(drain(b, "alice", now: now, max: 8) == 8)
        await a.flush(now: now)
        await b.flush(now: now)
        #expect(a.take("alice", now: now) == nil)
        #expect(b.take("alice", now: now) == nil)
    }

    @Test func unreachableCountersLeaveEachNodeItsBucket() async {
        let counters = MemoryCounters()
        counters.reachable = false
        let a = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        let b = SharedRate(name: "t", rate: 1, burst: 10, shared: counters, window: 10, flushInterval: .seconds(3600))
        let now = ContinuousClock.now
        #expect(drain(a, "alice", now: now) == 10)
        #expect(drain(b, "alice", now: now) == 10)
        await a.flush(now: now)
        #expect(b.take("alice", now: now + .seconds(1)) == nil, "a refill is not refused because Redis is down")
    }
}
