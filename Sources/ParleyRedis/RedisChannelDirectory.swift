import Foundation
package import ParleyChat

/// The Pusher channels of every node, in Redis (docs/pusher.md, "Several nodes").
///
/// Keys, under the prefix every node of one database shares:
/// - `<prefix>:members:<app>:<channel>`, a hash per presence channel: field
///   `<node>\n<user id>`, value the user's `user_info` JSON (empty without one);
/// - `<prefix>:subs:<node>`, a hash per node: field `<app>\n<channel>`, value the sockets that
///   node has in the channel (the index a dead node's channels are found by);
/// - `<prefix>:occupancy`, a hash: field `<app>\n<channel>`, value the sockets every node has in
///   the channel, changed with the node's own count in one script, so exactly one node sees a
///   channel go from 0 to 1 (`channel_occupied`) or back to 0 (`channel_vacated`);
/// - `<prefix>:alive:<node>`, the node's heartbeat, expiring 15 s after its last (every 5 s);
/// - `<prefix>:nodes`, the set of nodes.
///
/// A join is `MULTI; HGETALL; HSET; EXEC`, so of two nodes a user joins at once exactly one sees
/// the user absent and announces `member_added`; a leave is `HDEL` then `HGETALL`, the same way.
/// Only nodes in the set count. A heartbeat that finds a node's heartbeat expired removes it
/// from the set (the node whose `SREM` answered 1 does the rest): its members are deleted and
/// those no other node has are announced gone. A node whose heartbeat finds itself missing
/// from the set (Redis restarted empty, or it was taken for dead) writes its channels again
/// and announces the members that are news.
package final class RedisChannelDirectory: ChannelDirectory, @unchecked Sendable {
    // @unchecked: every mutable property is touched only on `queue`.

    private let node: String
    private let prefix: String
    private let client: RedisClient
    private var queue: DispatchQueue { client.queue }
    private var timer: (any DispatchSourceTimer)?
    private var state: (@Sendable () -> ChannelDirectoryState)?
    private var announce: (@Sendable ([(member: ChannelMember, added: Bool)]) -> Void)?
    private var occupancyChanged: (@Sendable ([(app: Int64, channel: String, occupied: Bool)]) -> Void)?

    /// Adds `ARGV[2]` to the node's count (`KEYS[1]`, unless empty) and the total (`KEYS[2]`) of
    /// field `ARGV[1]`, removing a field that reaches 0; answers the new total.
    private static let countScript = """
        if KEYS[1] ~= '' then
          local mine = redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
          if mine <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end
        end
        local total = redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[2])
        if total <= 0 then redis.call('HDEL', KEYS[2], ARGV[1]) end
        return total
        """

    /// The heartbeat's period, and how long a node's heartbeat outlives it.
    static let heartbeat: Duration = .seconds(5)
    static let lifetime = 15

    /// A directory for node `node` under `prefix` (the server uses `parley:<epoch>:pusher`).
    package init(url: RedisURL, node: String, prefix: String, timeout: Duration = .seconds(2)) {
        self.node = node
        self.prefix = prefix
        client = RedisClient(url: url, label: "parley.redis-channels", timeout: timeout)
    }

    package func start(state: @escaping @Sendable () -> ChannelDirectoryState,
                      announce: @escaping @Sendable ([(member: ChannelMember, added: Bool)]) -> Void) {
        start(state: state, announce: announce, occupancy: { _ in })
    }

    package func start(state: @escaping @Sendable () -> ChannelDirectoryState,
                      announce: @escaping @Sendable ([(member: ChannelMember, added: Bool)]) -> Void,
                      occupancy: @escaping @Sendable ([(app: Int64, channel: String, occupied: Bool)]) -> Void) {
        queue.async { [self] in
            self.state = state
            self.announce = announce
            self.occupancyChanged = occupancy
            timer = queue.repeating(every: Self.heartbeat) { [weak self] in self?.beat() }
        }
    }

    package func stop() {
        queue.sync {
            timer?.cancel()
            timer = nil
            // Left in the set without a heartbeat: the next node to beat takes this one's
            // members away and announces them gone.
            _ = try? command([["DEL", key("alive", node)]])
            client.close()
        }
    }

    package func join(_ member: ChannelMember, completion: @escaping @Sendable (ChannelJoin?) -> Void) {
        queue.async { [self] in completion(joinNow(member)) }
    }

    package func leave(app: Int64, channel: String, userID: String, completion: @escaping @Sendable (Bool?) -> Void) {
        queue.async { [self] in
            let members = membersKey(app, channel)
            guard let replies = try? command([["HDEL", members, node + "\n" + userID], ["HGETALL", members], ["SMEMBERS", key("nodes")]]),
                  replies.count == 3, let others = decode(replies[1], live: replies[2], app: app, channel: channel) else {
                return completion(nil)
            }
            completion(!others.contains { $0.userID == userID })
        }
    }

    package func members(app: Int64, channel: String, completion: @escaping @Sendable ([ChannelMember]?) -> Void) {
        queue.async { [self] in
            let replies = try? command([["HGETALL", membersKey(app, channel)], ["SMEMBERS", key("nodes")]])
            guard let replies, replies.count == 2 else { return completion(nil) }
            completion(decode(replies[0], live: replies[1], app: app, channel: channel).map(Self.distinct))
        }
    }

    package func subscriptions(app: Int64, channel: String, change: Int) {
        queue.async { [self] in
            guard let total = count(app: app, channel: channel, change: change, mine: true) else { return }
            if change > 0 && total == change { occupancyChanged?([(app, channel, true)]) }
            if change < 0 && total <= 0 { occupancyChanged?([(app, channel, false)]) }
        }
    }

    /// Changes a channel's total (and this node's count when `mine`); the new total.
    private func count(app: Int64, channel: String, change: Int, mine: Bool) -> Int? {
        let field = "\(app)\n\(channel)"
        guard let replies = try? command([["EVAL", Self.countScript, "2", mine ? key("subs", node) : "", key("occupancy"), field, String(change)]]),
              case .integer(let total) = replies.first else { return nil }
        return Int(total)
    }

    package func occupancy(app: Int64, prefix channelPrefix: String, completion: @escaping @Sendable ([ChannelOccupancy]?) -> Void) {
        queue.async { [self] in
            guard let nodes = liveNodes(),
                  let replies = try? command(nodes.map { ["HGETALL", key("subs", $0)] }) else { return completion(nil) }
            var sockets: [String: Int] = [:]
            let appPrefix = "\(app)\n"
            for reply in replies {
                for (field, value) in Self.pairs(reply) where field.hasPrefix(appPrefix) {
                    let channel = String(field.dropFirst(appPrefix.count))
                    guard channel.hasPrefix(channelPrefix), let count = Int(value), count > 0 else { continue }
                    sockets[channel, default: 0] += count
                }
            }
            let presence = sockets.keys.filter { $0.hasPrefix("presence-") }.sorted()
            var users: [String: Int] = [:]
            if !presence.isEmpty, let memberReplies = try? command(presence.map { ["HGETALL", membersKey(app, $0)] }) {
                let live = Set(nodes)
                for (channel, reply) in zip(presence, memberReplies) {
                    users[channel] = Set(Self.pairs(reply).compactMap { field, _ -> String? in
                        let (owner, user) = Self.split(field)
                        return live.contains(owner) ? user : nil
                    }).count
                }
            }
            completion(sockets.keys.sorted().map { ChannelOccupancy(channel: $0, subscriptions: sockets[$0] ?? 0, users: users[$0] ?? 0) })
        }
    }

    // MARK: - On the queue

    private func key(_ parts: String...) -> String { ([prefix] + parts).joined(separator: ":") }
    private func membersKey(_ app: Int64, _ channel: String) -> String { key("members", String(app), channel) }

    private func joinNow(_ member: ChannelMember) -> ChannelJoin? {
        let members = membersKey(member.app, member.channel)
        let replies = try? command([["MULTI"], ["HGETALL", members], ["HSET", members, node + "\n" + member.userID, member.infoJSON ?? ""],
                                    ["EXEC"], ["SMEMBERS", key("nodes")]])
        guard let replies, replies.count == 5, case .array(let results?) = replies[3], results.count == 2,
              let before = decode(results[0], live: replies[4], app: member.app, channel: member.channel) else { return nil }
        let news = !before.contains { $0.userID == member.userID }
        return ChannelJoin(members: Self.distinct(before + [member]), news: news)
    }

    /// The members in a `HGETALL` reply whose node is in the `SMEMBERS` reply (or is this one).
    private func decode(_ reply: RESPValue, live: RESPValue, app: Int64, channel: String) -> [ChannelMember]? {
        guard case .array(let nodes?) = live else { return nil }
        let alive = Set(nodes.compactMap(\.text)).union([node])
        return Self.pairs(reply).compactMap { field, value in
            let (owner, user) = Self.split(field)
            guard alive.contains(owner) else { return nil }
            return ChannelMember(app: app, channel: channel, userID: user, infoJSON: value.isEmpty ? nil : value)
        }
    }

    /// One entry per user (a user on two nodes is one member), in user id order.
    private static func distinct(_ members: [ChannelMember]) -> [ChannelMember] {
        var seen: Set<String> = []
        return members.sorted { $0.userID < $1.userID }.filter { seen.insert($0.userID).inserted }
    }

    private static func pairs(_ reply: RESPValue) -> [(String, String)] {
        guard case .array(let items?) = reply else { return [] }
        return stride(from: 0, to: items.count - 1, by: 2).compactMap { index in
            guard let field = items[index].text, let value = items[index + 1].text else { return nil }
            return (field, value)
        }
    }

    private static func split(_ field: String) -> (node: String, rest: String) {
        guard let newline = field.firstIndex(of: "\n") else { return (field, "") }
        return (String(field[..<newline]), String(field[field.index(after: newline)...]))
    }

    private func liveNodes() -> [String]? {
        guard let replies = try? command([["SMEMBERS", key("nodes")]]), case .array(let members?) = replies.first else { return nil }
        return Array(Set(members.compactMap(\.text)).union([node]))
    }

    /// Renews this node's heartbeat (writing its channels again when it was missing from the
    /// set), then takes away the nodes whose heartbeat expired.
    private func beat() {
        guard let replies = try? command([["SET", key("alive", node), "1", "EX", String(Self.lifetime)], ["SADD", key("nodes"), node],
                                          ["SMEMBERS", key("nodes")]]),
              replies.count == 3, case .array(let members?) = replies[2] else { return }
        if replies[1] == .integer(1) { restore() }
        let others = members.compactMap(\.text).filter { $0 != node }
        guard !others.isEmpty, let alive = try? command(others.map { ["EXISTS", key("alive", $0)] }) else { return }
        for (other, exists) in zip(others, alive) where exists != .integer(1) { bury(other) }
    }

    /// Writes this node's channels again and announces its members that are news.
    private func restore() {
        guard let current = state?() else { return }
        // The channels were occupied before Redis lost them: counted again, not announced again.
        for subscription in current.subscriptions {
            _ = count(app: subscription.app, channel: subscription.channel, change: subscription.count, mine: true)
        }
        let news = current.members.compactMap { member in joinNow(member).flatMap { $0.news ? member : nil } }
        if !news.isEmpty { announce?(news.map { ($0, true) }) }
    }

    /// Takes a dead node's members away (when this node is the one that removed it from the
    /// set) and announces those no live node has.
    private func bury(_ dead: String) {
        guard let replies = try? command([["SREM", key("nodes"), dead]]), replies.first == .integer(1) else { return }
        guard let channels = try? command([["HGETALL", key("subs", dead)]]) else { return }
        var gone: [(member: ChannelMember, added: Bool)] = []
        var vacated: [(app: Int64, channel: String, occupied: Bool)] = []
        for (field, value) in Self.pairs(channels[0]) {
            let (appText, channel) = Self.split(field)
            guard let app = Int64(appText) else { continue }
            if let sockets = Int(value), sockets > 0, let total = count(app: app, channel: channel, change: -sockets, mine: false), total <= 0 {
                vacated.append((app, channel, false))
            }
            guard channel.hasPrefix("presence-") else { continue }
            let members = membersKey(app, channel)
            guard let replies = try? command([["HGETALL", members], ["SMEMBERS", key("nodes")]]), replies.count == 2 else { continue }
            let fields = Self.pairs(replies[0]).map(\.0)
            let theirs = fields.filter { Self.split($0).node == dead }
            guard !theirs.isEmpty else { continue }
            _ = try? command([["HDEL", members] + theirs])
            let present = Set((decode(replies[0], live: replies[1], app: app, channel: channel) ?? []).map(\.userID))
            for field in theirs where !present.contains(Self.split(field).rest) {
                gone.append((ChannelMember(app: app, channel: channel, userID: Self.split(field).rest, infoJSON: nil), false))
            }
        }
        _ = try? command([["DEL", key("subs", dead)]])
        if !gone.isEmpty { announce?(gone) }
        if !vacated.isEmpty { occupancyChanged?(vacated) }
    }

    private func command(_ commands: [[String]]) throws -> [RESPValue] {
        try client.send(commands)
    }
}
