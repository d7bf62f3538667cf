import ParleyNet
import ParleyNetTesting

#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer entry: feeds the input, as a server would receive it, to the frame decoder and
/// message assembler in pieces sized by the first byte. Checks: no trap, messages never exceed
/// the limit, text messages are valid UTF-8, errors carry a close code a peer may receive.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocket(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let step = Int(bytes[0] % 32) + 1
    let role: WebSocketFrameDecoder.Role = bytes[0] & 0x80 == 0 ? .server : .client
    let limit = 4096
    var inbound = WebSocketInbound(role: role, maxMessageSize: limit)
    do {
        try feed(Array(bytes.dropFirst()), step: step) { buffer throws(WebSocketProtocolError) in
            while let action = try inbound.next(&buffer) {
                switch action {
                case .message(.text(let text)):
                    precondition(text.utf8.count <= limit, "text message past the limit")
                case .message(.binary(let payload)):
                    precondition(payload.count <= limit, "binary message past the limit")
                case .ping(let payload), .pong(let payload):
                    precondition(payload.count <= 125, "control payload over 125 bytes")
                case .close(let code, _):
                    precondition(code?.isValidOnWire ?? true, "invalid close code accepted")
                }
            }
        }
    } catch {
        precondition([1002, 1007, 1009].contains(error.code.rawValue), "unexpected close code \(error.code)")
    }
    return 0
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-websocket", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzWebSocket)
    }
}
#endif
