import Foundation
import ParleyChat
import ParleyNet
import ParleyWire
import ParleySync

/// Settings of the Pusher endpoints (docs/pusher.md); every field has a documented default.
package struct PusherConfiguration: Sendable, Hashable {
    /// Seconds of silence after which the server sends `pusher:ping` (and the
    /// `activity_timeout` it announces). Default: 120 s.
    package var activityTimeout: Duration = .seconds(120)
    /// How long a client has to answer that ping before it is closed with 4201. Default: 30 s.
    package var pongTimeout: Duration = .seconds(30)
    /// Events kept per channel for clients that were away (older ones are deleted). Default: 100.
    package var historyPerChannel = 100
    /// Client events per second one socket may send (Pusher's limit). Default: 10.
    package var clientEventsPerSecond = 10
    /// Channels one socket may be subscribed to at once. Default: 100.
    package var maxChannelsPerConnection = 100
    /// Outbound bytes queued for a socket that is not reading before it is closed with 4200
    /// (reconnect). Default: 1 MiB.
    package var maxQueuedBytes = 1 << 20
    /// HTTP API requests per second one app may make (twice that in a burst); beyond, 429
    /// with `Retry-After`. Default: 1,000.
    package var apiRequestsPerSecond = 1_000

    /// The defaults.
    package init() {}
}

/// What every Pusher socket shares.
final class PusherContext: Sendable {
    let chat: Chat
    let hub: PusherHub
    let configuration: PusherConfiguration
    private let counter = LockedValue<UInt32>(0)
    private let nodePart = UInt32.random(in: 1...999_999_999)

    init(chat: Chat, hub: PusherHub, configuration: PusherConfiguration) {
        self.chat = chat
        self.hub = hub
        self.configuration = configuration
    }

    /// A socket id of Pusher's shape (`123.456`): a random number for this process, then a counter.
    func newSocketID() -> String {
        let next = counter.withLock { value -> UInt32 in
            value &+= 1
            return value
        }
        return "\(nodePart).\(next)"
    }
}

/// One Pusher WebSocket (docs/pusher.md). Loop-confined state is touched only on the socket's
/// loop; deliveries from the hub and finished tasks hop back with `socket.loop.execute`.
///
/// A subscription goes `pending` (registering with the hub, then replaying what the client
/// missed when it asked) → `live`. While pending, the channel's live events are held, then
/// sent after the replay, skipping those the replay already sent (by position): no gap, no
/// duplicate.
final class PusherConnection: @unchecked Sendable {
    // @unchecked: every mutable property is touched only on the socket's loop (entries from the hub and from tasks hop there with `socket.loop.execute`); the rest is immutable.
    enum Delivery: Sendable {
        /// A channel event; `position` when it is stored.
        case event(channel: String, position: Int64?, frame: EncodedWebSocketFrame)
        /// A presence announcement.
        case ephemeral(channel: String, frame: EncodedWebSocketFrame)
    }

    private enum Subscription {
        case pending(held: [Delivery])
        case live(replayedUpTo: Int64)
    }

    let socket: WebSocket
    let socketID: String
    let app: ChannelApp
    let context: PusherContext

    // Loop-confined:
    private var subscriptions: [String: Subscription] = [:]
    private var presenceUser: [String: String] = [:]
    private var signedInUser: String?
    private var bucket: TokenBucket
    private var lastActivity = ContinuousClock.now
    private var activityTimer: ScheduledTimer?
    private var closed = false
    private let decoder = JSONDecoder()

    private let inbox = LoopInbox<Delivery>()

    init(socket: WebSocket, app: ChannelApp, context: PusherContext) {
        self.socket = socket
        self.app = app
        self.context = context
        socketID = context.newSocketID()
        bucket = TokenBucket(rate: Double(context.configuration.clientEventsPerSecond), burst: Double(context.configuration.clientEventsPerSecond))
    }

    private var activitySeconds: Int { Int(context.configuration.activityTimeout.components.seconds) }

    // MARK: - Socket events (loop)

    func opened() {
        context.hub.opened()
        scheduleActivityCheck()
        // Client events are checked against the app's blocklists without waiting, in order: have
        // them before the client learns its socket id (it cannot subscribe, so send, without it).
        let filters = context.chat.contentFilters
        let appID = app.app.id
        if filters.isLoaded(app: appID) { return established() }
        Task { [self] in
            _ = await filters.load(app: appID)
            onLoop { connection in connection.established() }
        }
    }

    private func established() {
        send(PusherFrames.connectionEstablished(socketID: socketID, activityTimeout: activitySeconds))
    }

    func didClose() {
        guard !closed else { return }
        closed = true
        if let activityTimer { socket.loop.cancel(activityTimer) }
        context.hub.remove(self, app: app.app.id, channels: Array(subscriptions.keys), userID: signedInUser)
        subscriptions = [:]
    }

    func received(_ message: WebSocketMessage) {
        guard !closed else { return }
        lastActivity = .now
        guard case .text(let text) = message else {
            send(PusherFrames.error(code: nil, message: "frames are JSON text"))
            return
        }
        let frame: PusherClientFrame
        do {
            frame = try decoder.decode(PusherClientFrame.self, from: Data(text.utf8))
        } catch {
            send(PusherFrames.error(code: nil, message: "a frame is a JSON object with a string 'event'"))
            return
        }
        switch frame.event {
        case "pusher:ping": send(PusherFrames.pong)
        case "pusher:pong": break  // lastActivity moved: the ping is answered
        case "pusher:subscribe": subscribe(frame)
        case "pusher:unsubscribe": unsubscribe(frame)
        case "pusher:signin": signIn(frame)
        case let name where name.hasPrefix("client-"): clientEvent(frame)
        default:
            send(PusherFrames.error(code: nil, message: "unknown event '\(frame.event.prefix(64))'"))
        }
    }

    // MARK: - Subscriptions

    private func subscribe(_ frame: PusherClientFrame) {
        guard let data = frame.dataObject, case .string(let channel)? = data["channel"] else {
            send(PusherFrames.error(code: nil, message: "pusher:subscribe needs data.channel"))
            return
        }
        if let problem = PusherProtocol.channelNameProblem(channel) {
            send(PusherFrames.subscriptionError(channel: String(channel.prefix(PusherProtocol.channelNameMax)), type: "InvalidChannel",
                                                message: problem, status: 400))
            return
        }
        guard subscriptions[channel] == nil else { return }  // already subscribed: as Pusher, nothing to do
        guard subscriptions.count < context.configuration.maxChannelsPerConnection else {
            send(PusherFrames.error(code: PusherProtocol.Code.overQuota,
                                    message: "a connection may subscribe to at most \(context.configuration.maxChannelsPerConnection) channels"))
            return
        }
        let kind = PusherProtocol.kind(of: channel)
        var member: (id: String, info: JSONValue?)?
        if kind != .public {
            guard let secret = app.secret else {
                refuseAuth(channel, "this app's secret predates signing: run 'parley-server apps rotate-secret <app>' and use the new secret")
                return
            }
            guard case .string(let auth)? = data["auth"] else {
                refuseAuth(channel, "\(kind == .presence ? "presence" : "private") channels need data.auth from your backend")
                return
            }
            var signed = "\(socketID):\(channel)"
            if kind == .presence {
                guard case .string(let channelData)? = data["channel_data"], channelData.utf8.count <= PusherProtocol.dataBytesMax else {
                    refuseAuth(channel, "presence channels need data.channel_data (at most \(PusherProtocol.dataBytesMax) bytes)")
                    return
                }
                guard case .object(let fields)? = try? JSONValue.decode(channelData), let userID = Self.userID(fields["user_id"]) else {
                    refuseAuth(channel, "channel_data must be a JSON object with a user_id (a string or a number)")
                    return
                }
                signed += ":\(channelData)"
                member = (userID, fields["user_info"])
            }
            guard PusherSignature.verifyAuth(auth, message: signed, key: app.key, secret: secret) else {
                refuseAuth(channel, "invalid signature: expected HMAC-SHA256 of '\(signed.prefix(200))' under the app secret, as key:hex")
                return
            }
        }
        var resumeFrom: Int64?
        if case .number(let position)? = data["position"], position >= 0, position < 9e15 { resumeFrom = Int64(position) }
        subscriptions[channel] = .pending(held: [])
        if let member { presenceUser[channel] = member.id }
        let resume = resumeFrom
        let hub = context.hub
        let appID = app.app.id
        Task { [self] in
            let outcome = await hub.subscribe(self, app: appID, channel: channel, member: member)
            onLoop { connection in connection.subscribed(channel, outcome: outcome, resumeFrom: resume) }
        }
    }

    private func subscribed(_ channel: String, outcome: PusherHub.Subscribed, resumeFrom: Int64?) {
        guard !closed, case .pending? = subscriptions[channel] else {
            context.hub.unsubscribe(self, app: app.app.id, channel: channel)  // closed or unsubscribed meanwhile
            return
        }
        switch outcome {
        case .full:
            subscriptions[channel] = nil
            presenceUser[channel] = nil
            send(PusherFrames.subscriptionError(channel: channel, type: "LimitReached",
                                                message: "a presence channel has at most \(PusherProtocol.presenceMembersMax) members",
                                                status: PusherProtocol.Code.overQuota))
        case .subscribed(let presence):
            send(PusherFrames.subscriptionSucceeded(channel: channel, presence: presence))
            guard let resumeFrom else { return goLive(channel, replayedUpTo: 0) }
            let chat = context.chat
            let appRef = app.app
            let limit = context.configuration.historyPerChannel
            Task { [self] in
                do {
                    let history = try await chat.channels.history(app: appRef, channel: channel, after: resumeFrom, limit: limit)
                    onLoop { connection in connection.replay(channel, history: history, requested: resumeFrom) }
                } catch {
                    onLoop { connection in
                        connection.send(PusherFrames.error(code: PusherProtocol.Code.reconnect, message: "the channel's history cannot be read now: reconnect"))
                        connection.socket.close(code: WebSocketCloseCode(rawValue: UInt16(PusherProtocol.Code.reconnect)), reason: "try again")
                    }
                }
            }
        }
    }

    private func replay(_ channel: String, history: ChannelHistory, requested: Int64) {
        guard !closed, case .pending? = subscriptions[channel] else { return }
        if history.oldestKept > requested, history.events.first.map({ ($0.seq ?? 1) > 1 }) ?? false {
            send(PusherFrames.historyTruncated(channel: channel, requested: requested, oldestKept: history.oldestKept))
        }
        for event in history.events where event.excludedSocket != socketID { send(PusherFrames.event(event)) }
        goLive(channel, replayedUpTo: history.events.last?.position ?? 0)
    }

    private func goLive(_ channel: String, replayedUpTo: Int64) {
        guard case .pending(let held)? = subscriptions[channel] else { return }
        subscriptions[channel] = .live(replayedUpTo: replayedUpTo)
        for delivery in held { sendLive(delivery) }
    }

    private func unsubscribe(_ frame: PusherClientFrame) {
        guard let data = frame.dataObject, case .string(let channel)? = data["channel"] else {
            send(PusherFrames.error(code: nil, message: "pusher:unsubscribe needs data.channel"))
            return
        }
        guard subscriptions.removeValue(forKey: channel) != nil else { return }
        presenceUser[channel] = nil
        context.hub.unsubscribe(self, app: app.app.id, channel: channel)
    }

    private func refuseAuth(_ channel: String, _ message: String) {
        send(PusherFrames.subscriptionError(channel: channel, type: "AuthError", message: message, status: 401))
    }

    /// A presence `user_id`: a string, or a whole number written as one.
    static func userID(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let text)?: return (1...128).contains(text.utf8.count) ? text : nil
        case .number(let number)? where number == number.rounded() && abs(number) < 1e15: return String(Int64(number))
        default: return nil
        }
    }

    // MARK: - Client events and sign-in

    private func clientEvent(_ frame: PusherClientFrame) {
        let reject = { (message: String) in self.send(PusherFrames.error(code: PusherProtocol.Code.clientEventRejected, message: message)) }
        guard let channel = frame.channel, subscriptions[channel] != nil else {
            return reject("subscribe to the channel before sending client events on it")
        }
        guard PusherProtocol.kind(of: channel) != .public, !channel.hasPrefix("private-encrypted-") else {
            return reject("client events are allowed on private and presence channels only")
        }
        if let problem = PusherProtocol.eventNameProblem(frame.event) { return reject(problem) }
        // The app's blocklists apply to every string in the data (docs/trust-and-safety.md).
        guard let filter = context.chat.contentFilters.currentFilter(app: app.app.id) else {
            return reject("the app's content filter cannot be read now (storage is failing): send the event again later")
        }
        let data: JSONValue
        do {
            data = try filter.apply(toJSON: frame.data ?? .null)
        } catch let error as ChatError {
            return reject("client event rejected: \(error.message)")
        } catch {
            return reject("client event rejected")
        }
        let dataJSON = (try? data.encoded()) ?? "null"
        guard dataJSON.utf8.count <= PusherProtocol.dataBytesMax else {
            return reject("client event data is at most \(PusherProtocol.dataBytesMax) bytes")
        }
        guard bucket.take(now: .now) == nil else {
            return reject("at most \(context.configuration.clientEventsPerSecond) client events per second")
        }
        context.chat.channels.publishUnstored(ChannelEvent(app: app.app.id, channel: channel, name: frame.event, dataJSON: dataJSON, position: nil,
                                                  seq: nil, userID: presenceUser[channel], excludedSocket: socketID,
                                                  createdAt: Int64(Date().timeIntervalSince1970 * 1000)))
        context.hub.clientEvent(app: app.app.id, channel: channel, event: frame.event, dataJSON: dataJSON, socketID: socketID,
                                userID: presenceUser[channel])
    }

    private func signIn(_ frame: PusherClientFrame) {
        guard let data = frame.dataObject, case .string(let userData)? = data["user_data"], case .string(let auth)? = data["auth"],
              userData.utf8.count <= PusherProtocol.dataBytesMax else {
            send(PusherFrames.error(code: PusherProtocol.Code.unauthorized, message: "pusher:signin needs data.user_data and data.auth"))
            return
        }
        guard let secret = app.secret,
              PusherSignature.verifyAuth(auth, message: "\(socketID)::user::\(userData)", key: app.key, secret: secret) else {
            send(PusherFrames.error(code: PusherProtocol.Code.unauthorized, message: "invalid sign-in signature"))
            return
        }
        guard case .object(let fields)? = try? JSONValue.decode(userData), let userID = Self.userID(fields["id"]) else {
            send(PusherFrames.error(code: PusherProtocol.Code.unauthorized, message: "user_data must be a JSON object with an id"))
            return
        }
        if let previous = signedInUser {
            guard previous == userID else {
                send(PusherFrames.error(code: PusherProtocol.Code.unauthorized, message: "this connection is signed in as another user"))
                return
            }
            send(PusherFrames.signinSuccess(userData: userData))
            return
        }
        signedInUser = userID
        context.hub.signIn(self, app: app.app.id, userID: userID)
        send(PusherFrames.signinSuccess(userData: userData))
        // The user's server-to-user channel: what the backend sends to this user reaches it.
        let channel = PusherProtocol.userChannel(userID)
        subscriptions[channel] = .pending(held: [])
        let hub = context.hub
        let appID = app.app.id
        Task { [self] in
            _ = await hub.subscribe(self, app: appID, channel: channel, member: nil)
            onLoop { connection in
                guard !connection.closed else { return hub.unsubscribe(connection, app: appID, channel: channel) }
                connection.goLive(channel, replayedUpTo: 0)
            }
        }
    }

    // MARK: - Activity

    private func scheduleActivityCheck() {
        activityTimer = socket.loop.schedule(after: context.configuration.activityTimeout) { [self] in
            guard !closed else { return }
            if ContinuousClock.now - lastActivity >= context.configuration.activityTimeout {
                send(PusherFrames.ping)
                let pinged = ContinuousClock.now
                activityTimer = socket.loop.schedule(after: context.configuration.pongTimeout) { [self] in
                    guard !closed else { return }
                    if lastActivity < pinged {
                        socket.close(code: WebSocketCloseCode(rawValue: UInt16(PusherProtocol.Code.pongTimeout)), reason: "Pong reply not received")
                    } else {
                        scheduleActivityCheck()
                    }
                }
            } else {
                scheduleActivityCheck()
            }
        }
    }

    // MARK: - Deliveries

    /// Called on the hub's queue: hands the delivery to the loop, one hop per burst.
    func deliver(_ delivery: Delivery) {
        if inbox.push(delivery) { socket.loop.execute { [self] in drainInbox() } }
    }

    /// Called on the hub's queue: the app's backend ended this user's connections.
    func terminate() {
        socket.loop.execute { [self] in
            guard !closed else { return }
            send(PusherFrames.error(code: PusherProtocol.Code.unauthorized, message: "connection terminated by the app's backend"))
            socket.close(code: WebSocketCloseCode(rawValue: UInt16(PusherProtocol.Code.unauthorized)), reason: "terminated")
        }
    }

    private func drainInbox() {
        let items = inbox.take()
        for delivery in items { sendLive(delivery) }
    }

    private func sendLive(_ delivery: Delivery) {
        guard !closed else { return }
        let channel: String
        switch delivery {
        case .event(let name, _, _), .ephemeral(let name, _): channel = name
        }
        switch subscriptions[channel] {
        case .pending(var held)?:
            held.append(delivery)
            subscriptions[channel] = .pending(held: held)
        case .live(let replayedUpTo)?:
            switch delivery {
            case .event(_, let position, let frame):
                if let position, position <= replayedUpTo { return }  // the replay sent it
                socket.send(frame)
            case .ephemeral(_, let frame):
                socket.send(frame)
            }
        case nil:
            return  // unsubscribed meanwhile
        }
    }

    private func send(_ bytes: [UInt8]) {
        guard !closed else { return }
        socket.send(EncodedWebSocketFrame(utf8: bytes))
    }

    private func onLoop(_ body: @escaping @Sendable (PusherConnection) -> Void) {
        socket.loop.execute { [self] in body(self) }
    }
}
