import Foundation
import Observation
import Parley
import ParleyNetTesting
import ParleyWire
import Testing

/// The observable models (issue 34) against the real binary: Bob's laptop shows his list and a
/// chat while Alice writes and Bob acts on his phone — each change arrives by the live stream
/// and the models redraw without a request of the app's.
@Suite(.serialized, .timeLimit(.minutes(2)))
@MainActor
struct ObservableModelTests {
    /// Waits until `condition` holds (``untilObserved(_:timeout:_:)``).
    func until(_ what: String, timeout: Duration = .seconds(15), _ condition: @escaping @MainActor () -> Bool) async throws {
        try await untilObserved(what, timeout: timeout, condition)
    }

    @Test func theListFollowsMessagesPinsReadsAndArchivesMadeElsewhere() async throws {
        let people = try await People.start()
        defer { withExtendedLifetime(people.server) {} }
        let (alice, phone, laptop) = (people.alice, people.phone, people.laptop)
        let group = try await alice.createConversation(.group, title: "Plans", members: ["bob"])
        let list = ConversationListModel(client: laptop, pageSize: 1)
        await list.start()
        #expect(list.conversations.map(\.id) == [group.id] && !list.hasMore)
        await laptop.connect()
        await alice.connect()
        await phone.connect()

        // Alice starts a direct chat: it appears, first, with one unread message.
        let chat = try await alice.directConversation(with: "bob")
        _ = try await alice.send(.text("hello Bob"), to: chat.id)
        try await until("the new chat, first and unread") {
            list.conversations.first?.id == chat.id && list.conversations.first?.unreadCount == 1
                && list.conversations.first?.lastMessage?.content == .text("hello Bob")
        }
        // A message in the group moves it up.
        _ = try await alice.send(.text("plans?"), to: group.id)
        try await until("the group first") { list.conversations.map(\.id) == [group.id, chat.id] }
        // Bob pins the chat on his phone: pinned ones come first whatever their activity.
        _ = try await phone.pin(chat.id)
        try await until("the pinned chat first") { list.conversations.map(\.id) == [chat.id, group.id] }
        // He reads it on his phone: no longer unread on the laptop.
        let seq = try await phone.conversation(chat.id).lastSeq
        try await phone.markRead(chat.id, upTo: seq)
        try await until("read on the phone") { list.conversations.first { $0.id == chat.id }?.unreadCount == 0 }
        // He archives the group: it leaves the list; a new message brings it back.
        _ = try await phone.archive(group.id)
        try await until("the group archived") { list.conversations.map(\.id) == [chat.id] }
        _ = try await alice.send(.text("still there?"), to: group.id)
        try await until("the group back") { list.conversations.map(\.id) == [chat.id, group.id] }
        // Paging reads the rest, once each, in the server's order.
        await list.reload()
        #expect(list.conversations.count == 1 && list.hasMore)
        await list.loadMore()
        #expect(list.conversations.map(\.id) == [chat.id, group.id] && list.lastError == nil)
        list.stop()
    }

    @Test func aChatShowsNewEditedAndEarlierMessagesAsTheyCome() async throws {
        let people = try await People.start()
        defer { withExtendedLifetime(people.server) {} }
        let (alice, laptop) = (people.alice, people.laptop)
        let chat = try await alice.directConversation(with: "bob")
        var sent: [Message] = []
        await alice.connect()
        for index in 1...5 {
            sent.append(try await alice.waitUntilSent(try await alice.send(.text("message \(index)"), to: chat.id)))
        }
        let model = MessagesModel(client: laptop, conversation: chat.id, pageSize: 2)
        await model.start()
        #expect(model.messages.map(\.id) == sent.suffix(2).map(\.id) && model.hasEarlier)
        await laptop.connect()
        // A chat with nothing in it yet shows none of another conversation's messages.
        let group = try await alice.createConversation(.group, title: "empty so far", members: ["bob"])
        let empty = MessagesModel(client: laptop, conversation: group.id)
        await empty.start()
        #expect(empty.messages.isEmpty)
        _ = try await alice.send(.text("message 6"), to: chat.id)
        try await until("the new message, last") { model.messages.last?.content == .text("message 6") }
        _ = try await alice.send(.text("in the group"), to: group.id)
        try await until("the group's own message") { empty.messages.map(\.content) == [.text("in the group")] }
        #expect(empty.messages.count == 1)
        empty.stop()
        _ = try await alice.edit(sent[4].id, in: chat.id, to: .text("message 5, edited"))
        try await until("the edit") { model.messages.contains { $0.content == .text("message 5, edited") && $0.editedAt != nil } }
        await model.loadEarlier()
        await model.loadEarlier()
        #expect(model.messages.map(\.seq) == model.messages.map(\.seq).sorted() && model.messages.count == 6 && !model.hasEarlier)
        #expect(model.messages.first?.id == sent[0].id)
        model.stop()
    }
}

struct ModelTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// A continuation resumed once, by whichever of the change and the deadline comes first.
final class Once: @unchecked Sendable {
    // @unchecked: `continuation` is read and written only under `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Void, Never>?

    func set(_ continuation: CheckedContinuation<Void, Never>) { lock.withLock { self.continuation = continuation } }

    func resume() {
        let taken = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            defer { continuation = nil }
            return continuation
        }
        taken?.resume()
    }
}

/// Waits until `condition` holds, woken by the models' own change notifications
/// (`withObservationTracking`), failing after `timeout`.
@MainActor
func untilObserved(_ what: String, timeout: Duration = .seconds(15), _ condition: @escaping @MainActor () -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { throw ModelTimeout(what: what) }
        let once = Once()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            once.set(continuation)
            withObservationTracking { _ = condition() } onChange: { once.resume() }
            Task { try? await Task.sleep(until: deadline); once.resume() }
        }
    }
}
