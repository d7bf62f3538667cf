import Foundation
import ParleyWire
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One realtime socket as the client sees it: text frames in order, then the close code.
protocol RealtimeConnection: Sendable {
    /// Every text frame, in arrival order; finishes when the socket closes.
    var frames: AsyncStream<String> { get }
    /// The close code the server sent (nil until closed, or when it vanished).
    var closeCode: UInt16? { get }
    func send(_ text: String)
    func close()
}

/// Opens realtime sockets: ParleyNet's WebSocket client on Linux, `URLSessionWebSocketTask`
/// on Apple platforms.
enum RealtimeTransport {
    static func connect(url: String, appKey: String) async throws -> any RealtimeConnection {
        #if canImport(Darwin)
        return try await URLSessionRealtimeConnection.connect(url: url, appKey: appKey)
        #else
        return try await NetRealtimeConnection.connect(url: url, appKey: appKey)
        #endif
    }
}

/// Records the close code once, from whichever thread reports it.
final class CloseCodeBox: Sendable {
    private let code = LockedValue<UInt16?>(nil)
    var value: UInt16? { code.withLock { $0 } }
    func set(_ new: UInt16?) { code.withLock { if $0 == nil { $0 = new } } }
}

#if !canImport(Darwin)
import ParleyNet
import ParleySync

/// The Linux transport: ParleyNet's RFC 6455 client on one SDK-owned event loop.
final class NetRealtimeConnection: RealtimeConnection, @unchecked Sendable {
    // @unchecked: its stored properties are immutable; `WebSocket` confines its own state to its loop, and `frames` is an AsyncStream (Sendable).
    /// One loop serves every client of the process (sockets are few and light).
    static let loops: EventLoopGroup? = try? EventLoopGroup(loopCount: 1)

    let frames: AsyncStream<String>
    private let socket: WebSocket
    private let code: CloseCodeBox
    var closeCode: UInt16? { code.value }

    private init(frames: AsyncStream<String>, socket: WebSocket, code: CloseCodeBox) {
        self.frames = frames
        self.socket = socket
        self.code = code
    }

    static func connect(url: String, appKey: String) async throws -> any RealtimeConnection {
        guard let loop = loops?.next() else { throw ParleyError.unreachable("cannot start the SDK's network loop") }
        let (frames, continuation) = AsyncStream<String>.makeStream()
        let code = CloseCodeBox()
        let handler = WebSocketHandler(
            onMessage: { _, message in
                if case .text(let text) = message { continuation.yield(text) }
            },
            onClose: { _, closeCode, _ in
                code.set(closeCode.rawValue)
                continuation.finish()
            })
        var configuration = WebSocketConfiguration()
        configuration.maxMessageSize = 16 << 20
        do {
            let socket = try await WebSocketClient.connect(to: url, headers: HTTPHeaders([("X-Parley-App-Key", appKey)]),
                                                           configuration: configuration, on: loop, handler: handler)
            return NetRealtimeConnection(frames: frames, socket: socket, code: code)
        } catch let error as WebSocketClientError where error.status != nil {
            throw ParleyError.server(.init(status: error.status ?? 0, code: "upgrade_refused", message: error.message))
        } catch {
            throw ParleyError.unreachable("\(error)")
        }
    }

    func send(_ text: String) { socket.send(text: text) }
    func close() { socket.close() }
}
#endif

/// The Apple transport: `URLSessionWebSocketTask`, which answers pings itself. Compiled on
/// every platform (Linux's FoundationNetworking declares the same API, so `make test`
/// type-checks every line of it) and used on Apple platforms only: Debian's libcurl, which
/// FoundationNetworking's tasks run on, has no WebSocket support, so it cannot run here.
final class URLSessionRealtimeConnection: RealtimeConnection, @unchecked Sendable {
    // @unchecked: its stored properties are immutable; `URLSessionWebSocketTask` is thread-safe (Foundation documents it so) but not marked Sendable.
    let frames: AsyncStream<String>
    private let task: URLSessionWebSocketTask
    private let code: CloseCodeBox
    var closeCode: UInt16? { code.value }

    private init(frames: AsyncStream<String>, task: URLSessionWebSocketTask, code: CloseCodeBox) {
        self.frames = frames
        self.task = task
        self.code = code
    }

    static func connect(url: String, appKey: String) async throws -> any RealtimeConnection {
        guard let target = URL(string: url) else { throw ParleyError.badResponse("bad URL \(url)") }
        var request = URLRequest(url: target)
        request.setValue(appKey, forHTTPHeaderField: "X-Parley-App-Key")
        let task = URLSession.shared.webSocketTask(with: request)
        task.maximumMessageSize = 16 << 20
        let (frames, continuation) = AsyncStream<String>.makeStream()
        let code = CloseCodeBox()
        task.resume()
        Task {
            while true {
                do {
                    if case .string(let text) = try await task.receive() { continuation.yield(text) }
                } catch {
                    code.set(task.closeCode == .invalid ? nil : UInt16(task.closeCode.rawValue))
                    continuation.finish()
                    return
                }
            }
        }
        return URLSessionRealtimeConnection(frames: frames, task: task, code: code)
    }

    func send(_ text: String) { task.send(.string(text)) { _ in } }
    func close() { task.cancel(with: .normalClosure, reason: nil) }
}
