import Foundation

/// Counts events per key in fixed windows and says when a key is over its budget.
/// Pure logic over an injected clock; one lock guards the table.
///
/// Used for failed sign-ins (per account and per address) and account creation (per address).
/// The table is bounded: when it is full, expired windows are swept, and if every entry is
/// live the oldest window is dropped (an attacker cycling keys cannot grow memory).
final class RateLimiter: @unchecked Sendable {
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
    private let lock = NSLock()
    private var entries: [String: Entry] = [:]

    init(rule: Rule, capacity: Int = 100_000) {
        self.rule = rule
        self.capacity = capacity
    }

    /// Seconds until `key` may try again, or nil when it is within budget.
    func retryAfter(_ key: String, now: Date) -> Int? {
        lock.withLock {
            guard let entry = entries[key], now.timeIntervalSince(entry.windowStart) < rule.window,
                  entry.count >= rule.limit else { return nil }
            return max(1, Int((rule.window - now.timeIntervalSince(entry.windowStart)).rounded(.up)))
        }
    }

    /// Counts one event for `key`.
    func record(_ key: String, now: Date) {
        lock.withLock {
            if var entry = entries[key], now.timeIntervalSince(entry.windowStart) < rule.window {
                entry.count += 1
                entries[key] = entry
                return
            }
            if entries.count >= capacity { sweep(now: now) }
            entries[key] = Entry(windowStart: now, count: 1)
        }
    }

    /// Forgets `key` (a successful sign-in clears the account's failures).
    func reset(_ key: String) {
        _ = lock.withLock { entries.removeValue(forKey: key) }
    }

    private func sweep(now: Date) {
        entries = entries.filter { now.timeIntervalSince($0.value.windowStart) < rule.window }
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.windowStart < $1.value.windowStart }) {
            entries.removeValue(forKey: oldest.key)
        }
    }
}
