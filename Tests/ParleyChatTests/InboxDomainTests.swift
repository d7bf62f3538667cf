import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Each user's own conversation list (issue 33, item 2), on both engines: pinned conversations
/// first in the order the user chose, archived ones out of the main list until a new message
/// arrives (unless muted), conversations marked unread without the read watermark moving back
/// — and only the user's own devices hear of any of it.
struct InboxDomainTests {
    private func names(_ page: ConversationPage) -> [String] { page.conversations.compactMap(\.title) }

    private func everyPage(_ chat: Chat, _ caller: Caller, limit: Int, archived: Bool = false) async throws -> [String] {
        var titles: [String] = []
        var cursor: String?
        repeat {
            let page = try await chat.listConversations(caller, limit: limit, before: cursor, archived: archived)
            titles += names(page)
            cursor = page.nextCursor
        } while cursor != nil && titles.count < 100
        return titles
    }

    @Test func pinnedConversationsComeFirstInTheUsersOrderOnEveryPage() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ann = try await harness.register("ann").caller
        let ben = try await harness.register("ben").caller
        var rooms: [String: ConversationID] = [:]
        for title in ["one", "two", "three", "four", "five"] {
            let room = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: ["ben"], title: title)).0.id
            _ = try await chat.send(ann, to: room, SendMessageRequest(clientID: title, content: .text(title)))
            rooms[title] = room
        }
        #expect(try await everyPage(chat, ann, limit: 30) == ["five", "four", "three", "two", "one"])
        let pinned = try await chat.inbox.setState(ann, conversation: try #require(rooms["one"]), ConversationStateRequest(pinned: true))
        #expect(pinned.pinnedRank != nil && pinned.state.pinnedRank == pinned.pinnedRank)
        _ = try await chat.inbox.setState(ann, conversation: try #require(rooms["three"]), ConversationStateRequest(pinned: true))
        // The newest pin on top, then the rest by activity; pages of 2 neither skip nor repeat.
        #expect(try await everyPage(chat, ann, limit: 30) == ["three", "one", "five", "four", "two"])
        #expect(try await everyPage(chat, ann, limit: 2) == ["three", "one", "five", "four", "two"])
        #expect(try await everyPage(chat, ann, limit: 1) == ["three", "one", "five", "four", "two"])
        // Reordered by dragging: exactly these, in this order.
        let order = [try #require(rooms["two"]), try #require(rooms["one"]), try #require(rooms["three"])]
        _ = try await chat.inbox.setPinned(ann, PinnedConversations(conversationIDs: order))
        #expect(try await chat.inbox.pinned(ann).conversationIDs == order)
        #expect(try await everyPage(chat, ann, limit: 2) == ["two", "one", "three", "five", "four"])
        _ = try await chat.inbox.setPinned(ann, PinnedConversations(conversationIDs: [try #require(rooms["one"])]))
        #expect(try await everyPage(chat, ann, limit: 30) == ["one", "five", "four", "three", "two"])
        // Ben's list is his own.
        #expect(try await everyPage(chat, ben, limit: 30) == ["five", "four", "three", "two", "one"])
        // Refused, changing nothing: a repeat, a conversation the caller is not in, pinned and archived at once.
        await #expect(throws: ChatError.self) {
            try await chat.inbox.setPinned(ann, PinnedConversations(conversationIDs: [try #require(rooms["two"]), try #require(rooms["two"])]))
        }
        let carol = try await harness.register("carol").caller
        let theirs = try await chat.createConversation(carol, CreateConversationRequest(kind: .group, members: [], title: "theirs")).0.id
        await #expect(throws: ChatError.self) {
            try await chat.inbox.setPinned(ann, PinnedConversations(conversationIDs: [try #require(rooms["two"]), theirs]))
        }
        await #expect(throws: ChatError.self) {
            try await chat.inbox.setState(ann, conversation: theirs, ConversationStateRequest(pinned: true))
        }
        await #expect(throws: ChatError.self) {
            try await chat.inbox.setState(ann, conversation: try #require(rooms["two"]), ConversationStateRequest(pinned: true, archived: true))
        }
        #expect(try await chat.inbox.pinned(ann).conversationIDs == [try #require(rooms["one"])])
    }

    @Test func atMostFiftyArePinned() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ann = try await harness.register("ann").caller
        var ids: [ConversationID] = []
        for index in 0...Limits.pinnedConversations {
            ids.append(try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: [], title: "r\(index)")).0.id)
        }
        for id in ids.dropLast() { _ = try await chat.inbox.setState(ann, conversation: id, ConversationStateRequest(pinned: true)) }
        let refused = await #expect(throws: ChatError.self) {
            try await chat.inbox.setState(ann, conversation: try #require(ids.last), ConversationStateRequest(pinned: true))
        }
        #expect(refused?.code == "conflict")
        await #expect(throws: ChatError.self) { try await chat.inbox.setPinned(ann, PinnedConversations(conversationIDs: ids)) }
        #expect(try await chat.inbox.pinned(ann).conversationIDs.count == Limits.pinnedConversations)
    }

    @Test func anArchivedConversationComesBackWithANewMessageUnlessMuted() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ann = try await harness.register("ann").caller
        let ben = try await harness.register("ben").caller
        let quiet = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: ["ben"], title: "quiet")).0.id
        let loud = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: ["ben"], title: "loud")).0.id
        _ = try await chat.inbox.setState(ann, conversation: quiet, ConversationStateRequest(pinned: true))
        let archived = try await chat.inbox.setState(ann, conversation: quiet, ConversationStateRequest(archived: true))
        #expect(archived.archived == true && archived.pinnedRank == nil, "archiving unpins")
        _ = try await chat.inbox.setState(ann, conversation: loud, ConversationStateRequest(archived: true))
        _ = try await chat.notifications.mute(ann, conversation: quiet, MuteRequest(until: nil))
        #expect(try await everyPage(chat, ann, limit: 30).isEmpty)
        #expect(try await everyPage(chat, ann, limit: 30, archived: true) == ["loud", "quiet"])
        // Ben writes in both: the muted one stays archived, the other comes back.
        _ = try await chat.send(ben, to: quiet, SendMessageRequest(clientID: "q", content: .text("psst")))
        _ = try await chat.send(ben, to: loud, SendMessageRequest(clientID: "l", content: .text("hey")))
        #expect(try await everyPage(chat, ann, limit: 30) == ["loud"])
        #expect(try await everyPage(chat, ann, limit: 30, archived: true) == ["quiet"])
        #expect(try await chat.conversation(ann, id: loud).archived == nil)
        #expect(try await chat.conversation(ann, id: quiet).archived == true)
        // Pinning brings one out of the archive.
        let back = try await chat.inbox.setState(ann, conversation: quiet, ConversationStateRequest(pinned: true))
        #expect(back.archived == nil && back.pinnedRank != nil)
        #expect(try await everyPage(chat, ann, limit: 30) == ["quiet", "loud"])
        // Ben never saw any of it.
        #expect(try await everyPage(chat, ben, limit: 30) == ["loud", "quiet"])
    }

    @Test func markedUnreadKeepsTheWatermarkAndClearsWhenReadOnOrUnmarked() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let said = try await chat.send(ben, to: room, SendMessageRequest(clientID: "a", content: .text("one"))).0
        _ = try await chat.updateReceipt(ann, conversation: room, ReceiptUpdate(deliveredSeq: said.seq, readSeq: said.seq))
        let marked = try await chat.inbox.setState(ann, conversation: room, ConversationStateRequest(markedUnread: true))
        #expect(marked.markedUnread == true && marked.receipt?.readSeq == said.seq && marked.unreadCount == 0)
        // Reading the same place again leaves the mark; reading on clears it.
        _ = try await chat.updateReceipt(ann, conversation: room, ReceiptUpdate(deliveredSeq: said.seq, readSeq: said.seq))
        #expect(try await chat.conversation(ann, id: room).markedUnread == true)
        let next = try await chat.send(ben, to: room, SendMessageRequest(clientID: "b", content: .text("two"))).0
        #expect(try await chat.conversation(ann, id: room).markedUnread == true)
        _ = try await chat.updateReceipt(ann, conversation: room, ReceiptUpdate(deliveredSeq: next.seq, readSeq: next.seq))
        #expect(try await chat.conversation(ann, id: room).markedUnread == nil)
        // Marked again, and cleared by hand.
        _ = try await chat.inbox.setState(ann, conversation: room, ConversationStateRequest(markedUnread: true))
        let cleared = try await chat.inbox.setState(ann, conversation: room, ConversationStateRequest(markedUnread: false))
        #expect(cleared.markedUnread == nil && cleared.receipt?.readSeq == next.seq)
    }

    @Test func onlyTheUsersOwnDevicesHearOfEachChangeOnce() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let annBefore = try await chat.feed(ann, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        let benBefore = try await chat.feed(ben, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        _ = try await chat.inbox.setState(ann, conversation: room, ConversationStateRequest(pinned: true, markedUnread: true))
        _ = try await chat.inbox.setState(ann, conversation: room, ConversationStateRequest(pinned: true))   // nothing changes: nothing said
        _ = try await chat.inbox.setState(ann, conversation: room, ConversationStateRequest(archived: true))
        let events = try await chat.feed(ann, after: chat.cursor(through: annBefore), limit: 200).records.map { try $0.event() }
        #expect(events.map(\.type) == [.stateUpdated, .stateUpdated])
        #expect(events.map(\.state) == [ConversationState(pinnedRank: 0, archived: false, markedUnread: true),
                                        ConversationState(pinnedRank: nil, archived: true, markedUnread: true)])
        #expect(events.allSatisfy { $0.seq == nil && $0.userID == ann.userID })
        #expect(try await chat.feed(ben, after: chat.cursor(through: benBefore), limit: 200).records.isEmpty)
    }

    @Test func aDraftIsTheLatestSaveByTheDevicesClockAndGoesWithTheSendThatCarriesItsClientID() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let now = harness.clock.now
        let first = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "See you", clientID: "d1", updatedAt: now.addingTimeInterval(-10)))
        #expect(first.text == "See you")
        // A save made earlier on another device, arriving late, changes nothing.
        let late = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "Old words", clientID: "d0", updatedAt: now.addingTimeInterval(-20)))
        #expect(late == first)
        // A clock ahead of the server's counts as the server's: it cannot win forever.
        let ahead = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "See you at 8", clientID: "d1", updatedAt: now.addingTimeInterval(3600)))
        #expect(ahead.updatedAt == now)
        #expect(try await chat.conversation(ann, id: room).draft?.text == "See you at 8")
        #expect(try await chat.conversation(ben, id: room).draft == nil, "ben sees his own drafts only")
        // A thread has its own.
        let root = try await chat.send(ben, to: room, SendMessageRequest(clientID: "r", content: .text("plans?"))).0
        harness.clock.advance(by: 1)
        _ = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "in the thread", threadID: root.id, clientID: "t1", updatedAt: harness.clock.now))
        #expect(try await chat.inbox.draft(ann, conversation: room, thread: root.id).draft?.text == "in the thread")
        #expect(try await chat.inbox.draft(ann, conversation: room, thread: nil).draft?.text == "See you at 8")
        let reply = try await chat.send(ben, to: room, SendMessageRequest(clientID: "rr", content: .text("yes"), threadID: root.id)).0
        await #expect(throws: ChatError.self) {
            try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "x", threadID: reply.id, updatedAt: harness.clock.now))
        }
        // The send with the draft's client id clears it; the thread's stays.
        _ = try await chat.send(ann, to: room, SendMessageRequest(clientID: "d1", content: .text("See you at 8")))
        #expect(try await chat.conversation(ann, id: room).draft == nil)
        #expect(try await chat.inbox.draft(ann, conversation: room, thread: nil).draft == nil)
        #expect(try await chat.inbox.draft(ann, conversation: room, thread: root.id).draft != nil)
        // Cleared by hand: an older save cannot bring it back.
        harness.clock.advance(by: 1)
        _ = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "", threadID: root.id, updatedAt: harness.clock.now))
        _ = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "stale", threadID: root.id, updatedAt: harness.clock.now.addingTimeInterval(-5)))
        #expect(try await chat.inbox.draft(ann, conversation: room, thread: root.id).draft == nil)
        // Too long, or a client id past its limit: refused.
        await #expect(throws: ChatError.self) {
            try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: String(repeating: "a", count: 10_001), updatedAt: harness.clock.now))
        }
        await #expect(throws: ChatError.self) {
            try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "a", clientID: String(repeating: "c", count: 65), updatedAt: harness.clock.now))
        }
    }

    @Test func aDraftReachesOnlyItsWritersDevicesAndLeavesWithTheirAccount() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let benBefore = try await chat.feed(ben, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        let annBefore = try await chat.feed(ann, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        _ = try await chat.inbox.saveDraft(ann, conversation: room, Draft(text: "secret plan", clientID: "x", updatedAt: harness.clock.now))
        let events = try await chat.feed(ann, after: chat.cursor(through: annBefore), limit: 200).records.map { try $0.event() }
        #expect(events.map(\.type) == [.draftUpdated] && events.first?.draft?.text == "secret plan" && events.first?.seq == nil)
        #expect(try await chat.feed(ben, after: chat.cursor(through: benBefore), limit: 200).records.isEmpty)
        try await chat.deleteAccount(ann, DeleteAccountRequest(password: "correct horse battery", erase: false), address: "127.0.0.1")
        let left = try await chat.store.read { db in try db.fetchValue(Int64.self, "SELECT count(*) FROM draft") }
        #expect(left == 0)
    }
}
