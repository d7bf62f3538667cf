import Foundation
import ParleyChat
import ParleyNet
import ParleyWire

/// Settings of the realtime endpoint; every field has a documented default (docs/protocol.md).
public struct RealtimeConfiguration: Sendable, Hashable {
    /// How long a new socket has to send `auth`. Default: 10 s.
    public var authTimeout: Duration = .seconds(10)
    /// The most events replayed to a reconnecting device; beyond, it is told to resync.
    /// Default: 10,000.
    public var maxReplayEvents = 10_000
    /// Commands per second one connection may send, sustained. Default: 50.
    public var commandsPerSecond = 50.0
    /// Commands one connection may send in a burst. Default: 100.
    public var commandBurst = 100.0
    /// Commands per second one user may send over all their devices. Default: 100.
    public var userCommandsPerSecond = 100.0
    /// Commands one user may send in a burst. Default: 200.
    public var userCommandBurst = 200.0
    /// Commands of one connection accepted and not yet answered. Default: 64.
    public var maxCommandsInFlight = 64
    /// Outbound bytes queued for a device before it is closed with 4000 (resume). Default: 4 MiB.
    public var maxQueuedBytes = 4 << 20
    /// Events held for a device while it replays, before it is closed with 4000. Default: 20,000.
    public var maxHeldEvents = 20_000
    /// How long a user stays online after their last device disconnects. Default: 10 s.
    public var presenceGrace: Duration = .seconds(10)

    /// The defaults.
    public init() {}
}

/// What every realtime session shares.
final class RealtimeContext: Sendable {
    let chat: Chat
    let fanout: Fanout<EncodedWebSocketFrame>
    let configuration: RealtimeConfiguration
    let heartbeatSeconds: Int
    /// Commands per user, over all of the user's connections on every node.
    let userRate: SharedRate

    init(chat: Chat, fanout: Fanout<EncodedWebSocketFrame>, configuration: RealtimeConfiguration, heartbeatSeconds: Int) {
        self.chat = chat
        self.fanout = fanout
        self.configuration = configuration
        self.heartbeatSeconds = heartbeatSeconds
        userRate = SharedRate(name: "commands-user", rate: configuration.userCommandsPerSecond, burst: configuration.userCommandBurst,
                              shared: chat.sharedCounters)
    }
}

/// The realtime WebSocket route: `GET /v1/realtime` with the app key in `X-Parley-App-Key`
/// or `?appKey=` (browsers cannot set headers on a WebSocket). The user's token is never in
/// the URL: it is the first frame.
enum RealtimeRoutes {
    static func add(to router: inout Router, context: RealtimeContext, webSocket: WebSocketConfiguration) {
        var configuration = webSocket
        configuration.maxMessageSize = Limits.realtimeFrameBytes
        configuration.maxQueuedBytes = context.configuration.maxQueuedBytes
        configuration.slowPeerCloseCode = WebSocketCloseCode(rawValue: RealtimeCloseCode.resume)
        router.webSocket("/v1/realtime", configuration: configuration) { request in
            guard let key = request.headers["x-parley-app-key"] ?? request.queryItems["appKey"] else {
                throw HTTPError(.unauthorized, code: ChatError.unknownApp.code, message: "send the app key in X-Parley-App-Key or ?appKey=")
            }
            let app: AppRef
            do {
                app = try await context.chat.app(publicKey: key)
            } catch let error as ChatError {
                throw HTTPError(HTTPStatus(code: error.status), code: error.code, message: error.message)
            }
            let session = Locked<RealtimeSession?>(nil)
            return WebSocketHandler(
                onOpen: { socket in
                    let created = RealtimeSession(socket: socket, app: app, context: context)
                    session.withLock { $0 = created }
                    created.opened()
                },
                onMessage: { _, message in session.withLock { $0 }?.received(message) },
                onClose: { _, _, _ in
                    session.withLock { $0 }?.closed()
                    session.withLock { $0 = nil }
                })
        }
    }
}

/// One device's realtime connection (docs/protocol.md):
///
/// ```
///  awaitingAuth ──auth──▶ authenticating ──token ok──▶ catchingUp ──replayed──▶ live
///       │ deadline / not auth: 4002 / 4003       │ bad token: 4001
/// ```
/// While catching up, live deliveries are held and then sent after the replay, skipping
/// what the replay already sent (by position): no gap, no duplicate. Commands run one after
/// another in the order they arrived, so a device's sends are stored in its order.
///
/// Loop-confined state is touched only on the socket's loop; tasks hop back with
/// `socket.loop.execute`.
final class RealtimeSession: @unchecked Sendable {
    private enum Phase { case awaitingAuth, authenticating, catchingUp, live, closed }
    typealias Delivery = Fanout<EncodedWebSocketFrame>.Delivery

    let socket: WebSocket
    let app: AppRef
    let context: RealtimeContext
    private var chat: Chat { context.chat }

    // Loop-confined:
    private var phase = Phase.awaitingAuth
    private var authTimer: ScheduledTimer?
    private var subscriber: Fanout<EncodedWebSocketFrame>.Subscriber?
    /// The newest position sent to the device; live events at or before it are skipped.
    private var lastPosition: Int64 = 0
    private var held: [Delivery] = []
    private var bucket: TokenBucket
    private var inFlight = 0
    private var chain: Task<Void, Never>?
    /// Decodes this socket's frames (loop thread only; one per session, not one per frame).
    private let decoder = JSONDecoder()

    /// The caller, once authenticated; read by command tasks.
    private let caller = Locked<Caller?>(nil)
    /// Deliveries from the fanout's queue, waiting for the loop.
    private let inbox = LoopInbox<Delivery>()

    init(socket: WebSocket, app: AppRef, context: RealtimeContext) {
        self.socket = socket
        self.app = app
        self.context = context
        bucket = TokenBucket(rate: context.configuration.commandsPerSecond, burst: context.configuration.commandBurst)
    }

    // MARK: - Socket events (loop)

    func opened() {
        authTimer = socket.loop.schedule(after: context.configuration.authTimeout) { [self] in
            guard phase == .awaitingAuth else { return }
            fail(ChatError.unauthenticated, id: nil, close: RealtimeCloseCode.authTimeout, reason: "authenticate within the deadline")
        }
    }

    func received(_ message: WebSocketMessage) {
        guard phase != .closed else { return }
        guard case .text(let text) = message else {
            fail(ChatError.invalid("frames are JSON text"), id: nil, close: RealtimeCloseCode.protocolViolation, reason: "send JSON text frames")
            return
        }
        let frame: ClientFrame
        do {
            frame = try decoder.decode(ClientFrame.self, from: Data(text.utf8))
        } catch {
            let (id, problem) = Self.decodingProblem(error)
            if phase == .awaitingAuth {
                // Before auth, any known command that is not a whole `auth` is "sign in first".
                let answer = error is ClientFrame.DecodingFailure && problem.code != ChatError.Code.unknownCommand.rawValue
                    ? ChatError.unauthenticated : problem
                fail(answer, id: id, close: RealtimeCloseCode.protocolViolation, reason: "the first frame must be auth")
            } else {
                send(RealtimeFrames.error(id: id, problem))
            }
            return
        }
        if let id = frame.id, !Limits.commandID.contains(id.count) {
            send(RealtimeFrames.error(id: nil, ChatError.invalid("id must be 1–\(Limits.commandID.upperBound) characters")))
            return
        }
        if phase == .awaitingAuth {
            guard case .auth(let auth) = frame else {
                fail(ChatError.unauthenticated, id: frame.id, close: RealtimeCloseCode.protocolViolation, reason: "the first frame must be auth with a token")
                return
            }
            guard (auth.position ?? 0) >= 0 else {
                fail(ChatError.invalid("position must not be negative"), id: auth.id, close: RealtimeCloseCode.protocolViolation, reason: "bad auth")
                return
            }
            authenticate(token: auth.token, position: auth.position, epoch: auth.epoch)
            return
        }
        switch frame {
        case .auth(let auth):
            send(RealtimeFrames.error(id: auth.id, ChatError.invalid("already authenticated")))
        case .ping(let id):
            send(RealtimeFrames.pong(id: id))
        default:
            command(frame)
        }
    }

    func closed() {
        guard phase != .closed else { return }
        phase = .closed
        if let authTimer { socket.loop.cancel(authTimer) }
        if let subscriber { context.fanout.detach(subscriber) }
        subscriber = nil
        held = []
        chain = nil
    }

    // MARK: - Authentication and catching up

    private func authenticate(token: String, position: Int64?, epoch: String?) {
        phase = .authenticating
        if let authTimer { socket.loop.cancel(authTimer) }
        authTimer = nil
        chain = Task { [self] in
            let caller: Caller
            do {
                caller = try await chat.authenticate(token: token, app: app)
            } catch {
                onLoop { $0.fail(ChatError.unauthenticated, id: nil, close: RealtimeCloseCode.unauthorized, reason: "sign in again") }
                return
            }
            self.caller.withLock { $0 = caller }
            let subscriber = Fanout<EncodedWebSocketFrame>.Subscriber(caller: caller) { [weak self] delivery in
                self?.deliver(delivery)
            }
            let registered: Bool = await withCheckedContinuation { continuation in
                socket.loop.execute { [self] in
                    guard phase == .authenticating else { return continuation.resume(returning: false) }
                    self.subscriber = subscriber
                    phase = .catchingUp
                    continuation.resume(returning: true)
                }
            }
            guard registered else { return }
            do {
                let asOf = try await context.fanout.attach(subscriber)
                // A socket that closed while attaching may have detached before the attach
                // registered it: detach again now that the attach is done (a second detach is
                // harmless), or the fanout would keep a dead device and its user online.
                let open: Bool = await withCheckedContinuation { continuation in
                    socket.loop.execute { [self] in continuation.resume(returning: phase != .closed) }
                }
                guard open else {
                    context.fanout.detach(subscriber)
                    return
                }
                try await catchUp(caller, from: position, epoch: epoch, asOf: asOf)
            } catch {
                onLoop { $0.fail(ChatError.internalError, id: nil, close: WebSocketCloseCode.tryAgainLater.rawValue, reason: "try again") }
            }
        }
    }

    /// Replays what the device missed, then goes live. A device without a position starts
    /// at `asOf`: the fanout holds what was published while it attached (``Fanout/attach(_:)``),
    /// so nothing after `ready.position` is missed.
    private func catchUp(_ caller: Caller, from position: Int64?, epoch: String?, asOf: Int64) async throws {
        var after = position ?? asOf
        var newest = asOf
        let serverEpoch = chat.epoch
        if let position {
            switch try await chat.catchUp(caller, after: position, epoch: epoch, maxEvents: context.configuration.maxReplayEvents) {
            case .resync(let current, let reason):
                after = current
                newest = current
                let frame = RealtimeFrames.resync(position: current, epoch: serverEpoch, reason: reason)
                onLoop { $0.send(frame) }
            case .replay:
                while true {
                    let page = try await chat.replay(caller, after: after, limit: 200)
                    let frames = page.frames.map(\.frame)
                    let open: Bool = await withCheckedContinuation { continuation in
                        onLoop { session in session.sendPaced(frames, from: 0) { continuation.resume(returning: $0) } }
                    }
                    guard open else { return }
                    after = page.frames.last?.position ?? after
                    newest = page.newest
                    if !page.hasMore { break }
                }
            }
        }
        let replayedUpTo = after
        let readyAt = max(after, newest)
        onLoop { session in
            guard session.phase == .catchingUp else { return }
            session.lastPosition = replayedUpTo
            session.phase = .live
            let held = session.held
            session.held = []
            for delivery in held { session.sendLive(delivery) }
            session.lastPosition = max(session.lastPosition, readyAt)
            session.send(RealtimeFrames.ready(position: session.lastPosition, epoch: serverEpoch, userID: caller.userID.rawValue,
                                              heartbeatSeconds: session.context.heartbeatSeconds))
        }
    }

    /// Sends replayed frames no faster than the device reads them: while more than a quarter
    /// of the queue limit is waiting, it checks again shortly. (Sending a long replay at once
    /// would trip the slow-peer limit on a device that reads fine.) `done` gets false if the
    /// connection closed meanwhile.
    private func sendPaced(_ frames: [[UInt8]], from start: Int, done: @escaping @Sendable (Bool) -> Void) {
        var index = start
        while index < frames.count {
            guard phase != .closed else { return done(false) }
            if socket.queuedBytes > context.configuration.maxQueuedBytes / 4 {
                let resumeAt = index
                _ = socket.loop.schedule(after: .milliseconds(2)) { [self] in sendPaced(frames, from: resumeAt, done: done) }
                return
            }
            send(frames[index])
            index += 1
        }
        done(phase != .closed)
    }

    // MARK: - Deliveries

    /// Called on the fanout's queue: hands the delivery to the loop, one hop per burst.
    private func deliver(_ delivery: Delivery) {
        if inbox.push(delivery) { socket.loop.execute { [self] in drainInbox() } }
    }

    private func drainInbox() {
        let items = inbox.take()
        for delivery in items {
            switch phase {
            case .live:
                sendLive(delivery)
            case .catchingUp:
                if case .signedOut = delivery { sendLive(delivery); return }
                held.append(delivery)
                if held.count > context.configuration.maxHeldEvents {
                    held = []
                    socket.close(code: WebSocketCloseCode(rawValue: RealtimeCloseCode.resume), reason: "too far behind: reconnect and resume")
                    phase = .closed
                    return
                }
            case .awaitingAuth, .authenticating, .closed:
                return
            }
        }
    }

    private func sendLive(_ delivery: Delivery) {
        switch delivery {
        case .event(let position, let frame):
            guard position > lastPosition else { return }
            lastPosition = position
            socket.send(frame)
        case .ephemeral(let frame):
            socket.send(frame)
        case .signedOut:
            fail(ChatError.unauthenticated, id: nil, close: RealtimeCloseCode.unauthorized, reason: "signed out")
        }
    }

    // MARK: - Commands

    private func command(_ frame: ClientFrame) {
        let id = frame.id
        let now = ContinuousClock.now
        if let wait = bucket.take(now: now) {
            send(RealtimeFrames.error(id: id, ChatError.rateLimited(retryAfter: wait)))
            return
        }
        guard inFlight < context.configuration.maxCommandsInFlight else {
            send(RealtimeFrames.error(id: id, ChatError.rateLimited(retryAfter: 1, "too many commands waiting for answers; wait for some")))
            return
        }
        inFlight += 1
        let previous = chain
        chain = Task { [self] in
            await previous?.value
            let answer: [UInt8]?
            if let caller = caller.withLock({ $0 }) {
                if let wait = context.userRate.take(String(caller.userKey), now: now) {
                    answer = RealtimeFrames.error(id: id, ChatError.rateLimited(retryAfter: wait))
                } else {
                    do {
                        let result = try await execute(frame, caller: caller)
                        answer = id.map { RealtimeFrames.ack(id: $0, result: result) }
                    } catch {
                        answer = RealtimeFrames.error(id: id, error as? ChatError ?? ChatError.internalError)
                    }
                }
            } else {
                answer = nil  // authentication failed: the socket is closing
            }
            onLoop { session in
                session.inFlight -= 1
                if let answer { session.send(answer) }
            }
        }
    }

    /// Runs one command; the REST endpoint's answer, encoded. Every case has its fields:
    /// ``ClientFrame`` decoding refused any frame that lacked one.
    private func execute(_ frame: ClientFrame, caller: Caller) async throws -> [UInt8] {
        // The REST answers, encoded as REST encodes them (the send's, the hot path, is written by hand).
        func encode(_ value: some Encodable) throws -> [UInt8] { Array(try WireCoding.encoder().encode(value)) }
        switch frame {
        case .send(_, let conversation, let message):
            let (record, created) = try await chat.sendRecord(caller, to: conversation, message)
            var writer = JSONWriter(capacity: 512)
            writer.object { json in
                json.key("created"); json.bool(created)
                json.key("message"); record.writeJSON(into: &json)
            }
            return writer.bytes
        case .edit(_, let conversation, let messageID, let content, let metadata):
            return try encode(try await chat.edit(caller, conversation: conversation, message: messageID,
                                                  EditMessageRequest(content: content, metadata: metadata)))
        case .delete(_, let conversation, let ids):
            return try encode(DeletedMessages(messages: try await chat.delete(caller, conversation: conversation, messages: ids)))
        case .react(_, let conversation, let messageID, let emoji, let adding):
            let (message, _) = adding ? try await chat.react(caller, conversation: conversation, message: messageID, emoji: emoji)
                                      : try await chat.unreact(caller, conversation: conversation, message: messageID, emoji: emoji)
            return try encode(message)
        case .markDelivered(_, let conversation, let seq):
            return try encode(try await chat.updateReceipt(caller, conversation: conversation, ReceiptUpdate(deliveredSeq: seq)))
        case .markRead(_, let conversation, let seq):
            return try encode(try await chat.updateReceipt(caller, conversation: conversation, ReceiptUpdate(readSeq: seq)))
        case .typing(_, let conversation, let isTyping):
            try await chat.typing(caller, conversation: conversation, typing: isTyping)
            return Array("{}".utf8)
        case .join(_, let conversation):
            return try encode(try await chat.join(caller, id: conversation))
        case .leave(_, let conversation):
            try await chat.removeMember(caller, id: conversation, user: caller.userID)
            return Array("{}".utf8)
        case .presence(_, let users):
            let fanout = context.fanout
            return try encode(try await chat.presence(caller, users: users, isOnline: { await fanout.online($0) }))
        case .auth, .ping:
            throw ChatError.invalid("not a command here")
        }
    }

    /// The typed error for a frame that did not decode, and the id to echo: a frame that
    /// was a JSON object with a `type` gets the command's own answer (``ClientFrame/DecodingFailure``);
    /// anything else is `invalid_json`, naming the field where it can.
    static func decodingProblem(_ error: any Error) -> (id: String?, ChatError) {
        let message: String
        switch error {
        case let failure as ClientFrame.DecodingFailure:
            return (failure.id, failure.error)
        case DecodingError.keyNotFound(let key, _):
            message = "missing field '\(key.stringValue)'"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            message = "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
        case DecodingError.dataCorrupted(let context) where !context.codingPath.isEmpty:
            message = "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' is invalid"
        default:
            message = "the frame is not a JSON object"
        }
        return (nil, ChatError.invalidJSON(message))
    }

    // MARK: - Helpers (loop)

    private func send(_ bytes: [UInt8]) {
        guard phase != .closed else { return }
        socket.send(EncodedWebSocketFrame(utf8: bytes))
    }

    /// Sends the error, then closes with `code`.
    private func fail(_ error: ChatError, id: String?, close code: UInt16, reason: String) {
        guard phase != .closed else { return }
        send(RealtimeFrames.error(id: id, error))
        socket.close(code: WebSocketCloseCode(rawValue: code), reason: reason)
        closed()
    }

    private func onLoop(_ body: @escaping @Sendable (RealtimeSession) -> Void) {
        socket.loop.execute { [self] in body(self) }
    }
}

