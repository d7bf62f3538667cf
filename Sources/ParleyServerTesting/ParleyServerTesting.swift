// Test helpers for anything that talks to a whole server (STYLE.md rule 7): a server on an
// ephemeral port that is shut down however the test ends, a signed-in realtime device that
// speaks the protocol as the SDK does, and REST calls as a client makes them.
import Foundation
import FoundationNetworking
import ParleyChat
import ParleyChatTesting
import ParleyLog
package import ParleyNet
package import ParleyServer
package import ParleyTesting
package import ParleyWire

/// Runs `body` against a fresh server (port 0, cheap password hashing, a temporary data
/// directory) and shuts it down afterwards, also when `body` throws: a failing test never
/// leaves a server and its threads behind for the next one.
package func withTestServer<T: Sendable>(_ configure: (inout ServerConfiguration) -> Void = { _ in },
                                        _ body: (ParleyServer) async throws -> T) async throws -> T {
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.threads = 2
    configuration.argon2Passes = 1
    configuration.argon2MemoryMiB = 1
    configuration.signUpsPerHour = 1_000_000
    configuration.dataDirectory = NSTemporaryDirectory() + "parley-test-\(UUID().uuidString)"
    // With PARLEY_TEST_POSTGRES(_URL) set, every test server gets a fresh PostgreSQL database.
    let database = try TestEngine.freshPostgresURL()
    defer { database?.drop() }
    configuration.databaseURL = database?.url
    configure(&configuration)
    // The log goes to a recording handler: tests assert on records, never on standard error.
    let server = try await ParleyServer.start(configuration, logHandler: RecordingLogHandler(minimumLevel: .debug))
    do {
        let value = try await body(server)
        await server.shutdown()
        return value
    } catch {
        await server.shutdown()
        throw error
    }
}

extension ParleyServer {
    /// POSTs `body` as JSON with the created app's key (and `token`), decoding the answer.
    package func post<T: Decodable>(_ path: String, _ body: some Encodable, token: String? = nil, as type: T.Type = T.self) async throws -> T {
        guard let url = URL(string: self.url + path) else { throw URLError(.badURL) }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = try JSONEncoder().encode(body)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(createdApp?.publicKey, forHTTPHeaderField: "X-Parley-App-Key")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try WireCoding.decoder().decode(T.self, from: data)
    }

    /// Registers `username` and returns the signed-in account.
    package func register(_ username: String, password: String = "correct horse battery") async throws -> SignedIn {
        try await post("/v1/users", RegisterRequest(username: username, password: password))
    }
}

/// One signed-in device on the realtime socket, over ParleyNet's WebSocket client, decoding
/// frames with the `ServerFrame` type the SDK uses. Every wait has a timeout.
package final class RealtimeDevice: @unchecked Sendable {
    // @unchecked: one test drives one device from one task; the queues are thread-safe.
    package let server: ParleyServer
    package let appKey: String
    package let token: String
    /// This connection's frames (a new queue per connection: what an old one left unread
    /// was never processed, as with a real client).
    package private(set) var frames = EventQueue<ServerFrame>()
    /// Close codes, in order.
    package let closes = EventQueue<UInt16>()
    package private(set) var socket: WebSocket?
    /// Frames read while waiting for another; `until` looks here first.
    private var backlog: [ServerFrame] = []
    /// Every event received, in order.
    package private(set) var events: [ConversationEvent] = []
    private var nextID = 0

    /// The client side's own loop, shared by every test device.
    static let loops: EventLoopGroup = {
        do { return try EventLoopGroup(loopCount: 1) } catch { fatalError("cannot start a client loop: \(error)") }
    }()

    /// A device of the account `signedIn` on `server` (not connected yet), sending `appKey`
    /// (default: the app the server created).
    package init(server: ParleyServer, _ signedIn: SignedIn, appKey: String? = nil) {
        self.server = server
        self.appKey = appKey ?? server.createdApp?.publicKey ?? ""
        token = signedIn.session.token ?? ""
    }

    /// Connects and authenticates, resuming after `position` of `epoch`; returns the first
    /// frame `done` accepts (default: `ready` or an error).
    @discardableResult
    package func connect(after position: Int64? = nil, epoch: String? = nil,
                        until done: (ServerFrame) -> Bool = { $0.type == .ready || $0.type == .error }) async throws -> ServerFrame {
        frames = EventQueue<ServerFrame>()
        backlog = []
        let frames = self.frames
        let closes = self.closes
        let handler = WebSocketHandler(
            onMessage: { _, message in
                guard case .text(let text) = message, let frame = try? WireCoding.decoder().decode(ServerFrame.self, from: Data(text.utf8)) else { return }
                frames.push(frame)
            },
            onClose: { _, code, _ in closes.push(code.rawValue) })
        let url = server.url.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime"
        socket = try await WebSocketClient.connect(to: url, headers: HTTPHeaders([("X-Parley-App-Key", appKey)]), on: Self.loops.next(),
                                                   handler: handler)
        send(.auth(ClientFrame.Auth(token: token, position: position, epoch: epoch)))
        return try await until(done)
    }

    /// Sends a frame as JSON text.
    package func send(_ frame: ClientFrame) {
        guard let data = try? JSONEncoder().encode(frame) else { return }
        socket?.send(text: String(decoding: data, as: UTF8.self))
    }

    /// Sends the command `make` builds with a fresh id and waits for its answer.
    package func command(_ make: (String) -> ClientFrame) async throws -> ServerFrame {
        nextID += 1
        let id = "c\(nextID)"
        send(make(id))
        return try await until { $0.id == id }
    }

    /// The next frame (from the backlog first) that `predicate` accepts; others are kept.
    package func until(_ predicate: (ServerFrame) -> Bool) async throws -> ServerFrame {
        if let index = backlog.firstIndex(where: predicate) { return backlog.remove(at: index) }
        while true {
            let frame = try await frames.next(timeout: 10)
            if let event = frame.event { events.append(event) }
            if predicate(frame) { return frame }
            backlog.append(frame)
        }
    }

    /// The next event `predicate` accepts.
    package func event(_ predicate: (ConversationEvent) -> Bool) async throws -> ConversationEvent {
        let frame = try await until { $0.event.map(predicate) ?? false }
        guard let event = frame.event else { throw ChatError.internalError }  // unreachable: the predicate saw an event
        return event
    }

    /// Closes the socket and waits for the close.
    package func disconnect() async throws {
        socket?.close()
        _ = try await closes.next(timeout: 10)
    }
}

extension ServerFrame {
    /// `ready`'s and `resync`'s position.
    package var position: Int64? {
        switch self {
        case .ready(let ready): ready.position
        case .resync(let resync): resync.position
        default: nil
        }
    }

    /// `ready`'s and `resync`'s epoch.
    package var epoch: String? {
        switch self {
        case .ready(let ready): ready.epoch
        case .resync(let resync): resync.epoch
        default: nil
        }
    }

    /// `resync`'s reason.
    package var reason: String? {
        if case .resync(let resync) = self { return resync.reason }
        return nil
    }
}
