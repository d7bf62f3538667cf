import Foundation
import ParleyChat

/// Who is online, across nodes, in Redis (docs/operations.md, "Several nodes").
///
/// Each node keeps a set of the users online on it, `<prefix>:online:<node>`, and a heartbeat
/// key `<prefix>:node:<node>`; both expire 15 s after the node's last heartbeat (every 5 s),
/// so the users of a node that died stop counting as online within 15 s with nobody cleaning
/// up. A user is online when any live node's set has them. The node list is
/// `<prefix>:nodes`; dead entries are pruned by whichever node notices.
///
/// Calls are best effort, like all presence: when Redis cannot be reached, this node answers
/// as if it were alone. After Redis restarts empty, the next heartbeat puts this node's users
/// back.
package final class RedisPresence: PresenceDirectory, @unchecked Sendable {
    // @unchecked: every mutable property is touched only on `queue`.

    private let node: String
    private let prefix: String
    private let client: RedisClient
    private var queue: DispatchQueue { client.queue }
    private var local: Set<Int64> = []
    private var timer: (any DispatchSourceTimer)?

    /// The heartbeat's period, and how long a node's keys outlive its last heartbeat.
    static let heartbeat: Duration = .seconds(5)
    static let lifetime = 15

    /// A directory for node `node` under `prefix` (every node of one database uses the same:
    /// the server names it after the database's epoch). Starts its heartbeat at once.
    package init(url: RedisURL, node: String, prefix: String, timeout: Duration = .seconds(2)) {
        self.node = node
        self.prefix = prefix
        client = RedisClient(url: url, label: "parley.redis-presence", timeout: timeout)
        timer = queue.repeating(every: Self.heartbeat) { [weak self] in self?.beat() }
    }

    /// Stops the heartbeat and removes this node's keys (its users go offline for the others).
    package func stop() {
        queue.sync {
            timer?.cancel()
            timer = nil
            _ = try? command([["DEL", key("online", node), key("node", node)].map(bytes), ["SREM", key("nodes"), node].map(bytes)])
            client.close()
        }
    }

    package func cameOnline(_ user: Int64) async -> Bool {
        await onQueue {
            self.local.insert(user)
            let others = self.othersHaving(user)
            _ = try? self.command([["SADD", self.key("online", self.node), String(user)].map(self.bytes)])
            return !others
        }
    }

    package func wentOffline(_ user: Int64) async -> Bool {
        await onQueue {
            self.local.remove(user)
            _ = try? self.command([["SREM", self.key("online", self.node), String(user)].map(self.bytes)])
            return !self.othersHaving(user)
        }
    }

    package func onlineElsewhere(_ users: [Int64]) async -> Set<Int64> {
        guard !users.isEmpty else { return [] }
        return await onQueue {
            let others = self.otherNodes()
            guard !others.isEmpty else { return [] }
            let commands = others.map { other in ([Array("SMISMEMBER".utf8), self.bytes(self.key("online", other))] + users.map { self.bytes(String($0)) }) }
            guard let replies = try? self.command(commands) else { return [] }
            var online: Set<Int64> = []
            for reply in replies {
                guard case .array(let flags?) = reply else { continue }
                for (index, flag) in flags.enumerated() where flag == .integer(1) && index < users.count { online.insert(users[index]) }
            }
            return online
        }
    }

    // MARK: - On the queue

    private func key(_ parts: String...) -> String { ([prefix] + parts).joined(separator: ":") }
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// The other nodes, read now (a node that started a moment ago counts at once). A dead
    /// node's set has expired, so asking it is harmless until a heartbeat prunes it.
    private func otherNodes() -> [String] {
        guard let replies = try? command([["SMEMBERS", key("nodes")].map(bytes)]), case .array(let members?) = replies.first else { return [] }
        return members.compactMap(\.text).filter { $0 != node }
    }

    /// Whether a node other than this one has `user` online.
    private func othersHaving(_ user: Int64) -> Bool {
        let others = otherNodes()
        guard !others.isEmpty,
              let replies = try? command(others.map { ["SISMEMBER", key("online", $0), String(user)].map(bytes) }) else { return false }
        return replies.contains(.integer(1))
    }

    /// Renews this node's keys (and puts its users back after Redis restarted empty), then
    /// prunes the nodes whose heartbeat expired.
    private func beat() {
        let lifetime = String(Self.lifetime)
        var commands: [[[UInt8]]] = [
            ["SET", key("node", node), "1", "EX", lifetime].map(bytes),
            ["SADD", key("nodes"), node].map(bytes),
        ]
        if !local.isEmpty { commands.append([bytes("SADD"), bytes(key("online", node))] + local.map { bytes(String($0)) }) }
        commands.append(["EXPIRE", key("online", node), lifetime].map(bytes))
        commands.append(["SMEMBERS", key("nodes")].map(bytes))
        guard let replies = try? command(commands), case .array(let members?) = replies.last else { return }
        let nodes = members.compactMap(\.text)
        guard let alive = try? command(nodes.map { ["EXISTS", key("node", $0)].map(bytes) }) else { return }
        let dead = zip(nodes, alive).filter { $0.1 != .integer(1) }.map(\.0)
        if !dead.isEmpty { _ = try? command([[bytes("SREM"), bytes(key("nodes"))] + dead.map(bytes)]) }
    }

    private func command(_ commands: [[[UInt8]]]) throws -> [RESPValue] {
        try client.send(commands)
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await client.run(body)
    }
}
