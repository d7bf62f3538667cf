import ParleyChat
import ParleySync

/// The shared budgets in Redis (sign-in and sign-up attempts, realtime commands per user,
/// Pusher API requests per app), so every node counts one window per key: a client
/// that spreads its password guesses over N nodes still gets one budget, not N.
///
/// A window is a key `<namespace>:rate:<limiter>:<key>` incremented by each attempt and given
/// its lifetime by the first (`EXPIRE … NX`); Redis removes it when the window ends. When Redis
/// cannot be reached, ``RateLimiter`` counts on the node instead (best effort, never a refusal
/// because Redis is down).
package final class RedisCounters: SharedCounters, Sendable {
    private let client: RedisClient
    private let namespace = LockedValue("parley")

    /// Counters at `url`; their keys are under ``setNamespace(_:)``'s name once it is called.
    package init(url: RedisURL, timeout: Duration = .seconds(2)) {
        client = RedisClient(url: url, label: "parley.redis-counters", timeout: timeout)
    }

    /// Puts the keys under `namespace` (the server uses the database's epoch, which every node
    /// of one database shares and no other database has).
    package func setNamespace(_ namespace: String) {
        self.namespace.withLock { $0 = namespace }
    }

    /// The namespace in use (tests give a second client the same).
    var namespaceForTests: String { namespace.withLock { $0 } }

    private func key(_ name: String) -> String { namespace.withLock { $0 } + ":rate:" + name }

    package func add(_ key: String, window: Int) async -> Bool {
        let full = self.key(key)
        let client = client
        return await client.run {
            (try? client.send([["INCR", full], ["EXPIRE", full, String(max(1, window)), "NX"]])) != nil
        }
    }

    package func current(_ key: String) async -> (count: Int, secondsLeft: Int)? {
        let full = self.key(key)
        let client = client
        let replies = await client.run { try? client.send([["GET", full], ["TTL", full]]) }
        guard let replies, replies.count == 2 else { return nil }
        let count = replies[0].text.flatMap { Int($0) } ?? 0
        guard case .integer(let ttl) = replies[1] else { return nil }
        return (count, ttl > 0 ? Int(ttl) : 0)
    }

    package func add(_ counts: [(key: String, count: Int)], window: Int) async -> [Int]? {
        guard !counts.isEmpty else { return [] }
        let commands = counts.flatMap { entry -> [[String]] in
            let full = key(entry.key)
            return [["INCRBY", full, String(entry.count)], ["EXPIRE", full, String(max(1, window)), "NX"]]
        }
        let client = client
        guard let replies = await client.run({ try? client.send(commands) }), replies.count == commands.count else { return nil }
        var totals: [Int] = []
        for index in stride(from: 0, to: replies.count, by: 2) {
            guard case .integer(let total) = replies[index] else { return nil }
            totals.append(Int(total))
        }
        return totals
    }

    package func remove(_ key: String) async {
        let full = self.key(key)
        let client = client
        await client.run { _ = try? client.send([["DEL", full]]) }
    }
}
