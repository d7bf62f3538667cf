import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import ParleySync
import ParleyWire
import Testing

struct ChatTests {
    @Test func concurrentSendsGetGapFreeSeqsAndRetriesNeverDuplicate() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        // 200 sends at once from two people, each sent twice (a client retrying on timeout).
        let results = try await withThrowingTaskGroup(of: Message.self) { group in
            for index in 0..<200 {
                let caller = index % 2 == 0 ? alice : bob
                let request = SendMessageRequest(clientID: "c\(index)", content: .text("n\(index)"))
                for _ in 0..<2 {
                    group.addTask { try await harness.chat.send(caller, to: room.id, request).0 }
                }
            }
            return try await group.reduce(into: [Message]()) { $0.append($1) }
        }
        let byClient = Dictionary(grouping: results, by: \.clientID)
        #expect(byClient.count == 200)
        #expect(byClient.values.allSatisfy { Set($0.map(\.id)).count == 1 }, "a retry returns the same message")
        let page = try await harness.chat.events(alice, conversation: room.id, afterSeq: 0, limit: 200)
        let more = try await harness.chat.events(alice, conversation: room.id, afterSeq: 200, limit: 200)
        let seqs = (page.records + more.records).compactMap(\.seq)
        #expect(seqs == Array(1...Int64(seqs.count)))
        #expect((page.records + more.records).filter { $0.type == .messageCreated }.count == 200)
    }

    @Test func sessionsExpireAndSignOutTakesEffectAtOnce() async throws {
        let harness = try await ChatHarness.make { $0.sessionLifetime = 3600 }
        defer { harness.tearDown() }
        let (alice, token) = try await harness.register("alice")
        #expect(try await harness.chat.authenticate(token: token, app: harness.app) == alice)
        harness.clock.advance(by: 3601)
        await #expect(throws: ChatError.unauthenticated) { try await harness.chat.authenticate(token: token, app: harness.app) }
        let again = try await harness.chat.signIn(SignInRequest(username: "ALICE", password: "correct horse battery"),
                                                  app: harness.app, address: "a")
        let fresh = try #require(again.session.token)
        let caller = try await harness.chat.authenticate(token: fresh, app: harness.app)
        try await harness.chat.signOut(caller, everywhere: false)
        await #expect(throws: ChatError.unauthenticated) { try await harness.chat.authenticate(token: fresh, app: harness.app) }
    }

    @Test func failedSignInsAreLimitedPerAccountAndTheWindowPasses() async throws {
        let harness = try await ChatHarness.make {
            $0.failedSignInsPerAccount = 3
            $0.failedSignInWindow = 60
        }
        defer { harness.tearDown() }
        _ = try await harness.register("alice")
        let wrong = SignInRequest(username: "alice", password: "not the password")
        for _ in 0..<3 {
            await #expect(throws: ChatError.wrongCredentials) { try await harness.chat.signIn(wrong, app: harness.app, address: "x") }
        }
        let right = SignInRequest(username: "alice", password: "correct horse battery")
        do {
            _ = try await harness.chat.signIn(right, app: harness.app, address: "y")
            Issue.record("the fourth attempt should be refused")
        } catch let error as ChatError {
            #expect(error.code == "rate_limited" && error.retryAfterSeconds == 60)
        }
        harness.clock.advance(by: 61)
        _ = try await harness.chat.signIn(right, app: harness.app, address: "y")
    }

    @Test func signUpsArePerAddress() async throws {
        let harness = try await ChatHarness.make { $0.signUpsPerAddressPerHour = 2 }
        defer { harness.tearDown() }
        _ = try await harness.register("one", address: "10.0.0.1")
        _ = try await harness.register("two", address: "10.0.0.1")
        await #expect(throws: ChatError.rateLimited(retryAfter: 3600)) { _ = try await harness.register("three", address: "10.0.0.1") }
        _ = try await harness.register("four", address: "10.0.0.2")
    }

    @Test func unreadCountsFollowTheReadWatermark() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .direct, members: ["bob"]))
        var last: Message?
        for index in 0..<5 {
            last = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "m\(index)", content: .text("hi"))).0
        }
        #expect(try await harness.chat.conversation(bob, id: room.id).unreadCount == 5)
        #expect(try await harness.chat.conversation(alice, id: room.id).unreadCount == 0)
        let seq = try #require(last?.seq)
        _ = try await harness.chat.updateReceipt(bob, conversation: room.id, ReceiptUpdate(readSeq: seq - 2))
        #expect(try await harness.chat.conversation(bob, id: room.id).unreadCount == 2)
        let receipt = try await harness.chat.updateReceipt(bob, conversation: room.id, ReceiptUpdate(deliveredSeq: 1))
        #expect(receipt.deliveredSeq == seq - 2 && receipt.readSeq == seq - 2, "watermarks never move back")
    }

    /// Decision 0026: receipts of one member that wait for the writer together are one write,
    /// one `receipt.updated` with the highest marks, and every call gets its answer.
    @Test func receiptsWaitingTogetherAreOneWriteWithTheHighestMarks() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        for index in 0..<10 { _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "m\(index)", content: .text("hi"))) }
        let before = try await harness.chat.feed(bob, after: harness.chat.cursor(through: 0), limit: 200).records.count
        // Hold the writer, so that every receipt below waits for it together.
        let holding = DispatchSemaphore(value: 0)
        let writing = LockedValue(false)
        let held = Task { try await harness.store.write { _ in writing.withLock { $0 = true }; holding.wait() } }
        var released = false
        defer { if !released { holding.signal() } }  // a failed wait must not leave the writer held
        try await harness.eventually("the writer holds the first write") { writing.withLock { $0 } }
        let chat = harness.chat
        // Written one by one, each would move the watermarks and leave an event of its own.
        let answers = Task {
            try await withThrowingTaskGroup(of: (Int, Receipt).self) { group in
                for index in 1...10 {
                    group.addTask {
                        let update = index % 2 == 0 ? ReceiptUpdate(readSeq: Int64(index)) : ReceiptUpdate(deliveredSeq: Int64(index))
                        return (index, try await chat.updateReceipt(bob, conversation: room.id, update))
                    }
                }
                return try await group.reduce(into: [Int: Receipt]()) { $0[$1.0] = $1.1 }
            }
        }
        try await harness.eventually("all ten receipts wait for the writer") { chat.receipts.waitingCalls(in: room.id) == 10 }
        holding.signal()
        released = true
        try await held.value
        let receipts = try await answers.value
        #expect(receipts.count == 10)
        for (index, receipt) in receipts {
            // Each answer is the write that held the call's marks: at least as high as them.
            #expect((index % 2 == 0 ? receipt.readSeq : receipt.deliveredSeq) >= Int64(index), "call \(index) got \(receipt)")
        }
        let events = try await harness.chat.feed(bob, after: harness.chat.cursor(through: 0), limit: 200).records.dropFirst(before)
        let updates = events.filter { $0.type == .receiptUpdated }
        #expect(updates.count == 1, "receipts that waited together were written together, not \(updates.count) times")
        let last = try #require(updates.last)
        #expect(last.payload.readSeq == 10 && last.payload.deliveredSeq == 10, "the highest marks won")
    }

    /// Issue 29: receipts of different members in different conversations that wait for the
    /// writer together are one write (one job, one commit), and one the write refuses (its
    /// sender is not in the group) gets its own error without failing the others.
    @Test func receiptsOfManyMembersAreOneWriteAndARefusalIsItsCallersAlone() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (carol, _) = try await harness.register("carol")
        let (dave, _) = try await harness.register("dave")
        let (first, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob", "carol"]))
        let (second, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob", "carol"]))
        for room in [first, second] {
            for index in 0..<3 { _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "\(room.id.rawValue)-\(index)", content: .text("hi"))) }
        }
        let holding = DispatchSemaphore(value: 0)
        let writing = LockedValue(false)
        let store = try #require(harness.store as? any GroupCommitStore)
        let writesBefore = store.commitStatistics.writes
        let held = Task { try await harness.store.write { _ in writing.withLock { $0 = true }; holding.wait() } }
        var released = false
        defer { if !released { holding.signal() } }
        try await harness.eventually("the writer holds the first write") { writing.withLock { $0 } }
        let chat = harness.chat
        let calls: [(Caller, Conversation, Int64)] = [(bob, first, 2), (carol, first, 3), (bob, second, 1), (carol, second, 3), (dave, first, 3)]
        let answers = Task {
            await withTaskGroup(of: (Int, Result<Receipt, ChatError>).self) { group in
                for (index, call) in calls.enumerated() {
                    group.addTask {
                        do { return (index, .success(try await chat.updateReceipt(call.0, conversation: call.1.id, ReceiptUpdate(readSeq: call.2)))) }
                        catch let error as ChatError { return (index, .failure(error)) }
                        catch { return (index, .failure(.internalError)) }
                    }
                }
                return await group.reduce(into: [Int: Result<Receipt, ChatError>]()) { $0[$1.0] = $1.1 }
            }
        }
        try await harness.eventually("every receipt waits for the writer") {
            chat.receipts.waitingCalls(in: first.id) + chat.receipts.waitingCalls(in: second.id) == calls.count
        }
        holding.signal()
        released = true
        try await held.value
        let results = await answers.value
        for (index, call) in calls.enumerated().dropLast() {
            let receipt = try results[index]?.get()
            #expect(receipt?.readSeq == call.2, "call \(index) moved its member's read mark")
        }
        // A group is not shown to those outside it: 404, as for any other call of dave's.
        #expect(results[calls.count - 1].map { if case .failure(.conversationNotFound) = $0 { true } else { false } } == true,
                "dave is not a member: \(String(describing: results[calls.count - 1]))")
        // In a log of several shards receipts gather per shard: one write for each shard's.
        let shards = Set([first.id, second.id].map { harness.chat.shard(of: $0) }).count
        #expect(store.commitStatistics.writes - writesBefore == 1 + shards, "the held write and one for every receipt (of a shard)")
        let members = try await harness.chat.members(alice, id: first.id, limit: nil, offset: nil).members
        #expect(members.first { $0.user.id == bob.userID }?.receipt.readSeq == 2)
        #expect(members.first { $0.user.id == carol.userID }?.receipt.readSeq == 3)
    }

    /// Issue 29: gathered receipts ride the next write begun for something else (a send) and
    /// commit in its transaction: the receipt costs no commit of its own and is answered with
    /// it, long before its wait would have run out.
    @Test func gatheredReceiptsCommitInTheNextSendsTransaction() async throws {
        let harness = try await ChatHarness.make(configure: { $0.receiptRiding = .seconds(60) })
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "first", content: .text("hi")))
        let store = try #require(harness.store as? any GroupCommitStore)
        let before = store.commitStatistics
        let started = ContinuousClock.now
        let chat = harness.chat
        let answered = LockedValue<Receipt?>(nil)
        let receipt = Task {
            let receipt = try await chat.updateReceipt(bob, conversation: room.id, ReceiptUpdate(readSeq: 1))
            answered.set(receipt)
        }
        var sends = 0
        while answered.get() == nil, sends < 1_000 {
            sends += 1
            _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "more-\(sends)", content: .text("and more")))
        }
        try await receipt.value
        let after = store.commitStatistics
        #expect(answered.get()?.readSeq == 1, "bob's read mark moved")
        #expect(ContinuousClock.now - started < .seconds(30), "the receipt did not wait out its minute")
        #expect(after.writes - before.writes == sends + 1)
        #expect(after.transactions - before.transactions == sends, "the receipt shared a send's transaction")
        let members = try await harness.chat.members(alice, id: room.id, limit: nil, offset: nil).members
        #expect(members.first { $0.user.id == bob.userID }?.receipt.readSeq == 1)
    }

    /// Issue 31, item 3: a full disk is answered `storage_full` (not a 500), stores nothing of
    /// what it refused, loses nothing acknowledged, shows in `storage`, and passes when space
    /// comes back. SQLite's own SQLITE_FULL, from a page limit on the writer's connection.
    @Test(.enabled(if: !TestEngine.isPostgres, "SQLite's page limit; PostgreSQL's 53100 is mapped by SQLSTATE"))
    func aFullDiskIsAnsweredStorageFullAndLosesNothing() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: []))
        let pages = try await harness.store.write { db in try db.fetchValue(Int64.self, "PRAGMA page_count") ?? 0 }
        _ = try await harness.store.write { db in try db.fetchValue(Int64.self, SQL(stringLiteral: "PRAGMA max_page_count = \(pages + 2)")) }
        let text = String(repeating: "x", count: 3_000)
        var acknowledged: [String] = []
        var refused: String?
        for index in 0..<200 {
            do {
                _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "m\(index)", content: .text(text)))
                acknowledged.append("m\(index)")
            } catch let error as ChatError {
                #expect(error == ChatError.storageFull, "a full disk says so: \(error)")
                refused = "m\(index)"
                break
            }
        }
        let refusedID = try #require(refused, "the page limit was reached")
        #expect(harness.chat.storage.current == .full)
        // Space again: the refused send goes through on its retry, and nothing is missing or doubled.
        _ = try await harness.store.write { db in try db.fetchValue(Int64.self, "PRAGMA max_page_count = 1073741823") }
        _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: refusedID, content: .text(text)))
        #expect(harness.chat.storage.current == nil, "a write committed: the problem passed")
        let stored = try await harness.chat.history(alice, id: room.id, HistoryQuery(limit: 200)).page().messages.map(\.clientID)
        #expect(stored == acknowledged + [refusedID])
    }

    /// Gathered receipts whose write fails are each answered with the failure, none left
    /// waiting: the store is closed under them.
    @Test func receiptsWhoseWriteFailsAreEachAnsweredWithTheFailure() async throws {
        let harness = try await ChatHarness.make()
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "m", content: .text("hi")))
        harness.store.close()
        let chat = harness.chat
        let answers = try await withTimeout(10) {
            await withTaskGroup(of: ChatError?.self) { group in
                for (caller, update) in [(bob, ReceiptUpdate(deliveredSeq: 1)), (bob, ReceiptUpdate(readSeq: 1)), (alice, ReceiptUpdate(readSeq: 1))] {
                    group.addTask {
                        do {
                            _ = try await chat.updateReceipt(caller, conversation: room.id, update)
                            return nil
                        } catch {
                            return error as? ChatError
                        }
                    }
                }
                return await group.reduce(into: [ChatError?]()) { $0.append($1) }
            }
        }
        #expect(answers.count == 3)
        #expect(answers.allSatisfy { $0 == ChatError.internalError }, "every receipt of the failed write is told: \(answers)")
        harness.tearDown()
    }

    @Test func aStorageFailureIsAnInternalErrorThatChangesNothing() async throws {
        let harness = try await ChatHarness.make()
        let (alice, _) = try await harness.register("alice")
        harness.store.close()
        await #expect(throws: ChatError.internalError) { try await harness.chat.me(alice) }
        harness.tearDown()
    }
}

struct RateLimiterTests {
    @Test func countsInWindowsAndForgets() {
        let limiter = RateLimiter(rule: .init(limit: 2, window: 10), capacity: 3)
        let start = Date(timeIntervalSince1970: 0)
        limiter.record("a", now: start)
        #expect(limiter.retryAfter("a", now: start) == nil)
        limiter.record("a", now: start + 1)
        #expect(limiter.retryAfter("a", now: start + 2) == 8)
        #expect(limiter.retryAfter("a", now: start + 10) == nil)
        limiter.reset("a")
        #expect(limiter.retryAfter("a", now: start + 3) == nil)
        // Bounded: more keys than capacity evict the oldest window, never grow.
        for key in ["b", "c", "d", "e"] { limiter.record(key, now: start + 4) }
        limiter.record("f", now: start + 5)
        limiter.record("f", now: start + 5)
        #expect(limiter.retryAfter("f", now: start + 5) != nil)
    }
}

struct SearchWordsTests {
    @Test(arguments: [
        ("hello world", ["hello", "world"]), ("\u{0}Ë", ["Ë"]), ("NEAR(a b)", ["NEAR", "a", "b"]),
        ("\"quoted\" OR *", ["quoted", "OR"]), ("café naïve", ["café", "naïve"]), ("日本語 テキスト", ["日本語", "テキスト"]),
        ("a\u{200B}b", ["a", "b"]), ("   ", []),
    ])
    func queriesSplitLikeTheTokenizer(_ query: String, _ words: [String]) {
        #expect(Chat.searchWords(query) == words)
    }

    /// The ASCII shortcut keeps exactly the scalars the Unicode categories keep.
    @Test func asciiScalarsAreWordsByTheirCategory() {
        for value in UInt8(0)...UInt8(127) {
            let scalar = Unicode.Scalar(value)
            let byCategory = switch scalar.properties.generalCategory {
            case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
                 .decimalNumber, .letterNumber, .otherNumber, .nonspacingMark, .spacingMark, .enclosingMark: true
            default: false
            }
            #expect(Chat.isWordScalar(scalar) == byCategory, "\(value)")
        }
    }

    /// A word folds for PostgreSQL's index as Foundation folds it, whether it takes the ASCII
    /// shortcut or not; a quote or a backslash leaves nothing to index.
    @Test func wordsFoldAsFoundationFoldsThem() {
        var generator = SystemRandomNumberGenerator()
        var words = ["Hello", "WORLD", "abc123", "Z", "a'b", "back\\slash", "", "café", "NAÏVE", "Straße", "ÅNGSTRÖM", "日本語", "ǅ"]
        for _ in 0..<2_000 {
            let count = Int.random(in: 1...12, using: &generator)
            words.append(String(decoding: (0..<count).map { _ in UInt8.random(in: 0x20...0x7E, using: &generator) }, as: UTF8.self))
        }
        for word in words {
            #expect(FullTextSearch.fold(word) == FullTextSearch.foldWithFoundation(word), "\(word)")
        }
        #expect(FullTextSearch.fold("ÉCOLE") == "ecole")
        #expect(FullTextSearch.fold("MiXeD42") == "mixed42")
        #expect(FullTextSearch.fold("it's") == nil)
    }
}

struct ValidationTests {
    @Test(arguments: ["ana", "Ana.B", "a-1_2", String(repeating: "a", count: 32)])
    func validUsernames(_ name: String) throws {
        #expect(try Validate.username(name).key == name.lowercased())
    }

    @Test(arguments: ["ab", "_ana", ".ana", "an a", "ána", "ana!", String(repeating: "a", count: 33), "ana\u{0}"])
    func invalidUsernames(_ name: String) {
        #expect(throws: ChatError.self) { try Validate.username(name) }
    }

    @Test func displayNamesAreTrimmedAndControlCharactersRefused() throws {
        #expect(try Validate.displayName("  Ana  ") == "Ana")
        #expect(throws: ChatError.self) { try Validate.displayName("A\u{7}na") }
        #expect(throws: ChatError.self) { try Validate.displayName("   ") }
    }

    @Test func deepCustomDataIsRefused() {
        var value = JSONValue.null
        for _ in 0..<20 { value = .array([value]) }
        #expect(throws: ChatError.self) { try Validate.customData(value) }
    }
}

struct HistoryJSONTests {
    /// History pages skip JSONEncoder; their bytes must be exactly what it would have written.
    @Test func theHandWrittenPageMatchesJSONEncoderByteForByte() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        _ = try await harness.chat.updateProfile(bob, UpdateProfileRequest(displayName: "Bob \"the\" Büilder 🛠"))
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        let photo = try await harness.upload(bob, kind: .photo, name: "Büro \"1\".jpg")
        let video = try await harness.upload(alice, kind: .video)
        let thumbnail = try await harness.upload(alice, kind: .photo)
        let contents: [MessageContent] = [
            .text("plain \\ \"quoted\" / slash\nnew line é 👋"), .markdown("**b**"),
            .location(Location(latitude: 52.520008, longitude: -13.404954, name: "Mitte")),
            .photo(Attachment(attachmentID: photo.id, caption: "x")),
            .video(Attachment(attachmentID: video.id, thumbnailID: thumbnail.id, durationSeconds: 0.1)),
            .custom(type: "poll", payload: .object(["n": .number(1e-7), "list": .array([.bool(true), .null, .string("ü")])])),
        ]
        var sent: [Message] = []
        for (index, content) in contents.enumerated() {
            let caller = index.isMultiple(of: 2) ? alice : bob
            let request = SendMessageRequest(clientID: "c\(index)", content: content, metadata: index == 1 ? ["k": "v\"", "a": "b"] : nil,
                                             replyTo: sent.last?.id)
            sent.append(try await harness.chat.send(caller, to: room.id, request).0)
        }
        // The answer to a send is written the same way, from the record the send stored.
        let (record, _) = try await harness.chat.sendRecord(bob, to: room.id, SendMessageRequest(
            clientID: "r", content: .custom(type: "t", payload: .object(["z": .number(0.5), "a": .string("\u{1}")])), metadata: ["m": "1"]))
        var writer = JSONWriter()
        record.writeJSON(into: &writer)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == String(decoding: try WireCoding.encoder().encode(try record.message()), as: UTF8.self))
        sent.append(try record.message())
        harness.clock.advance(by: 1.234)
        _ = try await harness.chat.edit(alice, conversation: room.id, message: sent[0].id, EditMessageRequest(content: .text("edited")))
        _ = try await harness.chat.delete(bob, conversation: room.id, messages: [sent[1].id])
        _ = try await harness.chat.updateReceipt(bob, conversation: room.id, ReceiptUpdate(readSeq: sent[2].seq))
        for query in [HistoryQuery(), HistoryQuery(limit: 3, ascending: false), HistoryQuery(before: sent[3].seq, limit: 2)] {
            let page = try await harness.chat.history(alice, id: room.id, query)
            let expected = try WireCoding.encoder().encode(try page.page())
            #expect(String(decoding: page.jsonBytes, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
        }
        let full = try await harness.chat.history(alice, id: room.id, HistoryQuery()).page()
        // Bob's own send after Alice's last message marks everything before it read for him.
        #expect(full.messages.map(\.status) == [.read, nil, .read, nil, .read, nil, nil])
        #expect(full.messages[1].content == nil && full.messages[1].deletedAt != nil)
        #expect(full.messages[0].editedAt != nil && full.messages[0].content == .text("edited"))

        // Events (the feed and the socket's frames) are written the same way.
        _ = try await harness.chat.updateConversation(alice, id: room.id, UpdateConversationRequest(
            title: "Tïtle \"q\"", customData: .object(["b": .array([.number(2.5)]), "a": .string("x")])))
        _ = try await harness.chat.updateReceipt(bob, conversation: room.id, ReceiptUpdate(deliveredSeq: 1_000, readSeq: 1_000))
        let feed = try await harness.chat.feed(alice, after: harness.chat.cursor(through: 0), limit: 200)
        #expect(Set(feed.records.map(\.type)) == [.memberAdded, .conversationCreated, .messageCreated, .messageEdited, .messageDeleted,
                                                   .receiptUpdated, .conversationUpdated])
        let expected = try WireCoding.encoder().encode(try feed.page())
        #expect(String(decoding: feed.jsonBytes, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
    }
}

struct LimitTests {
    private static let bigMetadata = Dictionary(uniqueKeysWithValues: (0...Limits.metadataEntries).map { ("k\($0)", "v") })

    /// Each request breaks exactly one limit; every one is refused with 400 naming the field.
    @Test(arguments: [
        (SendMessageRequest(clientID: "has space", content: .text("x")), "clientId"),
        (SendMessageRequest(clientID: String(repeating: "c", count: 65), content: .text("x")), "clientId"),
        (SendMessageRequest(clientID: "c", content: .text("x"), metadata: bigMetadata), "metadata"),
        (SendMessageRequest(clientID: "c", content: .text("x"), metadata: [String(repeating: "k", count: 65): "v"]), "metadata"),
        (SendMessageRequest(clientID: "c", content: .text("x"), metadata: ["k": String(repeating: "v", count: 1025)]), "metadata"),
        (SendMessageRequest(clientID: "c", content: .text(String(repeating: "é", count: 10_001))), "text"),
        (SendMessageRequest(clientID: "c", content: .markdown("")), "markdown"),
        (SendMessageRequest(clientID: "c", content: .location(Location(latitude: .nan, longitude: 0))), "latitude"),
        (SendMessageRequest(clientID: "c", content: .location(Location(latitude: 0, longitude: 0, name: "a\u{1}b"))), "name"),
        (SendMessageRequest(clientID: "c", content: .photo(Attachment(attachmentID: "a", width: 0))), "width"),
        (SendMessageRequest(clientID: "c", content: .photo(Attachment(attachmentID: "a", height: 100_001))), "height"),
        (SendMessageRequest(clientID: "c", content: .video(Attachment(attachmentID: "a", thumbnailID: "../t"))), "thumbnailId"),
        (SendMessageRequest(clientID: "c", content: .audio(Attachment(attachmentID: "a", durationSeconds: -1))), "durationSeconds"),
        (SendMessageRequest(clientID: "c", content: .file(Attachment(attachmentID: "a", name: "f", sizeBytes: -1))), "sizeBytes"),
        (SendMessageRequest(clientID: "c", content: .file(Attachment(attachmentID: "a", name: "f", caption: String(repeating: "c", count: 1001)))), "caption"),
        (SendMessageRequest(clientID: "c", content: .custom(type: String(repeating: "t", count: 65), payload: .null)), "customType"),
    ])
    func sendLimits(_ request: SendMessageRequest, _ field: String) {
        do {
            try Chat.validate(request)
            Issue.record("\(field): accepted")
        } catch let error as ChatError {
            #expect(error.status == 400 && error.message.contains(field), "\(error.message)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func conversationProfileAndDeviceLimits() throws {
        #expect(throws: ChatError.self) { try Chat.validate(CreateConversationRequest(kind: .group, title: String(repeating: "t", count: 129))) }
        #expect(throws: ChatError.self) { try Chat.validate(CreateConversationRequest(kind: .group, members: Array(repeating: "a", count: 101))) }
        #expect(throws: ChatError.self) { try Chat.validate(UpdateProfileRequest(displayName: String(repeating: "d", count: 65))) }
        #expect(try Chat.validate(CreateConversationRequest(kind: .group, title: "  Team  ")).title == "Team")
        #expect(throws: ChatError.self) { try Validate.device(String(repeating: "d", count: 65)) }
        #expect(throws: ChatError.self) { try Validate.device("  ") }
        #expect(try Validate.device(nil) == "unnamed device")
    }

    @Test func pageAndQueryLimits() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        await #expect(throws: ChatError.self) { _ = try await harness.chat.searchUsers(alice, query: "", limit: 101, offset: nil, sort: .username) }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.searchUsers(alice, query: "", limit: nil, offset: 10_001, sort: .username) }
        await #expect(throws: ChatError.self) {
            _ = try await harness.chat.searchUsers(alice, query: String(repeating: "q", count: 255), limit: nil, offset: nil, sort: .username)
        }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.listChannels(alice, query: String(repeating: "q", count: 129), limit: nil, offset: nil) }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.search(alice, query: String(repeating: "q", count: 257), conversation: nil, limit: nil) }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.feed(alice, after: harness.chat.cursor(through: 0), limit: 201) }
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group))
        await #expect(throws: ChatError.self) { _ = try await harness.chat.delete(alice, conversation: room.id, messages: Array(repeating: MessageID(rawValue: "m"), count: 101)) }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.members(alice, id: room.id, limit: nil, offset: -1) }
    }
}

struct AppTests {
    @Test func aRotatedSecretReplacesTheOldOne() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let created = try await harness.chat.createApp(name: "shop")
        let shop = try await harness.chat.app(publicKey: created.publicKey)
        let first = try #require(created.secret)
        #expect(try await harness.chat.verifySecret(first, app: shop))
        let rotated = try #require(try await harness.chat.backend.rotateSecret(app: "shop").secret)
        #expect(rotated != first)
        #expect(try await harness.chat.verifySecret(rotated, app: shop))
        #expect(try await !harness.chat.verifySecret(first, app: shop))
        await #expect(throws: ChatError.self) { _ = try await harness.chat.createApp(name: "shop") }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.createApp(name: "bad/name") }
        await #expect(throws: ChatError.unknownApp) { _ = try await harness.chat.app(publicKey: "pk_nope") }
        #expect(try await harness.chat.createDefaultAppIfNeeded() == nil, "the harness already made an app")
    }
}
