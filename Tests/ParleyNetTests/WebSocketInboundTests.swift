import Testing
@testable import ParleyNet

private func frame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
    WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, fin: fin, maskKey: 0x5A5A_1234)
}

private func actions(_ bytes: [UInt8], maxMessageSize: Int = 1 << 20)
    -> (actions: [WebSocketInbound.Action], error: WebSocketProtocolError?)
{
    var inbound = WebSocketInbound(role: .server, maxMessageSize: maxMessageSize)
    var buffer = ByteBuffer(bytes)
    var out: [WebSocketInbound.Action] = []
    do {
        while let action = try inbound.next(&buffer) { out.append(action) }
    } catch {
        return (out, error)
    }
    return (out, nil)
}

struct WebSocketInboundTests {
    @Test func reassemblesFragmentsAroundInterleavedPings() {
        let bytes = frame(.text, Array("Hel".utf8), fin: false) + frame(.ping, [1, 2]) + frame(.continuation, Array("lo".utf8))
        let (actions, error) = actions(bytes)
        #expect(error == nil)
        #expect(actions == [.ping([1, 2]), .message(.text("Hello"))])
    }

    @Test func sizeLimitCountsEveryFragment() {
        let bytes = frame(.binary, [UInt8](repeating: 0, count: 600), fin: false) + frame(.continuation, [UInt8](repeating: 0, count: 600))
        #expect(actions(bytes, maxMessageSize: 1000).error?.code == .messageTooBig)
    }

    @Test func invalidUTF8FailsBeforeTheMessageEnds() {
        // The bad byte arrives in the first fragment; the rest never has to.
        let (_, error) = actions(frame(.text, [0x61, 0xFF], fin: false))
        #expect(error?.code == .invalidPayload)
    }

    @Test func closeFramesAreChecked() {
        #expect(actions(frame(.close, [])).actions == [.close(code: nil, reason: "")])
        #expect(actions(frame(.close, [0x03, 0xE8] + Array("bye".utf8))).actions == [.close(code: .normalClosure, reason: "bye")])
        #expect(actions(frame(.close, [0x03])).error?.code == .protocolError)
        #expect(actions(frame(.close, [0x03, 0xED])).error?.code == .protocolError)  // 1005 is not for the wire
        #expect(actions(frame(.close, [0x03, 0xE8, 0xC3])).error?.code == .invalidPayload)
    }

    @Test func continuationWithoutStartAndInterruptedMessagesAreViolations() {
        #expect(actions(frame(.continuation, [1])).error?.code == .protocolError)
        #expect(actions(frame(.text, [0x61], fin: false) + frame(.binary, [1])).error?.code == .protocolError)
    }
}
