import Foundation
import FoundationNetworking
import Testing
import ParleyNet
import ParleyNetTesting
import ParleyChat
import ParleyWire
@testable import ParleyServer

/// The realtime WebSocket end to end in Swift: the real server in process, Parley's own
/// WebSocket client, frames decoded with the `ServerFrame` type the SDK will use.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct RealtimeTests {
    /// One signed-in device: REST over URLSession, realtime over the WebSocket client.
    final class Device: @unchecked Sendable {
        let server: ParleyServer
        let appKey: String
        let token: String
        let userID: String
        /// This connection's frames (a new queue per connection: what an old one left unread
        /// was never processed, as with a real client).
        private(set) var frames = EventQueue<ServerFrame>()
        let closes = EventQueue<UInt16>()
        private(set) var socket: WebSocket?
        /// Frames read while waiting for another; `until` looks here first.
        private var backlog: [ServerFrame] = []
        /// Every event received, in order.
        private(set) var events: [ConversationEvent] = []
        private var nextID = 0

        /// The client side's own loop, shared by every test device.
        static let loops: EventLoopGroup = {
            do { return try EventLoopGroup(loopCount: 1) } catch { fatalError("cannot start a client loop: \(error)") }
        }()

        init(server: ParleyServer, appKey: String, token: String, userID: String) {
            self.server = server
            self.appKey = appKey
            self.token = token
            self.userID = userID
        }

        /// Connects and authenticates, resuming after `position`; returns `ready`.
        @discardableResult
        func connect(after position: Int64? = nil) async throws -> ServerFrame {
            frames = EventQueue<ServerFrame>()
            backlog = []
            let frames = self.frames
            let closes = self.closes
            let handler = WebSocketHandler(
                onMessage: { _, message in
                    guard case .text(let text) = message, let frame = try? JSONDecoder.wire.decode(ServerFrame.self, from: Data(text.utf8)) else { return }
                    frames.push(frame)
                },
                onClose: { _, code, _ in closes.push(code.rawValue) })
            let url = server.url.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime"
            socket = try await WebSocketClient.connect(to: url, headers: HTTPHeaders([("X-Parley-App-Key", appKey)]), on: Self.loops.next(),
                                                       handler: handler)
            var auth = ClientFrame(.auth)
            auth.token = token
            auth.position = position
            send(auth)
            return try await until { $0.type == .ready || $0.type == .error }
        }

        func send(_ frame: ClientFrame) {
            guard let data = try? JSONEncoder().encode(frame) else { return }
            socket?.send(text: String(decoding: data, as: UTF8.self))
        }

        /// Sends a command and waits for its answer.
        func command(_ frame: ClientFrame) async throws -> ServerFrame {
            nextID += 1
            var frame = frame
            let id = "c\(nextID)"
            frame.id = id
            send(frame)
            return try await until { $0.id == id }
        }

        func until(_ predicate: (ServerFrame) -> Bool) async throws -> ServerFrame {
            if let index = backlog.firstIndex(where: predicate) { return backlog.remove(at: index) }
            while true {
                let frame = try await frames.next(timeout: 10)
                if let event = frame.event { events.append(event) }
                if predicate(frame) { return frame }
                backlog.append(frame)
            }
        }

        func event(_ predicate: (ConversationEvent) -> Bool) async throws -> ConversationEvent {
            let frame = try await until { $0.event.map(predicate) ?? false }
            return try #require(frame.event)
        }

        func disconnect() async throws {
            socket?.close()
            _ = try await closes.next(timeout: 10)
        }
    }

    private func start() async throws -> ParleyServer {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.threads = 2
        configuration.argon2Passes = 1
        configuration.argon2MemoryMiB = 1
        configuration.dataDirectory = NSTemporaryDirectory() + "parley-realtime-\(UUID().uuidString)"
        return try await ParleyServer.start(configuration)
    }

    private func post<T: Decodable>(_ server: ParleyServer, _ path: String, _ body: some Encodable, token: String? = nil,
                                    as type: T.Type = T.self) async throws -> T {
        guard let url = URL(string: server.url + path) else { throw URLError(.badURL) }
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.httpBody = try JSONEncoder().encode(body)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(server.createdApp?.publicKey, forHTTPHeaderField: "X-Parley-App-Key")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONDecoder.wire.decode(T.self, from: data)
    }

    private func device(_ server: ParleyServer, _ signedIn: SignedIn) -> Device {
        Device(server: server, appKey: server.createdApp?.publicKey ?? "", token: signedIn.session.token ?? "", userID: signedIn.user.id.rawValue)
    }

    private func text(_ clientID: String, _ body: String) -> SendMessageRequest {
        SendMessageRequest(clientID: clientID, content: .text(body))
    }

    @Test func twoUsersThreeDevicesExchangeAndTheOneThatWasAwayCatchesUpExactly() async throws {
        let server = try await start()
        let alice: SignedIn = try await post(server, "/v1/users", RegisterRequest(username: "alice", password: "correct horse battery"))
        let bob: SignedIn = try await post(server, "/v1/users", RegisterRequest(username: "bob", password: "correct horse battery"))
        let laptopSession: SignedIn = try await post(server, "/v1/sessions", SignInRequest(username: "alice", password: "correct horse battery"))
        let room: Conversation = try await post(server, "/v1/conversations",
                                                CreateConversationRequest(kind: .group, members: ["bob"], title: "plans"),
                                                token: alice.session.token)
        let phone = device(server, alice), laptop = device(server, laptopSession), bobs = device(server, bob)
        for device in [phone, laptop, bobs] { try await device.connect() }

        var send = ClientFrame(.send)
        send.conversationID = room.id
        send.message = text("one", "dinner at 8?")
        let ack = try await phone.command(send)
        #expect(ack.type == .ack)
        let sentID = try #require(ack.result.flatMap { result -> String? in
            guard case .object(let fields) = result, case .object(let message)? = fields["message"], case .string(let id)? = message["id"] else { return nil }
            return id
        })
        for device in [phone, laptop, bobs] {
            let event = try await device.event { $0.type == .messageCreated }
            #expect(event.message?.id.rawValue == sentID)
            #expect(event.message?.clientID == "one")
        }

        // Bob's device received it: delivered, then read; Alice's devices see the receipts.
        var delivered = ClientFrame(.markDelivered)
        delivered.conversationID = room.id
        delivered.seq = try #require(laptop.events.last?.seq)
        #expect(try await bobs.command(delivered).type == .ack)
        let receipt = try await phone.event { $0.type == .receiptUpdated }
        #expect(receipt.userID?.rawValue == bob.user.id.rawValue && receipt.deliveredSeq == delivered.seq && receipt.seq == nil)

        // The laptop goes away; the others keep talking, editing and deleting.
        let awayAt = try #require(laptop.events.map(\.position).max())
        try await laptop.disconnect()
        send.message = text("two", "or 9")
        _ = try await bobs.command(send)
        var edit = ClientFrame(.edit)
        edit.conversationID = room.id
        edit.messageID = MessageID(rawValue: sentID)
        edit.content = .text("dinner at 8:30?")
        #expect(try await phone.command(edit).type == .ack)
        send.message = text("three", "typo")
        let typo = try await phone.command(send)
        var delete = ClientFrame(.delete)
        delete.conversationID = room.id
        if case .object(let fields)? = typo.result, case .object(let message)? = fields["message"], case .string(let id)? = message["id"] {
            delete.messageIDs = [MessageID(rawValue: id)]
        }
        #expect(try await phone.command(delete).type == .ack)
        var read = ClientFrame(.markRead)
        read.conversationID = room.id
        read.seq = 100
        #expect(try await bobs.command(read).type == .ack)
        _ = try await phone.event { $0.type == .receiptUpdated && $0.readSeq != nil && $0.readSeq ?? 0 > 0 }

        // Back: exactly what the phone saw after that position, in order; then live.
        let ready = try await laptop.connect(after: awayAt)
        let stayed = phone.events.filter { $0.position > awayAt }.map { [$0.position, $0.seq ?? -1] }
        let resumed = laptop.events.filter { $0.position > awayAt }.map { [$0.position, $0.seq ?? -1] }
        #expect(!stayed.isEmpty)
        #expect(resumed == stayed)
        #expect((ready.position ?? 0) >= (stayed.last?.first ?? 0))
        send.message = text("four", "see you")
        _ = try await bobs.command(send)
        let live = try await laptop.event { $0.message?.clientID == "four" }
        #expect(live.position > (ready.position ?? 0))
        await server.shutdown()
    }

    @Test func aSecondConnectionOfAnotherAppsTokenIsClosedWith4001() async throws {
        let server = try await start()
        let alice: SignedIn = try await post(server, "/v1/users", RegisterRequest(username: "alice", password: "correct horse battery"))
        let other = try await ParleyServer.runApps(.create(name: "other"), configuration: server.configuration)
        let key = try #require(other.split(separator: "app key:").last?.split(separator: " ").first.map(String.init))
        let device = Device(server: server, appKey: key, token: alice.session.token ?? "", userID: alice.user.id.rawValue)
        let refused = try await device.connect()
        #expect(refused.type == .error && refused.error?.code == "unauthenticated")
        let code = try await device.closes.next(timeout: 10)
        #expect(code == RealtimeCloseCode.unauthorized)
        await server.shutdown()
    }
}

extension JSONDecoder {
    /// The decoder the SDK uses for server JSON (ISO 8601 dates with milliseconds).
    static var wire: JSONDecoder { WireCoding.decoder() }
}

/// The command budgets, with time passed in.
struct TokenBucketTests {
    @Test func aBurstIsAllowedThenTheRateAndTheWaitIsReported() {
        var bucket = TokenBucket(rate: 5, burst: 10)
        let start = ContinuousClock.now
        let taken = (0..<12).map { _ in bucket.take(now: start) }
        #expect(taken.prefix(10).allSatisfy { $0 == nil })
        #expect(taken.suffix(2).allSatisfy { $0 == 1 }, "one token comes back within a second at 5/s")
        #expect(bucket.take(now: start + .milliseconds(199)) != nil)
        #expect(bucket.take(now: start + .milliseconds(400)) == nil, "two tokens refilled after 400 ms at 5/s; one used")
    }

    @Test func everyDeviceOfAUserSharesTheUsersBudget() {
        let buckets = UserBuckets(rate: 1, burst: 3)
        let now = ContinuousClock.now
        #expect((0..<3).map { _ in buckets.take(user: 7, now: now) } == [nil, nil, nil])
        #expect(buckets.take(user: 7, now: now) == 1)
        #expect(buckets.take(user: 8, now: now) == nil, "another user has their own budget")
    }
}
