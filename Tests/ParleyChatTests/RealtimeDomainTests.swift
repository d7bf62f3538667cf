import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyTesting
import ParleyWire
import Testing
import ParleySync
import ParleyStore

/// Who receives which event: the feed (catch-up) and the fanout (live) follow one rule.
struct RealtimeDomainTests {
    /// A device on a fanout whose frames are the bytes themselves.
    final class Probe: @unchecked Sendable {
        let deliveries = EventQueue<Fanout<[UInt8]>.Delivery>()
        let subscriber: Fanout<[UInt8]>.Subscriber
        private let lock = NSLock()
        private var received: [ConversationEvent] = []
        /// Every event taken so far, in order.
        var events: [ConversationEvent] { lock.withLock { received } }

        init(_ caller: Caller) {
            let deliveries = deliveries
            subscriber = Fanout<[UInt8]>.Subscriber(caller: caller) { deliveries.push($0) }
        }

        /// The next delivered frame, decoded.
        func next() async throws -> ServerFrame {
            switch try await deliveries.next(timeout: 10) {
            case .event(_, let frame), .ephemeral(let frame): return try WireCoding.decoder().decode(ServerFrame.self, from: Data(frame))
            case .signedOut: return .error(id: nil, ChatError.unauthenticated)
            case .dropped: return .error(id: nil, ChatError.storeUnavailable)
            }
        }

        func nextEvent() async throws -> ConversationEvent {
            while true {
                let frame = try await next()
                if let event = frame.event {
                    lock.withLock { received.append(event) }
                    return event
                }
            }
        }
    }

    @Test func aMemberSeesEventsFromTheirJoinToTheirRemovalAndPublicReceiptsStayTheirOwn() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (carol, _) = try await harness.register("carol")
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        let early = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "early", content: .text("before carol"))).0
        _ = try await harness.chat.addMembers(alice, id: room.id, AddMembersRequest(usernames: ["carol"]))
        _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "late", content: .text("with carol")))
        try await harness.chat.removeMember(alice, id: room.id, user: bob.userID)
        _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "after", content: .text("without bob")))

        func feed(_ caller: Caller) async throws -> [EventRecord] { try await harness.chat.feed(caller, after: harness.chat.cursor(through: 0), limit: 200).records }
        let types = try await feed(alice).map(\.type)
        #expect(types == [.memberAdded, .memberAdded, .conversationCreated, .messageCreated, .memberAdded, .messageCreated,
                          .memberRemoved, .messageCreated])
        // Carol: from her own member.added on; never the message from before she came.
        let carols = try await feed(carol)
        #expect(carols.first?.type == .memberAdded && carols.first?.userID == carol.userID.rawValue)
        #expect(!carols.contains { $0.message?.id == early.id.rawValue })
        #expect(carols.compactMap(\.message?.clientID) == ["late", "after"])
        // Bob: up to and including his removal, nothing after.
        let bobs = try await feed(bob)
        #expect(bobs.last?.type == .memberRemoved)
        #expect(bobs.compactMap(\.message?.clientID) == ["early", "late"])

        // In a public channel a receipt goes only to its owner's devices.
        let (channel, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .public, title: "news"))
        _ = try await harness.chat.join(bob, id: channel.id)
        let post = try await harness.chat.send(alice, to: channel.id, SendMessageRequest(clientID: "p", content: .text("hi"))).0
        _ = try await harness.chat.updateReceipt(bob, conversation: channel.id, ReceiptUpdate(readSeq: post.seq))
        #expect(try await feed(bob).contains { $0.type == .receiptUpdated && $0.conversationID == channel.id.rawValue })
        #expect(try await !feed(alice).contains { $0.type == .receiptUpdated && $0.conversationID == channel.id.rawValue })
        // A receipt that moves nothing is not an event.
        let before = try await feed(bob).count
        _ = try await harness.chat.updateReceipt(bob, conversation: channel.id, ReceiptUpdate(readSeq: post.seq))
        #expect(try await feed(bob).count == before)
    }

    @Test func theFanoutFollowsMembershipAndDeliversExactlyWhatTheFeedHolds() async throws {
        let bus = InProcessBus()
        let harness = try await ChatHarness.make(bus: bus)
        defer { harness.tearDown() }
        let fanout = Fanout<[UInt8]>(chat: harness.chat, bus: bus, presenceGrace: .seconds(60)) { $0 }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (carol, _) = try await harness.register("carol")
        let alices = Probe(alice), bobs = Probe(bob), carols = Probe(carol)
        for probe in [alices, bobs, carols] { try await fanout.attach(probe.subscriber) }
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"]))
        // The new conversation's events reach its first members live, each from their own join.
        #expect(try await [alices.nextEvent(), alices.nextEvent(), alices.nextEvent()].map(\.type) == [.memberAdded, .memberAdded, .conversationCreated])
        let bobFirst = try await bobs.nextEvent()
        #expect(bobFirst.type == .memberAdded && bobFirst.userID == bob.userID)
        #expect(try await bobs.nextEvent().type == .conversationCreated)
        _ = try await harness.chat.addMembers(alice, id: room.id, AddMembersRequest(usernames: ["carol"]))
        let added = try await carols.nextEvent()
        #expect(added.type == .memberAdded && added.userID == carol.userID)
        try await harness.chat.typing(carol, conversation: room.id, typing: true)
        var typing = try await bobs.next()
        while typing.type != .typing { typing = try await bobs.next() }
        guard case .typing(let typingFrame) = typing else { Issue.record("not typing: \(typing)"); return }
        #expect(typingFrame.userID == carol.userID && typingFrame.isTyping)

        try await harness.chat.removeMember(alice, id: room.id, user: bob.userID)
        let message = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "m", content: .text("x"))).0
        // Alice's probe saw every event of the room in position order, exactly the feed's.
        let feed = try await harness.chat.feed(alice, after: harness.chat.cursor(through: 0), limit: 200).records.map(\.position)
        while alices.events.count < feed.count { _ = try await alices.nextEvent() }
        #expect(alices.events.map(\.position) == feed)
        // Bob got his own removal, then nothing more from the room.
        var bobEvents: [ConversationEvent] = []
        while bobEvents.last?.type != .memberRemoved { bobEvents.append(try await bobs.nextEvent()) }
        let carolsMessage = try await carols.nextEvent { $0.type == .messageCreated }
        #expect(carolsMessage.message?.id == message.id)
        await #expect(throws: TimedOut.self) {
            while true {
                let delivery = try await bobs.deliveries.next(timeout: 0.3)
                if case .event = delivery { Issue.record("a removed member received an event") }
            }
        }

        // Signing out reaches the device of that session only.
        try await harness.chat.signOut(carol, everywhere: false)
        while true {
            if case .signedOut = try await carols.deliveries.next(timeout: 10) { break }
        }
        fanout.detach(carols.subscriber)
        #expect(await fanout.deviceCount == 2)
    }
}

extension RealtimeDomainTests {
    /// A device attaching while it is being added somewhere must end up subscribed there: the
    /// change lands between the attach's read of its memberships and its subscribing.
    @Test func aDeviceAddedToAConversationWhileAttachingMissesNothingAfterward() async throws {
        let (harness, fanout, alice, carol) = try await aliceAndCarolOnAFanout()
        defer { harness.tearDown() }
        let (old, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["carol"]))
        let probe = Probe(carol)
        let rooms = LockedValue<ConversationID?>(nil)
        let chat = harness.chat
        let asOf = try await fanout.attach(probe.subscriber) {
            rooms.set(try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["carol"])).0.id)
            try await chat.removeMember(carol, id: old.id, user: carol.userID)
        }
        let room = try #require(rooms.get())
        let message = try await harness.chat.send(alice, to: room, SendMessageRequest(clientID: "new", content: .text("hi"))).0
        _ = try await harness.chat.send(alice, to: old.id, SendMessageRequest(clientID: "old", content: .text("gone")))
        let received = try await probe.nextEvent { $0.message != nil }
        #expect(received.message?.id == message.id, "subscribed to the room it joined, not to the one it left")
        #expect(!asOf.includes(received.position))
    }
}

extension RealtimeDomainTests {
    /// Two devices attaching at once share what is kept for them, and each gets it all.
    @Test func twoDevicesAttachingAtOnceBothGetWhatWasPublishedMeanwhile() async throws {
        let (harness, fanout, alice, carol) = try await aliceAndCarolOnAFanout()
        defer { harness.tearDown() }
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["carol"]))
        let chat = harness.chat
        let phone = Probe(carol), laptop = Probe(carol)
        let laptopAttached = LockedValue<Task<LogCursor, any Error>?>(nil)
        _ = try await fanout.attach(phone.subscriber) {
            _ = try await chat.send(alice, to: room.id, SendMessageRequest(clientID: "one", content: .text("1"))).0
            // The laptop starts attaching while the phone still is; both see "two".
            laptopAttached.set(Task {
                try await fanout.attach(laptop.subscriber) {
                    _ = try await chat.send(alice, to: room.id, SendMessageRequest(clientID: "three", content: .text("3"))).0
                }
            })
            _ = try await chat.send(alice, to: room.id, SendMessageRequest(clientID: "two", content: .text("2"))).0
        }
        _ = try await laptopAttached.get()?.value
        #expect(try await [phone.nextEvent(), phone.nextEvent(), phone.nextEvent()].map { $0.message?.clientID } == ["one", "two", "three"])
        let laptops = try await laptop.nextEvent(where: { $0.message?.clientID == "three" })
        #expect(laptops.message?.clientID == "three", "the laptop gets what came after it began attaching")
    }

    /// A device whose attach outlasts what the fanout keeps is refused with a temporary
    /// error (it connects again), never attached with a hole.
    @Test func anAttachThatOutlastsTheKeptEventsIsRefusedNotHoled() async throws {
        let (harness, fanout, alice, carol) = try await aliceAndCarolOnAFanout(maxRecentWhileAttaching: 4)
        defer { harness.tearDown() }
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["carol"]))
        let chat = harness.chat
        let probe = Probe(carol)
        await #expect(throws: ChatError.storeUnavailable) {
            _ = try await fanout.attach(probe.subscriber) {
                for index in 0..<10 {
                    _ = try await chat.send(alice, to: room.id, SendMessageRequest(clientID: "m\(index)", content: .text("\(index)")))
                }
            }
        }
        // Connecting again works and gets what is sent from then on.
        let again = Probe(carol)
        _ = try await fanout.attach(again.subscriber)
        _ = try await chat.send(alice, to: room.id, SendMessageRequest(clientID: "after", content: .text("after")))
        #expect(try await again.nextEvent().message?.clientID == "after")
        #expect(await fanout.deviceCount == 1, "the refused device was detached")
    }

    /// A domain with a fanout on its bus, and two registered users.
    func aliceAndCarolOnAFanout(maxRecentWhileAttaching: Int = 65_536) async throws -> (ChatHarness, Fanout<[UInt8]>, Caller, Caller) {
        let bus = InProcessBus()
        let harness = try await ChatHarness.make(bus: bus)
        let fanout = Fanout<[UInt8]>(chat: harness.chat, bus: bus, presenceGrace: .seconds(60),
                                     maxRecentWhileAttaching: maxRecentWhileAttaching) { $0 }
        let (alice, _) = try await harness.register("alice")
        let (carol, _) = try await harness.register("carol")
        return (harness, fanout, alice, carol)
    }
}

extension RealtimeDomainTests.Probe {
    func nextEvent(where predicate: (ConversationEvent) -> Bool) async throws -> ConversationEvent {
        while true {
            let event = try await nextEvent()
            if predicate(event) { return event }
        }
    }
}


extension RealtimeDomainTests {
    /// Issue 14's gap after `ready`: a message published while a device attaches (after its
    /// memberships are read, before it is subscribed) must still reach it. Before attaching
    /// held what was routed meanwhile, the message was lost and no replay covered it.
    @Test func aMessagePublishedWhileADeviceAttachesReachesIt() async throws {
        let (harness, fanout, alice, carol) = try await aliceAndCarolOnAFanout()
        defer { harness.tearDown() }
        let (room, _) = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["carol"]))
        let probe = Probe(carol)
        let chat = harness.chat
        let sent = LockedValue<MessageID?>(nil)
        let asOf = try await fanout.attach(probe.subscriber) {
            sent.set(try await chat.send(alice, to: room.id, SendMessageRequest(clientID: "meanwhile", content: .text("while you attached"))).0.id)
        }
        _ = try await harness.chat.send(alice, to: room.id, SendMessageRequest(clientID: "after", content: .text("after")))
        let first = try await probe.nextEvent()
        #expect(first.message?.id == sent.get(), "the message sent while attaching comes first")
        #expect(!asOf.includes(first.position), "it is after where the attach read the memberships")
        #expect(try await probe.nextEvent().message?.clientID == "after")
    }
}

extension RealtimeDomainTests {
    /// A receipt in a group reaches its member's devices and the authors whose messages it
    /// passed, nobody else (decision 0028): live and on replay alike. In a direct chat both
    /// people hear every receipt.
    @Test func aGroupReceiptReachesOnlyItsMemberAndTheAuthorsItPassed() async throws {
        let bus = InProcessBus()
        let harness = try await ChatHarness.make(bus: bus)
        defer { harness.tearDown() }
        let fanout = Fanout<[UInt8]>(chat: harness.chat, bus: bus, presenceGrace: .seconds(60)) { $0 }
        let (ann, _) = try await harness.register("ann")
        let (ben, _) = try await harness.register("ben")
        let (cat, _) = try await harness.register("cat")
        let (dan, _) = try await harness.register("dan")
        let probes = [ann, ben, cat, dan].map(Probe.init)
        for probe in probes { try await fanout.attach(probe.subscriber) }
        let (room, _) = try await harness.chat.createConversation(ann, CreateConversationRequest(kind: .group, members: ["ben", "cat", "dan"]))
        let anns = try await harness.chat.send(ann, to: room.id, SendMessageRequest(clientID: "a", content: .text("from ann"))).0
        let bens = try await harness.chat.send(ben, to: room.id, SendMessageRequest(clientID: "b", content: .text("from ben"))).0

        // Cat reads Ann's message: Cat and Ann hear it. Then Ben's: Cat and Ben.
        _ = try await harness.chat.updateReceipt(cat, conversation: room.id, ReceiptUpdate(readSeq: anns.seq))
        _ = try await harness.chat.updateReceipt(cat, conversation: room.id, ReceiptUpdate(readSeq: bens.seq))
        // Dan has both delivered at once: Dan, Ann and Ben; then reads them: the same three.
        let dansDelivered = try await harness.chat.updateReceipt(dan, conversation: room.id, ReceiptUpdate(deliveredSeq: bens.seq))
        _ = try await harness.chat.updateReceipt(dan, conversation: room.id, ReceiptUpdate(readSeq: bens.seq))
        // Ann reads Ben's message (her own before it moved nothing for anyone else): Ann and Ben.
        _ = try await harness.chat.updateReceipt(ann, conversation: room.id, ReceiptUpdate(readSeq: bens.seq))
        let last = try await harness.chat.send(ann, to: room.id, SendMessageRequest(clientID: "end", content: .text("end"))).0

        // Each receipt as whose, readSeq and deliveredSeq, in order.
        func live(_ events: [ConversationEvent]) -> [String] {
            events.filter { $0.type == .receiptUpdated && $0.conversationID == room.id }
                .map { "\($0.userID?.rawValue ?? "?") \($0.readSeq ?? -1) \($0.deliveredSeq ?? -1)" }
        }
        func replayed(_ caller: Caller) async throws -> [String] {
            try await harness.chat.feed(caller, after: harness.chat.cursor(through: 0), limit: 200).records
                .filter { $0.type == .receiptUpdated && $0.conversationID == room.id.rawValue }
                .map { "\($0.userID ?? "?") \($0.payload.readSeq ?? -1) \($0.payload.deliveredSeq ?? -1)" }
        }
        func mark(_ who: Caller, read: Int64, delivered: Int64) -> String { "\(who.userID.rawValue) \(read) \(delivered)" }
        let catReadsAnn = mark(cat, read: anns.seq, delivered: anns.seq), catReadsBen = mark(cat, read: bens.seq, delivered: bens.seq)
        let danGets = mark(dan, read: dansDelivered.readSeq, delivered: bens.seq), danReads = mark(dan, read: bens.seq, delivered: bens.seq)
        let annReadsBen = mark(ann, read: bens.seq, delivered: bens.seq)
        let expected = [
            [catReadsAnn, danGets, danReads, annReadsBen],   // Ann
            [catReadsBen, danGets, danReads, annReadsBen],   // Ben
            [catReadsAnn, catReadsBen],                      // Cat
            [danGets, danReads],                             // Dan
        ]
        for (index, (caller, probe)) in zip([ann, ben, cat, dan], probes).enumerated() {
            #expect(try await replayed(caller) == expected[index], "member \(index)'s feed")
            _ = try await probe.nextEvent { $0.message?.id == last.id }
            #expect(live(probe.events) == expected[index], "member \(index)'s live socket")
        }

        // A direct chat: both hear every receipt, and nothing is stored beside the event.
        let (direct, _) = try await harness.chat.createConversation(ann, CreateConversationRequest(kind: .direct, members: ["ben"]))
        let hello = try await harness.chat.send(ann, to: direct.id, SendMessageRequest(clientID: "d", content: .text("hello"))).0
        _ = try await harness.chat.updateReceipt(ben, conversation: direct.id, ReceiptUpdate(readSeq: hello.seq))
        for caller in [ann, ben] {
            let feed = try await harness.chat.feed(caller, after: harness.chat.cursor(through: 0), limit: 200).records
            #expect(feed.contains { $0.type == .receiptUpdated && $0.conversationID == direct.id.rawValue && $0.userID == ben.userID.rawValue })
        }
    }
}

extension RealtimeDomainTests {
    /// A receipt that passes every other member's messages, or more authors than
    /// ``Chat/receiptAuthorsNamed``, goes to every member and stores no list.
    @Test func aReceiptPassingEveryoneOrManyAuthorsGoesToEveryMember() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        func stored(_ position: Int64) async throws -> (recipient: Int64?, listed: Int) {
            try await harness.store.read { db in
                let row = try db.fetchOne("SELECT recipient_id FROM event WHERE position = \(position)")
                let recipient: Int64? = try row?.get("recipient_id", as: Int64?.self)
                return (recipient, try db.fetchValue(Int.self, "SELECT count(*) FROM event_recipient WHERE position = \(position)") ?? -1)
            }
        }
        func receipt(_ viewer: Caller, from reader: Caller, in room: ConversationID) async throws -> EventRecord? {
            try await chat.feed(viewer, after: chat.cursor(through: 0), limit: 200).records
                .last { $0.type == .receiptUpdated && $0.conversationID == room.rawValue && $0.userID == reader.userID.rawValue }
        }
        // Three members; the reader passes both others' messages: that is everyone.
        let (ann, ben, small) = try await harness.twoInAGroup()
        let cat = try await harness.register("cat").caller
        _ = try await chat.addMembers(ann, id: small, AddMembersRequest(usernames: ["cat"]))
        _ = try await chat.send(ann, to: small, SendMessageRequest(clientID: "a", content: .text("a")))
        let last = try await chat.send(ben, to: small, SendMessageRequest(clientID: "b", content: .text("b"))).0
        _ = try await chat.updateReceipt(cat, conversation: small, ReceiptUpdate(readSeq: last.seq))
        let everyone = try #require(try await receipt(ann, from: cat, in: small))
        #expect(try await stored(everyone.position) == (nil, 0))

        // Past more authors than a receipt names: every member, a silent one too.
        let authors = Chat.receiptAuthorsNamed + 1
        var names: [String] = []
        var callers: [Caller] = []
        for index in 0..<authors {
            callers.append(try await harness.register("author\(index)").caller)
            names.append("author\(index)")
        }
        let quiet = try await harness.register("quiet").caller
        let big = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: names + ["quiet"], title: "big")).0.id
        var newest: Int64 = 0
        for (index, author) in callers.enumerated() {
            newest = try await chat.send(author, to: big, SendMessageRequest(clientID: "m\(index)", content: .text("hi"))).0.seq
        }
        _ = try await chat.updateReceipt(ann, conversation: big, ReceiptUpdate(readSeq: newest))
        let wide = try #require(try await receipt(quiet, from: ann, in: big), "a member who wrote nothing hears it too")
        #expect(try await stored(wide.position) == (nil, 0))
    }
}
