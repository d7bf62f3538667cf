import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyStoreSQLite
import ParleyStorePostgres
import ParleyTesting
import ParleyWire
import Testing
import ParleySync

/// The one write path (docs/decisions/0013-one-write-path.md): what a write appends is what
/// it publishes and what its hooks see, in its own transaction.
struct WritePathTests {
    /// Records each hook call's events and writes one outbox row per event, as the push and
    /// webhook outboxes will; refuses events of `refusing` to show a hook can veto a write.
    final class OutboxProbe: TransactionHook, @unchecked Sendable {
        private let lock = NSLock()
        private var calls: [[AppendedEvent]] = []
        let refusing: ConversationEvent.Kind?

        init(refusing: ConversationEvent.Kind? = nil) { self.refusing = refusing }

        var batches: [[AppendedEvent]] { lock.withLock { calls } }

        func didAppend(_ events: [AppendedEvent], in db: any Database) throws {
            if let refusing, events.contains(where: { $0.record.type == refusing }) {
                throw StoreError.statement(message: "the outbox refused \(refusing.rawValue)", constraint: false)
            }
            for event in events {
                try db.execute("INSERT INTO outbox_probe (position, type) VALUES (\(event.record.position), \(event.record.type.rawValue))")
            }
            lock.withLock { calls.append(events) }
        }
    }

    /// A bus that keeps every batch.
    final class RecordingBus: Bus, @unchecked Sendable {
        private let lock = NSLock()
        private var batches: [[Publication]] = []
        var published: [[Int64]] {
            lock.withLock {
                batches.map { $0.compactMap { if case .event(let position, _, _, _, _, _) = $0 { position } else { nil } } }
            }
        }
        func publish(_ publications: [Publication]) { lock.withLock { batches.append(publications) } }
        func subscribe(_ receiver: @escaping @Sendable ([Publication]) -> Void) {}
    }

    private func harness(_ probe: OutboxProbe, bus: RecordingBus = RecordingBus()) async throws -> ChatHarness {
        let harness = try await ChatHarness.make(bus: bus, hooks: [probe])
        try await harness.store.write { db in try db.execute("CREATE TABLE outbox_probe (position INTEGER PRIMARY KEY, type TEXT NOT NULL)") }
        return harness
    }

    private func outbox(_ harness: ChatHarness) async throws -> [Int64] {
        try await harness.store.read { db in try db.fetchAll("SELECT position FROM outbox_probe ORDER BY position").map { try $0.get("position") } }
    }

    private func log(_ harness: ChatHarness) async throws -> [Int64] {
        try await harness.store.read { db in try db.fetchAll("SELECT position FROM event ORDER BY position").map { try $0.get("position") } }
    }

    @Test func everyEventHasExactlyOneOutboxRowAndIsPublishedByTheWriteThatAppendedIt() async throws {
        let probe = OutboxProbe()
        let bus = RecordingBus()
        let harness = try await harness(probe, bus: bus)
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        // Many writes at once, so the store commits several in one transaction (group commit):
        // each must still hand over its own events only.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<60 {
                group.addTask {
                    let sender = index.isMultiple(of: 2) ? alice : bob
                    let message = try await harness.chat.send(sender, to: room.id, SendMessageRequest(clientID: "m\(index)", content: .text("\(index)"))).0
                    if index.isMultiple(of: 3) {
                        _ = try await harness.chat.edit(sender, conversation: room.id, message: message.id, EditMessageRequest(content: .text("edited")))
                    }
                    _ = try await harness.chat.updateReceipt(index.isMultiple(of: 2) ? bob : alice, conversation: room.id,
                                                             ReceiptUpdate(readSeq: message.seq))
                }
            }
            try await group.waitForAll()
        }
        let log = try await log(harness)
        #expect(try await outbox(harness) == log, "one outbox row per event, written with it")
        #expect(bus.published.flatMap { $0 } == log, "each event published once, in position order")
        let byWrite = probe.batches.map { $0.map(\.record.position) }
        #expect(byWrite == bus.published.filter { !$0.isEmpty }, "the hook and the bus see the same events per write")
        // A send hands over one event; an edit one; the group's creation three.
        #expect(byWrite.first?.count == 3)
        #expect(byWrite.dropFirst().allSatisfy { $0.count == 1 })
        // The edits' events carry the message as the edit left it.
        let edits = probe.batches.joined().filter { $0.record.type == .messageEdited }
        #expect(edits.count == 20 && edits.allSatisfy { $0.record.message?.contentJSON?.contains("edited") == true })
        // Seqs of the room: 1… with no gap (creation 3, messages 60, edits 20).
        let seqs = try await harness.chat.events(alice, conversation: room.id, afterSeq: 0, limit: 200).records.compactMap(\.seq)
        #expect(seqs == Array(1...83))
    }

    @Test func aHookThatFailsRollsTheWholeWriteBackAndNothingIsPublished() async throws {
        let probe = OutboxProbe(refusing: .messageEdited)
        let bus = RecordingBus()
        let harness = try await harness(probe, bus: bus)
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, title: "notes"))
        let message = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "a", content: .text("before"))).0
        let logBefore = try await log(harness)
        let publishedBefore = bus.published.count
        await #expect(throws: ChatError.internalError) {
            _ = try await harness.chat.edit(alice, conversation: room.id, message: message.id, EditMessageRequest(content: .text("after")))
        }
        #expect(try await log(harness) == logBefore, "no event")
        #expect(try await outbox(harness) == logBefore, "no outbox row")
        #expect(bus.published.count == publishedBefore, "nothing published")
        let stored = try await harness.chat.message(alice, conversation: room.id, message: message.id)
        #expect(stored.content == .text("before") && stored.editedAt == nil, "the edit itself rolled back")
    }

    @Test func theCommittedPositionIsTheLogsNewestAndTheEpochIsStable() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let epoch = harness.chat.epoch
        #expect(epoch.hasPrefix("e_") && epoch.count == 18)
        let (alice, _) = try await harness.register("alice")
        _ = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, title: "notes"))
        let (_, _, asOf) = try await harness.chat.memberships(alice)
        #expect(asOf.newest == ((try await log(harness)).last ?? 0))
        try await harness.chat.migrate()
        #expect(harness.chat.epoch == epoch, "migrating again keeps the history's name")
    }
}

/// Storage failures that may pass are retried; others are a 500; neither changes anything.
struct RetryTests {
    /// The real store, failing its next `failures` writes with a retryable error (as SQLite's
    /// busy timeout or a PostgreSQL serialization failure would).
    final class FlakyStore: Store, @unchecked Sendable {
        let base: any Store
        private let lock = NSLock()
        private var failures = 0
        private(set) var attempts = 0

        init(_ base: any Store) { self.base = base }

        func failNext(_ count: Int) { lock.withLock { failures = count; attempts = 0 } }
        var writeAttempts: Int { lock.withLock { attempts } }

        private func shouldFail() -> Bool {
            lock.withLock {
                attempts += 1
                guard failures > 0 else { return false }
                failures -= 1
                return true
            }
        }

        func read<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T) async throws -> T { try await base.read(body) }
        func write<T: Sendable>(_ body: @escaping @Sendable (any Database) throws -> T, afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
            if shouldFail() { throw StoreError.retryable("database is locked") }
            return try await base.write(body, afterCommit: afterCommit)
        }
        func write<T: Sendable>(shard: Int?, ridingWithin within: Duration, _ body: @escaping @Sendable (any Database) throws -> T,
                                afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
            if shouldFail() { throw StoreError.retryable("database is locked") }
            return try await base.write(shard: shard, ridingWithin: within, body, afterCommit: afterCommit)
        }
        func write<T: Sendable>(shard: Int?, declaring declaration: WriteDeclaration, _ body: @escaping @Sendable (any Database) throws -> T,
                                afterCommit: @escaping @Sendable (T) -> Void) async throws -> T {
            if shouldFail() { throw StoreError.retryable("database is locked") }
            return try await base.write(shard: shard, declaring: declaration, body, afterCommit: afterCommit)
        }
        func useLogShards(_ shards: Int) async { await base.useLogShards(shards) }
        func close() { base.close() }
    }

    @Test func aBusyStoreIsRetriedThenAnswered503WithNothingChanged() async throws {
        let flaky = LockedValue<FlakyStore?>(nil)
        let harness = try await ChatHarness.make(wrap: { store in
            let wrapped = FlakyStore(store)
            flaky.set(wrapped)
            return wrapped
        })
        defer { harness.tearDown() }
        let store = try #require(flaky.get())
        let (alice, _) = try await harness.register("alice")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, title: "notes"))

        store.failNext(Chat.storeAttempts - 1)
        let sent = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "a", content: .text("made it")))
        #expect(sent.created && store.writeAttempts == Chat.storeAttempts, "retried until it went through")

        store.failNext(Chat.storeAttempts)
        await #expect(throws: ChatError.storeUnavailable) {
            _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "b", content: .text("lost?")))
        }
        #expect(ChatError.storeUnavailable.status == 503 && ChatError.storeUnavailable.isTemporary)
        let history = try await harness.chat.history(alice, id: room.id, HistoryQuery())
        #expect(history.records.map(\.clientID) == ["a"], "the refused send stored nothing")
        // The client retries with the same id once the store is back: one copy.
        let retried = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "b", content: .text("lost?")))
        #expect(retried.created)
    }

    /// In a log of several shards a write declared for one conversation runs on that shard's
    /// writer; one that appends an event to another shard's conversation is refused whole, since
    /// it would commit outside that shard's order (decision 0026, part 4). PostgreSQL only: a
    /// SQLite log has one shard.
    @Test func aWriteDeclaredForOneShardCannotAppendToAnother() async throws {
        guard TestEngine.isPostgres else { return }
        let harness = try await ChatHarness.make { $0.logShards = 4 }
        defer { harness.tearDown() }
        let chat = harness.chat
        #expect(chat.logShards == 4)
        let (alice, _) = try await harness.register("alice")
        var rooms: [Conversation] = []
        while Set(rooms.map { chat.shard(of: $0.id) }).count < 2 {
            rooms.append(try await chat.createConversation(alice, CreateConversationRequest(kind: .group, title: "r\(rooms.count)")).0)
        }
        let here = try #require(rooms.first)
        let there = try #require(rooms.first { chat.shard(of: $0.id) != chat.shard(of: here.id) })
        let events = { try await chat.events(alice, conversation: there.id, afterSeq: 0, limit: 100).records.count }
        let before = try await events()
        let appendThere: @Sendable (Transaction) throws -> Void = { tx in
            let key = try tx.fetchValue(Int64.self, "SELECT id FROM conversation WHERE public_id = \(there.id.rawValue)") ?? 0
            try tx.append(conversation: key, kind: .conversationCreated, actor: nil, now: 0)
        }
        await #expect(throws: StoreError.self) { try await chat.write(in: here.id, appendThere) }
        #expect(try await events() == before, "nothing of the refused write was stored")
        try await chat.write(in: there.id, appendThere)
        #expect(try await events() == before + 1, "declared for its own conversation, the same write commits")
    }

    @Test func anUnknownStoredValueIsAnErrorNotRelabelled() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, title: "notes"))
        #expect(try await harness.chat.feed(alice, after: harness.chat.cursor(through: 0), limit: 10).records.count == 2)
        // What a damaged database, or one written by a binary that knows more kinds, holds.
        let shards = Int64(harness.chat.logShards)
        try await harness.store.write { db in
            if shards > 1 {
                try db.execute("""
                    INSERT INTO event (position, conversation_id, seq, type, actor_id, created_at)
                    SELECT nextval('log_counter') * \(shards) + shard, id, last_seq + 1, 'conversation.archived', created_by, created_at
                    FROM conversation WHERE public_id = \(room.id.rawValue)
                    """)
            } else {
                try db.execute("""
                    INSERT INTO event (conversation_id, seq, type, actor_id, created_at)
                    SELECT id, last_seq + 1, 'conversation.archived', created_by, created_at FROM conversation WHERE public_id = \(room.id.rawValue)
                    """)
            }
        }
        await #expect(throws: ChatError.internalError) { _ = try await harness.chat.feed(alice, after: harness.chat.cursor(through: 0), limit: 10) }
    }

    /// Ann's group with Ben, Cat and Dan.
    static func fourInAGroup(_ harness: ChatHarness) async throws -> (ann: Caller, ben: Caller, cat: Caller, dan: Caller, room: ConversationID) {
        let (ann, ben, room) = try await harness.twoInAGroup()
        let cat = try await harness.register("cat").caller
        let dan = try await harness.register("dan").caller
        _ = try await harness.chat.addMembers(ann, id: room, AddMembersRequest(usernames: ["cat", "dan"]))
        return (ann, ben, cat, dan, room)
    }

    /// On PostgreSQL a receipt that names the authors it passed waits twice (decision 0026,
    /// part 3): its access read, and one statement that moves the watermarks, reads the
    /// authors, inserts the event and its recipients; with the write's BEGIN and COMMIT, four
    /// round trips, where the authors' read was a fifth. They still hear it, and only they.
    /// (Verified to count 5 with the statements of before.)
    @Test(.enabled(if: TestEngine.isPostgres)) func aReceiptWaitsForTheDatabaseTwice() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let store = try #require(harness.store as? PostgresStore)
        let (ann, ben, cat, dan, room) = try await Self.fourInAGroup(harness)
        let hello = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "r", content: .text("hello"))).0
        // The first prepares the statements (a round trip each, once per connection).
        _ = try await harness.chat.updateReceipt(cat, conversation: room, ReceiptUpdate(readSeq: hello.seq))
        let before = store.writeRoundTrips ?? 0
        let receipt = try await harness.chat.updateReceipt(ben, conversation: room, ReceiptUpdate(readSeq: hello.seq))
        #expect((store.writeRoundTrips ?? 0) - before == 4)
        #expect(receipt.readSeq == hello.seq && receipt.deliveredSeq == hello.seq)
        for (caller, hears) in [(ann, true), (ben, true), (cat, false), (dan, false)] {
            let feed = try await harness.chat.feed(caller, after: harness.chat.cursor(through: 0), limit: 200).records
            #expect(feed.contains { $0.type == .receiptUpdated && $0.userID == ben.userID.rawValue } == hears)
        }
        let marks = try await harness.chat.receipts(ann, conversation: room, limit: nil, offset: nil).receipts
        #expect(marks.first { $0.userID == ben.userID }?.readSeq == hello.seq)
    }

    /// Receipts gathered into one write read their members' access in one statement per
    /// conversation (decision 0026, part 3), and each is still answered as alone: a member's
    /// marks move, a second device of the same member in the same write moves them further
    /// from where the first left them, and someone who may not see the conversation gets the
    /// 404 of their own read while the others land, as does a receipt for an id no
    /// conversation can have.
    @Test func receiptsGatheredInOneWriteReadTheirMembersOnceAndAreEachAnsweredAsAlone() async throws {
        let harness = try await ChatHarness.make(configure: { $0.receiptGathering = .milliseconds(400) })
        defer { harness.tearDown() }
        let (ann, ben, room) = try await harness.twoInAGroup()
        let cat = try await harness.register("cat").caller
        let eve = try await harness.register("eve").caller
        _ = try await harness.chat.addMembers(ann, id: room, AddMembersRequest(usernames: ["cat"]))
        let first = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "1", content: .text("one"))).0
        let second = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "2", content: .text("two"))).0
        var bensTablet = ben
        bensTablet.sessionKey = ben.sessionKey + 1_000
        let store = try #require(harness.store as? any GroupCommitStore)
        let before = store.commitStatistics
        let chat = harness.chat
        async let bens = chat.updateReceipt(ben, conversation: room, ReceiptUpdate(readSeq: first.seq))
        async let tablets = chat.updateReceipt(bensTablet, conversation: room, ReceiptUpdate(readSeq: second.seq))
        async let cats = chat.updateReceipt(cat, conversation: room, ReceiptUpdate(deliveredSeq: second.seq))
        let eves = Task { try await chat.updateReceipt(eve, conversation: room, ReceiptUpdate(readSeq: second.seq)) }
        let nowhere = ConversationID(rawValue: "c_" + String(repeating: "x", count: 80))
        let lost = Task { try await chat.updateReceipt(cat, conversation: nowhere, ReceiptUpdate(readSeq: 1)) }
        let answers = try await (bens, tablets, cats)
        // Receipts gather per shard of the log: the lost one's id may fall in another shard.
        let apart = harness.chat.logShards > 1 && harness.chat.shard(of: nowhere) != harness.chat.shard(of: room)
        #expect(store.commitStatistics.transactions - before.transactions == (apart ? 2 : 1), "one write took them all")
        // The calls start in no set order: the phone's mark is the one it left, or the
        // tablet's when the tablet went first.
        let phoneFirst = answers.0.readSeq == first.seq
        #expect(phoneFirst || answers.0.readSeq == second.seq, "ben's phone: the marks it left")
        #expect(answers.1.readSeq == second.seq && answers.1.deliveredSeq == second.seq, "ben's tablet moved them to its own")
        #expect(answers.2.deliveredSeq == second.seq && answers.2.readSeq < first.seq)
        await #expect(throws: ChatError.conversationNotFound) { try await eves.value }
        await #expect(throws: ChatError.conversationNotFound, "an id no conversation can have") { try await lost.value }
        let marks = try await harness.chat.receipts(ann, conversation: room, limit: nil, offset: nil).receipts
        #expect(marks.first { $0.userID == ben.userID }?.readSeq == second.seq)
        #expect(marks.first { $0.userID == cat.userID }?.deliveredSeq == second.seq)
        #expect(marks.first { $0.userID == eve.userID } == nil, "the refused receipt added nobody")
        // The author hears each move, each from where the one before left the marks.
        let feed = try await harness.chat.feed(ann, after: harness.chat.cursor(through: 0), limit: 200).records
        func moves(of user: Caller) -> [[Int64]] {
            feed.filter { $0.type == .receiptUpdated && $0.userID == user.userID.rawValue }
                .map { [$0.payload.deliveredSeq ?? 0, $0.payload.readSeq ?? 0] }
        }
        #expect(moves(of: ben) == (phoneFirst ? [[first.seq, first.seq], [second.seq, second.seq]] : [[second.seq, second.seq]]))
        #expect(moves(of: cat) == [[second.seq, answers.2.readSeq]])
    }

    /// On PostgreSQL three members' receipts in one write wait twice, not six times: once for
    /// their access reads, once for their moves (each move one statement), so with BEGIN and
    /// COMMIT four round trips where there were eight. (Verified to count 8 without
    /// ``Chat/readAccesses(_:of:)`` and the moves sent together, 6 with the reads alone.)
    @Test(.enabled(if: TestEngine.isPostgres)) func threeMembersReceiptsInOneWriteWaitTwice() async throws {
        let harness = try await ChatHarness.make(configure: { $0.receiptGathering = .milliseconds(400) })
        defer { harness.tearDown() }
        let store = try #require(harness.store as? PostgresStore)
        let (ann, ben, cat, dan, room) = try await Self.fourInAGroup(harness)
        let chat = harness.chat
        func allThree(_ seq: Int64) async throws {
            async let b = chat.updateReceipt(ben, conversation: room, ReceiptUpdate(readSeq: seq))
            async let c = chat.updateReceipt(cat, conversation: room, ReceiptUpdate(readSeq: seq))
            async let d = chat.updateReceipt(dan, conversation: room, ReceiptUpdate(readSeq: seq))
            let marks = try await [b, c, d]
            #expect(marks.allSatisfy { $0.readSeq == seq })
        }
        // The first prepares the statements (a round trip each, once per connection).
        let first = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "1", content: .text("one"))).0
        try await allThree(first.seq)
        let second = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "2", content: .text("two"))).0
        let before = store.writeRoundTrips ?? 0
        let transactions = store.commitStatistics.transactions
        try await allThree(second.seq)
        #expect(store.commitStatistics.transactions - transactions == 1)
        #expect((store.writeRoundTrips ?? 0) - before == 4)
    }

    /// On PostgreSQL the sends of one batch have their access reads answered ahead, in one wait
    /// (decision 0026, part 5), except a send after another of the same sender's: the same
    /// client id sent twice in one batch is one message, the second answered as the retry it
    /// is, without a refused insert and the batch run again.
    @Test(.enabled(if: TestEngine.isPostgres)) func sendsOfOneBatchReadAheadButASendersSecondSeesTheirFirst() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let store = try #require(harness.store as? PostgresStore)
        let (ann, ben, cat, dan, room) = try await Self.fourInAGroup(harness)
        _ = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "warm", content: .text("first")))
        let shard = harness.chat.logShards > 1 ? harness.chat.shard(of: room) : nil
        let answeredBefore = store.readsAnsweredAhead
        let rerunBefore = store.batchesRunAgain ?? 0
        let chat = harness.chat
        let plan: [(Caller, String)] = [(ben, "b"), (ann, "twice"), (cat, "c"), (ann, "twice"), (dan, "d")]
        let sends: [@Sendable () async throws -> (Message, created: Bool)] = plan.map { caller, clientID in
            { try await chat.send(caller, to: room, SendMessageRequest(clientID: clientID, content: .text("hello from \(clientID)"))) }
        }
        var answers: [(Message, created: Bool)] = []
        for send in try await store.inOneBatch(shard: shard, sends) { answers.append(try await send.value) }
        #expect(answers.map(\.created) == [true, true, true, false, true])
        #expect(answers[1].0.id == answers[3].0.id, "one message for the client id sent twice")
        #expect(store.batchesRunAgain ?? 0 == rerunBefore, "no insert was refused")
        // Ben, Ann's first, Cat and Dan: ahead; Ann's second read as it ran.
        #expect(store.readsAnsweredAhead - answeredBefore == 4)
        let history = try await harness.chat.history(ben, id: room, HistoryQuery()).page().messages
        #expect(history.filter { $0.clientID == "twice" }.count == 1)
    }

    /// Migration 0034: on PostgreSQL the one-column CHECKs of the rows a send and a receipt
    /// write are domains (no table CHECK re-parsed per statement), and each still refuses what
    /// the table CHECK refused; the CHECK across two columns stays on its table.
    @Test(.enabled(if: TestEngine.isPostgres)) func theHotRowsOneColumnChecksAreDomainsThatStillRefuse() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (ann, _, room) = try await harness.twoInAGroup()
        _ = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "d", content: .text("checked")))
        let tableChecks = try await harness.store.read { db in
            try Self.constrainedColumns(db, kind: "c", of: ["conversation", "member", "event"])
        }
        #expect(tableChecks.isDisjoint(with: Schema.checksAsDomains.map { $0.table + "." + $0.column }))
        #expect(tableChecks.contains("member.read_seq"), "read never passes delivered: still the table's")
        let refused: [SQL] = [
            "UPDATE member SET role = 'king'",
            "UPDATE member SET push_level = 'sometimes'",
            "UPDATE conversation SET kind = 'forum'",
            "UPDATE event SET seq = 0 WHERE seq IS NOT NULL",
            "UPDATE member SET read_seq = delivered_seq + 1",
        ]
        for statement in refused {
            do {
                try await harness.store.write { db in try db.execute(statement) }
                Issue.record("stored: \(statement)")
            } catch let error as StoreError {
                #expect(error.isConstraintViolation, "\(statement): \(error)")
            }
        }
        // What the domains allow is stored, and read back as the type it was.
        try await harness.store.write { db in try db.execute("UPDATE member SET role = 'admin', push_level = 'mentions'") }
        let (role, seq) = try await harness.store.read { db in
            (try db.fetchValue(String.self, "SELECT role FROM member LIMIT 1"), try db.fetchValue(Int64.self, "SELECT max(seq) FROM event"))
        }
        #expect(role == "admin" && (seq ?? 0) >= 1)
    }

    /// Runs PostgreSQL's migrations up to, not including, the one whose name starts `name`.
    private static func migrate(_ store: PostgresStore, before name: String) async throws {
        var before = Migrator()
        for migration in Schema.postgres.migrations where migration.name < name { before.register(migration.name, migration.apply) }
        try await before.migrate(store)
    }

    /// The `table.column` of every constraint of `kind` (`f` foreign key, `c` CHECK) on the
    /// tables (PostgreSQL), by its first column.
    static func constrainedColumns(_ db: any Database, kind: String, of tables: [String]) throws -> Set<String> {
        Set(try db.fetchAll("""
            SELECT c.conrelid::regclass::text || '.' || a.attname AS name FROM pg_constraint c
            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
            WHERE c.contype = \(kind) AND c.conrelid::regclass::text IN (\(list: tables))
            """).map { try $0.get("name", as: String.self) })
    }

    /// A store on a fresh, empty PostgreSQL database, not migrated, and what closes it and
    /// drops the database; nil when the tests run on SQLite.
    private static func emptyPostgresStore() throws -> (PostgresStore, @Sendable () -> Void)? {
        guard case .postgres(let conninfo) = TestEngine.current else { return nil }
        let fresh = try TestEngine.freshPostgresDatabase(conninfo)
        do {
            let store = try PostgresStore(url: fresh.conninfo)
            return (store, { store.close(); fresh.drop() })
        } catch {
            fresh.drop()
            throw error
        }
    }

    /// Migration 0032 drops four named keys; a database missing one was not made by Parley's
    /// migrations (or was changed by hand), and the migration refuses it, naming the column,
    /// with nothing changed: every other key stays and 0032 is not recorded as applied.
    @Test(.enabled(if: TestEngine.isPostgres)) func migration0032RefusesADatabaseMissingAKeyItDropsAndChangesNothing() async throws {
        guard let (store, done) = try Self.emptyPostgresStore() else { return }
        defer { done() }
        let schema = Schema.postgres
        try await Self.migrate(store, before: "0032")
        @Sendable func keys() async throws -> Set<String> {
            try await store.read { db in try Self.constrainedColumns(db, kind: "f", of: ["message", "event"]) }
        }
        let all = try await keys()
        #expect(all.isSuperset(of: Schema.sendPathKeysToParentsNeverDeleted.map { $0.table + "." + $0.column }))
        try await store.write { db in
            let name = try db.fetchValue(String.self, """
                SELECT c.conname FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                WHERE c.conrelid = 'event'::regclass AND c.contype = 'f' AND a.attname = 'actor_id'
                """) ?? ""
            try db.execute(SQL(stringLiteral: "ALTER TABLE event DROP CONSTRAINT \"\(name)\""))
        }
        do {
            try await schema.migrate(store)
            Issue.record("migration 0032 ran on a database without event.actor_id's key")
        } catch let StoreError.decoding(message) {
            #expect(message.contains("event.actor_id") && message.contains("0032"), "\(message)")
        }
        #expect(try await keys() == all.subtracting(["event.actor_id"]))
        let recorded = try await store.read { db in
            try db.fetchOne("SELECT 1 FROM parley_migration WHERE name LIKE '0032%'") != nil
        }
        #expect(!recorded)
    }

    /// Migration 0034 turns four named CHECKs into domains; a database missing one was not
    /// made by Parley's migrations, and the migration refuses it, naming the column, with
    /// nothing changed: no domain made, every other CHECK still on its table, 0034 not recorded.
    @Test(.enabled(if: TestEngine.isPostgres)) func migration0034RefusesADatabaseMissingACheckItMovesAndChangesNothing() async throws {
        guard let (store, done) = try Self.emptyPostgresStore() else { return }
        defer { done() }
        try await Self.migrate(store, before: "0034")
        @Sendable func checks() async throws -> Set<String> {
            try await store.read { db in try Self.constrainedColumns(db, kind: "c", of: ["conversation", "member", "event"]) }
        }
        let all = try await checks()
        #expect(all.isSuperset(of: Schema.checksAsDomains.map { $0.table + "." + $0.column }))
        try await store.write { db in try db.execute("ALTER TABLE member DROP CONSTRAINT member_push_level_check") }
        do {
            try await Schema.postgres.migrate(store)
            Issue.record("migration 0034 ran on a database without member.push_level's CHECK")
        } catch let StoreError.decoding(message) {
            #expect(message.contains("member.push_level") && message.contains("0034"), "\(message)")
        }
        #expect(try await checks() == all.subtracting(["member.push_level"]))
        let (domains, recorded) = try await store.read { db in
            (try db.fetchValue(Int.self, "SELECT count(*) FROM pg_type WHERE typtype = 'd' AND typname IN ('conversation_kind', 'member_role', 'member_push_level', 'event_seq')"),
             try db.fetchOne("SELECT 1 FROM parley_migration WHERE name LIKE '0034%'") != nil)
        }
        #expect(domains == 0 && !recorded)
    }

    /// The send draws its keys from the sequences read when the database opens; a database
    /// whose columns own no sequence was not made by Parley's migrations, and opening it fails
    /// saying so, rather than the send looking them up on every write.
    @Test(.enabled(if: TestEngine.isPostgres)) func aDatabaseWithoutTheSendsSequencesIsRefusedWhenOpened() async throws {
        guard let (store, done) = try Self.emptyPostgresStore() else { return }
        defer { done() }
        try await Chat(store: store).migrate()
        try await store.write { db in try db.execute("ALTER TABLE message ALTER COLUMN id DROP IDENTITY") }
        do {
            try await Chat(store: store).migrate()
            Issue.record("a database without message.id's sequence was opened")
        } catch let StoreError.decoding(message) {
            #expect(message.contains("message.id") && message.contains("restore it from a backup"), "\(message)")
        }
    }

    /// Migrations 0032 and 0033: on PostgreSQL a send checks no foreign key against its
    /// conversation or its author, nor a receipt against the accounts it names (rows never
    /// deleted), and both still check the ones against a message or an event, which retention
    /// deletes; SQLite checks them all.
    @Test func theSendChecksForeignKeysOnlyAgainstRowsThatCanBeDeleted() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let alice = try await harness.register("alice").caller
        let room = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: [], title: "keys")).0.id
        _ = try await harness.chat.send(alice, to: room, SendMessageRequest(clientID: "k", content: .text("checked")))
        let checked: Set<String> = try await harness.store.read { db in
            switch db.dialect {
            case .postgres:
                return try Self.constrainedColumns(db, kind: "f", of: ["message", "event", "message_search", "event_recipient"])
            case .sqlite:
                var names: Set<String> = []
                for table in ["message", "event", "event_recipient"] {
                    for row in try db.fetchAll(SQL(stringLiteral: "SELECT \"from\" AS name FROM pragma_foreign_key_list('\(table)')")) {
                        names.insert(table + "." + (try row.get("name", as: String.self)))
                    }
                }
                return names
            }
        }
        // The send draws its keys from sequences named once, when the database was opened.
        #expect(harness.chat.logSequences == (TestEngine.isPostgres
            ? Transaction.Sequences(message: "public.message_id_seq", event: "public.event_position_seq") : nil))
        let neverDeleted = Set((Schema.sendPathKeysToParentsNeverDeleted + Schema.receiptPathKeysToAccounts).map { $0.table + "." + $0.column })
        #expect(checked.contains("event.message_id") && checked.contains("message.thread_id") && checked.contains("event_recipient.position"))
        if TestEngine.isPostgres {
            #expect(checked.isDisjoint(with: neverDeleted))
            #expect(checked.contains("message_search.message_id"))
            // A kept check still refuses: an event about a message that does not exist (the same
            // insert about one that does is stored).
            @Sendable func insertEvent(about message: String) async throws {
                try await harness.store.write { db in
                    try db.execute(SQL(stringLiteral: """
                        INSERT INTO event (position, conversation_id, seq, type, actor_id, message_id, payload, created_at)
                        SELECT (SELECT max(position) + 4096 FROM event), conversation_id, NULL, 'reaction.added', author_id, \(message), '{}', 0
                        FROM message LIMIT 1
                        """))
                }
            }
            try await insertEvent(about: "id")
            do {
                try await insertEvent(about: "-1")
                Issue.record("an event about a message that does not exist was stored")
            } catch let StoreError.statement(message, constraint) {
                #expect(constraint && message.contains("foreign key"), "\(message)")
            }
        } else {
            #expect(checked.isSuperset(of: neverDeleted))
        }
    }
}
