import Foundation
public import Observation
public import ParleyWire

/// The signed-in user's conversation list for a SwiftUI or UIKit screen: `@Observable` on the
/// main actor, loaded a page at a time, and kept as the server would list it from the live
/// stream — a new message moves its conversation up (pinned ones stay first, in the user's
/// order) and counts as unread, reading it on any device clears the count, a conversation the
/// user joins appears and one they leave, are removed from or archive goes, and a `resync`
/// reads the list again. With the client's ``LocalStore`` the list the device kept shows first.
///
/// ```swift
/// let list = ConversationListModel(client: client)
/// await list.start()                          // the first page, then live
/// print(list.conversations.map(\.id))         // a SwiftUI `List(list.conversations)` redraws by itself
/// if list.hasMore { await list.loadMore() }
/// list.stop()
/// ```
/// A model that follows the client's live stream (``ConversationListModel``, ``MessagesModel``).
@MainActor
protocol LiveModel: AnyObject, Sendable {
    /// Whether the model shows what `event` changes (a conversation's messages: its own only).
    func shows(_ event: ConversationEvent) -> Bool
    /// Applies one live event.
    func apply(_ event: ConversationEvent) async
    /// Reads what is shown again (after a resync).
    func reload() async
}

extension LiveModel {
    /// The task that hands the model the events of `events` it shows, and reloads it after a
    /// resync; it ends with the stream, or at the next event once the model is gone.
    func follow(_ events: AsyncStream<ParleyClient.LiveEvent>) -> Task<Void, Never> {
        Task { [weak self] in
            for await event in events {
                guard let self else { return }
                switch event {
                case .event(let change) where self.shows(change): await self.apply(change)
                case .resync: await self.reload()
                default: break
                }
            }
        }
    }
}

@Observable @MainActor
public final class ConversationListModel: LiveModel {
    /// The conversations, as `GET /v1/conversations` orders them: pinned first (by the user's
    /// order), then by latest activity.
    public private(set) var conversations: [Conversation] = []
    /// More, older conversations than those loaded exist: ``loadMore()``.
    public private(set) var hasMore = false
    /// A page is being read.
    public private(set) var isLoading = false
    /// What the last read that failed said (nil after one that worked).
    public private(set) var lastError: String?

    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private let pageSize: Int
    @ObservationIgnored private var cursor: String?
    @ObservationIgnored private var following: Task<Void, Never>?
    @ObservationIgnored private var me: UserID?

    /// A list of the user of `client`, read `pageSize` conversations at a time.
    public init(client: ParleyClient, pageSize: Int = 30) {
        self.client = client
        self.pageSize = pageSize
    }

    /// Reads the first page and follows the live stream until ``stop()``. The client's socket
    /// is the app's to open (``ParleyClient/connect()``).
    ///
    /// With the client's ``LocalStore``, what the device kept shows at once (without a
    /// network too); the server's first page then replaces it.
    public func start() async {
        guard following == nil else { return }
        me = await client.currentUser?.id
        if conversations.isEmpty { conversations = await client.cachedConversations() }
        following = follow(await client.events())
        await reload()
    }

    /// Stops following the live stream (what is loaded stays).
    public func stop() {
        following?.cancel()
        following = nil
    }

    /// Reads the next page of older conversations.
    public func loadMore() async {
        guard hasMore, !isLoading else { return }
        await read(after: cursor)
    }

    /// Reads the first page again, replacing what is shown.
    public func reload() async {
        cursor = nil
        await read(after: nil)
    }

    private func read(after: String?) async {
        isLoading = true
        defer { isLoading = false }
        do {
            let page = try await client.conversations(limit: pageSize, before: after)
            if after == nil { conversations = [] }   // the server's list replaces the device's
            let known = Set(conversations.map(\.id))
            conversations += page.conversations.filter { !known.contains($0.id) }
            cursor = page.nextCursor
            hasMore = page.nextCursor != nil
            lastError = nil
        } catch {
            lastError = "\(error)"
        }
    }

    /// The list after one stored change.
    /// Every conversation's events change the list.
    func shows(_ event: ConversationEvent) -> Bool { true }

    func apply(_ event: ConversationEvent) async {
        let id = event.conversationID
        let leaving = [.memberRemoved, .memberBanned].contains(event.type) && event.userID == me && me != nil
        if leaving {
            conversations.removeAll { $0.id == id }
            return
        }
        guard let index = conversations.firstIndex(where: { $0.id == id }) else {
            // A conversation not shown: one the user just joined or was added to, or one a new
            // message brings back from the archive. The server says what it is now.
            guard [.memberAdded, .conversationCreated, .messageCreated].contains(event.type) else { return }
            guard let fetched = try? await client.conversation(id), fetched.archived != true,
                  !conversations.contains(where: { $0.id == id }) else { return }
            insert(fetched)
            return
        }
        let updated = conversations[index].listed(after: event, me: me)
        conversations.remove(at: index)
        if updated.archived != true { insert(updated) }
    }

    /// Puts a conversation in its place: pinned ones first by rank, then newest activity first.
    private func insert(_ conversation: Conversation) {
        let place = conversations.firstIndex { Self.comesBefore(conversation, $0) } ?? conversations.endIndex
        conversations.insert(conversation, at: place)
    }

    private static func comesBefore(_ a: Conversation, _ b: Conversation) -> Bool {
        switch (a.pinnedRank, b.pinnedRank) {
        case (let x?, let y?): x < y
        case (.some, nil): true
        case (nil, .some): false
        case (nil, nil): a.lastPosition > b.lastPosition
        }
    }
}

/// One conversation's messages for a chat screen: `@Observable` on the main actor, the newest
/// page first, ``loadEarlier()`` for the one before, and every change applied as it arrives
/// (``Swift/Array/applying(_:me:)``: new messages in seq order, edits, deletions, reactions,
/// pins, votes, thread counts, expiry). A `resync` reads the newest page again.
///
/// ```swift
/// let chat = MessagesModel(client: client, conversation: room)
/// await chat.start()
/// print(chat.messages.map(\.seq))            // oldest first, as MessageKit shows them
/// if chat.hasEarlier { await chat.loadEarlier() }
/// ```
@Observable @MainActor
public final class MessagesModel: LiveModel {
    /// The conversation shown.
    public let conversationID: ConversationID
    /// Its messages loaded so far, oldest first.
    public private(set) var messages: [Message] = []
    /// Older messages exist: ``loadEarlier()``.
    public private(set) var hasEarlier = false
    /// A page is being read.
    public private(set) var isLoading = false
    /// What the last read that failed said (nil after one that worked).
    public private(set) var lastError: String?
    /// The user's messages to this conversation still in the outbox (``ParleyClient/outbox``),
    /// oldest first: show them after ``messages`` as "sending". Each leaves when the server
    /// has it (it is then in ``messages``).
    public private(set) var sending: [OutboxItem] = []

    @ObservationIgnored private let client: ParleyClient
    @ObservationIgnored private let pageSize: Int
    @ObservationIgnored private var following: Task<Void, Never>?
    @ObservationIgnored private var outgoing: Task<Void, Never>?
    @ObservationIgnored private var me = UserID(rawValue: "")

    /// The messages of `conversation`, read `pageSize` at a time.
    public init(client: ParleyClient, conversation: ConversationID, pageSize: Int = 50) {
        self.client = client
        self.conversationID = conversation
        self.pageSize = pageSize
    }

    /// Reads the newest page and follows the conversation's live events until ``stop()``.
    /// With the client's ``LocalStore``, the messages the device kept show at once (without a
    /// network too), and the outbox's in ``sending``; the server's newest page then replaces them.
    public func start() async {
        guard following == nil else { return }
        me = await client.currentUser?.id ?? me
        if messages.isEmpty { messages = await client.cachedHistory(of: conversationID, limit: pageSize) }
        await refreshSending()
        following = follow(await client.events())
        let updates = await client.outgoingUpdates()
        let id = conversationID
        outgoing = Task { [weak self] in
            for await update in updates where update.conversationID == id {
                guard let self else { return }
                await self.refreshSending()
            }
        }
        await reload()
    }

    /// Stops following the live stream (what is loaded stays).
    public func stop() {
        following?.cancel()
        following = nil
        outgoing?.cancel()
        outgoing = nil
    }

    private func refreshSending() async {
        let id = conversationID
        sending = await client.outbox.filter { $0.conversationID == id }
    }

    /// Reads the newest page again, replacing what is shown.
    public func reload() async {
        await read(before: nil)
    }

    /// Reads the page before the oldest message shown.
    public func loadEarlier() async {
        guard hasEarlier, !isLoading, let oldest = messages.first?.seq else { return }
        await read(before: oldest)
    }

    private func read(before: Int64?) async {
        isLoading = true
        defer { isLoading = false }
        do {
            let page = try await client.history(of: conversationID, before: before, limit: pageSize)
            if before == nil {
                messages = page.messages
            } else {
                let known = Set(messages.map(\.id))
                messages = page.messages.filter { !known.contains($0.id) } + messages
            }
            hasEarlier = page.hasOlder
            lastError = nil
        } catch {
            lastError = "\(error)"
        }
    }

    /// Only this conversation's events change its messages.
    func shows(_ event: ConversationEvent) -> Bool { event.conversationID == conversationID }

    /// The messages after one stored change of this conversation.
    func apply(_ event: ConversationEvent) async {
        messages = messages.applying(event, me: me)
        if event.type == .messageCreated, let sent = event.message?.clientID, sending.contains(where: { $0.clientID == sent }) {
            sending.removeAll { $0.clientID == sent }
        }
    }
}
