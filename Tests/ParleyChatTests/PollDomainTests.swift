import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Polls counted by the server (issue 33, item 4), on both engines: every vote replaces the
/// voter's earlier one, the counts come from the votes alone, an anonymous poll never says who
/// voted, and a closed poll takes nothing more — and every refusal changes nothing.
struct PollDomainTests {
    private func poll(_ question: String = "Lunch?", _ options: [String] = ["Pizza", "Sushi", "Salad"], multiple: Bool = false,
                      anonymous: Bool = false, closesAt: Date? = nil) -> MessageContent {
        .poll(PollContent(question: question, options: options, multipleChoice: multiple, anonymous: anonymous, closesAt: closesAt))
    }

    private func counts(_ message: Message) -> [Int] { message.poll?.options.map(\.votes) ?? [] }

    @Test func votesAreCountedByTheServerAndEachReplacesTheVotersLast() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let cat = try await harness.register("cat").caller
        _ = try await chat.addMembers(ann, id: room, AddMembersRequest(usernames: ["cat"]))
        let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: "p1", content: poll())).0
        #expect(counts(sent) == [0, 0, 0] && sent.poll?.voterCount == 0 && sent.poll?.closedAt == nil)

        let first = try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [1])
        #expect(first.changed && counts(first.0) == [0, 1, 0] && first.0.myVotes == [1])
        #expect(first.0.poll?.options[1].voterIDs == [ben.userID])
        let changed = try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [0]).0
        #expect(counts(changed) == [1, 0, 0] && changed.poll?.voterCount == 1, "a new vote replaces the old one")
        let again = try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [0])
        #expect(!again.changed, "the same vote again changes nothing")
        _ = try await chat.polls.vote(cat, conversation: room, message: sent.id, options: [0])
        let history = try await chat.history(ben, id: room, HistoryQuery(limit: 10)).page().messages
        let seen = try #require(history.first { $0.id == sent.id })
        #expect(counts(seen) == [2, 0, 0] && seen.poll?.voterCount == 2 && seen.myVotes == [0], "history shows the counts and the reader's own vote")
        #expect(try await chat.history(ann, id: room, HistoryQuery(limit: 10)).page().messages.first { $0.id == sent.id }?.myVotes == nil)

        // Refusals change nothing.
        await #expect(throws: ChatError.self) { try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [0, 1]) }
        await #expect(throws: ChatError.self) { try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [3]) }
        await #expect(throws: ChatError.self) { try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [-1]) }
        await #expect(throws: ChatError.self) { try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [1, 1]) }
        let text = try await chat.send(ann, to: room, SendMessageRequest(clientID: "t", content: .text("no poll"))).0
        await #expect(throws: ChatError.self) { try await chat.polls.vote(ben, conversation: room, message: text.id, options: [0]) }
        let outsider = try await harness.register("dan").caller
        await #expect(throws: ChatError.conversationNotFound) { try await chat.polls.vote(outsider, conversation: room, message: sent.id, options: [0]) }
        let after = try await chat.polls.vote(cat, conversation: room, message: sent.id, options: [0])
        #expect(!after.changed && counts(after.0) == [2, 0, 0])

        // Taking a vote back.
        let withdrawn = try await chat.polls.vote(cat, conversation: room, message: sent.id, options: []).0
        #expect(counts(withdrawn) == [1, 0, 0] && withdrawn.poll?.voterCount == 1 && withdrawn.myVotes == nil)

        // Several answers in a multiple-choice poll; voters count once.
        let many = try await chat.send(ann, to: room, SendMessageRequest(clientID: "p2", content: poll(multiple: true))).0
        let both = try await chat.polls.vote(ben, conversation: room, message: many.id, options: [2, 0]).0
        #expect(counts(both) == [1, 0, 1] && both.poll?.voterCount == 1 && both.myVotes == [0, 2])

        // Each change is a poll.voted event with no seq, naming the voter.
        let events = try await chat.feed(ann, after: chat.cursor(through: 0), limit: 200).records.filter { $0.type == .pollVoted }
        #expect(events.count == 5 && events.allSatisfy { $0.seq == nil })
        #expect(events.first?.actorID == ben.userID.rawValue)
    }

    @Test func anAnonymousPollNeverSaysWhoVoted() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: "p", content: poll(anonymous: true))).0
        #expect(sent.poll?.options.allSatisfy { $0.voterIDs == nil } == true)
        let voted = try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [2]).0
        #expect(counts(voted) == [0, 0, 1] && voted.myVotes == [2], "the voter's own answer says their vote")
        #expect(voted.poll?.options.allSatisfy { $0.voterIDs == nil } == true)
        for viewer in [ann, ben] {
            let events = try await chat.feed(viewer, after: chat.cursor(through: 0), limit: 200).records.filter { $0.type == .pollVoted }
            #expect(events.count == 1 && events.allSatisfy { $0.actorID == nil && $0.userID == nil }, "the event names nobody")
        }
        let asAuthor = try await chat.history(ann, id: room, HistoryQuery(limit: 10)).page().messages.first { $0.id == sent.id }
        #expect(asAuthor?.poll?.options.allSatisfy { $0.voterIDs == nil } == true && asAuthor?.myVotes == nil)
    }

    @Test func aClosedPollTakesNoMoreVotesAndOnlyItsAuthorOrAModeratorClosesIt() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let asked = try await chat.send(ben, to: room, SendMessageRequest(clientID: "p", content: poll())).0
        let cat = try await harness.register("cat").caller
        _ = try await chat.addMembers(ann, id: room, AddMembersRequest(usernames: ["cat"]))
        await #expect(throws: ChatError.self) { try await chat.polls.close(cat, conversation: room, message: asked.id) }
        _ = try await chat.polls.vote(cat, conversation: room, message: asked.id, options: [1])
        // Ann created the group (its owner): a moderator closes anyone's poll.
        let closed = try await chat.polls.close(ann, conversation: room, message: asked.id)
        #expect(closed.changed && closed.0.poll?.closedAt != nil && counts(closed.0) == [0, 1, 0])
        #expect(try await !chat.polls.close(ben, conversation: room, message: asked.id).changed, "closing a closed poll changes nothing")
        await #expect(throws: ChatError.pollClosed) { try await chat.polls.vote(cat, conversation: room, message: asked.id, options: [0]) }
        #expect(try await chat.feed(cat, after: chat.cursor(through: 0), limit: 200).records.filter { $0.type == .pollClosed }.map(\.actorID) == [ann.userID.rawValue])

        // A closing time stops the votes by itself.
        let timed = try await chat.send(ben, to: room, SendMessageRequest(clientID: "timed", content: poll(closesAt: harness.clock.now.addingTimeInterval(3600)))).0
        _ = try await chat.polls.vote(cat, conversation: room, message: timed.id, options: [0])
        harness.clock.advance(by: 3601)
        await #expect(throws: ChatError.pollClosed) { try await chat.polls.vote(cat, conversation: room, message: timed.id, options: [1]) }
        let final = try await chat.history(cat, id: room, HistoryQuery(limit: 10)).page().messages.first { $0.id == timed.id }
        #expect(final.map(counts) == [1, 0, 0] && final?.myVotes == [0])
        if case .poll(let content)? = final?.content { #expect(final?.poll?.isClosed(content, at: harness.clock.now) == true) }
    }

    @Test func aPollIsCheckedWhenSentAndCannotBeEdited() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, _, room) = try await harness.twoInAGroup()
        let refused: [MessageContent] = [
            poll("Lunch?", ["Only one"]), poll("Lunch?", (1...11).map { "option \($0)" }), poll("Lunch?", ["Pizza", "pizza "]),
            poll("   ", ["a", "b"]), poll("Lunch?", ["a", ""]), poll(String(repeating: "q", count: 301), ["a", "b"]),
            poll("Lunch?", ["a", String(repeating: "o", count: 101)]), poll("Lunch?\n", ["a", "b"]),
            poll(closesAt: harness.clock.now.addingTimeInterval(-1)), poll(closesAt: harness.clock.now.addingTimeInterval(400 * 86_400)),
        ]
        for (index, content) in refused.enumerated() {
            await #expect(throws: ChatError.self, "refused poll \(index)") {
                try await chat.send(ann, to: room, SendMessageRequest(clientID: "bad\(index)", content: content))
            }
        }
        #expect(try await chat.history(ann, id: room, HistoryQuery(limit: 50)).page().messages.allSatisfy { $0.poll == nil }, "nothing was stored")
        let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: "ok", content: poll())).0
        await #expect(throws: ChatError.self) { try await chat.edit(ann, conversation: room, message: sent.id, EditMessageRequest(content: poll("Dinner?"))) }
        let text = try await chat.send(ann, to: room, SendMessageRequest(clientID: "text", content: .text("hi"))).0
        await #expect(throws: ChatError.self) { try await chat.edit(ann, conversation: room, message: text.id, EditMessageRequest(content: poll())) }
        // A deleted poll loses its votes and shows no counts.
        let ben = try await harness.register("eve").caller
        _ = try await chat.addMembers(ann, id: room, AddMembersRequest(usernames: ["eve"]))
        _ = try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [0])
        _ = try await chat.delete(ann, conversation: room, messages: [sent.id])
        #expect(try await harness.store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM poll_vote") } == 0)
        await #expect(throws: ChatError.messageDeleted) { try await chat.polls.vote(ben, conversation: room, message: sent.id, options: [1]) }
        let gone = try await chat.history(ann, id: room, HistoryQuery(limit: 50)).page().messages.first { $0.id == sent.id }
        #expect(gone?.deletedAt != nil && gone?.poll == nil)
    }
}

extension PollDomainTests {
    /// A poll names at most ``Limits/pollVotersListed`` voters per option, the earliest, and
    /// still counts everyone.
    @Test func theResultsNameTheEarliestFiftyVotersAndCountThemAll() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ann = try await harness.register("ann").caller
        var voters: [Caller] = []
        for index in 0...Limits.pollVotersListed { voters.append(try await harness.register("voter\(index)").caller) }
        let room = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: (0...Limits.pollVotersListed).map { "voter\($0)" },
                                                                                    title: "many")).0.id
        let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: "p", content: poll())).0
        for voter in voters {
            _ = try await chat.polls.vote(voter, conversation: room, message: sent.id, options: [0])
            harness.clock.advance(by: 1)
        }
        let last = try await chat.history(ann, id: room, HistoryQuery(limit: 5)).page().messages.first { $0.id == sent.id }
        #expect(last?.poll?.options[0].votes == Limits.pollVotersListed + 1 && last?.poll?.voterCount == Limits.pollVotersListed + 1)
        #expect(last?.poll?.options[0].voterIDs == voters.prefix(Limits.pollVotersListed).map(\.userID), "the earliest fifty, in order")
    }
}
