import Foundation
import Parley
import ParleyNetTesting
import ParleyTesting
import ParleyWire
import Testing

/// The real `parley-server` binary in a child process, so a test can kill -9 it and start it
/// again on the same port with the same data.
final class ServerProcess: @unchecked Sendable {
    /// `PARLEY_SERVER_BINARY`, else the `parley-server` built next to this test bundle (any scratch
    /// path, sanitizers included), else the default debug build.
    static let binary: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("parley-server").path
        let candidates: [String?] = [ProcessInfo.processInfo.environment["PARLEY_SERVER_BINARY"], besideTests,
                                     root.appendingPathComponent(".build/debug/parley-server").path]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) } ?? besideTests
    }()

    let data = NSTemporaryDirectory() + "parley-sdk-\(UUID().uuidString)"
    /// More options for the server (limits a test wants tight).
    var extraArguments: [String] = []
    private(set) var port: UInt16 = 0
    private(set) var appKey = ""
    private var process: Process?

    var url: String { "http://127.0.0.1:\(port)" }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["--port", "\(port)", "--threads", "2", "--data-dir", data, "--argon2-passes", "1", "--argon2-memory-mib", "1",
                             "--signups-per-hour", "1000000", "--presence-grace", "1"] + extraArguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        // The banner: "listening on http://127.0.0.1:PORT", the app key on first start, then "Health:".
        var text = ""
        let handle = output.fileHandleForReading
        while !text.contains("Health:") {
            let chunk = handle.availableData
            guard !chunk.isEmpty else { throw ParleyError.unreachable("parley-server exited: \(text)") }
            text += String(decoding: chunk, as: UTF8.self)
        }
        if port == 0, let range = text.range(of: "http://127.0.0.1:") {
            port = UInt16(text[range.upperBound...].prefix { $0.isNumber }) ?? 0
        }
        if appKey.isEmpty, let range = text.range(of: "pk_") {
            appKey = "pk_" + text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }
        }
    }

    /// kill -9.
    func kill() {
        guard let process, process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(atPath: data)
    }
}

/// Waits for the first element of `stream` that matches, or fails after `seconds`.
func first<S: AsyncSequence & Sendable>(_ stream: S, within seconds: Double = 20, where predicate: @escaping @Sendable (S.Element) -> Bool)
    async throws -> S.Element where S.Element: Sendable {
    try await withTimeout(seconds) {
        for try await element in stream where predicate(element) { return element }
        throw ParleyError.unreachable("the stream ended")
    }
}

@Suite(.serialized, .timeLimit(.minutes(2)))
struct ParleyClientTests {
    /// A fresh server with Alice and Bob registered, each on their own client.
    func aliceAndBob(serverArguments: [String] = []) async throws -> (ServerProcess, ParleyClient, ParleyClient) {
        let server = ServerProcess()
        server.extraArguments = serverArguments
        try server.start()
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        return (server, alice, bob)
    }

    /// A fresh server; `username` registered on a client that keeps its state in a file (the
    /// file's path returned, for a relaunch), `other` on one in memory.
    func savedInAFile(_ username: String, beside other: String) async throws -> (ServerProcess, String, ParleyClient, ParleyClient) {
        let server = ServerProcess()
        try server.start()
        let file = NSTemporaryDirectory() + "parley-state-\(UUID().uuidString)/state.json"
        let saved = ParleyClient(server: server.url, appKey: server.appKey, store: FileStateStore(path: file))
        try await saved.register(username: username, password: "correct horse battery")
        let another = ParleyClient(server: server.url, appKey: server.appKey)
        try await another.register(username: other, password: "correct horse battery")
        return (server, file, saved, another)
    }

    /// Connects each client and waits until it is online.
    func connectUntilOnline(_ clients: ParleyClient...) async throws {
        for client in clients {
            let states = await client.connectionStates()
            await client.connect()
            _ = try await first(states) { $0 == .online }
        }
    }

    @Test func aConversationSurvivesKill9WithTheOutboxDrainedAndIdenticalHistories() async throws {
        let (server, alice, bob) = try await aliceAndBob()
        defer { withExtendedLifetime(server) {} }  // killed when released: it lives as long as the test
        let chat = try await alice.directConversation(with: "bob")
        let bobEvents = await bob.events(in: chat.id)
        try await connectUntilOnline(alice, bob)

        var sent: [String] = []
        for index in 0..<5 {
            sent.append(try await alice.send(.text("a\(index)"), to: chat.id))
            sent.append(try await bob.send(.text("b\(index)"), to: chat.id))
        }
        for clientID in sent.prefix(10) {
            _ = try await (sent.firstIndex(of: clientID).map { $0 % 2 == 0 } == true ? alice : bob).waitUntilSent(clientID)
        }

        // The server dies mid-conversation; both keep typing while it is down.
        let aliceStates = await alice.connectionStates()
        server.kill()
        _ = try await first(aliceStates) { $0 == .offline }
        let offline = [try await alice.send(.text("while down 1"), to: chat.id), try await bob.send(.text("while down 2"), to: chat.id),
                       try await alice.send(.text("while down 3"), to: chat.id)]
        let waitingAtAlice = await alice.outbox.count, waitingAtBob = await bob.outbox.count
        #expect(waitingAtAlice == 2 && waitingAtBob == 1, "kept in the outbox while offline")
        try server.start()  // same port, same data
        for (index, clientID) in offline.enumerated() {
            _ = try await (index == 1 ? bob : alice).waitUntilSent(clientID)
        }
        let leftAtAlice = await alice.outbox.count, leftAtBob = await bob.outbox.count
        #expect(leftAtAlice == 0 && leftAtBob == 0)

        // Both sides read the same history: 13 messages, each once, in one order.
        let fromAlice = try await alice.history(of: chat.id, limit: 100).messages
        let fromBob = try await bob.history(of: chat.id, limit: 100).messages
        #expect(fromAlice.map(\.id) == fromBob.map(\.id))
        #expect(fromAlice.count == 13 && Set(fromAlice.map(\.clientID)) == Set(sent + offline))
        #expect(fromAlice.map(\.seq) == fromAlice.map(\.seq).sorted())
        // Bob's device saw each of Alice's messages live exactly once, across the crash.
        var seen: [String] = []
        let alicesIDs = Set(fromAlice.filter { $0.sender.username == "alice" }.map(\.id.rawValue))
        for try await event in bobEvents where event.type == .messageCreated {
            if let message = event.message, message.sender.username == "alice" { seen.append(message.id.rawValue) }
            if Set(seen) == alicesIDs { break }
        }
        #expect(seen.count == alicesIDs.count, "no duplicates")
        await alice.disconnect()
        await bob.disconnect()
    }

    @Test func anOutgoingMessageGoesSendingSentDeliveredRead() async throws {
        let (server, alice, bob) = try await aliceAndBob()
        defer { withExtendedLifetime(server) {} }  // killed when released: it lives as long as the test
        let chat = try await alice.directConversation(with: "bob")
        try await alice.track(chat.id)
        let updates = await alice.outgoingUpdates()
        let bobEvents = await bob.events(in: chat.id)
        try await connectUntilOnline(alice, bob)
        let clientID = try await alice.send(.text("are you there?"), to: chat.id)
        var statuses: [String] = []
        for await update in updates where update.clientID == clientID {
            switch update.status {
            case .sending: statuses.append("sending")
            case .sent: statuses.append("sent")
            case .delivered:  // Bob's client marked it delivered by itself; now he reads it
                statuses.append("delivered")
                let received = try await first(bobEvents) { $0.type == .messageCreated }
                try await bob.markRead(chat.id, upTo: try #require(received.seq))
            case .deliveredToSome: Issue.record("a direct chat has one other member: nobody is 'some'")
            case .read: statuses.append("read")
            case .failed(let error): Issue.record("failed: \(error)")
            }
            if statuses.last == "read" { break }
        }
        #expect(statuses == ["sending", "sent", "delivered", "read"])
        await alice.disconnect()
        await bob.disconnect()
    }

    /// A send the server refuses for a moment (here: past the socket's command rate) waits in
    /// the outbox and goes again by itself, after the server's Retry-After: no other send and
    /// no reconnect needed, and each message is stored once.
    @Test func sendsRefusedForAMomentGoAgainByThemselves() async throws {
        let (server, alice, bob) = try await aliceAndBob(serverArguments: ["--commands-per-second", "1"])
        defer { withExtendedLifetime(server) {} }  // killed when released: it lives as long as the test
        let chat = try await alice.directConversation(with: "bob")
        let updates = await alice.outgoingUpdates()
        try await connectUntilOnline(alice)
        var sending: Set<String> = []
        for index in 0..<6 { sending.insert(try await alice.send(.text("burst \(index)"), to: chat.id)) }
        let clientIDs = sending
        try await withTimeout(30) {
            var sent: Set<String> = []
            for await update in updates {
                if case .sent = update.status { sent.insert(update.clientID) }
                if case .failed = update.status { Issue.record("a temporary refusal failed the send") }
                if sent == clientIDs { return }
            }
        }
        #expect(await alice.outbox.isEmpty)
        let history = try await bob.history(of: chat.id, limit: 50)
        #expect(history.messages.map(\.clientID).sorted() == clientIDs.sorted(), "each once")
        await alice.disconnect()
    }

    @Test func whatHappensBetweenSigningInAndConnectingIsReplayedNotMissed() async throws {
        let (server, alice, bob) = try await aliceAndBob()
        defer { withExtendedLifetime(server) {} }  // killed when released: it lives as long as the test
        // Bob is signed in but not connected: Alice starts a conversation and writes.
        let sent = try await alice.send(.text("are you there?"), toUsernames: ["bob"])
        let events = await bob.events()
        await bob.connect()
        let received = try await first(events) {
            if case .event(let event) = $0, event.message?.id == sent.message?.id { return true }
            return false
        }
        if case .event(let event) = received { #expect(event.type == .messageCreated) }
        await bob.disconnect()
    }

    /// The client keeps a cursor (one position per shard of the server's log) and resumes from
    /// it; a state saved by an SDK before cursors (a position only) resumes from that position.
    @Test func aStateSavedBeforeCursorsResumesFromItsPositionThenKeepsACursor() async throws {
        let (server, file, bob, alice) = try await savedInAFile("bob", beside: "alice")
        defer { withExtendedLifetime(server) {} }
        _ = try await alice.directConversation(with: "bob")
        try await connectUntilOnline(bob)
        await bob.disconnect()
        let cursor = try #require(await bob.cursor)
        let position = await bob.position
        #expect(cursor.shards == 1 && cursor[0] == position, "this server's log has one shard")

        // The file as an SDK before cursors wrote it: the position, no cursor.
        var saved = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        #expect(saved["cursor"] as? [Int] == [Int(cursor[0])])
        saved.removeValue(forKey: "cursor")
        try JSONSerialization.data(withJSONObject: saved).write(to: URL(fileURLWithPath: file))

        let missed = try #require(try await alice.send(.text("while you were away"), toUsernames: ["bob"]).message?.id)
        let relaunched = ParleyClient(server: server.url, appKey: server.appKey, store: FileStateStore(path: file))
        let resumeFrom = await relaunched.cursor
        #expect(resumeFrom == cursor, "the old position is a cursor of one shard")
        let events = await relaunched.events()
        await relaunched.connect()
        let received = try await first(events) {
            switch $0 {
            case .event(let event): event.message?.id == missed
            case .resync: true
            default: false
            }
        }
        guard case .event(let event) = received else { Issue.record("resynced instead of resuming: \(received)"); return }
        let after = await relaunched.cursor
        #expect(after == LogCursor(position: event.position))
        await relaunched.disconnect()
    }

    @Test func aSendMadeOfflineSurvivesARelaunchInAPrivateFile() async throws {
        let (server, file, first, bob) = try await savedInAFile("ana", beside: "bob")
        defer { withExtendedLifetime(server) {} }
        let chat = try await first.directConversation(with: "bob")
        let clientID = try await first.send(.location(Location(latitude: 52.52, longitude: 13.405)), to: chat.id)  // never connected
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "the token is readable by its owner only")

        // The app is relaunched: a new client from the same file sends what was waiting.
        let relaunched = ParleyClient(server: server.url, appKey: server.appKey, store: FileStateStore(path: file))
        #expect(await relaunched.currentUser?.username == "ana")
        #expect(await relaunched.outbox.map(\.clientID) == [clientID])
        let sent = Task { try await relaunched.waitUntilSent(clientID) }
        await relaunched.connect()
        let message = try await withTimeout(20) { try await sent.value }
        #expect(message.content == .location(Location(latitude: 52.52, longitude: 13.405)))
        #expect(try await bob.history(of: chat.id).messages.map(\.id) == [message.id])
        await relaunched.disconnect()
    }
}
