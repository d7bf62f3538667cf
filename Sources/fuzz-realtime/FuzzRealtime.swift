import Foundation
import FoundationNetworking
import ParleyChat
import ParleyNet
import ParleyNetTesting
import ParleyServer
import ParleyWire
import ParleySync

/// libFuzzer entry for a realtime session: the real server runs in this process (SQLite in a
/// temporary directory), one signed-in device is connected over a real socket, and each input
/// is a sequence of frames (split at 0x00 bytes; valid UTF-8 goes as text, the rest as binary)
/// sent on that socket. `$C` in a frame becomes the id of a conversation the user is in, so
/// saved inputs reach the command handlers. Promises checked after every input: the server
/// answers a `ping` (or has closed with a documented code, after which a new device
/// connects), and never crashes or hangs.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRealtime(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let harness = RealtimeFuzzHarness.shared
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let frames = input.split(separator: 0, omittingEmptySubsequences: false).prefix(32)
    let device = harness.device()
    for frame in frames {
        if let text = String(validating: frame, as: UTF8.self) {
            device.socket.send(text: text.replacingOccurrences(of: "$C", with: harness.conversationID))
        } else {
            device.socket.send(binary: Array(frame))
        }
    }
    device.socket.send(text: #"{"type":"ping","id":"fuzz-probe"}"#)
    switch device.waitForPongOrClose(timeout: 10) {
    case .pong:
        break
    case .closed(let code):
        precondition(RealtimeFuzzHarness.documentedCloseCodes.contains(code), "closed with an undocumented code \(code)")
        harness.forget(device)
    case .timedOut:
        preconditionFailure("the session neither answered a ping nor closed within 10 s")
    }
    return 0
}

/// The in-process server and the device inputs are sent on.
final class RealtimeFuzzHarness: @unchecked Sendable {
    // @unchecked: every stored property is set once in `init` and immutable afterwards.
    static let shared = RealtimeFuzzHarness()
    /// Close codes docs/protocol.md lists.
    static let documentedCloseCodes: Set<UInt16> = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1011, 1013,
                                                     RealtimeCloseCode.resume, RealtimeCloseCode.unauthorized,
                                                     RealtimeCloseCode.authTimeout, RealtimeCloseCode.protocolViolation]

    let server: ParleyServer
    let loops: EventLoopGroup
    let token: String
    let conversationID: String
    private let current = LockedValue<FuzzDevice?>(nil)

    private init() {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.threads = 1
        configuration.argon2Passes = 1
        configuration.argon2MemoryMiB = 1
        configuration.realtime.commandsPerSecond = 1_000_000
        configuration.realtime.commandBurst = 1_000_000
        configuration.realtime.userCommandsPerSecond = 1_000_000
        configuration.realtime.userCommandBurst = 1_000_000
        configuration.dataDirectory = NSTemporaryDirectory() + "parley-fuzz-realtime-\(UUID().uuidString)"
        do {
            let settings = configuration
            server = try blocking { try await ParleyServer.start(settings) }
            loops = try EventLoopGroup(loopCount: 1)
            let key = server.createdApp?.publicKey ?? ""
            let alice = try post(server.url + "/v1/users", key: key, token: nil, body: #"{"username":"alice","password":"correct horse battery"}"#)
            _ = try post(server.url + "/v1/users", key: key, token: nil, body: #"{"username":"bob","password":"correct horse battery"}"#)
            guard case .object(let signedIn) = alice, case .object(let session)? = signedIn["session"], case .string(let token)? = session["token"] else {
                fatalError("cannot register the fuzzing user: \(alice)")
            }
            self.token = token
            let room = try post(server.url + "/v1/conversations", key: key, token: token, body: #"{"kind":"group","members":["bob"]}"#)
            guard case .object(let fields) = room, case .string(let id)? = fields["id"] else { fatalError("cannot create a conversation: \(room)") }
            conversationID = id
        } catch {
            fatalError("cannot start the in-process server: \(error)")
        }
    }

    /// The connected, authenticated device (a new one after the last was closed).
    func device() -> FuzzDevice {
        current.withLock { current in
            if let current { return current }
            let made = FuzzDevice(url: server.url, appKey: server.createdApp?.publicKey ?? "", token: token, loop: loops.next())
            current = made
            return made
        }
    }

    func forget(_ device: FuzzDevice) {
        current.withLock { if $0 === device { $0 = nil } }
    }
}

/// One authenticated realtime socket whose frames and close are watched.
final class FuzzDevice: @unchecked Sendable {
    // @unchecked: `pongs` and `closeCode` are read and written only while `condition` is locked; `socket` is immutable.
    enum Outcome { case pong, closed(UInt16), timedOut }

    let socket: WebSocket
    private let condition = NSCondition()
    private var pongs = 0
    private var closeCode: UInt16?

    init(url: String, appKey: String, token: String, loop: EventLoop) {
        let box = WeakBox()
        let handler = WebSocketHandler(
            onMessage: { _, message in
                guard case .text(let text) = message else { return }
                if text.contains(#""id":"fuzz-probe""#), text.contains(#""type":"pong""#) { box.device?.record(pong: true) }
            },
            onClose: { _, code, _ in box.device?.record(close: code.rawValue) })
        do {
            socket = try blocking {
                try await WebSocketClient.connect(to: url.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime",
                                                  headers: HTTPHeaders([("X-Parley-App-Key", appKey)]), on: loop, handler: handler)
            }
        } catch {
            fatalError("cannot connect a device: \(error)")
        }
        box.device = self
        socket.send(text: #"{"type":"auth","token":"\#(token)"}"#)
    }

    func record(pong: Bool) { condition.withLock { pongs += 1; condition.broadcast() } }
    func record(close code: UInt16) { condition.withLock { closeCode = code; condition.broadcast() } }

    func waitForPongOrClose(timeout: Double) -> Outcome {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return condition.withLock {
            while true {
                if pongs > 0 {
                    pongs -= 1
                    return .pong
                }
                if let closeCode { return .closed(closeCode) }
                if !condition.wait(until: deadline) { return .timedOut }
            }
        }
    }
}

private final class WeakBox: @unchecked Sendable {
    // @unchecked: `device` is set once, before the socket that reads it exists.
    weak var device: FuzzDevice?
}

/// Runs async work to completion from synchronous code (libFuzzer's callback).
private func blocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) throws -> T {
    try runBlocking(work).get()
}

private func post(_ url: String, key: String, token: String?, body: String) throws -> JSONValue {
    guard let target = URL(string: url) else { throw URLError(.badURL) }
    var request = URLRequest(url: target)
    request.httpMethod = "POST"
    request.httpBody = Data(body.utf8)
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.setValue(key, forHTTPHeaderField: "X-Parley-App-Key")
    if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
    let immutable = request
    let data = try blocking { try await URLSession.shared.data(for: immutable).0 }
    return try JSONDecoder().decode(JSONValue.self, from: data)
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-realtime", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzRealtime)
        exit(0)
    }
}
#endif
