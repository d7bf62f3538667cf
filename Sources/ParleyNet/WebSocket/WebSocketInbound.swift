/// Turns received bytes into whole messages and control actions (RFC 6455 §5.4–5.5): it
/// reassembles fragments, applies the message size limit as bytes arrive, validates text as
/// UTF-8 incrementally (failing fast, §8.1), and checks close frames. Pure logic: the socket
/// handler performs the actions, tests and the fuzzer drive it directly.
public struct WebSocketInbound: Sendable {
    /// What the connection should do.
    public enum Action: Sendable, Hashable {
        /// A whole message arrived.
        case message(WebSocketMessage)
        /// The peer pinged: answer with a pong carrying `payload`.
        case ping([UInt8])
        /// The peer ponged.
        case pong([UInt8])
        /// The peer sent a close frame; `code` is `nil` when the frame had no payload.
        case close(code: WebSocketCloseCode?, reason: String)
    }

    private var decoder: WebSocketFrameDecoder
    private let maxMessageSize: Int
    private var messageOpcode: WebSocketOpcode?
    private var messageBytes: [UInt8] = []
    private var utf8 = UTF8Validator()
    private var frameOpcode = WebSocketOpcode.continuation
    private var frameIsFinal = false
    private var controlBytes: [UInt8] = []

    /// An assembler for `role` with a message size limit.
    public init(role: WebSocketFrameDecoder.Role, maxMessageSize: Int) {
        decoder = WebSocketFrameDecoder(role: role, maxFrameSize: maxMessageSize)
        self.maxMessageSize = maxMessageSize
    }

    /// The next action from `buffer`, or `nil` when more bytes are needed.
    ///
    /// - Throws: ``WebSocketProtocolError`` with the close code to fail the connection with.
    public mutating func next(_ buffer: inout ByteBuffer) throws(WebSocketProtocolError) -> Action? {
        while let event = try decoder.next(&buffer) {
            switch event {
            case .header(let header):
                try begin(header)
            case .payload(let bytes, let frameEnd):
                if let action = try consume(bytes, frameEnd: frameEnd) { return action }
            }
        }
        return nil
    }

    private mutating func begin(_ header: WebSocketFrameHeader) throws(WebSocketProtocolError) {
        NetMetrics.shared.frameReceived(bytes: header.length)
        frameOpcode = header.opcode
        frameIsFinal = header.fin
        switch header.opcode {
        case .text, .binary:
            guard messageOpcode == nil else { throw .violation("a new message started before the previous one finished") }
            messageOpcode = header.opcode
            messageBytes = []
            utf8 = UTF8Validator()
        case .continuation:
            guard messageOpcode != nil else { throw .violation("continuation frame without a message to continue") }
        case .close, .ping, .pong:
            controlBytes = []
        }
        if !header.opcode.isControl, messageBytes.count + header.length > maxMessageSize {
            throw .init(code: .messageTooBig, reason: "message exceeds \(maxMessageSize) bytes")
        }
    }

    private mutating func consume(_ bytes: [UInt8], frameEnd: Bool) throws(WebSocketProtocolError) -> Action? {
        if frameOpcode.isControl {
            controlBytes += bytes
            return frameEnd ? try control(frameOpcode, controlBytes) : nil
        }
        guard let opcode = messageOpcode else { return nil }
        if opcode == .text, !utf8.validate(bytes) {
            throw .init(code: .invalidPayload, reason: "text message is not valid UTF-8")
        }
        messageBytes += bytes
        guard frameEnd, frameIsFinal else { return nil }
        if opcode == .text, !utf8.isComplete {
            throw .init(code: .invalidPayload, reason: "text message ends inside a UTF-8 sequence")
        }
        let bytes = messageBytes
        messageBytes = []
        messageOpcode = nil
        return .message(opcode == .text ? .text(String(decoding: bytes, as: UTF8.self)) : .binary(bytes))
    }

    private func control(_ opcode: WebSocketOpcode, _ payload: [UInt8]) throws(WebSocketProtocolError) -> Action? {
        switch opcode {
        case .ping: return .ping(payload)
        case .pong: return .pong(payload)
        case .close:
            if payload.isEmpty { return .close(code: nil, reason: "") }
            guard payload.count >= 2 else { throw .violation("close frame with a one-byte payload") }
            let code = WebSocketCloseCode(rawValue: UInt16(payload[0]) << 8 | UInt16(payload[1]))
            guard code.isValidOnWire else { throw .violation("invalid close code \(code.rawValue)") }
            var validator = UTF8Validator()
            let reason = payload.dropFirst(2)
            guard validator.validate(reason), validator.isComplete else {
                throw .init(code: .invalidPayload, reason: "close reason is not valid UTF-8")
            }
            return .close(code: code, reason: String(decoding: reason, as: UTF8.self))
        case .text, .binary, .continuation:
            return nil
        }
    }
}
