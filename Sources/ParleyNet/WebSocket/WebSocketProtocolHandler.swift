/// The WebSocket protocol over one connection, for either side (RFC 6455 §5–7).
///
/// ```
///  open ──send close──▶ closeSent ──peer's close──▶ closed (TCP closed)
///    │                      └──closeTimeout──────▶ closed
///    └──peer's close──▶ (echo close) ──────────────▶ closed
///  any protocol violation: send close(1002/1007/1009), close TCP.
/// ```
/// Messages are reassembled from fragments with the size limit applied as bytes arrive and
/// text validated as UTF-8 incrementally (failing fast, §8.1). Pings are answered with pongs.
final class WebSocketProtocolHandler: ConnectionHandler, ShutdownParticipant, @unchecked Sendable {
    // @unchecked: all state is touched only on the connection's loop thread; the public
    // `WebSocket` handle reaches it through `loop.execute`.

    private enum CloseState {
        case open
        case closeSent
        case closed
    }

    let role: WebSocketFrameDecoder.Role
    let configuration: WebSocketConfiguration
    let handler: WebSocketHandler
    let connection: Connection
    private weak var registry: ConnectionRegistry?
    private(set) var socket: WebSocket?
    private var inbound: WebSocketInbound
    private var buffer = ByteBuffer()
    private var closeState = CloseState.open
    private var receivedCloseCode = WebSocketCloseCode.abnormalClosure
    private var receivedCloseReason = ""

    private var keepalive: WebSocketKeepalive
    private var keepaliveTimer: ScheduledTimer?
    private var closeTimer: ScheduledTimer?
    private var maskPool: [UInt8] = []

    var queuedBytes: Int { connection.queuedBytes }

    init(role: WebSocketFrameDecoder.Role, configuration: WebSocketConfiguration, handler: WebSocketHandler,
         connection: Connection, registry: ConnectionRegistry?) {
        self.role = role
        self.configuration = configuration
        self.handler = handler
        self.connection = connection
        self.registry = registry
        inbound = WebSocketInbound(role: role, maxMessageSize: configuration.maxMessageSize)
        keepalive = WebSocketKeepalive(interval: configuration.pingInterval, now: connection.loop.now)
    }

    /// Takes over the connection: bytes that arrived with the handshake are decoded first.
    func start(leftover: ByteBuffer, request: HTTPRequestHead? = nil) {
        let head = request ?? HTTPRequestHead(method: .GET, target: "/")
        let socket = WebSocket(loop: connection.loop, request: head, remoteAddress: connection.peer, core: self)
        self.socket = socket
        NetMetrics.shared.webSocketOpened()
        scheduleKeepalive(at: connection.loop.now + configuration.pingInterval.nanoseconds)
        handler.onOpen(socket)
        if leftover.readableBytes > 0 {
            buffer = leftover
            process()
        }
    }

    // MARK: - ConnectionHandler

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        buffer.write(bytes)
        keepalive.heard(now: connection.loop.now)
        process()
    }

    func connectionDidReadEOF(_ connection: Connection) {
        connection.close(mode: .now)
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {}

    func connectionDidClose(_ connection: Connection, error: IOError?) {
        closeState = .closed
        if let keepaliveTimer { connection.loop.cancel(keepaliveTimer) }
        if let closeTimer { connection.loop.cancel(closeTimer) }
        registry?.remove(self)
        NetMetrics.shared.webSocketClosed()
        if let socket {
            socket.detach()
            handler.onClose(socket, receivedCloseCode, receivedCloseReason)
        }
        socket = nil
    }

    // MARK: - ShutdownParticipant

    func beginShutdown() { initiateClose(code: .goingAway, reason: "server shutting down") }

    func closeNow() { connection.close(mode: .now) }

    // MARK: - Receiving

    private func process() {
        while connection.isOpen, closeState != .closed {
            let action: WebSocketInbound.Action?
            do {
                action = try inbound.next(&buffer)
            } catch {
                fail(error)
                return
            }
            guard let action else { return }
            perform(action)
        }
    }

    private func perform(_ action: WebSocketInbound.Action) {
        switch action {
        case .message(let message):
            // Data after our close frame is dropped (§5.5.1).
            guard closeState == .open, let socket else { return }
            handler.onMessage(socket, message)
        case .ping(let payload):
            if closeState == .open { send(opcode: .pong, payload: payload) }
        case .pong:
            break  // any frame counts as life; `keepalive.heard` already ran
        case .close(let code, let reason):
            receivedCloseCode = code ?? .noStatusReceived
            receivedCloseReason = reason
            switch closeState {
            case .open:
                // Echo the code (§5.5.1); the server closes TCP first (§7.1.1).
                writeFrame(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: code, reason: ""))
                closeState = .closeSent
                connection.close(mode: .lingering)
            case .closeSent:
                connection.close(mode: role == .server ? .lingering : .afterFlush)
            case .closed:
                break
            }
        }
    }

    /// Fails the connection (§7.1.7): a close frame with the code, then TCP close.
    private func fail(_ error: WebSocketProtocolError) {
        if closeState == .open {
            writeFrame(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: error.code, reason: error.reason))
            closeState = .closeSent
        }
        receivedCloseCode = error.code
        receivedCloseReason = error.reason
        connection.close(mode: .lingering)
    }

    // MARK: - Sending

    /// Sends a data or control frame while the connection is open.
    func send(opcode: WebSocketOpcode, payload: [UInt8]) {
        guard closeState == .open else { return }
        writeFrame(opcode: opcode, payload: payload)
    }

    func sendEncoded(_ frame: EncodedWebSocketFrame) {
        guard closeState == .open else { return }
        switch role {
        case .server: enqueue(frame.bytes)
        case .client: writeFrame(opcode: frame.opcode, payload: frame.payload)  // masked per frame
        }
    }

    func initiateClose(code: WebSocketCloseCode, reason: String) {
        guard closeState == .open, connection.isOpen else { return }
        writeFrame(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: code, reason: reason))
        closeState = .closeSent
        closeTimer = connection.loop.schedule(after: configuration.closeTimeout) { [self] in
            connection.close(mode: .now)
        }
    }

    private func writeFrame(opcode: WebSocketOpcode, payload: [UInt8]) {
        let frame = WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, maskKey: role == .client ? nextMaskKey() : nil)
        enqueue(frame)
    }

    private func enqueue(_ frame: [UInt8]) {
        guard connection.isAcceptingWrites else { return }
        NetMetrics.shared.frameSent(bytes: frame.count)
        if connection.queuedBytes + frame.count > configuration.maxQueuedBytes {
            // The peer is not reading: drop it rather than hold memory (DESIGN guarantee 7).
            // What it has not started to receive is dropped, and the close frame queued behind
            // the frame in flight, so a peer that reads again learns why; one that never does
            // is cut at the close timeout.
            closeSlowPeer()
            return
        }
        // Coalesced: frames queued in one loop iteration go out in one writev.
        connection.write(frame, coalesce: true)
    }

    private func closeSlowPeer() {
        let code = configuration.slowPeerCloseCode
        let reason = "too slow: reconnect and resume"
        connection.discardUnsentWrites()
        NetMetrics.shared.webSocketSlowPeerClosed()
        receivedCloseCode = code
        receivedCloseReason = reason
        let close = WebSocketFrameEncoder.encode(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: code, reason: reason),
                                                 maskKey: role == .client ? nextMaskKey() : nil)
        connection.write(close)
        closeState = .closeSent
        closeTimer = connection.loop.schedule(after: configuration.closeTimeout) { [self] in
            connection.close(mode: .now)
        }
    }

    private func nextMaskKey() -> UInt32 {
        if maskPool.count < 4 { maskPool = SecureRandom.bytes(256) }
        let key = maskPool.suffix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        maskPool.removeLast(4)
        return key
    }

    // MARK: - Keepalive

    private func scheduleKeepalive(at instant: UInt64) {
        let loop = connection.loop
        let now = loop.now
        keepaliveTimer = loop.schedule(after: .nanoseconds(Int64(instant > now ? instant - now : 0))) { [self] in
            keepaliveFired()
        }
    }

    private func keepaliveFired() {
        guard connection.isOpen else { return }
        switch keepalive.check(now: connection.loop.now) {
        case .wait(let until):
            scheduleKeepalive(at: until)
        case .ping(let next):
            send(opcode: .ping, payload: [])
            scheduleKeepalive(at: next)
        case .dead:
            receivedCloseCode = .abnormalClosure
            receivedCloseReason = "peer stopped responding"
            connection.close(mode: .now)
        }
    }
}
