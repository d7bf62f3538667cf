import Testing
@testable import ParleyNet
import ParleyNetTesting

private func decodeAll(_ bytes: [UInt8], role: WebSocketFrameDecoder.Role, maxFrameSize: Int = 1 << 20, step: Int = .max)
    -> (frames: [(WebSocketFrameHeader, [UInt8])], error: WebSocketProtocolError?)
{
    var decoder = WebSocketFrameDecoder(role: role, maxFrameSize: maxFrameSize)
    var frames: [(WebSocketFrameHeader, [UInt8])] = []
    var current: WebSocketFrameHeader?
    var payload: [UInt8] = []
    do {
        try feed(bytes, step: step) { buffer throws(WebSocketProtocolError) in
            while let event = try decoder.next(&buffer) {
                switch event {
                case .header(let header):
                    current = header
                    payload = []
                case .payload(let bytes, let frameEnd):
                    payload += bytes
                    if frameEnd, let header = current { frames.append((header, payload)) }
                }
            }
        }
    } catch {
        return (frames, error)
    }
    return (frames, nil)
}

struct WebSocketCodecTests {
    @Test(arguments: [0, 1, 125, 126, 127, 65535, 65536, 200_000])
    func roundTripsEveryLengthEncoding(length: Int) {
        let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let masked = WebSocketFrameEncoder.encode(opcode: .binary, payload: payload, maskKey: 0x1234_5678)
        let fromClient = decodeAll(masked, role: .server)
        #expect(fromClient.error == nil)
        #expect(fromClient.frames.count == 1)
        #expect(fromClient.frames.first?.1 == payload)
        #expect(fromClient.frames.first?.0.maskKey == 0x1234_5678)

        let unmasked = WebSocketFrameEncoder.encode(opcode: .binary, payload: payload)
        #expect(decodeAll(unmasked, role: .client).frames.first?.1 == payload)
    }

    @Test func headerBytesFollowRFC6455Examples() {
        // RFC 6455 §5.7: a single-frame unmasked text message "Hello".
        #expect(WebSocketFrameEncoder.encode(opcode: .text, payload: Array("Hello".utf8))
                == [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f])
        // The masked version with key 37 fa 21 3d.
        #expect(WebSocketFrameEncoder.encode(opcode: .text, payload: Array("Hello".utf8), maskKey: 0x37fa_213d)
                == [0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58])
        // 256 bytes use the 16-bit length; 64 KiB the 64-bit one.
        #expect(Array(WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: 256)).prefix(4))
                == [0x82, 0x7E, 0x01, 0x00])
        #expect(Array(WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: 65536)).prefix(10))
                == [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0])
    }

    @Test(arguments: [1, 2, 3, 5, 13])
    func dripFedFramesDecodeTheSame(step: Int) {
        var bytes: [UInt8] = []
        bytes += WebSocketFrameEncoder.encode(opcode: .text, payload: Array("fragmented ".utf8), fin: false, maskKey: 0xA1B2_C3D4)
        bytes += WebSocketFrameEncoder.encode(opcode: .ping, payload: Array("p".utf8), maskKey: 7)
        bytes += WebSocketFrameEncoder.encode(opcode: .continuation, payload: Array("message".utf8), maskKey: 0xDEAD_BEEF)
        let whole = decodeAll(bytes, role: .server)
        let dripped = decodeAll(bytes, role: .server, step: step)
        #expect(dripped.error == nil)
        #expect(whole.frames.map(\.1) == dripped.frames.map(\.1))
        #expect(dripped.frames.map(\.0.opcode) == [.text, .ping, .continuation])
        #expect(String(decoding: dripped.frames[0].1 + dripped.frames[2].1, as: UTF8.self) == "fragmented message")
    }

    struct Violation: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var role: WebSocketFrameDecoder.Role
        var code: UInt16
        var testDescription: String { name }
    }

    static let violations: [Violation] = [
        .init(name: "RSV1 without extension", bytes: [0xC1, 0x80, 0, 0, 0, 0], role: .server, code: 1002),
        .init(name: "reserved opcode 3", bytes: [0x83, 0x80, 0, 0, 0, 0], role: .server, code: 1002),
        .init(name: "reserved control opcode 0xB", bytes: [0x8B, 0x80, 0, 0, 0, 0], role: .server, code: 1002),
        .init(name: "unmasked client frame", bytes: [0x81, 0x01, 0x41], role: .server, code: 1002),
        .init(name: "masked server frame", bytes: [0x81, 0x81, 0, 0, 0, 0, 0x41], role: .client, code: 1002),
        .init(name: "fragmented ping", bytes: [0x09, 0x80, 0, 0, 0, 0], role: .server, code: 1002),
        .init(name: "ping over 125 bytes", bytes: [0x89, 0xFE, 0x00, 0x7E], role: .server, code: 1002),
        .init(name: "64-bit length with top bit", bytes: [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0], role: .server, code: 1002),
        .init(name: "frame over the limit", bytes: [0x82, 0xFF, 0, 0, 0, 0, 0x10, 0, 0, 0], role: .server, code: 1009),
    ]

    @Test(arguments: violations)
    func rejectsProtocolViolations(_ violation: Violation) {
        let (_, error) = decodeAll(violation.bytes, role: violation.role)
        #expect(error?.code.rawValue == violation.code, "\(violation.name)")
    }

    @Test func unmaskingHonoursOffsetsAcrossChunks() {
        let payload = Array("The quick brown fox jumps over the lazy dog".utf8)
        var masked = payload
        WebSocketFrameDecoder.unmask(&masked, key: 0x0102_0304, offset: 0)
        #expect(masked != payload)
        var first = Array(masked[0..<7]), second = Array(masked[7...])
        WebSocketFrameDecoder.unmask(&first, key: 0x0102_0304, offset: 0)
        WebSocketFrameDecoder.unmask(&second, key: 0x0102_0304, offset: 7)
        #expect(first + second == payload)
    }

    @Test func closePayloadIsCutAtACharacterBoundary() {
        let reason = String(repeating: "é", count: 100)  // 200 bytes
        let payload = WebSocketFrameEncoder.closePayload(code: .goingAway, reason: reason)
        #expect(payload.count <= 125)
        #expect(String(validating: payload.dropFirst(2), as: UTF8.self) != nil)
    }

    @Test func closeCodesValidOnTheWire() {
        for valid: UInt16 in [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999] {
            #expect(WebSocketCloseCode(rawValue: valid).isValidOnWire, "\(valid)")
        }
        for invalid: UInt16 in [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535] {
            #expect(!WebSocketCloseCode(rawValue: invalid).isValidOnWire, "\(invalid)")
        }
    }
}

struct UTF8ValidatorTests {
    @Test(arguments: ["", "hello", "κόσμε", "日本語", "🎉 emoji", "\u{10FFFF}", "\u{FFFD}"])
    func acceptsValidText(_ text: String) {
        var validator = UTF8Validator()
        let valid1 = validator.validate(Array(text.utf8))
        #expect(valid1)
        #expect(validator.isComplete)
    }

    @Test(arguments: [
        [0xC0, 0x80],              // overlong NUL
        [0xE0, 0x80, 0xAF],        // overlong
        [0xED, 0xA0, 0x80],        // UTF-16 surrogate
        [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
        [0xF5, 0x80, 0x80, 0x80],  // invalid lead
        [0xFF],                    // never valid
        [0x80],                    // lone continuation
        [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80, 0x65, 0x64, 0x69, 0x74, 0x65, 0x64],
    ] as [[UInt8]])
    func rejectsInvalidSequences(_ bytes: [UInt8]) {
        var validator = UTF8Validator()
        let valid2 = validator.validate(bytes)
        #expect(!valid2)
    }

    @Test func validatesAcrossEverySplit() {
        let bytes = Array("aé日🎉z".utf8)
        for split in 0...bytes.count {
            var validator = UTF8Validator()
            let valid3 = validator.validate(bytes[..<split])
            #expect(valid3)
            let valid4 = validator.validate(bytes[split...])
            #expect(valid4)
            #expect(validator.isComplete)
        }
    }

    @Test func truncatedSequenceIsIncomplete() {
        var validator = UTF8Validator()
        let valid5 = validator.validate([0xF0, 0x9F, 0x8E])
        #expect(valid5)
        #expect(!validator.isComplete)
    }

    @Test func failsFastOnTheFirstBadByte() {
        // After a valid prefix, the first impossible byte fails at once; no need for the rest.
        var validator = UTF8Validator()
        let valid6 = validator.validate(Array("valid so far ".utf8))
        #expect(valid6)
        let valid7 = validator.validate([0xF4, 0x90])
        #expect(!valid7)
    }
}

struct HandshakeTests {
    @Test func acceptValueMatchesRFC6455Example() {
        // RFC 6455 §1.3.
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func base64RoundTrips() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.decode("Zm9vYg==") == Array("foob".utf8))
        #expect(Base64.decode("Zm9v!mFy") == nil)
        #expect(Base64.decode("Zm9=YmFy") == nil)
    }

    @Test func validatesClientHandshakes() throws {
        var head = HTTPRequestHead(method: .GET, target: "/ws")
        head.headers.add(name: "Host", value: "x")
        head.headers.add(name: "Upgrade", value: "websocket")
        head.headers.add(name: "Connection", value: "keep-alive, Upgrade")
        head.headers.add(name: "Sec-WebSocket-Version", value: "13")
        head.headers.add(name: "Sec-WebSocket-Key", value: "dGhlIHNhbXBsZSBub25jZQ==")
        #expect(try WebSocketHandshake.validateClientRequest(head) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

        var wrongVersion = head
        wrongVersion.headers.replaceOrAdd(name: "Sec-WebSocket-Version", value: "8")
        #expect(throws: HTTPError.self) { try WebSocketHandshake.validateClientRequest(wrongVersion) }
        do {
            _ = try WebSocketHandshake.validateClientRequest(wrongVersion)
        } catch {
            #expect(error.status.code == 426)
            #expect(error.headers["sec-websocket-version"] == "13")
        }

        var shortKey = head
        shortKey.headers.replaceOrAdd(name: "Sec-WebSocket-Key", value: "c2hvcnQ=")
        #expect(throws: HTTPError.self) { try WebSocketHandshake.validateClientRequest(shortKey) }
    }

    @Test func clientURLParsing() throws {
        #expect(try WebSocketClient.parse("ws://127.0.0.1:9001/echo?x=1") == .init(host: "127.0.0.1", port: 9001, path: "/echo?x=1"))
        #expect(try WebSocketClient.parse("ws://example.com") == .init(host: "example.com", port: 80, path: "/"))
        #expect(try WebSocketClient.parse("ws://[::1]:81/a") == .init(host: "::1", port: 81, path: "/a"))
        #expect(try WebSocketClient.parse("wss://example.com/v1") == .init(host: "example.com", port: 443, path: "/v1", secure: true))
        #expect(throws: WebSocketClientError.self) { try WebSocketClient.parse("http://example.com") }
        #expect(throws: WebSocketClientError.self) { try WebSocketClient.parse("ws://host:99999/") }
    }
}
