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
///
/// With several nodes a ``ChannelDirectory`` (Redis) holds every node's presence members and
/// socket counts: a user's first socket on this node joins there and their last leaves, and
/// `member_added` / `member_removed` go out through the bus, once per user however many nodes
/// they are on. Without one (or while it cannot be reached) the node counts alone.
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

    private let bus: any Bus
    private let directory: (any ChannelDirectory)?
    /// Where Pusher's webhook events go (channels occupied and vacated, presence members,
    /// client events), each told once across nodes.
    private let report: @Sendable (Int64, [PusherWebhookEvent]) -> Void

    init(bus: any Bus, directory: (any ChannelDirectory)? = nil, report: @escaping @Sendable (Int64, [PusherWebhookEvent]) -> Void = { _, _ in }) {
        self.bus = bus
        self.directory = directory
        self.report = report
        directory?.start(state: { [weak self] in self?.localState() ?? ChannelDirectoryState(subscriptions: [], members: []) },
                         announce: { [weak self] changes in
                             for change in changes { self?.announce(change.member, added: change.added, excluding: nil) }
                         },
                         occupancy: { changes in
                             for change in changes {
                                 report(change.app, [PusherWebhookEvent(name: change.occupied ? "channel_occupied" : "channel_vacated",
                                                                        channel: change.channel)])
                             }
                         })
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
        await withCheckedContinuation { (continuation: CheckedContinuation<Subscribed, Never>) in
            queue.async { [self] in
                let key = ChannelKey(app: app, name: name)
                if channels[key] == nil, directory == nil { report(app, [PusherWebhookEvent(name: "channel_occupied", channel: name)]) }
                var channel = channels[key] ?? Channel()
                let id = ObjectIdentifier(connection)
                let isNew = channel.sockets[id] == nil
                guard let member else {
                    channel.sockets[id] = connection
                    channels[key] = channel
                    if isNew { directory?.subscriptions(app: app, channel: name, change: 1) }
                    return continuation.resume(returning: .subscribed(nil))
                }
                if var existing = channel.members[member.id] {
                    // Not the user's first socket here: nobody is told.
                    existing.sockets.insert(id)
                    channel.members[member.id] = existing
                    channel.sockets[id] = connection
                    channels[key] = channel
                    if isNew { directory?.subscriptions(app: app, channel: name, change: 1) }
                    let local = Self.snapshot(channel)
                    guard let directory else { return continuation.resume(returning: .subscribed(local)) }
                    directory.members(app: app, channel: name) { found in
                        continuation.resume(returning: .subscribed(found.map { Self.snapshot($0, adding: local) } ?? local))
                    }
                    return
                }
                guard channel.members.count < PusherProtocol.presenceMembersMax else { return continuation.resume(returning: .full) }
                channel.members[member.id] = Member(info: member.info, sockets: [id])
                channel.memberOrder.append(member.id)
                channel.sockets[id] = connection
                channels[key] = channel
                let local = Self.snapshot(channel)
                guard let directory else {
                    deliverMember(key, id: member.id, info: member.info, added: true, excluding: connection)
                    report(app, [Self.memberEvent(channel: name, userID: member.id, added: true)])
                    return continuation.resume(returning: .subscribed(local))
                }
                if isNew { directory.subscriptions(app: app, channel: name, change: 1) }
                let joining = ChannelMember(app: app, channel: name, userID: member.id, infoJSON: member.info.flatMap { try? $0.encoded() })
                directory.join(joining) { [self] joined in
                    guard let joined else {
                        // The directory cannot be reached: as if this node were alone.
                        queue.async { [self] in deliverMember(key, id: member.id, info: member.info, added: true, excluding: connection) }
                        report(app, [Self.memberEvent(channel: name, userID: member.id, added: true)])
                        return continuation.resume(returning: .subscribed(local))
                    }
                    if joined.news && joined.members.count > PusherProtocol.presenceMembersMax {
                        queue.async { [self] in removeSubscription(connection, key: key, quietly: true) }
                        return continuation.resume(returning: .full)
                    }
                    if joined.news { announce(joining, added: true, excluding: connection.socketID) }
                    continuation.resume(returning: .subscribed(Self.snapshot(joined.members, adding: local)))
                }
            }
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

    /// Takes a socket out of a channel; when it was its user's last socket here the user leaves
    /// (announced unless `quietly`: a join refused because the channel was full).
    private func removeSubscription(_ connection: PusherConnection, key: ChannelKey, quietly: Bool = false) {
        guard var channel = channels[key] else { return }
        let id = ObjectIdentifier(connection)
        guard channel.sockets.removeValue(forKey: id) != nil else { return }
        // After the member leaves (the directory answers in call order): member_removed is told
        // before channel_vacated.
        defer { directory?.subscriptions(app: key.app, channel: key.name, change: -1) }
        if let userID = channel.members.first(where: { $0.value.sockets.contains(id) })?.key {
            channel.members[userID]?.sockets.remove(id)
            if channel.members[userID]?.sockets.isEmpty == true {
                channel.members.removeValue(forKey: userID)
                channel.memberOrder.removeAll { $0 == userID }
                if let directory {
                    directory.leave(app: key.app, channel: key.name, userID: userID) { [self] gone in
                        guard !quietly else { return }
                        if gone == true { announce(ChannelMember(app: key.app, channel: key.name, userID: userID, infoJSON: nil), added: false, excluding: nil) }
                        if gone == nil {
                            queue.async { [self] in deliverMember(key, id: userID, info: nil, added: false, excluding: nil) }
                            report(key.app, [Self.memberEvent(channel: key.name, userID: userID, added: false)])
                        }
                    }
                } else if !quietly {
                    for other in channel.sockets.values {
                        other.deliver(.ephemeral(channel: key.name, frame: EncodedWebSocketFrame(utf8: PusherFrames.memberRemoved(channel: key.name, userID: userID))))
                    }
                    report(key.app, [Self.memberEvent(channel: key.name, userID: userID, added: false)])
                }
            }
        }
        if channel.sockets.isEmpty, directory == nil { report(key.app, [PusherWebhookEvent(name: "channel_vacated", channel: key.name)]) }
        channels[key] = channel.sockets.isEmpty ? nil : channel
    }

    /// Tells this node's sockets in a channel that a member came or went.
    private func deliverMember(_ key: ChannelKey, id: String, info: JSONValue?, added: Bool, excluding: PusherConnection?) {
        guard let channel = channels[key] else { return }
        let frame = EncodedWebSocketFrame(utf8: added ? PusherFrames.memberAdded(channel: key.name, userID: id, info: info)
                                                      : PusherFrames.memberRemoved(channel: key.name, userID: id))
        for other in channel.sockets.values where other !== excluding { other.deliver(.ephemeral(channel: key.name, frame: frame)) }
    }

    /// A client event, for Pusher-format webhooks (`data` as the client sent it, as a string).
    func clientEvent(app: Int64, channel: String, event: String, dataJSON: String, socketID: String, userID: String?) {
        var fields = [("event", event), ("data", Self.dataString(dataJSON)), ("socket_id", socketID)]
        if let userID { fields.append(("user_id", userID)) }
        report(app, [PusherWebhookEvent(name: "client_event", channel: channel, fields: fields)])
    }

    /// Pusher's webhook entry for a presence member.
    private static func memberEvent(channel: String, userID: String, added: Bool) -> PusherWebhookEvent {
        PusherWebhookEvent(name: added ? "member_added" : "member_removed", channel: channel, fields: [("user_id", userID)])
    }

    /// A client event's data as Pusher's webhook carries it: the string a client sent, or the
    /// JSON of anything else.
    private static func dataString(_ json: String) -> String {
        if case .string(let text)? = try? JSONValue.decode(json) { return text }
        return json
    }

    /// Sends a member change to every node's sockets in the channel, through the bus (and, on
    /// this node only, to Pusher-format webhooks: each change is announced by one node).
    private func announce(_ member: ChannelMember, added: Bool, excluding socket: String?) {
        report(member.app, [Self.memberEvent(channel: member.channel, userID: member.userID, added: added)])
        var data: [String: JSONValue] = ["user_id": .string(member.userID)]
        if added { data["user_info"] = member.infoJSON.flatMap { try? JSONValue.decode($0) } ?? .object([:]) }
        let text = (try? JSONValue.string((try? JSONValue.object(data).encoded()) ?? "{}").encoded()) ?? "\"{}\""
        bus.publish([.channel(ChannelEvent(app: member.app, channel: member.channel,
                                           name: added ? "pusher_internal:member_added" : "pusher_internal:member_removed",
                                           dataJSON: text, position: nil, seq: nil, userID: nil, excludedSocket: socket,
                                           createdAt: Int64(Date().timeIntervalSince1970 * 1000)))])
    }

    private static func snapshot(_ channel: Channel) -> PresenceSnapshot {
        PresenceSnapshot(members: channel.memberOrder.map { PresenceSnapshot.Member(id: $0, info: channel.members[$0]?.info) })
    }

    /// Every node's members, with this node's (which the directory may not show yet).
    private static func snapshot(_ members: [ChannelMember], adding local: PresenceSnapshot) -> PresenceSnapshot {
        var result = members.map { PresenceSnapshot.Member(id: $0.userID, info: $0.infoJSON.flatMap { try? JSONValue.decode($0) }) }
        let known = Set(result.map(\.id))
        result += local.members.filter { !known.contains($0.id) }
        return PresenceSnapshot(members: result)
    }

    /// What this node holds, for the directory to write again.
    private func localState() -> ChannelDirectoryState {
        queue.sync {
            ChannelDirectoryState(
                subscriptions: channels.map { (app: $0.key.app, channel: $0.key.name, count: $0.value.sockets.count) },
                members: channels.flatMap { key, channel in
                    channel.memberOrder.map { ChannelMember(app: key.app, channel: key.name, userID: $0,
                                                            infoJSON: channel.members[$0]?.info.flatMap { try? $0.encoded() }) }
                })
        }
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

    /// The app's occupied channels whose names start with `prefix`, by name: on every node
    /// when there is a directory.
    func occupied(app: Int64, prefix: String) async -> [Occupancy] {
        if let directory, let found = await withCheckedContinuation({ (continuation: CheckedContinuation<[ChannelOccupancy]?, Never>) in
            directory.occupancy(app: app, prefix: prefix) { continuation.resume(returning: $0) }
        }) {
            return found.map { Occupancy(name: $0.channel, subscriptionCount: $0.subscriptions, userCount: $0.users) }
        }
        return await onQueue { [self] in
            channels.filter { $0.key.app == app && $0.key.name.hasPrefix(prefix) }
                .map { Occupancy(name: $0.key.name, subscriptionCount: $0.value.sockets.count, userCount: $0.value.members.count) }
                .sorted { $0.name < $1.name }
        }
    }

    /// One channel's occupancy (zero counts when nobody is subscribed).
    func occupancy(app: Int64, channel name: String) async -> Occupancy {
        if directory != nil {
            return await occupied(app: app, prefix: name).first { $0.name == name } ?? Occupancy(name: name, subscriptionCount: 0, userCount: 0)
        }
        return await onQueue { [self] in
            let channel = channels[ChannelKey(app: app, name: name)]
            return Occupancy(name: name, subscriptionCount: channel?.sockets.count ?? 0, userCount: channel?.members.count ?? 0)
        }
    }

    /// The user ids present in a presence channel: in the order they joined on one node, by id
    /// over several.
    func users(app: Int64, channel name: String) async -> [String] {
        if let directory, let found = await withCheckedContinuation({ (continuation: CheckedContinuation<[ChannelMember]?, Never>) in
            directory.members(app: app, channel: name) { continuation.resume(returning: $0) }
        }) {
            return found.map(\.userID)
        }
        return await onQueue { [self] in channels[ChannelKey(app: app, name: name)]?.memberOrder ?? [] }
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
