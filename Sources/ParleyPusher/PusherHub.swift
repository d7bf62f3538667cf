import Foundation
import ParleyChat
import ParleyNet
import ParleyWire

/// One node's router of named channels: which sockets are subscribed to which channel of which
/// app, who is present in each presence channel, and which sockets are signed in as which user.
/// It receives every ``Publication/channel(_:)`` from the bus (stored events after commit,
/// client events as they come) and hands each to the channel's sockets, the frame written once.
///
/// All of its state lives on one serial queue, like ``Fanout``'s, so a channel's events reach
/// every socket in the order the bus delivered them.
final class PusherHub: @unchecked Sendable {
    // @unchecked: every mutable property is touched only on `queue`.

    struct ChannelKey: Hashable {
        var app: Int64
        var name: String
    }

    private struct Member {
        var info: JSONValue?
        var sockets: Set<ObjectIdentifier>
    }

    private struct Channel {
        var sockets: [ObjectIdentifier: PusherConnection] = [:]
        /// Presence channels: members by user id, in the order they joined.
        var members: [String: Member] = [:]
        var memberOrder: [String] = []
    }

    private let queue = DispatchQueue(label: "parley.pusher")
    private var channels: [ChannelKey: Channel] = [:]
    private var signedIn: [Int64: [String: [ObjectIdentifier: PusherConnection]]] = [:]
    private var connections = 0
    private var routed = 0

    init(bus: any Bus) {
        bus.subscribe { [weak self] publications in
            // Every native message passes here too: hop to the queue only for channel events.
            guard let self, publications.contains(where: {
                switch $0 {
                case .channel, .channelUserTerminated: true
                default: false
                }
            }) else { return }
            queue.async { self.route(publications) }
        }
    }

    // MARK: - Routing

    private func route(_ publications: [Publication]) {
        for case .channelUserTerminated(let app, let userID) in publications {
            for connection in (signedIn[app]?[userID] ?? [:]).values { connection.terminate() }
        }
        for case .channel(let event) in publications {
            guard let channel = channels[ChannelKey(app: event.app, name: event.channel)] else { continue }
            routed += 1
            let frame = EncodedWebSocketFrame(utf8: PusherFrames.event(event))
            for connection in channel.sockets.values where connection.socketID != event.excludedSocket {
                connection.deliver(.event(channel: event.channel, position: event.position, frame: frame))
            }
        }
    }

    // MARK: - Subscriptions

    /// What subscribing found.
    enum Subscribed {
        /// Subscribed; the presence members when it is a presence channel.
        case subscribed(PresenceSnapshot?)
        /// The presence channel is full.
        case full
    }

    /// Subscribes a socket; a presence member is announced to the others when this is the
    /// user's first socket in the channel (`member_added` goes out before this returns, so it
    /// precedes anything the member sends).
    func subscribe(_ connection: PusherConnection, app: Int64, channel name: String, member: (id: String, info: JSONValue?)?) async -> Subscribed {
        await onQueue { [self] in
            let key = ChannelKey(app: app, name: name)
            var channel = channels[key] ?? Channel()
            let id = ObjectIdentifier(connection)
            if let member {
                if var existing = channel.members[member.id] {
                    existing.sockets.insert(id)
                    channel.members[member.id] = existing
                } else {
                    guard channel.members.count < PusherProtocol.presenceMembersMax else { return .full }
                    let added = EncodedWebSocketFrame(utf8: PusherFrames.memberAdded(channel: name, userID: member.id, info: member.info))
                    for other in channel.sockets.values where other !== connection {
                        other.deliver(.ephemeral(channel: name, frame: added))
                    }
                    channel.members[member.id] = Member(info: member.info, sockets: [id])
                    channel.memberOrder.append(member.id)
                }
            }
            channel.sockets[id] = connection
            channels[key] = channel
            guard member != nil else { return .subscribed(nil) }
            return .subscribed(PresenceSnapshot(members: channel.memberOrder.map { PresenceSnapshot.Member(id: $0, info: channel.members[$0]?.info) }))
        }
    }

    /// Unsubscribes a socket; a presence member whose last socket this was is announced gone.
    func unsubscribe(_ connection: PusherConnection, app: Int64, channel name: String) {
        queue.async { [self] in removeSubscription(connection, key: ChannelKey(app: app, name: name)) }
    }

    /// A socket closed: every subscription and sign-in of it ends.
    func remove(_ connection: PusherConnection, app: Int64, channels names: [String], userID: String?) {
        queue.async { [self] in
            for name in names { removeSubscription(connection, key: ChannelKey(app: app, name: name)) }
            if let userID {
                signedIn[app]?[userID]?.removeValue(forKey: ObjectIdentifier(connection))
                if signedIn[app]?[userID]?.isEmpty == true { signedIn[app]?.removeValue(forKey: userID) }
            }
            connections -= 1
        }
    }

    private func removeSubscription(_ connection: PusherConnection, key: ChannelKey) {
        guard var channel = channels[key] else { return }
        let id = ObjectIdentifier(connection)
        guard channel.sockets.removeValue(forKey: id) != nil else { return }
        if let userID = channel.members.first(where: { $0.value.sockets.contains(id) })?.key {
            channel.members[userID]?.sockets.remove(id)
            if channel.members[userID]?.sockets.isEmpty == true {
                channel.members.removeValue(forKey: userID)
                channel.memberOrder.removeAll { $0 == userID }
                let removed = EncodedWebSocketFrame(utf8: PusherFrames.memberRemoved(channel: key.name, userID: userID))
                for other in channel.sockets.values { other.deliver(.ephemeral(channel: key.name, frame: removed)) }
            }
        }
        channels[key] = channel.sockets.isEmpty ? nil : channel
    }

    /// A socket opened.
    func opened() {
        queue.async { [self] in connections += 1 }
    }

    // MARK: - Users

    /// Records that a socket signed in as `userID` (`pusher:signin`).
    func signIn(_ connection: PusherConnection, app: Int64, userID: String) {
        queue.async { [self] in signedIn[app, default: [:]][userID, default: [:]][ObjectIdentifier(connection)] = connection }
    }

    // MARK: - Occupancy (the HTTP API's channel queries)

    /// A channel's occupancy on this node.
    struct Occupancy: Sendable {
        var name: String
        var subscriptionCount: Int
        var userCount: Int
    }

    /// The app's occupied channels whose names start with `prefix`, by name.
    func occupied(app: Int64, prefix: String) async -> [Occupancy] {
        await onQueue { [self] in
            channels.filter { $0.key.app == app && $0.key.name.hasPrefix(prefix) }
                .map { Occupancy(name: $0.key.name, subscriptionCount: $0.value.sockets.count, userCount: $0.value.members.count) }
                .sorted { $0.name < $1.name }
        }
    }

    /// One channel's occupancy (zero counts when nobody is subscribed).
    func occupancy(app: Int64, channel name: String) async -> Occupancy {
        await onQueue { [self] in
            let channel = channels[ChannelKey(app: app, name: name)]
            return Occupancy(name: name, subscriptionCount: channel?.sockets.count ?? 0, userCount: channel?.members.count ?? 0)
        }
    }

    /// The user ids present in a presence channel, in the order they joined.
    func users(app: Int64, channel name: String) async -> [String] {
        await onQueue { [self] in channels[ChannelKey(app: app, name: name)]?.memberOrder ?? [] }
    }

    /// Open Pusher sockets and channel events routed, for `/metrics`.
    var counts: (connections: Int, routed: Int) {
        get async { await onQueue { [self] in (connections, routed) } }
    }

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }
}
