import Foundation
import Parley
import ParleyNetTesting
import ParleyWire
import Testing

/// The user's own conversation list through the SDK against the real binary: pins, archive and
/// unread marks made on one device show on the user's other device at once, and the list pages
/// with pinned conversations first.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct ConversationListClientTests {
    @Test func aPinAnArchiveAndAnUnreadMarkOnThePhoneShowOnTheLaptopAtOnce() async throws {
        let people = try await People.start()
        defer { withExtendedLifetime(people.server) {} }
        let (alice, phone, laptop) = (people.alice, people.phone, people.laptop)
        let chat = try await alice.directConversation(with: "bob")
        let group = try await alice.createConversation(.group, title: "Plans", members: ["bob"])
        var shown = try await laptop.conversation(chat.id)
        let events = await laptop.events(in: chat.id)
        var iterator = events.makeAsyncIterator()
        await laptop.connect()
        await alice.connect()
        _ = try await alice.send(.text("hello"), to: chat.id)
        while let event = await iterator.next() {
            shown = shown.updated(by: event)
            if event.type == .messageCreated { break }
        }
        _ = try await phone.pin(chat.id)
        _ = try await phone.markUnread(chat.id)
        _ = try await phone.archive(chat.id)
        var states: [ConversationState] = []
        while states.count < 3, let event = await iterator.next() {
            shown = shown.updated(by: event)
            if event.type == .stateUpdated { states.append(shown.state) }
        }
        #expect(states == [ConversationState(pinnedRank: 0), ConversationState(pinnedRank: 0, markedUnread: true),
                           ConversationState(archived: true, markedUnread: true)])
        #expect(try await laptop.conversations().conversations.map(\.id) == [group.id])
        #expect(try await laptop.conversations(archived: true).conversations.map(\.id) == [chat.id])
        // A new message brings it back, on the server and in the laptop's copy alike.
        _ = try await alice.send(.text("are you there?"), to: chat.id)
        while let event = await iterator.next() {
            shown = shown.updated(by: event)
            if event.type == .messageCreated, event.message?.content == .text("are you there?") { break }
        }
        #expect(shown.archived == nil && shown.markedUnread == true)
        #expect(try await laptop.conversation(chat.id).archived == nil)
        // Pinned ones come first, in the order saved.
        try await phone.setPinnedConversations([group.id, chat.id])
        #expect(try await laptop.pinnedConversations() == [group.id, chat.id])
        #expect(try await laptop.conversations(limit: 1).conversations.map(\.id) == [group.id])
        #expect(try await laptop.conversations().conversations.map(\.id) == [group.id, chat.id])
        // Alice's list is untouched.
        #expect(try await alice.conversation(chat.id).pinnedRank == nil)
    }

    @Test func aDraftWrittenOnThePhoneShowsOnTheLaptopAndGoesWhenItIsSent() async throws {
        let people = try await People.start()
        defer { withExtendedLifetime(people.server) {} }
        let (alice, phone, laptop) = (people.alice, people.phone, people.laptop)
        let chat = try await alice.directConversation(with: "bob")
        var shown = try await laptop.conversation(chat.id)
        var iterator = await laptop.events(in: chat.id).makeAsyncIterator()
        await laptop.connect()
        await phone.connect()
        let draftID = "draft-\(UUID().uuidString)"
        _ = try await phone.saveDraft("See you at", in: chat.id, clientID: draftID)
        while let event = await iterator.next() {
            shown = shown.updated(by: event)
            if event.type == .draftUpdated { break }
        }
        #expect(shown.draft?.text == "See you at" && shown.draft?.clientID == draftID)
        #expect(try await laptop.draft(in: chat.id)?.text == "See you at")
        // A late save from a device that was offline loses to the newer one.
        let late = try await laptop.saveDraft("older words", in: chat.id, at: Date().addingTimeInterval(-60))
        #expect(late.text == "See you at")
        // Sent from the phone with the draft's id: gone on the laptop and on the server.
        _ = try await phone.send(.text("See you at 8"), to: chat.id, clientID: draftID)
        while let event = await iterator.next() {
            shown = shown.updated(by: event)
            if event.type == .messageCreated { break }
        }
        #expect(shown.draft == nil)
        #expect(try await laptop.draft(in: chat.id) == nil)
        #expect(try await laptop.conversation(chat.id).draft == nil)
    }

    @Test func aMessageScheduledOnThePhoneIsSentWhileNoDeviceIsOnline() async throws {
        let people = try await People.start()
        defer { withExtendedLifetime(people.server) {} }
        let (alice, bob) = (people.alice, people.phone)
        let chat = try await alice.directConversation(with: "bob")
        let planned = try await bob.schedule(.text("happy birthday!"), to: chat.id, at: Date().addingTimeInterval(600))
        #expect(try await bob.scheduledMessages().map(\.id) == [planned.id])
        let moved = try await bob.reschedule(planned.id, to: Date().addingTimeInterval(1.5), content: .text("happy birthday, Alice!"))
        #expect(moved.message.content == .text("happy birthday, Alice!"))
        // No device of Bob's is connected: the server sends it at its time, as Bob.
        var iterator = await alice.events(in: chat.id).makeAsyncIterator()
        await alice.connect()
        while let event = await iterator.next() {
            if event.type == .messageCreated {
                #expect(event.message?.content == .text("happy birthday, Alice!") && event.message?.sender.username == "bob")
                break
            }
        }
        // Bob's device, once it connects, hears it was sent (recorded just after the send).
        var bobs = await bob.events(in: chat.id).makeAsyncIterator()
        await bob.connect()
        while let event = await bobs.next() {
            if event.type == .scheduledUpdated, event.scheduled?.status == .sent { break }
        }
        #expect(try await bob.scheduledMessages().isEmpty)
        let other = try await bob.schedule(.text("never mind"), to: chat.id, at: Date().addingTimeInterval(600))
        try await bob.cancelScheduled(other.id)
        #expect(try await bob.scheduledMessages().isEmpty)
    }
}
