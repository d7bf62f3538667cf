import ParleySync
/// A close status code (RFC 6455 §7.4). Parley's own codes live in 4000–4999 (docs/protocol.md).
public struct WebSocketCloseCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let normalClosure = WebSocketCloseCode(rawValue: 1000)
    public static let goingAway = WebSocketCloseCode(rawValue: 1001)
    public static let protocolError = WebSocketCloseCode(rawValue: 1002)
    public static let unsupportedData = WebSocketCloseCode(rawValue: 1003)
    /// Received no close code (never sent on the wire).
    public static let noStatusReceived = WebSocketCloseCode(rawValue: 1005)
    /// The connection dropped without a close frame (never sent on the wire).
    public static let abnormalClosure = WebSocketCloseCode(rawValue: 1006)
    public static let invalidPayload = WebSocketCloseCode(rawValue: 1007)
    public static let policyViolation = WebSocketCloseCode(rawValue: 1008)
    public static let messageTooBig = WebSocketCloseCode(rawValue: 1009)
    public static let internalError = WebSocketCloseCode(rawValue: 1011)
    public static let tryAgainLater = WebSocketCloseCode(rawValue: 1013)

    /// True for codes a peer may put in a close frame (RFC 6455 §7.4, IANA registry).
    public var isValidOnWire: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }

    public var description: String { String(rawValue) }
}

/// A complete received message.
public enum WebSocketMessage: Sendable, Hashable {
    /// A text message (validated UTF-8).
    case text(String)
    /// A binary message.
    case binary([UInt8])
}

/// Limits and timers of a WebSocket connection; every field has a documented default.
public struct WebSocketConfiguration: Sendable, Hashable {
    /// Largest message (all fragments together); larger closes with 1009. Default: 1 MiB.
    public var maxMessageSize = 1 << 20
    /// Outbound bytes queued for a peer that is not reading, beyond which what is queued and
    /// unsent is dropped and the peer is closed with ``slowPeerCloseCode``. Default: 4 MiB.
    public var maxQueuedBytes = 4 << 20
    /// The close code a peer that fell ``maxQueuedBytes`` behind gets. Default: 1013 (try
    /// again later); Parley's realtime endpoint uses 4000 (resume).
    public var slowPeerCloseCode = WebSocketCloseCode.tryAgainLater
    /// How often a quiet peer is pinged; a peer silent for twice this long is dropped.
    /// Default: 30 s.
    public var pingInterval: Duration = .seconds(30)
    /// How long to wait for the peer's close frame after sending ours. Default: 5 s.
    public var closeTimeout: Duration = .seconds(5)

    /// The defaults.
    public init() {}
}

/// Callbacks for one WebSocket; each runs on the connection's loop thread, in order.
public struct WebSocketHandler: Sendable {
    /// The handshake is done; the socket may send.
    public var onOpen: @Sendable (WebSocket) -> Void
    /// A whole message arrived.
    public var onMessage: @Sendable (WebSocket, WebSocketMessage) -> Void
    /// The connection closed. The code is the peer's (or 1006 if it vanished); the reason may be empty.
    public var onClose: @Sendable (WebSocket, WebSocketCloseCode, String) -> Void

    /// Creates a handler; unneeded callbacks may be omitted.
    public init(onOpen: @escaping @Sendable (WebSocket) -> Void = { _ in },
                onMessage: @escaping @Sendable (WebSocket, WebSocketMessage) -> Void = { _, _ in },
                onClose: @escaping @Sendable (WebSocket, WebSocketCloseCode, String) -> Void = { _, _, _ in }) {
        self.onOpen = onOpen
        self.onMessage = onMessage
        self.onClose = onClose
    }
}

/// Decides whether to accept a WebSocket upgrade; throw an ``HTTPError`` to refuse it.
public typealias WebSocketUpgrade = @Sendable (Request) async throws -> WebSocketHandler

/// A server frame encoded once and sent to many sockets without re-encoding (broadcast).
public struct EncodedWebSocketFrame: Sendable, Hashable {
    /// The unmasked frame, as every server-side socket sends it.
    let bytes: [UInt8]
    /// Kept for client-side sockets, which must mask each frame afresh.
    let opcode: WebSocketOpcode
    let payload: [UInt8]

    /// A text frame.
    public init(text: String) { self.init(opcode: .text, payload: Array(text.utf8)) }
    /// A binary frame.
    public init(binary: [UInt8]) { self.init(opcode: .binary, payload: binary) }

    /// A text frame from bytes the caller guarantees are UTF-8 (JSON it wrote), without a
    /// detour through `String`.
    public init(utf8 text: [UInt8]) { self.init(opcode: .text, payload: text) }

    private init(opcode: WebSocketOpcode, payload: [UInt8]) {
        self.opcode = opcode
        self.payload = payload
        bytes = WebSocketFrameEncoder.encode(opcode: opcode, payload: payload)
    }
}

/// One open WebSocket, server or client side. Every method is safe from any thread; work is
/// handed to the connection's loop.
public final class WebSocket: Sendable {
    /// The loop the connection lives on.
    public let loop: EventLoop
    /// The upgrade request (server side) or the request sent (client side).
    public let request: HTTPRequestHead
    /// The peer's address.
    public let remoteAddress: SocketAddress?
    private let core: LockedValue<WebSocketProtocolHandler?>

    init(loop: EventLoop, request: HTTPRequestHead, remoteAddress: SocketAddress?, core: WebSocketProtocolHandler) {
        self.loop = loop
        self.request = request
        self.remoteAddress = remoteAddress
        self.core = LockedValue(core)
    }

    func detach() { core.withLock { $0 = nil } }

    private func withCore(_ body: @escaping @Sendable (WebSocketProtocolHandler) -> Void) {
        guard let core = core.withLock({ $0 }) else { return }
        if loop.inEventLoop {
            body(core)
        } else {
            loop.execute { body(core) }
        }
    }

    /// Sends a text message.
    public func send(text: String) { withCore { $0.send(opcode: .text, payload: Array(text.utf8)) } }

    /// Sends a binary message.
    public func send(binary: [UInt8]) { withCore { $0.send(opcode: .binary, payload: binary) } }

    /// Sends a frame encoded once for many server-side sockets.
    public func send(_ frame: EncodedWebSocketFrame) { withCore { $0.sendEncoded(frame) } }

    /// Sends a ping; the peer's pong counts as life.
    public func ping(_ payload: [UInt8] = []) {
        withCore { $0.send(opcode: .ping, payload: Array(payload.prefix(125))) }
    }

    /// Cuts the connection without a close frame, as a network that drops it would (the peer
    /// sees 1006): test mode's fault (docs/test-mode.md).
    public func drop() { withCore { $0.closeNow() } }

    /// Starts the close handshake with `code` and `reason`.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") {
        withCore { $0.initiateClose(code: code, reason: reason) }
    }

    /// Bytes queued for this peer and not yet written. Loop thread only.
    public var queuedBytes: Int {
        loop.preconditionInEventLoop()
        return core.withLock { $0?.queuedBytes } ?? 0
    }
}
