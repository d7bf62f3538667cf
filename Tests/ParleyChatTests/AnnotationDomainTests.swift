import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Reactions, pins and mentions (issue 19), on both engines: what each person sees on the
/// message, what the feed carries, and that none of it makes a conversation unread or moves it.
struct AnnotationDomainTests {
    private func group(_ harness: ChatHarness, _ names: [String]) async throws -> ([Caller], ConversationID) {
        var callers: [Caller] = []
        for name in names { callers.append(try await harness.register(name).caller) }
        let room = try await harness.chat.createConversation(callers[0], CreateConversationRequest(kind: .group, members: Array(names.dropFirst()), title: "room")).0
        return (callers, room.id)
    }

    /// The code of the error `work` throws; nil when it throws none.
    private func send(_ chat: Chat, _ caller: Caller, _ room: ConversationID, _ text: String) async throws -> Message {
        try await chat.send(caller, to: room, SendMessageRequest(clientID: UUID().uuidString, content: .text(text))).0
    }

    @Test func reactionsAreCountedPerEmojiOncePerPersonAndNeverMakeAConversationUnread() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (people, room) = try await group(harness, ["alice", "bob", "carol"])
        let (alice, bob, carol) = (people[0], people[1], people[2])
        let message = try await send(chat, alice, room, "lunch?")
        _ = try await chat.updateReceipt(bob, conversation: room, ReceiptUpdate(readSeq: message.seq))
        let before = try await chat.conversation(bob, id: room)
        let position = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0

        #expect(try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: "👍").changed)
        #expect(try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: "👍\u{FE0F}").changed == false,
                "the same emoji with a variation selector is the same reaction, and a repeat changes nothing")
        _ = try await chat.annotations.react(carol, conversation: room, message: message.id, emoji: "👍")
        let (mine, _) = try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: "👨‍👩‍👧")
        #expect(mine.reactions == [ReactionCount(emoji: "👍", count: 2), ReactionCount(emoji: "👨‍👩‍👧", count: 1)])
        #expect(mine.myReactions == ["👍", "👨‍👩‍👧"])

        let page = try await chat.history(alice, id: room, HistoryQuery()).page()
        #expect(page.messages.first?.reactions?.map(\.count) == [2, 1])
        #expect(page.messages.first?.myReactions == [], "alice reacted with nothing")
        let after = try await chat.conversation(bob, id: room)
        #expect(after.unreadCount == 0 && after.lastSeq == before.lastSeq && after.lastPosition == before.lastPosition,
                "reactions neither count as unread nor move the conversation up the list")

        // Every member's devices get each change in order, with who and what, and no seq.
        let events = try await chat.feed(alice, after: chat.cursor(through: position), limit: 200).page().events
        #expect(events.map(\.type) == [.reactionAdded, .reactionAdded, .reactionAdded])
        #expect(events.map(\.emoji) == ["👍", "👍", "👨‍👩‍👧"] && events.map(\.userID) == [bob.userID, carol.userID, bob.userID])
        #expect(events.allSatisfy { $0.seq == nil } && events.last?.message?.reactions?.count == 2)

        let (taken, changed) = try await chat.annotations.unreact(carol, conversation: room, message: message.id, emoji: "👍")
        #expect(changed && taken.reactions == [ReactionCount(emoji: "👍", count: 1), ReactionCount(emoji: "👨‍👩‍👧", count: 1)])
        #expect(try await chat.annotations.unreact(carol, conversation: room, message: message.id, emoji: "👍").changed == false)
        let who = try await chat.annotations.reactions(alice, conversation: room, message: message.id, emoji: nil, limit: 1, offset: nil)
        #expect(who.reactions.map(\.user.username) == ["bob"] && who.hasMore)
        let next = try await chat.annotations.reactions(alice, conversation: room, message: message.id, emoji: nil, limit: 1, offset: 1)
        #expect(next.reactions.map(\.emoji) == ["👨‍👩‍👧"] && !next.hasMore)
    }

    @Test func badReactionsAreRefusedAndChangeNothing() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (people, room) = try await group(harness, ["alice", "bob"])
        let (alice, bob) = (people[0], people[1])
        let message = try await send(chat, alice, room, "hi")
        for bad in ["", "a", "1", "👍👍", "👍 ", "<b>", String(repeating: "\u{1F3FB}", count: 20), "\u{200D}"] {
            let refused = await code { _ = try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: bad) }
            #expect(refused == "invalid_request", "\(bad.unicodeScalars.map { String($0.value, radix: 16) })")
        }
        _ = try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: "1️⃣")
        _ = try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: "🇫🇷")
        let (outsider, _) = try await harness.register("mallory")
        await #expect(throws: ChatError.conversationNotFound) {
            _ = try await chat.annotations.react(outsider, conversation: room, message: message.id, emoji: "👍")
        }
        for index in 0..<18 {
            _ = try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: String(Character(Unicode.Scalar(0x1F600 + index) ?? "😀")))
        }
        #expect(await code { _ = try await chat.annotations.react(bob, conversation: room, message: message.id, emoji: "🦊") } == "too_many_reactions")
        #expect(try await chat.message(bob, conversation: room, message: message.id).myReactions?.count == 20)
        _ = try await chat.delete(alice, conversation: room, messages: [message.id])
        await #expect(throws: ChatError.messageDeleted) {
            _ = try await chat.annotations.react(alice, conversation: room, message: message.id, emoji: "👍")
        }
        let tombstone = try await chat.message(bob, conversation: room, message: message.id)
        #expect(tombstone.reactions == nil && tombstone.myReactions == nil, "a tombstone keeps no reactions")
        #expect(try await chat.annotations.reactions(alice, conversation: room, message: message.id, emoji: nil, limit: nil, offset: nil).reactions.isEmpty)
    }

    @Test func pinsSurviveEditsGoWithDeletionAndFollowTheChannelsRoles() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (people, room) = try await group(harness, ["alice", "bob"])
        let (alice, bob) = (people[0], people[1])
        let text = try await send(chat, alice, room, "the address")
        let place = try await chat.send(alice, to: room, SendMessageRequest(
            clientID: "loc", content: .location(Location(latitude: 52.5, longitude: 13.4, name: "Berlin", caption: "meet here")))).0
        let (pinned, changed) = try await chat.annotations.pin(bob, conversation: room, message: place.id)
        #expect(changed && pinned.pinnedBy == bob.userID && pinned.pinnedAt != nil)
        harness.clock.advance(by: 1)
        _ = try await chat.annotations.pin(alice, conversation: room, message: text.id)
        #expect(try await chat.annotations.pin(alice, conversation: room, message: text.id).changed == false)
        _ = try await chat.edit(alice, conversation: room, message: text.id, EditMessageRequest(content: .text("the new address")))
        let pins = try await chat.annotations.pins(bob, conversation: room).messages
        #expect(pins.map(\.id) == [text.id, place.id], "most recently pinned first, kept across an edit")
        #expect(pins.last?.content == .location(Location(latitude: 52.5, longitude: 13.4, name: "Berlin", caption: "meet here")))
        _ = try await chat.delete(alice, conversation: room, messages: [text.id])
        #expect(try await chat.annotations.pins(bob, conversation: room).messages.map(\.id) == [place.id])
        _ = try await chat.annotations.unpin(alice, conversation: room, message: place.id)
        #expect(try await chat.annotations.pins(bob, conversation: room).messages.isEmpty)

        let channel = try await chat.createConversation(alice, CreateConversationRequest(kind: .public, title: "news")).0
        _ = try await chat.join(bob, id: channel.id)
        let post = try await send(chat, alice, channel.id, "read me")
        #expect(await code { _ = try await chat.annotations.pin(bob, conversation: channel.id, message: post.id) } == "forbidden")
        #expect(try await chat.annotations.pin(alice, conversation: channel.id, message: post.id).changed)
    }

    @Test func mentionsAreResolvedToMembersAtSendTimeAndQueriedAsMine() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (people, room) = try await group(harness, ["alice", "bob", "carol"])
        let (alice, bob, carol) = (people[0], people[1], people[2])
        _ = try await harness.register("dave")       // not a member: not mentioned
        #expect(Chat.mentionedNames("hi @bob, @Carol. mail x@y.com or @dave-") == ["bob", "Carol", "dave"])
        #expect(Chat.mentionedNames("@b1\u{FE0F}\u{20E3} and @a\u{0301}") == [], "a name ends where a character ends (found by fuzz-wire)")
        let message = try await send(chat, alice, room, "hi @bob, @Carol. mail x@y.com or @dave- and @alice")
        #expect(message.mentions?.map(\.username) == ["bob", "carol", "alice"])
        #expect(try await chat.annotations.mentions(bob, before: nil, limit: nil).messages.map(\.id) == [message.id])
        #expect(try await chat.annotations.mentions(alice, before: nil, limit: nil).messages.isEmpty, "mentioning yourself notifies nobody")
        let second = try await send(chat, alice, room, "@bob again")
        let page = try await chat.annotations.mentions(bob, before: nil, limit: 1)
        #expect(page.messages.map(\.id) == [second.id] && page.hasMore)
        #expect(try await chat.annotations.mentions(bob, before: second.id, limit: 1).messages.map(\.id) == [message.id])
        // An edit re-resolves them.
        let edited = try await chat.edit(alice, conversation: room, message: message.id, EditMessageRequest(content: .text("never mind, @carol")))
        #expect(edited.mentions?.map(\.userID) == [carol.userID])
        #expect(try await chat.annotations.mentions(bob, before: nil, limit: nil).messages.map(\.id) == [second.id])
        let plain = try await send(chat, alice, room, "no names here")
        #expect(plain.mentions == nil)
    }
}

/// Profile changes reach the conversations (issue 19): a new photo or name is a `user.updated`
/// (no seq) in each conversation of the user.
struct ProfileEventTests {
    @Test func aNewPhotoOrNameIsAnEventInEveryConversationOfTheUser() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let one = try await chat.createConversation(alice, CreateConversationRequest(kind: .direct, members: ["bob"])).0.id
        let two = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "g")).0.id
        let position = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        let photo = try await harness.upload(alice, kind: .photo)
        let user = try await chat.attachments.setProfilePhoto(alice, attachment: photo.id)
        #expect(user.photoURL == "/v1/avatars/\(photo.id)")
        _ = try await chat.updateProfile(alice, UpdateProfileRequest(displayName: "Alice L."))
        let events = try await chat.feed(bob, after: chat.cursor(through: position), limit: 100).page().events
        #expect(events.allSatisfy { $0.type == .userUpdated && $0.seq == nil && $0.userID == alice.userID })
        #expect(Set(events.map(\.conversationID)) == [one, two] && events.count == 4)
        #expect(events.last?.displayName == "Alice L." && events.last?.photoURL == user.photoURL)
        #expect(try await chat.conversation(bob, id: two).unreadCount == 0)
    }
}

/// The pins limit: a 101st pin is refused and changes nothing.
struct PinLimitTests {
    @Test func aConversationHoldsAtMostItsPins() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        _ = try await harness.register("bob")
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .direct, members: ["bob"])).0.id
        for index in 0...Limits.pinsPerConversation {
            let message = try await chat.send(alice, to: room, SendMessageRequest(clientID: "p\(index)", content: .text("\(index)"))).0
            if index < Limits.pinsPerConversation {
                _ = try await chat.annotations.pin(alice, conversation: room, message: message.id)
            } else {
                await #expect(throws: ChatError.conflict("a conversation holds at most \(Limits.pinsPerConversation) pins; unpin one first")) {
                    _ = try await chat.annotations.pin(alice, conversation: room, message: message.id)
                }
                #expect(try await chat.message(alice, conversation: room, message: message.id).pinnedAt == nil)
            }
        }
        #expect(try await chat.annotations.pins(alice, conversation: room).messages.count == Limits.pinsPerConversation)
    }
}
