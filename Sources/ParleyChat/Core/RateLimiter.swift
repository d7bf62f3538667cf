import Foundation
import ParleySync

/// Counts events per key in fixed windows and says when a key is over its budget.
/// Pure logic over an injected clock; one lock guards the table.
///
/// Used for failed sign-ins (per account and per address) and account creation (per address).
/// The table is bounded: when it is full, expired windows are swept, and if every entry is
/// live the oldest window is dropped (an attacker cycling keys cannot grow memory).
///
/// With ``SharedCounters`` (several nodes: Redis), the async methods count in the shared
/// windows instead, so a client spreading its attempts over N nodes still gets one budget;
/// when the shared counters cannot be reached they fall back to this node's table.
final class RateLimiter: Sendable {
    struct Rule: Sendable, Hashable {
        var limit: Int
        var window: TimeInterval
    }

    private struct Entry {
        var windowStart: Date
        var count: Int
    }

    private let rule: Rule
    private let capacity: Int
    private let entries = LockedValue([String: Entry]())
    private let shared: (any SharedCounters)?
    /// The limiter's name in the shared counters' keys.
    private let name: String

    init(rule: Rule, capacity: Int = 100_000, name: String = "", shared: (any SharedCounters)? = nil) {
        self.rule = rule
        self.capacity = capacity
        self.name = name
        self.shared = shared
    }

    /// ``retryAfter(_:now:)`` in the shared windows when there are any.
    func check(_ key: String, now: Date) async -> Int? {
        if let shared, let state = await shared.current(name + ":" + key) {
            return state.count >= rule.limit ? max(1, state.secondsLeft) : nil
        }
        return retryAfter(key, now: now)
    }

    /// ``record(_:now:)`` in the shared windows when there are any.
    func count(_ key: String, now: Date) async {
        if let shared, await shared.add(name + ":" + key, window: Int(rule.window.rounded(.up))) { return }
        record(key, now: now)
    }

    /// ``reset(_:)`` in the shared windows too.
    func clear(_ key: String) async {
        reset(key)
        if let shared { await shared.remove(name + ":" + key) }
    }

    /// Seconds until `key` may try again, or nil when it is within budget.
    func retryAfter(_ key: String, now: Date) -> Int? {
        entries.withLock { entries in
            guard let entry = entries[key], now.timeIntervalSince(entry.windowStart) < rule.window,
                  entry.count >= rule.limit else { return nil }
            return max(1, Int((rule.window - now.timeIntervalSince(entry.windowStart)).rounded(.up)))
        }
    }

    /// Counts one event for `key`.
    func record(_ key: String, now: Date) {
        entries.withLock { entries in
            if var entry = entries[key], now.timeIntervalSince(entry.windowStart) < rule.window {
                entry.count += 1
                entries[key] = entry
                return
            }
            if entries.count >= capacity { sweep(&entries, now: now) }
            entries[key] = Entry(windowStart: now, count: 1)
        }
    }

    /// Forgets `key` (a successful sign-in clears the account's failures).
    func reset(_ key: String) {
        _ = entries.withLock { $0.removeValue(forKey: key) }
    }

    private func sweep(_ entries: inout [String: Entry], now: Date) {
        entries = entries.filter { now.timeIntervalSince($0.value.windowStart) < rule.window }
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.windowStart < $1.value.windowStart }) {
            entries.removeValue(forKey: oldest.key)
        }
    }
}

/// Counters in fixed windows that every node shares (with several nodes, in Redis). Each call
/// is best effort: nil or false means the counters could not be reached, and the caller counts
/// on its own node instead.
package protocol SharedCounters: Sendable {
    /// Adds one to `key`'s window, starting a window of `window` seconds if none is open.
    /// Returns false when the counters cannot be reached.
    func add(_ key: String, window: Int) async -> Bool
    /// `key`'s count in its open window and the seconds it has left ((0, 0) with none open);
    /// nil when the counters cannot be reached.
    func current(_ key: String) async -> (count: Int, secondsLeft: Int)?
    /// Closes `key`'s window.
    func remove(_ key: String) async
    /// Adds each count to its key's window (starting windows of `window` seconds where none is
    /// open) in one exchange, and returns the windows' totals in the same order; nil when the
    /// counters cannot be reached.
    func add(_ counts: [(key: String, count: Int)], window: Int) async -> [Int]?
}
