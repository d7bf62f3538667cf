import Foundation
import ParleyChat
import ParleyWire

/// The rules of one device's realtime connection (docs/protocol.md), as a value that takes
/// what happened and returns what to do — the way ``WebSocketKeepalive`` and ``HTTPTimeouts``
/// work. ``RealtimeSession`` does the I/O (the socket, timers, tasks) and nothing else, so the
/// rules are tested without sockets or clocks (time is passed in).
///
/// ```
///  awaitingAuth ──auth──▶ authenticating ──attached──▶ catchingUp ──replayed──▶ live
///       │ deadline: 4002 / not auth: 4003          │ bad token: 4001
///       │                                          │ store unreachable: 1013 (try again)
/// ```
/// While catching up, live deliveries are held and then sent after the replay, skipping what
/// the replay already sent (by position): no gap, no duplicate. Commands are answered in the
/// order they arrived, at most ``RealtimeConfiguration/maxCommandsInFlight`` at once, within
/// the connection's rate.
struct RealtimeSessionMachine<Frame: Sendable> {
    typealias Delivery = Fanout<Frame>.Delivery

    enum Phase: Equatable { case awaitingAuth, authenticating, catchingUp, live, closed }

    /// What the session must do.
    enum Action {
        /// Arm the authentication deadline.
        case scheduleAuthDeadline
        /// Disarm it.
        case cancelAuthDeadline
        /// Check the token (then report ``authenticated(_:)`` or ``authenticationFailed(_:)``).
        /// `resume` is the device's cursor (or its one position, from a client before cursors).
        case authenticate(token: String, resume: LogCursor?, epoch: String?)
        /// Run a command after the ones before it; report ``commandAnswered(_:)``.
        case runCommand(ClientFrame)
        /// Send these bytes (a frame the server wrote).
        case send([UInt8])
        /// Send a delivery's frame as it is.
        case sendFrame(Frame)
        /// Close with this code and reason.
        case close(code: UInt16, reason: String)
        /// Cut the connection without a close frame (test mode's fault).
        case drop
        /// Stop receiving deliveries (the socket closed).
        case detach
    }

    private(set) var phase = Phase.awaitingAuth
    /// The newest position of each shard sent to the device; live events at or before it are skipped.
    private(set) var sent = LogCursor(shards: 1)
    private var held: [Delivery] = []
    private(set) var inFlight = 0
    private var bucket: TokenBucket
    private let configuration: RealtimeConfiguration

    init(configuration: RealtimeConfiguration) {
        self.configuration = configuration
        bucket = TokenBucket(rate: configuration.commandsPerSecond, burst: configuration.commandBurst)
    }

    /// Deliveries held while catching up.
    var heldCount: Int { held.count }

    // MARK: - The socket

    mutating func opened() -> [Action] { [.scheduleAuthDeadline] }

    mutating func authDeadlinePassed() -> [Action] {
        guard phase == .awaitingAuth else { return [] }
        return fail(ChatError.unauthenticated, id: nil, close: RealtimeCloseCode.authTimeout, reason: "authenticate within the deadline")
    }

    /// A binary frame: the protocol is JSON text.
    mutating func receivedBinary() -> [Action] {
        guard phase != .closed else { return [] }
        return fail(ChatError.invalid("frames are JSON text"), id: nil, close: RealtimeCloseCode.protocolViolation, reason: "send JSON text frames")
    }

    /// A text frame that did not decode: `id` and `problem` from ``RealtimeSession/decodingProblem(_:)``;
    /// `isCommand` when it was a known command with a bad field.
    mutating func receivedUndecodable(id: String?, problem: ChatError, isCommand: Bool) -> [Action] {
        switch phase {
        case .closed:
            return []
        case .awaitingAuth:
            // Before auth, a known command that is not a whole `auth` is "sign in first".
            let answer = isCommand && problem.code != ChatError.Code.unknownCommand.rawValue ? Self.authFirst : problem
            return fail(answer, id: id, close: RealtimeCloseCode.protocolViolation, reason: "the first frame must be auth")
        case .authenticating, .catchingUp, .live:
            return [.send(RealtimeFrames.error(id: id, problem))]
        }
    }

    /// A command before `auth`: what to send first.
    static var authFirst: ChatError { ChatError(.unauthenticated, #"sign in first: the first frame is {"type":"auth","token":"<session token>"}"#) }

    /// A frame that decoded, at `now`.
    mutating func received(_ frame: ClientFrame, now: ContinuousClock.Instant) -> [Action] {
        guard phase != .closed else { return [] }
        if let id = frame.id, !Limits.commandID.contains(id.count) {
            return [.send(RealtimeFrames.error(id: nil, ChatError.invalid("id must be 1–\(Limits.commandID.upperBound) characters")))]
        }
        if phase == .awaitingAuth {
            guard case .auth(let auth) = frame else {
                return fail(Self.authFirst, id: frame.id, close: RealtimeCloseCode.protocolViolation,
                            reason: "the first frame must be auth with a token")
            }
            guard (auth.position ?? 0) >= 0 else {
                return fail(ChatError.invalid("position must not be negative"), id: auth.id, close: RealtimeCloseCode.protocolViolation, reason: "bad auth")
            }
            phase = .authenticating
            return [.cancelAuthDeadline, .authenticate(token: auth.token, resume: auth.cursor ?? auth.position.map { LogCursor(position: $0) }, epoch: auth.epoch)]
        }
        switch frame {
        case .auth(let auth):
            return [.send(RealtimeFrames.error(id: auth.id, ChatError.invalid("already authenticated")))]
        case .ping(let id):
            return [.send(RealtimeFrames.pong(id: id))]
        default:
            if let wait = bucket.take(now: now) {
                return [.send(RealtimeFrames.error(id: frame.id, ChatError.rateLimited(retryAfter: wait)))]
            }
            guard inFlight < configuration.maxCommandsInFlight else {
                return [.send(RealtimeFrames.error(id: frame.id, ChatError.rateLimited(retryAfter: 1, "too many commands waiting for answers; wait for some")))]
            }
            inFlight += 1
            return [.runCommand(frame)]
        }
    }

    /// The socket closed (or the session closed it).
    mutating func closed() -> [Action] {
        guard phase != .closed else { return [] }
        phase = .closed
        held = []
        return [.cancelAuthDeadline, .detach]
    }

    // MARK: - Authentication and catching up

    /// The token was good and the device is attached to the fan-out: what arrives now is held
    /// until the replay is done. False when the socket closed meanwhile.
    mutating func attached() -> Bool {
        guard phase == .authenticating else { return false }
        phase = .catchingUp
        return true
    }

    /// The token was refused (4001: sign in again), or the store could not be reached to
    /// check it (1013: try again, the session is not over).
    mutating func authenticationFailed(_ error: any Error) -> [Action] {
        if (error as? ChatError)?.isTemporary == true {
            return fail(ChatError.storeUnavailable, id: nil, close: RealtimeCloseCode.tryAgainLater, reason: "try again")
        }
        // A refused JWT says why (expired, wrong audience…); any other token just fails.
        let refusal = (error as? ChatError).flatMap { $0.code == ChatError.Code.invalidToken.rawValue ? $0 : nil } ?? ChatError.unauthenticated
        return fail(refusal, id: nil, close: RealtimeCloseCode.unauthorized, reason: "sign in again")
    }

    /// Catching up failed (the store went away): try again later, nothing is lost.
    mutating func catchUpFailed() -> [Action] {
        fail(ChatError.storeUnavailable, id: nil, close: RealtimeCloseCode.tryAgainLater, reason: "try again")
    }

    /// The replay sent everything up to `replayedUpTo`, and the device is current as of
    /// `readyAt`: send what was held (skipping what the replay sent), then `ready`.
    mutating func replayFinished(replayedUpTo: LogCursor, readyAt: LogCursor, ready: (LogCursor) -> [UInt8]) -> [Action] {
        guard phase == .catchingUp else { return [] }
        sent = replayedUpTo
        phase = .live
        let waiting = held
        held = []
        var actions: [Action] = []
        for delivery in waiting { actions += live(delivery) }
        guard phase == .live else { return actions }
        sent.advance(to: readyAt)
        actions.append(.send(ready(sent)))
        return actions
    }

    /// Whether replayed frames may be sent now: false while more than a quarter of the
    /// queue limit is waiting (sending a long replay at once would trip the slow-peer limit on
    /// a device that reads fine); the session checks again shortly.
    func maySendReplay(queuedBytes: Int) -> Bool { queuedBytes <= configuration.maxQueuedBytes / 4 }

    // MARK: - Deliveries and answers

    /// A delivery from the fan-out.
    mutating func delivered(_ delivery: Delivery) -> [Action] {
        if case .dropped = delivery {
            guard phase != .closed else { return [] }
            phase = .closed
            held = []
            return [.drop, .cancelAuthDeadline, .detach]
        }
        switch phase {
        case .live:
            return live(delivery)
        case .catchingUp:
            if case .signedOut = delivery { return live(delivery) }
            held.append(delivery)
            guard held.count > configuration.maxHeldEvents else { return [] }
            held = []
            phase = .closed
            return [.close(code: RealtimeCloseCode.resume, reason: "too far behind: reconnect and resume"), .detach]
        case .awaitingAuth, .authenticating, .closed:
            return []
        }
    }

    /// A command's answer (nil: none to send, e.g. a command without an id failed quietly).
    mutating func commandAnswered(_ answer: [UInt8]?) -> [Action] {
        inFlight -= 1
        guard phase != .closed, let answer else { return [] }
        return [.send(answer)]
    }

    private mutating func live(_ delivery: Delivery) -> [Action] {
        switch delivery {
        case .event(let position, let frame):
            guard sent.advance(to: position) else { return [] }
            return [.sendFrame(frame)]
        case .ephemeral(let frame):
            return [.sendFrame(frame)]
        case .signedOut:
            return fail(ChatError.unauthenticated, id: nil, close: RealtimeCloseCode.unauthorized, reason: "signed out")
        case .dropped:
            return []  // handled in delivered(_:)
        }
    }

    /// Sends the error, then closes with `code`.
    private mutating func fail(_ error: ChatError, id: String?, close code: UInt16, reason: String) -> [Action] {
        guard phase != .closed else { return [] }
        phase = .closed
        held = []
        return [.send(RealtimeFrames.error(id: id, error)), .close(code: code, reason: reason), .cancelAuthDeadline, .detach]
    }
}
