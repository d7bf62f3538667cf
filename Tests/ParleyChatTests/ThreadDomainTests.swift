import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Threads (issue 19), on both engines: replies under a message, left out of the
/// conversation's history unless also sent there, counted on the root, paged on their own,
/// with a read state and unread count per thread that the conversation's never includes.
struct ThreadDomainTests {
    @Test func repliesLiveInTheirThreadCountOnTheRootAndHaveTheirOwnUnreadCount() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        var people: [Caller] = []
        for name in ["alice", "bob", "carol", "dave"] { people.append(try await harness.register(name).caller) }
        let (alice, bob, carol, dave) = (people[0], people[1], people[2], people[3])
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob", "carol", "dave"], title: "t")).0.id
        func send(_ caller: Caller, _ text: String, thread: MessageID? = nil, also: Bool? = nil) async throws -> Message {
            try await chat.send(caller, to: room, SendMessageRequest(clientID: UUID().uuidString, content: .text(text), threadID: thread,
                                                                     alsoInConversation: also)).0
        }
        let root = try await send(alice, "plan for saturday?")
        _ = try await chat.updateReceipt(alice, conversation: room, ReceiptUpdate(readSeq: root.seq))
        let before = try await chat.conversation(alice, id: room)
        harness.clock.advance(by: 1)
        let first = try await send(bob, "hike", thread: root.id)
        let second = try await send(bob, "or a museum", thread: root.id)
        harness.clock.advance(by: 1)
        let shared = try await send(carol, "@alice museum!", thread: root.id, also: true)
        #expect(first.threadID == root.id && first.alsoInConversation == nil && shared.alsoInConversation == true)

        // The conversation shows the root (with its count) and the reply also sent there.
        let page = try await chat.history(dave, id: room, HistoryQuery()).page()
        #expect(page.messages.map(\.id).suffix(2) == [root.id, shared.id])
        let shownRoot = try #require(page.messages.first { $0.id == root.id })
        #expect(shownRoot.replyCount == 3 && shownRoot.lastReplyAt == shared.sentAt)
        let after = try await chat.conversation(alice, id: room)
        #expect(after.unreadCount == 1, "only the reply also sent to the conversation counts there")
        #expect(after.lastMessage?.id == shared.id)
        // The thread pages like a conversation.
        let replies = try await chat.threads.replies(dave, conversation: room, root: root.id, before: nil, after: nil, limit: 2).page()
        #expect(replies.messages.map(\.id) == [second.id, shared.id] && replies.hasOlder && !replies.hasNewer)
        let older = try await chat.threads.replies(dave, conversation: room, root: root.id, before: second.seq, after: nil, limit: 2).page()
        #expect(older.messages.map(\.id) == [first.id])

        // Per-thread read state.
        var info = try await chat.threads.thread(alice, conversation: room, root: root.id)
        #expect(info.unreadCount == 3 && info.participating && info.root.replyCount == 3)
        #expect(try await chat.threads.thread(dave, conversation: room, root: root.id).participating == false)
        #expect(try await chat.threads.thread(carol, conversation: room, root: root.id).unreadCount == 0, "replying reads the thread up to the reply")
        info = try await chat.threads.markRead(alice, conversation: room, root: root.id, seq: second.seq)
        #expect(info.unreadCount == 1 && info.readSeq == second.seq)
        info = try await chat.threads.markRead(alice, conversation: room, root: root.id, seq: 1)
        #expect(info.readSeq == second.seq, "a thread's read mark never moves back")
        let list = try await chat.threads.list(dave, conversation: room, before: nil, limit: nil)
        #expect(list.threads.map(\.root.id) == [root.id] && !list.hasMore)

        // Every member's devices get the replies, with the root's count after each.
        let events = try await chat.feed(dave, after: chat.cursor(through: before.lastPosition), limit: 100).page().events
        #expect(events.compactMap(\.thread?.replyCount) == [1, 2, 3])
        #expect(events.allSatisfy { $0.seq != nil })

        // A deleted reply leaves the count.
        _ = try await chat.delete(bob, conversation: room, messages: [first.id])
        #expect(try await chat.message(dave, conversation: room, message: root.id).replyCount == 2)
        let deleted = try await chat.feed(dave, after: chat.cursor(through: events.last?.position ?? 0), limit: 10).page().events
        #expect(deleted.first?.type == .messageDeleted && deleted.first?.thread?.replyCount == 2)
    }

    @Test func aThreadTakesNoThreadAndNoDeletedRoot() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        _ = try await harness.register("bob")
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .direct, members: ["bob"])).0.id
        let root = try await chat.send(alice, to: room, SendMessageRequest(clientID: "r", content: .text("root"))).0
        let reply = try await chat.send(alice, to: room, SendMessageRequest(clientID: "a", content: .text("reply"), threadID: root.id)).0
        #expect(await code { _ = try await chat.send(alice, to: room, SendMessageRequest(clientID: "b", content: .text("x"), threadID: reply.id)) }
                == "invalid_request")
        #expect(await code { _ = try await chat.send(alice, to: room, SendMessageRequest(clientID: "c", content: .text("x"), alsoInConversation: true)) }
                == "invalid_request")
        #expect(await code { _ = try await chat.send(alice, to: room, SendMessageRequest(clientID: "d", content: .text("x"), threadID: MessageID(rawValue: "m_nope"))) }
                == "message_not_found")
        _ = try await chat.delete(alice, conversation: room, messages: [root.id])
        #expect(await code { _ = try await chat.send(alice, to: room, SendMessageRequest(clientID: "e", content: .text("x"), threadID: root.id)) }
                == "message_deleted")
        #expect(try await chat.history(alice, id: room, HistoryQuery()).page().messages.map(\.id).contains(reply.id) == false)
    }
}
