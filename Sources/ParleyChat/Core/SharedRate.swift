package import Foundation
import ParleySync

/// A rate per key — `rate` a second sustained, `burst` at once — that several nodes share
/// without a round trip per use.
///
/// Each node takes from its own token bucket at once, as a lone node does, and counts what it
/// took. Every ``flushInterval`` it adds those counts to the shared window of each key
/// (``SharedCounters``, Redis with several nodes: one pipelined exchange for every key) and
/// reads back what all the nodes took in that window. A key over the window's budget —
/// what one bucket lets through in a window, `rate × window + burst` — is refused on this
/// node until its window ends. So one node behaves exactly as before (its bucket never lets
/// through more than the window's budget), and a client that spreads itself over N nodes
/// gets one budget, not N, give or take what it takes within one flush interval.
///
/// When the shared counters cannot be reached, each node keeps its own bucket (best effort:
/// never a refusal because Redis is down).
package final class SharedRate: Sendable {
    private struct State {
        var buckets: [String: TokenBucket] = [:]
        /// Taken on this node and not yet added to the shared window, by key.
        var pending: [String: Int] = [:]
        /// Keys over the shared budget, and the end of the window they may go on after.
        var blocked: [String: ContinuousClock.Instant] = [:]
    }

    private let name: String
    private let rate: Double
    private let burst: Double
    private let shared: (any SharedCounters)?
    /// The shared window's length in seconds.
    let window: Int
    /// How often this node adds what it took to the shared windows.
    let flushInterval: Duration
    private let state = LockedValue(State())
    private let flushing = LockedValue(false)
    private let capacity = 100_000

    /// A rate named `name` (the shared counters' key prefix); shared when `shared` is given.
    package init(name: String, rate: Double, burst: Double, shared: (any SharedCounters)?, window: Int = 10,
                 flushInterval: Duration = .milliseconds(250)) {
        self.name = name
        self.rate = rate
        self.burst = burst
        self.shared = shared
        self.window = window
        self.flushInterval = flushInterval
    }

    /// The budget of one shared window: what one bucket lets through in it.
    var windowBudget: Int { Int((rate * Double(window) + burst).rounded(.up)) }

    /// Takes one use for `key`: nil when it may go on, else whole seconds until it may.
    /// Schedules a flush when this is the first use since the last one.
    package func take(_ key: String, now: ContinuousClock.Instant = .now) -> Int? {
        let (wait, schedule) = state.withLock { state -> (Int?, Bool) in
            if let until = state.blocked[key] {
                if until > now { return (max(1, Int((until - now).inSeconds.rounded(.up))), false) }
                state.blocked.removeValue(forKey: key)
            }
            if state.buckets.count > capacity { state.buckets.removeAll(keepingCapacity: true) }  // full buckets are the default anyway
            var bucket = state.buckets[key] ?? TokenBucket(rate: rate, burst: burst)
            let wait = bucket.take(now: now)
            state.buckets[key] = bucket
            guard wait == nil, shared != nil, state.pending.count < capacity else { return (wait, false) }
            let first = state.pending.isEmpty
            state.pending[key, default: 0] += 1
            return (nil, first)
        }
        if schedule { scheduleFlush() }
        return wait
    }

    private func scheduleFlush() {
        guard flushing.withLock({ busy in defer { busy = true }; return !busy }) else { return }
        let delay = flushInterval
        Task { [self] in
            try? await Task.sleep(for: delay)
            flushing.withLock { $0 = false }
            await flush()
        }
    }

    /// Adds what this node took to the shared windows now, and blocks the keys over budget
    /// (`wall` names the window: every node's clock agrees on it).
    package func flush(now: ContinuousClock.Instant = .now, wall: Date = Date()) async {
        guard let shared else { return }
        let pending = state.withLock { state in
            defer { state.pending.removeAll(keepingCapacity: true) }
            return state.pending
        }
        guard !pending.isEmpty else { return }
        // Windows are aligned to the wall clock so every node names the same one.
        let seconds = Int(wall.timeIntervalSince1970)
        let index = seconds / window
        let left = (index + 1) * window - seconds
        let keys = Array(pending.keys)
        guard let totals = await shared.add(keys.map { ("\(name):\($0):\(index)", pending[$0] ?? 0) }, window: window + 1),
              totals.count == keys.count else { return }
        let budget = windowBudget
        let until = now + .seconds(left)
        state.withLock { state in
            for (key, total) in zip(keys, totals) where total > budget { state.blocked[key] = until }
            if state.blocked.count > capacity { state.blocked = state.blocked.filter { $0.value > now } }
        }
    }
}
