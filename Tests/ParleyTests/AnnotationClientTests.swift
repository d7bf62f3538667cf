import Foundation
import Parley
import ParleyNetTesting
import ParleyWire
import Testing

/// Reactions, pins and mentions through the SDK against the real binary: the calls, and the
/// events another member's client receives live.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct AnnotationClientTests {
    @Test func aReactionAPinAndAMentionReachTheOtherMemberAsTypedEvents() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await alice.directConversation(with: "bob")
        let events = await alice.events(in: chat.id)
        let aliceID = try #require(await alice.currentUser).id
        let bobID = try #require(await bob.currentUser).id
        await alice.connect()
        let clientID = try await bob.send(.text("hey @alice, look"), to: chat.id)
        await bob.connect()
        let message = try await bob.waitUntilSent(clientID)
        #expect(message.mentions == [Mention(userID: aliceID, username: "alice")])

        let reacted = try await alice.react("🎉", to: message.id, in: chat.id)
        #expect(reacted.reactions == [ReactionCount(emoji: "🎉", count: 1)] && reacted.myReactions == ["🎉"])
        let pinned = try await bob.pin(message.id, in: chat.id)
        #expect(pinned.pinnedBy == bobID)
        var kinds: [ConversationEvent.Kind] = []
        for await event in events where event.type != .receiptUpdated {
            kinds.append(event.type)
            if event.type == .reactionAdded { #expect(event.emoji == "🎉" && event.message?.reactions?.first?.count == 1) }
            if event.type == .messagePinned { break }
        }
        #expect(kinds.suffix(3) == [.messageCreated, .reactionAdded, .messagePinned])
        #expect(try await alice.pins(in: chat.id).map(\.id) == [message.id])
        #expect(try await alice.mentions().messages.map(\.id) == [message.id])
        let page = try await bob.reactions(on: message.id, in: chat.id)
        #expect(page.reactions.map(\.user.username) == ["alice"])
        let taken = try await alice.unreact("🎉", from: message.id, in: chat.id)
        #expect(taken.reactions == nil && taken.myReactions == nil)
        _ = try await bob.unpin(message.id, in: chat.id)
        #expect(try await alice.pins(in: chat.id).isEmpty)

        // A thread under the message: queued through the outbox like any send.
        let replyID = try await alice.send(.text("in the thread"), to: chat.id, inThread: message.id)
        let reply = try await alice.waitUntilSent(replyID)
        #expect(reply.threadID == message.id)
        var root = message
        for await event in events where event.message?.id == reply.id {
            root = root.updated(by: event, me: aliceID)
            break
        }
        #expect(root.replyCount == 1 && root.lastReplyAt == reply.sentAt)
        let thread = try await bob.thread(message.id, in: chat.id)
        #expect(thread.unreadCount == 1 && thread.participating && thread.root.replyCount == 1)
        #expect(try await bob.threadHistory(message.id, in: chat.id).messages.map(\.id) == [reply.id])
        #expect(try await bob.markThreadRead(message.id, in: chat.id, upTo: reply.seq).unreadCount == 0)
        #expect(try await bob.threads(in: chat.id).threads.map(\.root.id) == [message.id])
        #expect(try await bob.history(of: chat.id).messages.contains { $0.id == reply.id } == false, "a thread-only reply")
    }
}

/// Moderation through the SDK against the real binary.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ModerationClientTests {
    @Test func reportsBansMutesSlowModeAndBlocks() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        let bobUser = try await bob.register(username: "bob", password: "correct horse battery")
        let group = try await alice.createConversation(.group, title: "team", members: ["bob"])
        let sent = try await bob.send(.text("spam spam"), toUsernames: ["alice"])
        let direct = try #require(sent.conversation)
        let message = try #require(sent.message)
        let report = try await alice.report(message.id, in: direct.id, reason: .spam)
        #expect(report.state == "open")
        try await alice.block(bobUser.id)
        #expect(try await alice.blockedUsers().map(\.id) == [bobUser.id])
        try await alice.unblock(bobUser.id)
        #expect(try await alice.setSlowMode(5, in: group.id).slowModeSeconds == 5)
        #expect(try await alice.muteMember(bobUser.id, in: group.id).mutedUntil != nil)
        #expect(try await alice.unmuteMember(bobUser.id, in: group.id).mutedUntil == nil)
        let ban = try await alice.ban(bobUser.id, from: group.id, reason: "testing")
        let bans = try await alice.bans(in: group.id)
        #expect(ban.reason == "testing" && bans.count == 1)
        try await alice.unban(bobUser.id, from: group.id)
        #expect(try await alice.bans(in: group.id).isEmpty)
        do {
            _ = try await bob.reports(in: group.id)
            Issue.record("bob is no moderator")
        } catch ParleyError.server(let refusal) {
            #expect(refusal.code == "user_not_found" || refusal.code == "conversation_not_found" || refusal.code == "forbidden")
        }
    }

    @Test func aBlockReachesEveryDeviceAndTurnsTheBlockedPersonsMessagesIntoStubs() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        let bobUser = try await bob.register(username: "bob", password: "correct horse battery")
        let carol = ParleyClient(server: server.url, appKey: server.appKey)
        _ = try await carol.register(username: "carol", password: "correct horse battery")
        let group = try await alice.createConversation(.group, title: "team", members: ["bob", "carol"])
        let live = await alice.events()
        let states = await alice.connectionStates()
        await alice.connect()
        _ = try await first(states) { $0 == .online }
        try await alice.block(bobUser.id)
        // Her device hears the new list, then bob's message as a stub.
        guard case .blocks(let heard) = try await first(live, where: { if case .blocks = $0 { true } else { false } }) else { return }
        #expect(heard == [bobUser.id])
        _ = try await bob.send(.text("can you hear me?"), to: group.id)
        await bob.connect()
        let arrived = try await first(live) { event in
            if case .event(let event) = event { return event.type == .messageCreated && event.message?.sender.id == bobUser.id }
            return false
        }
        guard case .event(let event) = arrived, let stub = event.message else { return }
        #expect(stub.hidden == .blocked && stub.content == nil)
        #expect(stub.messageKind == .custom(type: "hidden", payload: .object(["reason": .string("blocked")])))
        // Carol's view of it is whole; she was never told anything.
        #expect(try await carol.history(of: group.id).messages.last?.content == .text("can you hear me?"))
    }

    @Test func searchFiltersBySenderAndPagesWithTheCursor() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await alice.directConversation(with: "bob")
        for index in 0..<3 { _ = try await bob.send(.text("picnic \(index)"), toUsernames: ["alice"]) }
        _ = try await alice.send(.text("picnic yes"), toUsernames: ["bob"])
        let bobs = try await alice.searchMessages("picnic", in: chat.id, filters: SearchFilters(from: "bob"), limit: 2)
        #expect(bobs.messages.count == 2 && bobs.messages.allSatisfy { $0.sender.username == "bob" } && bobs.nextCursor != nil)
        let rest = try await alice.searchMessages("picnic", in: chat.id, filters: SearchFilters(from: "bob"), limit: 2, cursor: bobs.nextCursor)
        #expect(rest.messages.count == 1 && rest.nextCursor == nil)
        let newest = try await alice.searchMessages("", filters: SearchFilters(from: "alice"))
        #expect(newest.messages.map { $0.content } == [.text("picnic yes")])
    }
}
