import Foundation
import Parley
import ParleyWire
import Testing

/// The SDK's local store (issue 34, item 1): what the device keeps, read back without a
/// network; live events applied in order, deletions and expiry gone from the file itself;
/// the budgets; and a file of another version, or no database at all, rebuilt instead of
/// crashing the app.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct LocalStoreTests {
    private func directory() -> String {
        let path = NSTemporaryDirectory() + "parley-local-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func fileBytes(_ path: String) -> Data {
        var bytes = FileManager.default.contents(atPath: path) ?? Data()
        for suffix in ["-journal", "-wal"] { bytes += FileManager.default.contents(atPath: path + suffix) ?? Data() }
        return bytes
    }

    private func contains(_ data: Data, _ text: String) -> Bool { data.range(of: Data(text.utf8)) != nil }

    @Test func aColdStartWithoutANetworkShowsTheListHistoryAndTheOutboxThenCatchesUp() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let folder = directory()
        let alice = ParleyClient(server: server.url, appKey: server.appKey, store: FileStateStore(path: folder + "/state.json"),
                                 localStore: try LocalStore(path: folder + "/local.sqlite"))
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await bob.directConversation(with: "alice")
        await bob.connect()
        for n in 1...3 { _ = try await bob.waitUntilSent(try await bob.send(.text("note \(n) from bob"), to: chat.id)) }
        // Alice reads her list and the chat once, online, then follows it live.
        let list = await ConversationListModel(client: alice)
        await list.start()
        let screen = await MessagesModel(client: alice, conversation: chat.id)
        await screen.start()
        #expect(await screen.messages.map(\.seq).count == 3)
        let events = await alice.events(in: chat.id)
        await alice.connect()
        let live = try await bob.waitUntilSent(try await bob.send(.text("a fourth, live"), to: chat.id))
        _ = try await first(events) { $0.message?.id == live.id }
        // A reply only in its thread is kept for the thread, not the conversation; members with
        // their receipts as the live stream moves them.
        let members = try await alice.members(of: chat.id).members
        #expect(Set(members.map(\.user.username)) == ["alice", "bob"])
        let reply = try await bob.waitUntilSent(try await bob.send(.text("in the thread"), to: chat.id, inThread: live.id))
        _ = try await first(events) { $0.message?.id == reply.id }
        let mine = try await alice.waitUntilSent(try await alice.send(.text("read this, bob"), to: chat.id))
        _ = try await first(events) { $0.message?.id == mine.id }
        try await bob.markRead(chat.id, upTo: mine.seq)
        _ = try await first(events) { $0.type == .receiptUpdated && $0.readSeq == mine.seq }
        await alice.disconnect()
        await list.stop()
        await screen.stop()

        // A cold start with the server unreachable: the same files, nothing from the network.
        server.kill()
        let offline = ParleyClient(server: server.url, appKey: server.appKey, store: FileStateStore(path: folder + "/state.json"),
                                   localStore: try LocalStore(path: folder + "/local.sqlite"))
        #expect(await offline.cachedConversations().map(\.id) == [chat.id])
        #expect(await offline.cachedConversations().first?.lastMessage?.id == mine.id, "the list's last message came live")
        #expect(await offline.cachedHistory(of: chat.id).map(\.content) == [.text("note 1 from bob"), .text("note 2 from bob"),
                                                                           .text("note 3 from bob"), .text("a fourth, live"),
                                                                           .text("read this, bob")])
        #expect(await offline.cachedThread(live.id).map(\.id) == [reply.id])
        #expect(await offline.cachedHistory(of: chat.id).first { $0.id == live.id }?.replyCount == 1, "the root shows its reply count")
        let bobSeen = await offline.cachedMembers(of: chat.id).first { $0.user.username == "bob" }
        #expect(bobSeen?.receipt.readSeq == mine.seq, "bob's receipt as the live stream said")
                let queued = try await offline.send(.text("written on the train"), to: chat.id)
        let coldList = await ConversationListModel(client: offline)
        await coldList.start()
        #expect(await coldList.conversations.map(\.id) == [chat.id], "shown from disk")
        #expect(await coldList.lastError != nil, "the server's read failed")
        let coldScreen = await MessagesModel(client: offline, conversation: chat.id)
        await coldScreen.start()
        #expect(await coldScreen.messages.count == 5)
        #expect(await coldScreen.sending.map(\.clientID) == [queued], "the outbox shows as sending")
        #expect(await offline.searchLocally("TRAIN").isEmpty, "the outbox is not searched: it is not a message yet")
        #expect(await offline.searchLocally("fourth live").map(\.id) == [live.id])
        #expect(await offline.searchMessagesAnywhere("note 2").map(\.content) == [.text("note 2 from bob")], "offline: the device's results")
        await coldList.stop()

        // The server comes back: the outbox drains, what was missed is replayed into the store,
        // and the chat's "sending" empties as its message arrives.
        try server.start()
        let away = try await bob.waitUntilSent(try await bob.send(.text("while you were away"), to: chat.id))
        let caughtUp = await offline.events(in: chat.id)
        await offline.connect()
        let sent = try await offline.waitUntilSent(queued)
        _ = try await first(caughtUp) { $0.message?.id == away.id }
        _ = try await first(caughtUp) { $0.message?.id == sent.id }
        let kept = await offline.cachedHistory(of: chat.id).map(\.id)
        #expect(kept.contains(away.id) && kept.contains(sent.id))
        try await untilObserved("the chat's sending list to empty") { coldScreen.sending.isEmpty }
        await coldScreen.stop()
        await offline.disconnect()
    }

    @Test func deletedAndExpiredTextIsGoneFromTheFileAndAResyncOrAnotherUserEmptiesIt() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let folder = directory()
        let local = try LocalStore(path: folder + "/local.sqlite")
        let alice = ParleyClient(server: server.url, appKey: server.appKey, localStore: local)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await bob.directConversation(with: "alice")
        let events = await alice.events(in: chat.id)
        await alice.connect()
        await bob.connect()
        let secret = try await bob.waitUntilSent(try await bob.send(.text("the door code is 4711-zebra"), to: chat.id))
        _ = try await first(events) { $0.message?.id == secret.id }
        _ = try await alice.history(of: chat.id)
        #expect(contains(fileBytes(local.path), "4711-zebra"))
        // Deleted while Alice's device is offline: the resume replays the deletion into the file.
        await alice.disconnect()
        try await bob.delete([secret.id], in: chat.id)
        await alice.connect()
        _ = try await first(events) { $0.type == .messageDeleted && $0.message?.id == secret.id }
        #expect(await alice.cachedHistory(of: chat.id).first?.deletedAt != nil)
        #expect(!contains(fileBytes(local.path), "4711-zebra"), "a deleted message's text is overwritten in the file")
        #expect(local.position == (await alice.position), "the store is as far as the client")

        // Another user signs in on the device: nothing of Alice's is left.
        await alice.disconnect()
        let other = ParleyClient(server: server.url, appKey: server.appKey, localStore: local)
        let note = try await bob.waitUntilSent(try await bob.send(.text("still here for alice"), to: chat.id))
        _ = try await alice.history(of: chat.id)
        #expect(await alice.cachedHistory(of: chat.id).last?.id == note.id)
        try await other.register(username: "carol", password: "correct horse battery")
        #expect(await other.cachedConversations().isEmpty)
        #expect(await other.cachedHistory(of: chat.id).isEmpty)
        #expect(!contains(fileBytes(local.path), "still here for alice"))
    }

    @Test func aResyncEmptiesTheStoreAndTheScreensReloadFillItAgain() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let folder = directory()
        let state = FileStateStore(path: folder + "/state.json")
        let local = try LocalStore(path: folder + "/local.sqlite")
        let alice = ParleyClient(server: server.url, appKey: server.appKey, store: state, localStore: local)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await bob.directConversation(with: "alice")
        await bob.connect()
        _ = try await bob.waitUntilSent(try await bob.send(.text("before the restore"), to: chat.id))
        _ = try await alice.history(of: chat.id)
        _ = try await alice.conversations()
        #expect(await alice.cachedHistory(of: chat.id).count == 1)
        // The server's history changed under the device (a restore from a backup): it answers
        // the resume with a resync, and what the device kept may not be that history.
        var saved = try state.load()
        saved.epoch = "an-epoch-of-another-history"
        try state.save(saved)
        let relaunched = ParleyClient(server: server.url, appKey: server.appKey, store: state, localStore: local)
        let live = await relaunched.events()
        let list = await ConversationListModel(client: relaunched)
        await relaunched.connect()
        _ = try await first(live) { if case .resync = $0 { true } else { false } }
        #expect(await relaunched.cachedHistory(of: chat.id).isEmpty)
        #expect(await relaunched.cachedConversations().isEmpty)
        #expect(local.userID?.rawValue == (await relaunched.currentUser)?.id.rawValue, "still the same user's store")
        await list.start()
        #expect(await relaunched.cachedConversations().map(\.id) == [chat.id], "the list's reload filled it again")
        _ = try await relaunched.history(of: chat.id)
        #expect(await relaunched.cachedHistory(of: chat.id).map(\.content) == [.text("before the restore")])
        await list.stop()
        await relaunched.disconnect()
    }

    @Test func theBudgetsHoldAndAFileOfAnotherVersionOrNoDatabaseIsRebuilt() async throws {
        let folder = directory()
        let path = folder + "/local.sqlite"
        let local = try LocalStore(path: path, budget: LocalStore.Budget(messagesPerConversation: 5, conversations: 2))
        let me = UserID(rawValue: "u_me")
        let sender = Sender(id: me, username: "me", displayName: "Me")
        func conversation(_ n: Int) -> Conversation {
            Conversation(id: ConversationID(rawValue: "c_\(n)"), kind: .group, title: "room \(n)", customData: nil, createdAt: Date(),
                         lastSeq: 0, lastPosition: Int64(n), lastMessage: nil, memberCount: 2, role: .member, unreadCount: 0,
                         receipt: nil, peer: nil, mutedUntil: nil)
        }
        try local.save(conversations: (1...3).map(conversation))
        #expect(try local.conversations().map(\.id.rawValue) == ["c_3", "c_2"], "the two most recently active")
        let messages = (1...8).map { seq in
            Message(id: MessageID(rawValue: "m_\(seq)"), conversationID: ConversationID(rawValue: "c_3"), seq: Int64(seq), sender: sender,
                    clientID: "k\(seq)", sentAt: Date(timeIntervalSince1970: Double(seq)), content: .text("message number \(seq)"))
        }
        try local.save(messages: messages)
        #expect(try local.messages(in: ConversationID(rawValue: "c_3")).map(\.seq) == [4, 5, 6, 7, 8], "the newest five")
        // Retention reaches the device: expired messages leave it, text and all.
        let expired = ConversationEvent(position: 100, conversationID: ConversationID(rawValue: "c_3"), seq: 9, type: .messagesExpired,
                                        actorID: nil, createdAt: Date(), body: .expiry(throughSeq: 6, count: 6))
        try local.apply(expired, me: me)
        #expect(try local.messages(in: ConversationID(rawValue: "c_3")).map(\.seq) == [7, 8] && local.position == 100)
        #expect(!contains(fileBytes(path), "message number 5"))

        // The byte budget: a megabyte of text in one big conversation, the oldest messages go.
        let big = try LocalStore(path: folder + "/big.sqlite", budget: LocalStore.Budget(messagesPerConversation: 10_000, bytes: 1 << 20))
        let filler = String(repeating: "lorem ipsum dolor sit amet ", count: 80)   // about 2 KB
        for batch in 0..<8 {
            try big.save(messages: (0..<100).map { n in
                let seq = batch * 100 + n + 1
                return Message(id: MessageID(rawValue: "m_b\(seq)"), conversationID: ConversationID(rawValue: "c_big"), seq: Int64(seq), sender: sender,
                               clientID: "b\(seq)", sentAt: Date(timeIntervalSince1970: Double(seq)), content: .text("\(seq) \(filler)"))
            })
        }
        let kept = try big.messages(in: ConversationID(rawValue: "c_big"), limit: 10_000)
        #expect(kept.count < 800 && kept.last?.seq == 800, "the newest stay, the oldest went")
        let size = (try FileManager.default.attributesOfItem(atPath: folder + "/big.sqlite")[.size] as? Int) ?? 0
        #expect(size <= (1 << 20) + (256 << 10), "the file stays near its budget: \(size) bytes")

        // A store of another version: rebuilt empty, never a crash.
        try local.reset()
        try await Task.sleep(for: .zero)
        let version = Process()
        version.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        version.arguments = [path, "PRAGMA user_version = 99"]
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3") {
            try version.run()
            version.waitUntilExit()
            #expect(try LocalStore(path: path).conversations().isEmpty)
        }
        // Not a database at all.
        try Data("this is not SQLite, but a file someone left here".utf8).write(to: URL(fileURLWithPath: path))
        let rebuilt = try LocalStore(path: path)
        try rebuilt.save(conversations: [conversation(7)])
        #expect(try rebuilt.conversations().map(\.id.rawValue) == ["c_7"])
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600, "the copy of someone's messages is theirs alone")
    }
}
