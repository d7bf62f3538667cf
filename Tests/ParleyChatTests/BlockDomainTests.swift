import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Blocks hide a user everywhere (issue 32, decision 0027), on both engines: in a group the
/// blocker reads the blocked person's messages as stubs (history, threads, pins, the feed,
/// the conversation's last message, an owner's export), never finds them (search, mentions),
/// does not count them (unread), does not receive their reactions, and is not added by them;
/// everyone else sees everything, and an unblock shows it all again.
struct BlockDomainTests {
    @Test func aBlockedPersonsMessagesAreStubsForTheBlockerOnlyOnEveryReadAndComeBackOnUnblock() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let carol = try await harness.register("carol").caller
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob", "carol"], title: "t")).0.id
        func send(_ caller: Caller, _ text: String, thread: MessageID? = nil) async throws -> Message {
            try await chat.send(caller, to: room, SendMessageRequest(clientID: UUID().uuidString, content: .text(text), threadID: thread)).0
        }
        let before = try await chat.feed(alice, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        try await chat.moderation.block(alice, user: bob.userID)
        let rude = try await send(bob, "pineapple on pizza, @alice")
        let fine = try await send(carol, "pineapple is fine")
        let reply = try await send(bob, "pineapple forever", thread: fine.id)
        _ = try await chat.annotations.react(bob, conversation: room, message: fine.id, emoji: "👍")
        _ = try await chat.annotations.react(carol, conversation: room, message: rude.id, emoji: "😂")
        _ = try await chat.annotations.pin(alice, conversation: room, message: rude.id)

        // History: the stub keeps its place and sender, says nothing.
        let page = try await chat.history(alice, id: room, HistoryQuery()).page().messages
        let stub = try #require(page.first { $0.id == rude.id })
        #expect(stub.hidden == .blocked && stub.content == nil && stub.reactions == nil && stub.mentions == nil)
        #expect(stub.sender.id == bob.userID && stub.seq == rude.seq)
        #expect(page.first { $0.id == fine.id }?.hidden == nil && page.first { $0.id == fine.id }?.content != nil)
        // Carol sees everything.
        let carols = try await chat.history(carol, id: room, HistoryQuery()).page().messages
        #expect(carols.first { $0.id == rude.id }?.content == .text("pineapple on pizza, @alice") && carols.allSatisfy { $0.hidden == nil })
        // Threads and pins.
        let replies = try await chat.threads.replies(alice, conversation: room, root: fine.id, before: nil, after: nil, limit: nil).page().messages
        #expect(replies.map(\.id) == [reply.id] && replies[0].hidden == .blocked && replies[0].content == nil)
        #expect(try await chat.threads.thread(alice, conversation: room, root: fine.id).unreadCount == 0, "a blocked person's reply is not unread")
        #expect(try await chat.threads.thread(carol, conversation: room, root: fine.id).unreadCount == 1)
        let pins = try await chat.annotations.pins(alice, conversation: room).messages
        #expect(pins.map(\.id) == [rude.id] && pins[0].hidden == .blocked)
        // The feed: message events carry the stub; bob's reaction is left out, carol's is not.
        let events = try await chat.feed(alice, after: chat.cursor(through: before), limit: 200).page().events
        let created = events.compactMap { event -> Message? in
            if case .message(let message, _) = event.body, event.type == .messageCreated { return message }
            return nil
        }
        #expect(created.first { $0.id == rude.id }?.hidden == .blocked && created.first { $0.id == rude.id }?.content == nil)
        let reactors = events.compactMap { event -> UserID? in
            if case .reaction(let user, _, _) = event.body { return user }
            return nil
        }
        #expect(reactors == [carol.userID], "bob's reaction never reaches alice")
        #expect(try await chat.feed(carol, after: chat.cursor(through: before), limit: 200).page().events.filter { $0.type == .reactionAdded }.count == 2)
        // Search and mentions never find it; unread does not count it; the last message is a stub.
        #expect(try await chat.search(alice, query: "pineapple", conversation: nil, limit: nil).messages.map(\.id) == [fine.id])
        #expect(Set(try await chat.search(carol, query: "pineapple", conversation: nil, limit: nil).messages.map(\.id)) == [rude.id, fine.id, reply.id])
        #expect(try await chat.annotations.mentions(alice, before: nil, limit: nil).messages.isEmpty)
        let last = try await send(bob, "last word")
        let view = try await chat.conversation(alice, id: room)
        #expect(view.unreadCount == 1, "carol's message only")
        #expect(view.lastMessage?.id == last.id && view.lastMessage?.hidden == .blocked && view.lastMessage?.content == nil)
        #expect(try await chat.conversation(carol, id: room).lastMessage?.content == .text("last word"))

        // Unblocked: everything is back, history included.
        try await chat.moderation.unblock(alice, user: bob.userID)
        let again = try await chat.history(alice, id: room, HistoryQuery()).page().messages
        #expect(again.allSatisfy { $0.hidden == nil } && again.first { $0.id == rude.id }?.content != nil)
        #expect(try await chat.annotations.mentions(alice, before: nil, limit: nil).messages.map(\.id) == [rude.id])
        #expect(try await chat.conversation(alice, id: room).unreadCount == 3, "bob's two and carol's one (the thread reply is the thread's)")
    }

    @Test func someoneWhoBlockedYouCannotBeAddedByYouButTheAppMayAddThem() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        _ = try await harness.register("carol").caller
        try await chat.moderation.block(alice, user: bob.userID)
        #expect(await code { _ = try await chat.createConversation(bob, CreateConversationRequest(kind: .group, members: ["alice", "carol"], title: "x")) }
                == "forbidden")
        let room = try await chat.createConversation(bob, CreateConversationRequest(kind: .group, members: ["carol"], title: "y")).0.id
        #expect(await code { _ = try await chat.addMembers(bob, id: room, AddMembersRequest(usernames: ["alice"])) } == "forbidden")
        #expect(try await chat.conversation(bob, id: room).memberCount == 2, "nothing changed")
        // Alice may still add bob (she blocked him, not the other way round).
        let hers = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "z")).0.id
        #expect(try await chat.conversation(alice, id: hers).memberCount == 2)
        // After the unblock bob may add her again.
        try await chat.moderation.unblock(alice, user: bob.userID)
        #expect(try await chat.addMembers(bob, id: room, AddMembersRequest(usernames: ["alice"])).members.count == 1)
    }

    @Test func anOwnersExportHasTheBlockedPersonsMessagesAsStubs() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "t")).0.id
        _ = try await chat.send(bob, to: room, SendMessageRequest(clientID: "b1", content: .text("secret plan")))
        try await chat.moderation.block(alice, user: bob.userID)
        let lines = ExportDomainTests.Lines()
        try await chat.exports.conversation(alice, conversation: room, into: lines)
        let messages = lines.objects.filter { if case .string("message")? = $0["type"] { true } else { false } }
        guard messages.count == 1, case .object(let message)? = messages[0]["message"] else {
            Issue.record("one message line: \(messages)")
            return
        }
        #expect(message["hidden"] == .string("blocked") && message["content"] == nil && message["id"] != nil)
    }

    @Test func aLiveFrameIsStubbedOrWithheldOnlyForWhoBlocked() throws {
        func frame(_ object: JSONValue) throws -> [UInt8] { Array(try object.encoded().utf8) }
        let message: JSONValue = .object([
            "id": .string("m_1"), "seq": .number(7), "content": .object(["type": .string("text"), "text": .string("hi")]),
            "reactions": .array([]), "mentions": .array([]), "sender": .object(["id": .string("u_bob"), "username": .string("bob")])])
        let created = try frame(.object(["type": .string("event"), "event": .object([
            "type": .string("message.created"), "actorId": .string("u_bob"), "position": .number(12), "message": message])]))
        let reading = BlockedFrames(frame: created)
        #expect(reading.outcome(for: ["u_carol"]) == .asIs)
        guard case .stub(let stub) = reading.outcome(for: ["u_bob"]),
              case .object(let root)? = try? JSONValue.decode(String(decoding: stub, as: UTF8.self)),
              case .object(let event)? = root["event"], case .object(let stubbed)? = event["message"] else {
            Issue.record("no stub")
            return
        }
        #expect(stubbed["hidden"] == .string("blocked") && stubbed["content"] == nil && stubbed["reactions"] == nil && stubbed["mentions"] == nil)
        #expect(stubbed["id"] == .string("m_1") && event["position"] == .number(12) && root["type"] == .string("event"))
        // A reaction by the blocked person is withheld; one by someone else on their message is a stub.
        let reaction = try frame(.object(["type": .string("event"), "event": .object([
            "type": .string("reaction.added"), "actorId": .string("u_bob"), "message": .object(["id": .string("m_2"), "sender": .object(["id": .string("u_carol")])])])]))
        #expect(BlockedFrames(frame: reaction).outcome(for: ["u_bob"]) == .withheld)
        let onHis = try frame(.object(["type": .string("event"), "event": .object([
            "type": .string("reaction.added"), "actorId": .string("u_carol"), "message": message])]))
        if case .stub = BlockedFrames(frame: onHis).outcome(for: ["u_bob"]) {} else { Issue.record("a reaction to a blocked person's message carries the stub") }
        // So is a vote of theirs; a blocked person's poll is a stub without its question or counts.
        let vote = try frame(.object(["type": .string("event"), "event": .object([
            "type": .string("poll.voted"), "actorId": .string("u_bob"), "message": .object(["id": .string("m_3"), "sender": .object(["id": .string("u_carol")])])])]))
        #expect(BlockedFrames(frame: vote).outcome(for: ["u_bob"]) == .withheld)
        #expect(BlockedFrames(frame: vote).outcome(for: ["u_dan"]) == .asIs)
        var poll = message
        if case .object(var fields) = poll {
            fields["poll"] = .object(["voterCount": .number(1)])
            fields["content"] = .object(["type": .string("poll"), "question": .string("Lunch?")])
            poll = .object(fields)
        }
        let asked = try frame(.object(["type": .string("event"), "event": .object([
            "type": .string("poll.voted"), "actorId": .string("u_carol"), "message": poll])]))
        guard case .stub(let pollStub) = BlockedFrames(frame: asked).outcome(for: ["u_bob"]) else { Issue.record("no stub of a blocked person's poll"); return }
        #expect(!String(decoding: pollStub, as: UTF8.self).contains("voterCount") && !String(decoding: pollStub, as: UTF8.self).contains("Lunch?"))
        // Typing and presence of the blocked person are withheld; others' pass.
        let typing = Array(RealtimeFrames.typing(conversationID: "c_1", userID: "u_bob", typing: true, expiresInMs: 5000))
        #expect(BlockedFrames(frame: typing).outcome(for: ["u_bob"]) == .withheld)
        #expect(BlockedFrames(frame: typing).outcome(for: ["u_dan"]) == .asIs)
        let presence = Array(RealtimeFrames.presence(userID: "u_bob", status: .online, lastSeenAtMilliseconds: nil))
        #expect(BlockedFrames(frame: presence).outcome(for: ["u_bob"]) == .withheld)
    }

    @Test func theBusCarriesAChangedBlockList() throws {
        let message = BusCodec.Message(node: "n1", link: nil, publications: [.blocksChanged(user: 42, blocked: ["u_a", "u_b"])])
        let decoded = try BusCodec.decode(BusCodec.encode(message))
        guard case .blocksChanged(let user, let blocked)? = decoded.publications.first else {
            Issue.record("not decoded")
            return
        }
        #expect(user == 42 && blocked == ["u_a", "u_b"])
        var truncated = BusCodec.encode(message)
        truncated.removeLast(2)
        #expect(throws: BusCodec.DecodingError.self) { try BusCodec.decode(truncated) }
    }
}
