import Foundation
import ParleyChat
import ParleyLog
import ParleyNet
import ParleySync
import ParleyWire

/// Settings of the realtime endpoint; every field has a documented default (docs/protocol.md).
package struct RealtimeConfiguration: Sendable, Hashable {
    /// How long a new socket has to send `auth`. Default: 10 s.
    package var authTimeout: Duration = .seconds(10)
    /// The most events replayed to a reconnecting device; beyond, it is told to resync.
    /// Default: 10,000.
    package var maxReplayEvents = 10_000
    /// Commands per second one connection may send, sustained. Default: 50.
    package var commandsPerSecond = 50.0
    /// Commands one connection may send in a burst. Default: 100.
    package var commandBurst = 100.0
    /// Commands per second one user may send over all their devices. Default: 100.
    package var userCommandsPerSecond = 100.0
    /// Commands one user may send in a burst. Default: 200.
    package var userCommandBurst = 200.0
    /// Commands of one connection accepted and not yet answered. Default: 64.
    package var maxCommandsInFlight = 64
    /// Outbound bytes queued for a device before it is closed with 4000 (resume). Default: 4 MiB.
    package var maxQueuedBytes = 4 << 20
    /// Events held for a device while it replays, before it is closed with 4000. Default: 20,000.
    package var maxHeldEvents = 20_000
    /// How long a user stays online after their last device disconnects. Default: 10 s.
    package var presenceGrace: Duration = .seconds(10)

    /// The defaults.
    package init() {}
}

/// What every realtime session shares.
final class RealtimeContext: Sendable {
    let chat: Chat
    let fanout: Fanout<EncodedWebSocketFrame>
    let configuration: RealtimeConfiguration
    let heartbeatSeconds: Int
    /// Commands per user, over all of the user's connections on every node.
    let userRate: SharedRate
    /// Sessions' opens, closes and failures.
    let logger: Logger

    init(chat: Chat, fanout: Fanout<EncodedWebSocketFrame>, configuration: RealtimeConfiguration, heartbeatSeconds: Int,
         logger: Logger = .discarding()) {
        self.logger = logger.labelled("parley.realtime")
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
            let app: AppRef
            do {
                app = try await API.app(key: request.headers["x-parley-app-key"] ?? request.queryItems["appKey"], in: context.chat,
                                        header: "X-Parley-App-Key or ?appKey=")
            } catch let error as ChatError {
                throw HTTPError(HTTPStatus(code: error.status), code: error.code, message: error.message)
            }
            let session = LockedValue<RealtimeSession?>(nil)
            return WebSocketHandler(
                onOpen: { socket in
                    let created = RealtimeSession(socket: socket, app: app, context: context)
                    session.set(created)
                    created.opened()
                },
                onMessage: { _, message in session.get()?.received(message) },
                onClose: { _, code, reason in
                    session.get()?.closed(code: code.rawValue, reason: reason)
                    session.set(nil)
                })
        }
    }
}

/// One device's realtime connection (docs/protocol.md): the I/O around a
/// ``RealtimeSessionMachine``, which holds the rules. This class reads frames, performs the
/// machine's actions on the socket, its timer and the store, and feeds back what came of them.
///
/// Loop-confined state is touched only on the socket's loop; tasks hop back with
/// `socket.loop.execute`.
final class RealtimeSession: @unchecked Sendable {
    // @unchecked: `machine`, `authTimer`, `subscriber`, `chain` and `decoder` are touched only on
    // `socket.loop` (every entry from elsewhere goes through `onLoop`); `caller` and `inbox`
    // are thread-safe.
    typealias Delivery = Fanout<EncodedWebSocketFrame>.Delivery

    let socket: WebSocket
    let app: AppRef
    let context: RealtimeContext
    private var chat: Chat { context.chat }

    // Loop-confined:
    private var machine: RealtimeSessionMachine<EncodedWebSocketFrame>
    private var authTimer: ScheduledTimer?
    private var subscriber: Fanout<EncodedWebSocketFrame>.Subscriber?
    private var chain: Task<Void, Never>?
    /// The authentication and catch-up, which receipts wait for (they do not wait for the chain).
    private var authentication: Task<Void, Never>?
    /// Decodes this socket's frames (loop thread only; one per session, not one per frame).
    private let decoder = JSONDecoder()
    private let openedAt = ContinuousClock.now

    /// The caller, once authenticated; read by command tasks.
    private let caller = LockedValue<Caller?>(nil)
    /// Deliveries from the fanout's queue, waiting for the loop.
    private let inbox = LoopInbox<Delivery>()

    init(socket: WebSocket, app: AppRef, context: RealtimeContext) {
        self.socket = socket
        self.app = app
        self.context = context
        machine = RealtimeSessionMachine(configuration: context.configuration)
    }

    // MARK: - Socket events (loop)

    func opened() {
        context.logger.debug("socket opened", metadata: ["app.id": .integer(app.id)])
        perform(machine.opened())
    }

    func received(_ message: WebSocketMessage) {
        guard case .text(var text) = message else { return perform(machine.receivedBinary()) }
        do {
            // The hot commands without Foundation; anything else, or anything the fast reader
            // is unsure of, as before (decision 0026, part 2).
            let fast = text.withUTF8 { ClientFrame.fastDecoding($0) }
            let frame = try fast ?? decoder.decode(ClientFrame.self, from: Data(text.utf8))
            perform(machine.received(frame, now: .now))
        } catch {
            let (id, problem) = Self.decodingProblem(error)
            perform(machine.receivedUndecodable(id: id, problem: problem, isCommand: error is ClientFrame.DecodingFailure))
        }
    }

    /// The socket closed, with the code and reason of its close frame when there was one.
    func closed(code: UInt16?, reason: String?) {
        let wasOpen = machine.phase != .closed
        perform(machine.closed())
        guard wasOpen || code != nil else { return }
        var metadata: LogMetadata = ["app.id": .integer(app.id), "ms": .double((ContinuousClock.now - openedAt).inSeconds * 1000)]
        if let code { metadata["code"] = .integer(Int64(code)) }
        if let user = caller.get() { metadata["user.id"] = .string(user.userID.rawValue) }
        context.logger.info("socket closed", metadata: metadata)
    }

    /// Does what the machine said.
    private func perform(_ actions: [RealtimeSessionMachine<EncodedWebSocketFrame>.Action]) {
        for action in actions {
            switch action {
            case .scheduleAuthDeadline:
                authTimer = socket.loop.schedule(after: context.configuration.authTimeout) { [self] in perform(machine.authDeadlinePassed()) }
            case .cancelAuthDeadline:
                if let authTimer { socket.loop.cancel(authTimer) }
                authTimer = nil
            case .authenticate(let token, let resume, let epoch):
                authenticate(token: token, resume: resume, epoch: epoch)
            case .runCommand(let frame):
                command(frame)
            case .send(let bytes):
                socket.send(EncodedWebSocketFrame(utf8: bytes))
            case .sendFrame(let frame):
                socket.send(frame)
            case .close(let code, let reason):
                socket.close(code: WebSocketCloseCode(rawValue: code), reason: reason)
            case .drop:
                socket.drop()
            case .detach:
                if let subscriber { context.fanout.detach(subscriber) }
                subscriber = nil
                chain = nil
            }
        }
    }

    // MARK: - Authentication and catching up

    private func authenticate(token: String, resume: LogCursor?, epoch: String?) {
        defer { authentication = chain }
        chain = Task(executorPreference: socket.loop.taskExecutor) { [self] in
            let caller: Caller
            do {
                caller = try await chat.authenticate(token: token, app: app)
            } catch {
                ErrorCounts.shared.count((error as? ChatError)?.isTemporary == true ? ChatError.storeUnavailable : ChatError.unauthenticated, via: .realtime)
                onLoop { $0.perform($0.machine.authenticationFailed(error)) }
                return
            }
            self.caller.set(caller)
            let subscriber = Fanout<EncodedWebSocketFrame>.Subscriber(caller: caller) { [weak self] delivery in
                self?.deliver(delivery)
            }
            let registered: Bool = await withCheckedContinuation { continuation in
                onLoop { session in
                    guard session.machine.attached() else { return continuation.resume(returning: false) }
                    session.subscriber = subscriber
                    session.context.logger.info("socket authenticated", metadata: ["app.id": .integer(session.app.id), "user.id": .string(caller.userID.rawValue),
                                                                           "resume": resume.map { .string($0.description) } ?? "fresh"])
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
                    onLoop { continuation.resume(returning: $0.machine.phase != .closed) }
                }
                guard open else {
                    context.fanout.detach(subscriber)
                    return
                }
                try await catchUp(caller, from: resume, epoch: epoch, asOf: asOf)
            } catch {
                context.logger.failed("cannot catch a device up; it will reconnect", error)
                onLoop { $0.perform($0.machine.catchUpFailed()) }
            }
        }
    }

    /// Replays what the device missed, then goes live. A device without a cursor starts
    /// at `asOf`: the fanout holds what was published while it attached (``Fanout/attach(_:)``),
    /// so nothing after `ready.cursor` is missed.
    private func catchUp(_ caller: Caller, from resume: LogCursor?, epoch: String?, asOf: LogCursor) async throws {
        var after = resume ?? asOf
        var newest = asOf
        let serverEpoch = chat.epoch
        if let resume {
            switch try await chat.catchUp(caller, after: resume, epoch: epoch, maxEvents: context.configuration.maxReplayEvents) {
            case .resync(let current, let reason):
                after = current
                newest = current
                let frame = RealtimeFrames.resync(cursor: current, epoch: serverEpoch, reason: reason)
                onLoop { $0.perform([.send(frame)]) }
            case .replay:
                while true {
                    let page = try await chat.replay(caller, after: after, limit: 200)
                    let frames = page.frames.map(\.frame)
                    if chat.traceRecorder.isOn {
                        let at = chat.traceRecorder.now()
                        chat.traceRecorder.record(page.frames.compactMap { replayed in
                            EventRecord.messageSentAt(frame: replayed.frame) == nil ? nil
                                : TraceRecorder.Row(position: replayed.position, step: "replayed", user: caller.userKey, session: caller.sessionKey, at: at)
                        })
                    }
                    let open: Bool = await withCheckedContinuation { continuation in
                        onLoop { session in session.sendPaced(frames, from: 0) { continuation.resume(returning: $0) } }
                    }
                    guard open else { return }
                    for replayed in page.frames { after.advance(to: replayed.position) }
                    newest = page.newest
                    if !page.hasMore { break }
                }
            }
        }
        let replayedUpTo = after
        var current = after
        current.advance(to: newest)
        let readyAt = current
        let heartbeat = context.heartbeatSeconds
        onLoop { session in
            session.perform(session.machine.replayFinished(replayedUpTo: replayedUpTo, readyAt: readyAt) { cursor in
                RealtimeFrames.ready(cursor: cursor, epoch: serverEpoch, userID: caller.userID.rawValue, heartbeatSeconds: heartbeat)
            })
        }
    }

    /// Sends replayed frames as fast as the device reads them (``RealtimeSessionMachine/maySendReplay(queuedBytes:)``),
    /// checking again shortly when it lags. `done` gets false if the connection closed meanwhile.
    private func sendPaced(_ frames: [[UInt8]], from start: Int, done: @escaping @Sendable (Bool) -> Void) {
        var index = start
        while index < frames.count {
            guard machine.phase != .closed else { return done(false) }
            guard machine.maySendReplay(queuedBytes: socket.queuedBytes) else {
                let resumeAt = index
                _ = socket.loop.schedule(after: .milliseconds(2)) { [self] in sendPaced(frames, from: resumeAt, done: done) }
                return
            }
            perform([.send(frames[index])])
            index += 1
        }
        done(machine.phase != .closed)
    }

    // MARK: - Deliveries

    /// Called on the fanout's queue: hands the delivery to the loop, one hop per burst.
    private func deliver(_ delivery: Delivery) {
        if inbox.push(delivery) { socket.loop.execute { [self] in drainInbox() } }
    }

    private func drainInbox() {
        for delivery in inbox.take() {
            perform(machine.delivered(delivery))
            if machine.phase == .closed { return }
        }
    }

    // MARK: - Commands

    /// Runs a command after the ones before it (a device's sends are stored in its order),
    /// and hands its answer back to the machine. Receipts do not wait for the commands before
    /// them, only for authentication: a watermark only moves up, so their order does not
    /// matter, and a delivered and a read mark sent together then join one write (decision 0026).
    private func command(_ frame: ClientFrame) {
        let id = frame.id
        let now = ContinuousClock.now
        let isReceipt = switch frame {
        case .markDelivered, .markRead: true
        default: false
        }
        if isReceipt, machine.phase == .live, let caller = caller.get() {
            return receipt(frame, caller: caller, now: now)
        }
        let previous = isReceipt ? authentication : chain
        // On the socket's loop, not the global pool: the command is decoded, run and answered
        // where its bytes are, and only the store's writer is between (decision 0026).
        let task = Task(executorPreference: socket.loop.taskExecutor) { [self] in
            await previous?.value
            let answer: [UInt8]?
            if let caller = caller.get() {
                if let refusal = refusedForRate(caller, id: id, now: now) {
                    answer = refusal
                } else {
                    do {
                        answer = Self.answer(id: id, .success(try await execute(frame, caller: caller)))
                    } catch {
                        answer = Self.answer(id: id, .failure(error))
                    }
                }
            } else {
                answer = nil  // authentication failed: the socket is closing
            }
            onLoop { $0.perform($0.machine.commandAnswered(answer)) }
        }
        if !isReceipt { chain = task }
    }

    /// A receipt once the session is live: no task of its own (decision 0026). The chat
    /// gathers it with every other waiting receipt into one write and calls back when that
    /// commits; the answer comes back to this loop, where the machine sends it.
    private func receipt(_ frame: ClientFrame, caller: Caller, now: ContinuousClock.Instant) {
        let id = frame.id
        let conversation: ConversationID, update: ReceiptUpdate
        switch frame {
        case .markDelivered(_, let target, let seq): (conversation, update) = (target, ReceiptUpdate(deliveredSeq: seq))
        case .markRead(_, let target, let seq): (conversation, update) = (target, ReceiptUpdate(readSeq: seq))
        default: return
        }
        if let refusal = refusedForRate(caller, id: id, now: now) { return perform(machine.commandAnswered(refusal)) }
        chat.updateReceipt(caller, conversation: conversation, update) { [self] result in
            let answer = Self.answer(id: id, result.map(\.jsonBytes))
            onLoop { $0.perform($0.machine.commandAnswered(answer)) }
        }
    }

    /// The error frame for a command past its user's rate (counted), or nil to run it.
    private func refusedForRate(_ caller: Caller, id: String?, now: ContinuousClock.Instant) -> [UInt8]? {
        guard let wait = context.userRate.take(String(caller.userKey), now: now) else { return nil }
        let error = ChatError.rateLimited(retryAfter: wait)
        ErrorCounts.shared.count(error, via: .realtime)
        return RealtimeFrames.error(id: id, error)
    }

    /// A command's answer frame: its ack (none for a command without an id), or its error, counted.
    private static func answer(id: String?, _ result: Result<[UInt8], any Error>) -> [UInt8]? {
        switch result {
        case .success(let bytes):
            return id.map { RealtimeFrames.ack(id: $0, result: bytes) }
        case .failure(let failure):
            let error = ChatError.answering(failure)
            ErrorCounts.shared.count(error, via: .realtime)
            return RealtimeFrames.error(id: id, error)
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
            let (message, _) = adding ? try await chat.annotations.react(caller, conversation: conversation, message: messageID, emoji: emoji)
                                      : try await chat.annotations.unreact(caller, conversation: conversation, message: messageID, emoji: emoji)
            return try encode(message)
        case .markDelivered(_, let conversation, let seq):
            return try await chat.updateReceipt(caller, conversation: conversation, ReceiptUpdate(deliveredSeq: seq)).jsonBytes
        case .markRead(_, let conversation, let seq):
            return try await chat.updateReceipt(caller, conversation: conversation, ReceiptUpdate(readSeq: seq)).jsonBytes
        case .typing(_, let conversation, let isTyping, let thread):
            try await chat.typing(caller, conversation: conversation, thread: thread, typing: isTyping)
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

    // MARK: - Helpers

    /// Runs `body` on the socket's loop: at once when already there (a command's task runs on
    /// the loop), else at the loop's next turn.
    private func onLoop(_ body: @escaping @Sendable (RealtimeSession) -> Void) {
        if socket.loop.inEventLoop {
            body(self)
        } else {
            socket.loop.execute { [self] in body(self) }
        }
    }
}

