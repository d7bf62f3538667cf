/// A frame opcode (RFC 6455 §5.2).
public enum WebSocketOpcode: UInt8, Sendable, Hashable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    /// Close, ping and pong: at most 125 bytes, never fragmented.
    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// A decoded frame header.
public struct WebSocketFrameHeader: Sendable, Hashable {
    /// Final fragment of a message.
    public var fin: Bool
    /// The opcode.
    public var opcode: WebSocketOpcode
    /// The masking key, when the frame is masked (client to server).
    public var maskKey: UInt32?
    /// Payload length in bytes.
    public var length: Int
}

/// A violation that ends the connection with a close code (RFC 6455 §7.4.1).
public struct WebSocketProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The close code to send: 1002 protocol error, 1007 invalid data, 1009 too big.
    public var code: WebSocketCloseCode
    /// Why, for the close frame's reason and logs.
    public var reason: String

    public var description: String { "\(code.rawValue): \(reason)" }

    static func violation(_ reason: String) -> WebSocketProtocolError { .init(code: .protocolError, reason: reason) }
}

/// An incremental frame decoder: header first, then the payload in chunks as they arrive,
/// unmasked. Payloads are never buffered whole here, so a 16 MiB frame is checked (size,
/// UTF-8) while it arrives and rejected before it is all in memory.
public struct WebSocketFrameDecoder: Sendable {
    /// Which side is decoding: servers require masked frames, clients unmasked ones.
    public enum Role: Sendable, Hashable { case server, client }

    /// One decoding step.
    public enum Event: Sendable, Hashable {
        /// A frame's header; its payload follows as `.payload` events.
        case header(WebSocketFrameHeader)
        /// Unmasked payload bytes; `frameEnd` on the last chunk (also for an empty payload).
        case payload([UInt8], frameEnd: Bool)
    }

    private enum State: Sendable, Hashable {
        case header
        case payload(maskKey: UInt32?, remaining: Int, offset: Int)
    }

    /// The decoding side.
    public let role: Role
    /// Largest frame payload accepted; larger is a 1009 error. Default: 1 MiB.
    public var maxFrameSize: Int
    private var state = State.header

    /// A decoder for `role`.
    public init(role: Role, maxFrameSize: Int = 1 << 20) {
        self.role = role
        self.maxFrameSize = maxFrameSize
    }

    /// Decodes the next event from `buffer`, or `nil` when more bytes are needed.
    public mutating func next(_ buffer: inout ByteBuffer) throws(WebSocketProtocolError) -> Event? {
        switch state {
        case .header:
            guard let header = try readHeader(&buffer) else { return nil }
            state = .payload(maskKey: header.maskKey, remaining: header.length, offset: 0)
            return .header(header)
        case .payload(let maskKey, let remaining, let offset):
            if remaining == 0 {
                state = .header
                return .payload([], frameEnd: true)
            }
            let count = min(remaining, buffer.readableBytes)
            guard count > 0, var bytes = buffer.readBytes(count) else { return nil }
            if let maskKey { Self.unmask(&bytes, key: maskKey, offset: offset) }
            let left = remaining - count
            state = left == 0 ? .header : .payload(maskKey: maskKey, remaining: left, offset: offset + count)
            return .payload(bytes, frameEnd: left == 0)
        }
    }

    private func readHeader(_ buffer: inout ByteBuffer) throws(WebSocketProtocolError) -> WebSocketFrameHeader? {
        guard let first = buffer.getByte(at: 0), let second = buffer.getByte(at: 1) else { return nil }
        guard first & 0x70 == 0 else { throw .violation("reserved bits set without a negotiated extension") }
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else {
            throw .violation("unknown opcode \(first & 0x0F)")
        }
        let fin = first & 0x80 != 0
        let masked = second & 0x80 != 0
        switch role {
        case .server: guard masked else { throw .violation("client frames must be masked") }
        case .client: guard !masked else { throw .violation("server frames must not be masked") }
        }
        var length = Int(second & 0x7F)
        var offset = 2
        if opcode.isControl {
            guard fin else { throw .violation("control frames must not be fragmented") }
            guard length <= 125 else { throw .violation("control frame payload over 125 bytes") }
        }
        if length == 126 {
            guard let bytes = buffer.getBytes(at: 2, count: 2) else { return nil }
            length = bytes.reduce(0) { $0 << 8 | Int($1) }
            offset = 4
        } else if length == 127 {
            guard let bytes = buffer.getBytes(at: 2, count: 8) else { return nil }
            guard bytes[bytes.startIndex] & 0x80 == 0 else { throw .violation("payload length has its top bit set") }
            let wide = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard wide <= UInt64(maxFrameSize) else {
                throw .init(code: .messageTooBig, reason: "frame exceeds \(maxFrameSize) bytes")
            }
            length = Int(wide)
            offset = 10
        }
        guard length <= maxFrameSize else { throw .init(code: .messageTooBig, reason: "frame exceeds \(maxFrameSize) bytes") }
        var maskKey: UInt32?
        if masked {
            guard let bytes = buffer.getBytes(at: offset, count: 4) else { return nil }
            maskKey = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            offset += 4
        }
        buffer.moveReaderIndex(forwardBy: offset)
        return WebSocketFrameHeader(fin: fin, opcode: opcode, maskKey: maskKey, length: length)
    }

    /// XORs `bytes` with the masking key, starting at payload `offset` (RFC 6455 §5.3).
    static func unmask(_ bytes: inout [UInt8], key: UInt32, offset: Int) {
        let keyBytes: (UInt8, UInt8, UInt8, UInt8) = (UInt8(key >> 24), UInt8(key >> 16 & 0xff),
                                                     UInt8(key >> 8 & 0xff), UInt8(key & 0xff))
        bytes.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var i = 0
            let count = buffer.count
            // Align to the key, then XOR eight bytes at a time.
            while i < count, (offset + i) & 3 != 0 {
                base[i] ^= Self.keyByte(keyBytes, (offset + i) & 3)
                i += 1
            }
            if count - i >= 8 {
                var word: UInt64 = 0
                withUnsafeMutableBytes(of: &word) { raw in
                    for j in 0..<8 { raw[j] = Self.keyByte(keyBytes, j & 3) }
                }
                let raw = UnsafeMutableRawPointer(base + i)
                let words = (count - i) / 8
                for w in 0..<words {
                    let value = raw.loadUnaligned(fromByteOffset: w * 8, as: UInt64.self)
                    raw.storeBytes(of: value ^ word, toByteOffset: w * 8, as: UInt64.self)
                }
                i += words * 8
            }
            while i < count {
                base[i] ^= Self.keyByte(keyBytes, (offset + i) & 3)
                i += 1
            }
        }
    }

    @inline(__always)
    private static func keyByte(_ key: (UInt8, UInt8, UInt8, UInt8), _ index: Int) -> UInt8 {
        switch index {
        case 0: key.0
        case 1: key.1
        case 2: key.2
        default: key.3
        }
    }
}

/// Encodes frames. Servers send unmasked frames; clients mask every frame (RFC 6455 §5.1).
public enum WebSocketFrameEncoder: Sendable {
    /// The bytes of one frame.
    ///
    /// - Parameters:
    ///   - maskKey: required for client frames, `nil` for server frames.
    public static func encode(opcode: WebSocketOpcode, payload: some Collection<UInt8>, fin: Bool = true,
                              maskKey: UInt32? = nil) -> [UInt8] {
        let length = payload.count
        var frame: [UInt8] = []
        frame.reserveCapacity(length + 14)
        frame.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        if length < 126 {
            frame.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            frame.append(maskBit | 126)
            frame.append(UInt8(length >> 8))
            frame.append(UInt8(length & 0xFF))
        } else {
            frame.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((UInt64(length) >> UInt64(shift)) & 0xFF)) }
        }
        guard let maskKey else {
            frame.append(contentsOf: payload)
            return frame
        }
        frame.append(UInt8(maskKey >> 24))
        frame.append(UInt8(maskKey >> 16 & 0xFF))
        frame.append(UInt8(maskKey >> 8 & 0xFF))
        frame.append(UInt8(maskKey & 0xFF))
        var masked = Array(payload)
        WebSocketFrameDecoder.unmask(&masked, key: maskKey, offset: 0)
        frame.append(contentsOf: masked)
        return frame
    }

    /// The payload of a close frame: the code, big-endian, then the UTF-8 reason.
    static func closePayload(code: WebSocketCloseCode?, reason: String) -> [UInt8] {
        guard let code else { return [] }
        var reasonBytes = Array(reason.utf8)
        if reasonBytes.count > 123 {
            // Cut at a character boundary so the reason stays valid UTF-8.
            var cut = 123
            while cut > 0, reasonBytes[cut] & 0xC0 == 0x80 { cut -= 1 }
            reasonBytes = Array(reasonBytes[..<cut])
        }
        return [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)] + reasonBytes
    }
}

/// An incremental UTF-8 validator (RFC 3629 §4): fed in pieces, it fails on the first byte
/// that cannot start or continue a well-formed sequence, so text is rejected fast.
public struct UTF8Validator: Sendable, Hashable {
    private var needed = 0
    private var lower: UInt8 = 0x80
    private var upper: UInt8 = 0xBF

    /// A validator at a character boundary.
    public init() {}

    /// True at a character boundary (no sequence half-read).
    public var isComplete: Bool { needed == 0 }

    /// Validates more bytes; false as soon as they cannot be UTF-8.
    public mutating func validate(_ bytes: some Sequence<UInt8>) -> Bool {
        for byte in bytes {
            if needed == 0 {
                if byte < 0x80 { continue }
                switch byte {
                case 0xC2...0xDF: needed = 1
                case 0xE0: needed = 2; lower = 0xA0
                case 0xE1...0xEC, 0xEE...0xEF: needed = 2
                case 0xED: needed = 2; upper = 0x9F  // no UTF-16 surrogates
                case 0xF0: needed = 3; lower = 0x90
                case 0xF1...0xF3: needed = 3
                case 0xF4: needed = 3; upper = 0x8F  // nothing above U+10FFFF
                default: return false
                }
            } else {
                guard byte >= lower, byte <= upper else { return false }
                lower = 0x80
                upper = 0xBF
                needed -= 1
            }
        }
        return true
    }
}
