public import Foundation
public import ParleyWire

/// A Parley client: one user on one device. REST for request–response work, one realtime
/// socket for everything live, and the reliability apps should not have to write — an outbox
/// that survives being offline (and, with a ``FileStateStore``, a relaunch), reconnection with
/// jittered backoff, resume from the last position, automatic delivered receipts, and each
/// outgoing message's `sending → sent → delivered → read` (or `failed`) as a stream.
///
/// ```swift
/// let client = ParleyClient(server: "http://127.0.0.1:8080", appKey: "pk_…")
/// try await client.signIn(username: "ana", password: "correct horse")
/// let chat = try await client.directConversation(with: "bob")
/// await client.connect()
/// let pending = try await client.send(.text("hi Bob"), to: chat.id)
/// for await event in client.events() { … }
/// ```
public actor ParleyClient {
    /// Where the client stands with the realtime socket.
    public enum ConnectionState: Sendable, Hashable {
        /// Not connected (signed out of the socket by the app, or between attempts).
        case offline
        /// Opening the socket and authenticating.
        case connecting
        /// Connected and replaying what was missed.
        case resyncing
        /// Caught up and live.
        case online
        /// The server refused the session (signed out elsewhere, password changed): sign in again.
        case signedOut
    }

    /// Something that happened, as the socket delivered it.
    public enum LiveEvent: Sendable, Hashable {
        /// A stored change (message, edit, delete, membership, receipt…), in position order.
        case event(ConversationEvent)
        /// Someone started (true) or stopped typing, in the conversation or in a thread
        /// (`threadID`, its root); forget a `true` after `expiresIn`.
        case typing(conversationID: ConversationID, userID: UserID, isTyping: Bool, expiresIn: Duration, threadID: MessageID? = nil)
        /// Someone came online or went offline.
        case presence(Presence)
        /// The signed-in user's block list changed, on this device or another: everyone they
        /// block now (their messages arrive as stubs with `hidden == .blocked` from here on).
        case blocks([UserID])
        /// Too much was missed to replay, or the server's history changed (a restore from
        /// backup): reload what is shown (conversation list, open history).
        case resync(position: Int64)
        /// The client's state could not be saved to its store (``ParleyError/stateNotSaved(_:)``):
        /// an acknowledged send may be sent again after a relaunch (the server answers it with
        /// the stored message, never a second copy), or the position may be behind.
        case saveFailed(ParleyError)
    }

    /// Where one of this client's messages is.
    public enum OutgoingStatus: Sendable, Hashable {
        /// In the outbox, not yet acknowledged.
        case sending
        /// Stored by the server.
        case sent(Message)
        /// Some other members have it, not yet all (groups and channels): the update's
        /// ``OutgoingUpdate/progress`` says how many of how many.
        case deliveredToSome
        /// Every other member's device has it.
        case delivered
        /// Every other member has seen it.
        case read
        /// The server refused it (and will refuse a retry): the reason.
        case failed(ParleyError)
    }

    /// A status change of one outgoing message, named by its client id.
    public struct OutgoingUpdate: Sendable, Hashable {
        /// The idempotency key ``send(_:to:metadata:replyTo:inThread:alsoInConversation:clientID:)`` returned.
        public var clientID: String
        /// Where it went.
        public var conversationID: ConversationID
        /// Its new status.
        public var status: OutgoingStatus
        /// How many of how many have it, where the client learns counts: in groups (from every
        /// member's receipts) and public channels (from `delivery.updated`); nil otherwise.
        public var progress: DeliveryProgress? = nil
    }

    /// How far a message has got: how many of the members other than its author have it and
    /// have read it ("Delivered to 3 of 5", "Read by 1").
    public struct DeliveryProgress: Sendable, Hashable {
        /// Members who have it.
        public var delivered: Int
        /// Members who have read it.
        public var read: Int
        /// Members other than the author.
        public var recipients: Int
    }

    let http: HTTPClient
    private let realtimeURL: String
    private let appKey: String
    private let store: any ClientStateStore
    /// Where downloaded attachments are cached.
    let mediaCache: URL
    /// The most bytes the media cache keeps; the least recently used files go first.
    let mediaCacheBytes: Int64
    /// What the user has seen, kept on the device (nil: nothing is kept but the state).
    public nonisolated let localStore: LocalStore?
    private var state: ClientState
    private var connection: (any RealtimeConnection)?
    private var connectionState = ConnectionState.offline
    private var liveTask: Task<Void, Never>?
    private var commandCounter = 0
    private var waiting: [String: CheckedContinuation<ServerFrame, any Error>] = [:]
    /// What of the outbox is on the wire, and how recent sends ended.
    private var sends = SendTracker()
    /// Sends refused for a moment (rate limited, the store unavailable): how many times each
    /// was retried, for its backoff.
    private var temporaryRefusals: [String: Int] = [:]
    private var eventListeners = Listeners<LiveEvent>()
    private var stateListeners = Listeners<ConnectionState>()
    private var outgoingListeners = Listeners<OutgoingUpdate>()
    private var pendingDelivered: [ConversationID: Int64] = [:]
    private var deliveredFlushScheduled = false
    /// Where this client's own messages stand, from the other members' watermarks.
    private var receipts = ReceiptTracker()

    /// A client of the server at `server` (`http://host:port`) for the app with `appKey`,
    /// keeping its token, position and outbox in `store` (default: memory only) and
    /// downloaded attachments in `mediaCache` (default: a folder in the temporary directory),
    /// at most `mediaCacheBytes` of them (default: 256 MiB). With `localStore`, the
    /// conversations, history and live events it reads are kept there for offline reading
    /// (``cachedConversations(archived:)``, ``cachedHistory(of:before:limit:)``).
    public init(server: String, appKey: String, store: any ClientStateStore = MemoryStateStore(), mediaCache: URL? = nil,
                mediaCacheBytes: Int64 = 256 << 20, localStore: LocalStore? = nil) {
        self.localStore = localStore
        let base = server.hasSuffix("/") ? String(server.dropLast()) : server
        self.mediaCache = mediaCache ?? FileManager.default.temporaryDirectory.appendingPathComponent("parley-media-\(appKey)")
        self.mediaCacheBytes = mediaCacheBytes
        http = HTTPClient(base: base, appKey: appKey)
        self.appKey = appKey
        realtimeURL = base.replacingOccurrences(of: "https://", with: "wss://").replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime"
        self.store = store
        state = (try? store.load()) ?? ClientState()
    }

    // MARK: - Accounts

    /// The signed-in user, if any.
    public var currentUser: User? { state.user }

    /// Creates an account and signs in as it.
    @discardableResult
    public func register(username: String, password: String, displayName: String? = nil, device: String? = nil) async throws -> User {
        let signedIn: SignedIn = try await http.call("POST", "/v1/users", body: RegisterRequest(username: username, password: password,
                                                                                              displayName: displayName, device: device), token: nil)
        return try await adopt(signedIn)
    }

    /// Signs in with a password.
    @discardableResult
    public func signIn(username: String, password: String, device: String? = nil) async throws -> User {
        let signedIn: SignedIn = try await http.call("POST", "/v1/sessions", body: SignInRequest(username: username, password: password, device: device),
                                                     token: nil)
        return try await adopt(signedIn)
    }

    /// Signs in with a session token the app's own backend issued for the user
    /// (`POST /v1/server/users/{username}/sessions`, docs/server-api.md): for apps whose users
    /// sign in elsewhere and never see a Parley password. The token is checked with the server.
    ///
    /// - Throws: ``ParleyError`` when the server refuses the token (401: expired or signed out).
    @discardableResult
    public func signIn(token: String) async throws -> User {
        let user: User = try await http.call("GET", "/v1/me", token: token)
        let session = Session(token: token, id: "", device: "", createdAt: Date(), expiresAt: Date())
        return try await adopt(SignedIn(user: user, session: session))
    }

    /// Signs in with a JWT from the app's own identity provider (Firebase Auth, Sign in with
    /// Apple through the app's backend, Auth0, Supabase…), exchanged for a Parley session; the
    /// user its `sub` names is created on first sign-in. The app's backend tells Parley how
    /// its tokens are checked (`PUT /v1/server/jwt`, docs/trust-and-safety.md).
    ///
    /// - Throws: ``ParleyError`` with `invalid_token` (the message says why: expired, wrong
    ///   audience…) or `user_deactivated`.
    @discardableResult
    public func signIn(jwt: String, device: String? = nil) async throws -> User {
        let signedIn: SignedIn = try await http.call("POST", "/v1/sessions/jwt", body: JWTSignInRequest(token: jwt, device: device), token: nil)
        return try await adopt(signedIn)
    }

    /// Signs in as a new guest (the Pusher tutorial's anonymous sender).
    @discardableResult
    public func signInAsGuest(displayName: String) async throws -> User {
        let signedIn: SignedIn = try await http.call("POST", "/v1/sessions/guest", body: GuestSignInRequest(displayName: displayName), token: nil)
        return try await adopt(signedIn)
    }

    /// Signs this device out (`everywhere`: every device of the account), closes the socket
    /// and forgets the token, position and outbox.
    public func signOut(everywhere: Bool = false) async throws {
        let token = try requireToken()
        let _: Empty = try await http.call("DELETE", everywhere ? "/v1/sessions" : "/v1/sessions/current", token: token)
        disconnect()
        state = ClientState()
        try store.save(state)
        try localStore?.reset()   // nothing of the account stays on the device
    }

    /// Deletes the signed-in account for good (what App Store guideline 5.1.1(v) asks an app to
    /// offer), then forgets it here as ``signOut(everywhere:)`` does. Every device of the
    /// account is signed out, its push devices removed and its username freed; the app's
    /// backend hears `user.deleted`.
    ///
    /// - Parameters:
    ///   - password: the account's password; `nil` for an account without one (a guest, or a
    ///     user the app's backend made), which needs a session less than 10 minutes old
    ///     (`recent_sign_in_required` otherwise: sign in again first).
    ///   - erase: also erase every message the account sent (each becomes a tombstone).
    public func deleteAccount(password: String?, erase: Bool = false) async throws {
        let token = try requireToken()
        let _: Empty = try await http.call("DELETE", "/v1/me", body: DeleteAccountRequest(password: password, erase: erase), token: token)
        disconnect()
        state = ClientState()
        try store.save(state)
        try localStore?.reset()
    }

    private func adopt(_ signedIn: SignedIn) async throws -> User {
        if state.user?.id != signedIn.user.id { state = ClientState() }  // another account: nothing carries over
        if let localStore, localStore.userID != signedIn.user.id { try localStore.reset(user: signedIn.user.id) }
        state.token = signedIn.session.token
        state.user = signedIn.user
        if state.resumePoint == nil {
            // Live starts here, not when the socket first attaches: where the log stood when
            // the account's conversations were read (from a server before cursors, the newest
            // position of those conversations, or 0 for none). So whatever happens between
            // signing in and connecting is replayed, never missed.
            let page: ConversationPage? = try? await http.call("GET", "/v1/conversations", query: [("limit", "1")], token: state.token)
            let cursor = page?.liveCursor ?? LogCursor(position: page?.conversations.first?.lastPosition ?? 0)
            state.cursor = cursor
            state.position = cursor.newest
        }
        try store.save(state)
        return signedIn.user
    }

    func requireToken() throws -> String {
        guard let token = state.token else { throw ParleyError.notSignedIn }
        return token
    }

    // MARK: - Directory and conversations

    /// Users whose username or display name starts with `query`.
    public func searchUsers(_ query: String, limit: Int = 20, offset: Int = 0, sort: UserSort = .username) async throws -> UserPage {
        try await http.call("GET", "/v1/users", query: [("query", query), ("limit", "\(limit)"), ("offset", "\(offset)"), ("sort", sort.rawValue)],
                            token: try requireToken())
    }

    /// Messages in the user's conversations matching `text` (words, the last one a prefix;
    /// may be empty when a filter is set) and every filter set, best match first (newest
    /// first without words); `in` keeps one conversation. Pass the answer's `nextCursor` as
    /// `cursor` for the next page.
    public func searchMessages(_ text: String, in conversation: ConversationID? = nil, filters: SearchFilters = SearchFilters(),
                               limit: Int = 20, cursor: String? = nil) async throws -> SearchResults {
        var query: [(String, String)] = [("q", text), ("limit", "\(limit)")]
        if let conversation { query.append(("conversationId", conversation.rawValue)) }
        if let from = filters.from { query.append(("from", from)) }
        if let before = filters.before { query.append(("before", WireCoding.formatDate(before))) }
        if let after = filters.after { query.append(("after", WireCoding.formatDate(after))) }
        if let kind = filters.kind { query.append(("kind", kind)) }
        if let has = filters.hasAttachment { query.append(("hasAttachment", has ? "true" : "false")) }
        if let thread = filters.threadID { query.append(("threadId", thread.rawValue)) }
        if let cursor { query.append(("cursor", cursor)) }
        return try await http.call("GET", "/v1/search", query: query, token: try requireToken())
    }

    /// Which usernames exist (Magnet's "invalid recipients").
    public func resolve(_ usernames: [String]) async throws -> ResolveUsersResponse {
        try await http.call("POST", "/v1/users/resolve", body: ResolveUsersRequest(usernames: usernames), token: try requireToken())
    }

    /// The direct conversation with `username`, created the first time.
    public func directConversation(with username: String) async throws -> Conversation {
        try await http.call("POST", "/v1/conversations", body: CreateConversationRequest(kind: .direct, members: [username]), token: try requireToken())
    }

    /// A new group, public channel or private channel.
    public func createConversation(_ kind: ConversationKind, title: String?, members: [String] = []) async throws -> Conversation {
        try await http.call("POST", "/v1/conversations", body: CreateConversationRequest(kind: kind, members: members, title: title),
                            token: try requireToken())
    }

    /// One conversation as the caller sees it (unread count, last message, the peer of a direct one).
    public func conversation(_ id: ConversationID) async throws -> Conversation {
        try await http.call("GET", "/v1/conversations/\(id.rawValue)", token: try requireToken())
    }

    /// The caller's conversations with unread counts: the ones they pinned first (by
    /// ``Conversation/pinnedRank``), then the rest by newest activity, leaving out the ones they
    /// archived; `archived: true` lists only those. `customData` keeps the conversations whose
    /// custom data has each name at that value (top-level strings, numbers and booleans,
    /// compared as text; at most 4).
    public func conversations(limit: Int = 30, before cursor: String? = nil, customData: [String: String] = [:],
                              archived: Bool = false) async throws -> ConversationPage {
        let fields = customData.sorted { $0.key < $1.key }.map { ("customData." + $0.key, $0.value) }
        let page: ConversationPage = try await http.call("GET", "/v1/conversations", query: [("limit", "\(limit)")] + (cursor.map { [("before", $0)] } ?? [])
                                                         + fields + (archived ? [("archived", "true")] : []), token: try requireToken())
        keep { try $0.save(conversations: page.conversations) }
        return page
    }

    /// Public channels whose title starts with `query` (all when empty).
    public func channels(matching query: String = "", limit: Int = 30, offset: Int = 0) async throws -> ChannelPage {
        try await http.call("GET", "/v1/channels", query: [("query", query), ("limit", "\(limit)"), ("offset", "\(offset)")],
                            token: try requireToken())
    }

    /// Joins a public channel.
    @discardableResult
    public func join(_ conversation: ConversationID) async throws -> Conversation {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/join", body: Empty(), token: try requireToken())
    }

    /// Leaves a group or channel.
    public func leave(_ conversation: ConversationID) async throws {
        guard let me = state.user?.id else { throw ParleyError.notSignedIn }
        let _: Empty = try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/members/\(me.rawValue)", token: try requireToken())
    }

    /// A page of the conversation's members.
    public func members(of conversation: ConversationID, limit: Int = 100, offset: Int = 0) async throws -> MemberList {
        let list: MemberList = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/members",
                                                   query: [("limit", "\(limit)"), ("offset", "\(offset)")], token: try requireToken())
        keep { try $0.save(members: list.members, in: conversation) }
        return list
    }

    // MARK: - Messages

    /// A page of history, oldest first: the newest `limit` messages, or those before `seq`
    /// ("load earlier": pass the oldest seq shown, and the page ends right where the view began).
    public func history(of conversation: ConversationID, before seq: Int64? = nil, limit: Int = 50) async throws -> MessagePage {
        let page: MessagePage = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/messages",
                                                    query: [("limit", "\(limit)")] + (seq.map { [("before", "\($0)")] } ?? []), token: try requireToken())
        keep { try $0.save(messages: page.messages) }
        return page
    }

    // MARK: - Offline (the local store)

    /// The conversations kept on the device (``LocalStore``), as the list shows them; empty
    /// without a local store. Needs no network.
    public func cachedConversations(archived: Bool = false) -> [Conversation] {
        (try? localStore?.conversations(archived: archived)) ?? []
    }

    /// A conversation's messages kept on the device before `seq` (the newest when nil), oldest
    /// first; empty without a local store. Needs no network.
    public func cachedHistory(of conversation: ConversationID, before seq: Int64? = nil, limit: Int = 50) -> [Message] {
        (try? localStore?.messages(in: conversation, before: seq, limit: limit)) ?? []
    }

    /// The replies kept on the device in the thread under `root`, oldest first. Needs no network.
    public func cachedThread(_ root: MessageID, limit: Int = 50) -> [Message] {
        (try? localStore?.thread(root, limit: limit)) ?? []
    }

    /// A conversation's members kept on the device (with their receipts as the live stream
    /// last said), by when they joined. Needs no network.
    public func cachedMembers(of conversation: ConversationID) -> [Member] {
        (try? localStore?.members(of: conversation)) ?? []
    }

    /// Messages kept on the device whose text has every word of `text`, newest first. Needs no network.
    public func searchLocally(_ text: String, limit: Int = 20) -> [Message] {
        (try? localStore?.search(text, limit: limit)) ?? []
    }

    /// ``searchMessages(_:in:filters:limit:cursor:)``'s first page merged with what the device
    /// holds: the server's matches first, then the device's it did not return (offline: the
    /// device's alone).
    public func searchMessagesAnywhere(_ text: String, limit: Int = 20) async -> [Message] {
        let here = searchLocally(text, limit: limit)
        guard let there = try? await searchMessages(text, limit: limit).messages else { return here }
        let seen = Set(there.map(\.id))
        return Array((there + here.filter { !seen.contains($0.id) }).prefix(limit))
    }

    /// Writes to the local store, telling the app when it cannot (``LiveEvent/saveFailed(_:)``).
    private func keep(_ write: (LocalStore) throws -> Void) {
        guard let localStore else { return }
        do {
            try write(localStore)
        } catch {
            emit(.saveFailed(.stateNotSaved("the local store: \(error)")))
        }
    }

    /// Queues a message and returns its client id at once. It goes out over the socket as soon
    /// as the client is online (in the order sent, with the same client id after any reconnect,
    /// so nothing doubles); follow it with ``outgoingUpdates()`` or ``waitUntilSent(_:)``.
    ///
    /// With `inThread`, the message is a reply in the thread under that message (shown in the
    /// conversation too when `alsoInConversation`). `clientID` is the draft's
    /// (``Draft/clientID``) when the message is the draft being sent: the draft then clears on
    /// every device of the user; nil makes a new one. `previewLinks: false` asks the server for
    /// no link preview (``Message/linkPreview``), now or after an edit.
    @discardableResult
    public func send(_ content: MessageContent, to conversation: ConversationID, metadata: [String: String]? = nil,
                     replyTo: MessageID? = nil, inThread root: MessageID? = nil, alsoInConversation: Bool = false,
                     clientID: String? = nil, previewLinks: Bool = true) throws -> String {
        guard state.token != nil else { throw ParleyError.notSignedIn }
        let item = OutboxItem(clientID: clientID ?? UUID().uuidString.lowercased(), conversationID: conversation, content: content,
                              metadata: metadata, replyTo: replyTo, threadID: root, alsoInConversation: root != nil && alsoInConversation ? true : nil,
                              previewLinks: previewLinks ? nil : false)
        state.outbox.append(item)
        try store.save(state)
        publish(OutgoingUpdate(clientID: item.clientID, conversationID: conversation, status: .sending))
        if connectionState == .online { transmit(item) }
        return item.clientID
    }

    /// Sends to a set of usernames right away (Magnet's MessageMe): the direct conversation for
    /// one name, else the group of exactly those people, created when needed. Unknown names
    /// come back in `invalidUsernames` and are left out. Needs the server: while offline it
    /// throws (use ``send(_:to:metadata:replyTo:inThread:alsoInConversation:clientID:)`` with a conversation id to queue).
    public func send(_ content: MessageContent, toUsernames usernames: [String], metadata: [String: String]? = nil) async throws -> SendToUsersResponse {
        try await http.call("POST", "/v1/messages", body: SendToUsersRequest(to: usernames, clientID: UUID().uuidString.lowercased(),
                                                                           content: content, metadata: metadata),
                            token: try requireToken())
    }

    /// Waits until the message with `clientID` is stored (or refused).
    public func waitUntilSent(_ clientID: String) async throws -> Message {
        if let outcome = sends.outcome(of: clientID) { return try outcome.get() }
        let updates = outgoingUpdates()
        guard state.outbox.contains(where: { $0.clientID == clientID }) else {
            throw ParleyError.badResponse("no message \(clientID) is waiting to be sent")
        }
        for await update in updates where update.clientID == clientID {
            switch update.status {
            case .sent(let message): return message
            case .failed(let error): throw error
            default: continue
            }
        }
        throw ParleyError.unreachable("the client stopped")
    }

    /// Messages in the outbox, oldest first.
    public var outbox: [OutboxItem] { state.outbox }

    /// Replaces a message's content (one's own).
    public func edit(_ message: MessageID, in conversation: ConversationID, to content: MessageContent) async throws -> Message {
        try await http.call("PATCH", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)",
                            body: EditMessageRequest(content: content), token: try requireToken())
    }

    /// Deletes messages (one's own, or any as a moderator), all or none.
    public func delete(_ messages: [MessageID], in conversation: ConversationID) async throws {
        struct Deleted: Decodable, Sendable { var messages: [Message] }
        let _: Deleted = try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/messages/delete",
                                             body: DeleteMessagesRequest(ids: messages), token: try requireToken())
    }

    // MARK: Photos

    /// Sets the user's profile photo from a photo upload (``upload(file:kind:mimeType:name:clientID:)``
    /// or the `attachmentID` of a sent photo of theirs), or removes it with nil. Every sender and
    /// user then carries ``User/photoURL``: give it to MessageKit's avatar view as `server + photoURL`.
    public func setProfilePhoto(_ attachmentID: String?) async throws -> User {
        if let attachmentID {
            return try await http.call("PUT", "/v1/me/photo", body: PhotoRequest(attachmentID: attachmentID), token: try requireToken())
        }
        return try await http.call("DELETE", "/v1/me/photo", token: try requireToken())
    }

    /// Sets (or with nil removes) a group's or channel's photo (owners and admins).
    public func setPhoto(_ attachmentID: String?, of conversation: ConversationID) async throws -> Conversation {
        if let attachmentID {
            return try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/photo", body: PhotoRequest(attachmentID: attachmentID),
                                       token: try requireToken())
        }
        return try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/photo", token: try requireToken())
    }

    // MARK: Moderation

    /// Reports a message to the conversation's moderators (once per message).
    public func report(_ message: MessageID, in conversation: ConversationID, reason: ReportReason, note: String? = nil) async throws -> Report {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)/reports",
                            body: ReportRequest(reason: reason, note: note), token: try requireToken())
    }

    /// Blocks someone: their messages in a direct chat no longer reach the user (they are not told).
    public func block(_ user: UserID) async throws {
        let _: Empty = try await http.call("PUT", "/v1/me/blocks/\(user.rawValue)", token: try requireToken())
    }

    /// Ends a block.
    public func unblock(_ user: UserID) async throws {
        let _: Empty = try await http.call("DELETE", "/v1/me/blocks/\(user.rawValue)", token: try requireToken())
    }

    /// The people the user blocked.
    public func blockedUsers() async throws -> [User] {
        let list: BlockList = try await http.call("GET", "/v1/me/blocks", token: try requireToken())
        return list.users
    }

    /// Bans someone from a group or channel (owners and admins), until `until` or until lifted.
    public func ban(_ user: UserID, from conversation: ConversationID, until: Date? = nil, reason: String? = nil) async throws -> Ban {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/bans", body: BanRequest(userID: user, until: until, reason: reason),
                            token: try requireToken())
    }

    /// Lifts a ban (owners and admins).
    public func unban(_ user: UserID, from conversation: ConversationID) async throws {
        let _: Empty = try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/bans/\(user.rawValue)", token: try requireToken())
    }

    /// The bans in force (owners and admins).
    public func bans(in conversation: ConversationID) async throws -> [Ban] {
        let list: BanList = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/bans", token: try requireToken())
        return list.bans
    }

    /// Mutes a member (owners and admins): they read but may not post, until `until` or until unmuted.
    public func muteMember(_ user: UserID, in conversation: ConversationID, until: Date? = nil) async throws -> Member {
        try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/members/\(user.rawValue)/mute", body: MuteMemberRequest(until: until),
                            token: try requireToken())
    }

    /// Ends a moderator's mute.
    public func unmuteMember(_ user: UserID, in conversation: ConversationID) async throws -> Member {
        try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/members/\(user.rawValue)/mute", token: try requireToken())
    }

    /// Sets slow mode (owners and admins): members post at most once per `seconds` (0: off).
    public func setSlowMode(_ seconds: Int, in conversation: ConversationID) async throws -> Conversation {
        try await http.call("PATCH", "/v1/conversations/\(conversation.rawValue)", body: UpdateConversationRequest(slowModeSeconds: seconds),
                            token: try requireToken())
    }

    /// The conversation's reports (owners and admins): open ones, or resolved.
    public func reports(in conversation: ConversationID, resolved: Bool = false, after: String? = nil, limit: Int = 50) async throws -> ReportList {
        try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/reports",
                            query: [("state", resolved ? "resolved" : "open"), ("limit", "\(limit)")] + (after.map { [("after", $0)] } ?? []),
                            token: try requireToken())
    }

    /// Resolves a report (owners and admins): dismiss it, delete the message, or also ban its author.
    public func resolveReport(_ report: String, in conversation: ConversationID, as resolution: ReportResolution, note: String? = nil) async throws -> Report {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/reports/\(report)/resolve",
                            body: ResolveReportRequest(resolution: resolution, note: note), token: try requireToken())
    }

    // MARK: Threads

    /// A thread as the user sees it: the root (with its reply count), unread replies, read mark.
    public func thread(_ root: MessageID, in conversation: ConversationID) async throws -> ThreadInfo {
        try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/threads/\(root.rawValue)", token: try requireToken())
    }

    /// A page of a thread's replies, oldest first: the newest `limit`, or those before `seq`.
    public func threadHistory(_ root: MessageID, in conversation: ConversationID, before seq: Int64? = nil, limit: Int = 50) async throws -> MessagePage {
        let page: MessagePage = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/threads/\(root.rawValue)/messages",
                                                    query: [("limit", "\(limit)")] + (seq.map { [("before", "\($0)")] } ?? []), token: try requireToken())
        keep { try $0.save(messages: page.messages) }
        return page
    }

    /// The conversation's threads, latest reply first; pass the last one's `lastReplyAt` as `before` for more.
    public func threads(in conversation: ConversationID, before: Date? = nil, limit: Int = 20) async throws -> ThreadList {
        try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/threads",
                            query: [("limit", "\(limit)")] + (before.map { [("before", WireCoding.formatDate($0))] } ?? []),
                            token: try requireToken())
    }

    /// Marks a thread's replies read up to `seq` (never back).
    public func markThreadRead(_ root: MessageID, in conversation: ConversationID, upTo seq: Int64) async throws -> ThreadInfo {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/threads/\(root.rawValue)/read",
                            body: ThreadReadRequest(seq: seq), token: try requireToken())
    }

    // MARK: Reactions, pins and mentions

    /// Adds the user's reaction (one emoji) to a message; doing it again changes nothing.
    /// Every member's devices get a `reaction.added` event.
    ///
    /// - Returns: the message with its counts (``Message/reactions``) and the user's own
    ///   (``Message/myReactions``).
    public func react(_ emoji: String, to message: MessageID, in conversation: ConversationID) async throws -> Message {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)/reactions",
                            body: ReactionRequest(emoji: emoji), token: try requireToken())
    }

    /// Takes the user's reaction back; doing it again changes nothing.
    public func unreact(_ emoji: String, from message: MessageID, in conversation: ConversationID) async throws -> Message {
        let escaped = emoji.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? emoji
        return try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)/reactions/\(escaped)",
                                   token: try requireToken())
    }

    /// Who reacted to a message (with `emoji`, or with anything), oldest first.
    public func reactions(on message: MessageID, in conversation: ConversationID, emoji: String? = nil, limit: Int = 50,
                          offset: Int = 0) async throws -> ReactionPage {
        try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)/reactions",
                            query: [("limit", "\(limit)"), ("offset", "\(offset)")] + (emoji.map { [("emoji", $0)] } ?? []),
                            token: try requireToken())
    }

    /// Sets the user's vote in a poll to `options` (indexes of the poll's options), replacing
    /// any earlier one; `[]` takes it back. Answers the message with the new counts and the
    /// user's votes (`myVotes`). A poll is sent like any message:
    ///
    /// ```swift
    /// let sent = try client.send(.poll(PollContent(question: "Lunch?", options: ["Pizza", "Sushi"])), to: room)
    /// let poll = try await client.waitUntilSent(sent)
    /// let voted = try await client.vote([1], in: poll.id, conversation: room)
    /// print(voted.poll?.options[1].votes ?? 0, voted.myVotes ?? [])
    /// ```
    public func vote(_ options: [Int], in poll: MessageID, conversation: ConversationID) async throws -> Message {
        try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/messages/\(poll.rawValue)/poll/vote",
                            body: VoteRequest(options: options), token: try requireToken())
    }

    /// Closes a poll (its author, or a moderator): no more votes; members get `poll.closed`.
    public func closePoll(_ poll: MessageID, in conversation: ConversationID) async throws -> Message {
        try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/messages/\(poll.rawValue)/poll/close", token: try requireToken())
    }

    /// Pins a message (in a public channel, owners and admins only). Members get `message.pinned`.
    public func pin(_ message: MessageID, in conversation: ConversationID) async throws -> Message {
        try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)/pin", token: try requireToken())
    }

    /// Unpins a message. Members get `message.unpinned`.
    public func unpin(_ message: MessageID, in conversation: ConversationID) async throws -> Message {
        try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/messages/\(message.rawValue)/pin", token: try requireToken())
    }

    /// A conversation's pinned messages, most recently pinned first.
    public func pins(in conversation: ConversationID) async throws -> [Message] {
        let list: MessageList = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/pins", token: try requireToken())
        return list.messages
    }

    /// Messages that mention the user, newest first; pass the last one's id as `before` for more.
    public func mentions(before: MessageID? = nil, limit: Int = 50) async throws -> MessageList {
        try await http.call("GET", "/v1/mentions", query: [("limit", "\(limit)")] + (before.map { [("before", $0.rawValue)] } ?? []),
                            token: try requireToken())
    }

    /// Marks everything up to `seq` read (and so delivered).
    public func markRead(_ conversation: ConversationID, upTo seq: Int64) async throws {
        let _: Receipt = try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/receipts",
                                             body: ReceiptUpdate(readSeq: seq), token: try requireToken())
    }

    /// Tells the other members the user is (or stopped) typing, in the conversation or in the
    /// thread under `thread` (its root). Repeat every few seconds while typing. Does nothing
    /// while offline.
    public func setTyping(_ typing: Bool, in conversation: ConversationID, thread: MessageID? = nil) {
        write(.typing(id: nil, conversationID: conversation, isTyping: typing, threadID: thread))
    }

    /// Who of `users` is online (people sharing a conversation with the caller).
    public func presence(of users: [UserID]) async throws -> [Presence] {
        let answer = try await command { .presence(id: $0, userIDs: users) }
        guard case .ack(_, .value(let result)) = answer else { return [] }
        return try result.decode(as: PresenceList.self).users
    }

    // MARK: - Live

    /// Opens the realtime socket and keeps it open: reconnects with jittered backoff, resumes
    /// from the last position, sends the outbox. Returns at once.
    public func connect() {
        guard liveTask == nil, state.token != nil else { return }
        liveTask = Task { await self.runLive() }
    }

    /// Closes the socket and stops reconnecting; the outbox is kept.
    public func disconnect() {
        liveTask?.cancel()
        liveTask = nil
        connection?.close()
        connection = nil
        setState(.offline)
    }

    /// Every live event from now on (each call gets its own stream).
    public func events() -> AsyncStream<LiveEvent> {
        eventListeners.add(buffer: 10_000) { id in Task { await self.forget(id, from: .events) } }
    }

    /// The events of one conversation.
    public func events(in conversation: ConversationID) -> AsyncStream<ConversationEvent> {
        let all = events()
        return AsyncStream { continuation in
            let task = Task {
                for await case .event(let event) in all where event.conversationID == conversation { continuation.yield(event) }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The connection state now and every change after.
    public func connectionStates() -> AsyncStream<ConnectionState> {
        stateListeners.add(buffer: 64, first: connectionState) { id in Task { await self.forget(id, from: .states) } }
    }

    /// Status changes of this client's outgoing messages.
    public func outgoingUpdates() -> AsyncStream<OutgoingUpdate> {
        outgoingListeners.add(buffer: 10_000) { id in Task { await self.forget(id, from: .outgoing) } }
    }

    /// The newest event position processed.
    public var position: Int64? { state.resumePoint?.newest }

    /// Where a reconnect resumes from: the newest position processed of each shard of the
    /// server's log (docs/protocol.md, "Resuming").
    public var cursor: LogCursor? { state.resumePoint }

    private enum ListenerKind: Sendable { case events, states, outgoing }

    private func forget(_ id: UUID, from kind: ListenerKind) {
        switch kind {
        case .events: eventListeners.remove(id)
        case .states: stateListeners.remove(id)
        case .outgoing: outgoingListeners.remove(id)
        }
    }

    private func setState(_ new: ConnectionState) {
        guard new != connectionState else { return }
        connectionState = new
        stateListeners.yield(new)
    }

    private func publish(_ update: OutgoingUpdate) {
        outgoingListeners.yield(update)
    }

    private func publish(_ updates: [OutgoingUpdate]) {
        for update in updates { outgoingListeners.yield(update) }
    }

    private func runLive() async {
        var failures = 0
        while !Task.isCancelled {
            guard let token = state.token else {
                setState(.signedOut)
                return
            }
            setState(.connecting)
            var code: UInt16?
            do {
                let connection = try await RealtimeTransport.connect(url: realtimeURL, appKey: appKey)
                self.connection = connection
                let resume = state.resumePoint
                write(.auth(ClientFrame.Auth(token: token, position: resume?.newest, cursor: resume, epoch: resume == nil ? nil : state.epoch)))
                setState(.resyncing)
                for await text in connection.frames {
                    if handle(text) { failures = 0 }
                }
                code = connection.closeCode
            } catch {
                code = nil
            }
            connection = nil
            let lost = waiting
            waiting = [:]
            sends.connectionLost()
            for continuation in lost.values { continuation.resume(throwing: ParleyError.unreachable("the connection dropped")) }
            if Task.isCancelled { return }
            if code == RealtimeCloseCode.unauthorized {
                setState(.signedOut)
                liveTask = nil
                return
            }
            setState(.offline)
            failures += 1
            // Jittered exponential backoff: 0.25 s, 0.5 s, 1 s … up to 30 s, ±50%.
            let base = min(30.0, 0.25 * pow(2.0, Double(min(failures - 1, 8))))
            try? await Task.sleep(for: .milliseconds(Int(base * 1000 * Double.random(in: 0.5...1.5))))
        }
    }

    /// Handles one server frame; true when it shows the connection is healthy (`ready`).
    /// A frame type this SDK does not know (a newer server's) is skipped; an event of a kind
    /// it does not know is passed on like any other (``ConversationEvent/Kind/unknown(_:)``).
    private func handle(_ text: String) -> Bool {
        guard let frame = try? WireCoding.decoder().decode(ServerFrame.self, from: Data(text.utf8)) else { return false }
        switch frame {
        case .ready(let ready):
            if let epoch = ready.epoch, epoch != state.epoch {
                state.epoch = epoch
                persist()
            }
            advance(to: ready.resumePoint)
            setState(.online)
            for item in state.outbox { transmit(item) }
            return true
        case .event(let event):
            apply(event)
        case .typing(let typing):
            emit(.typing(conversationID: typing.conversationID, userID: typing.userID, isTyping: typing.isTyping,
                         expiresIn: .milliseconds(typing.expiresInMs), threadID: typing.threadID))
        case .presence(let presence):
            emit(.presence(presence))
        case .blocks(let blocks):
            emit(.blocks(blocks.userIDs))
        case .resync(let resync):
            if let epoch = resync.epoch, epoch != state.epoch {
                // Another history: its positions are not comparable with ours.
                state.epoch = epoch
                state.cursor = resync.resumePoint
                state.position = resync.resumePoint.newest
                persist()
            } else {
                advance(to: resync.resumePoint)
            }
            // What the device kept may have gaps now: empty it; the reads the app makes next
            // (the resync tells its screens to reload) fill it again.
            keep { try $0.reset(user: self.state.user?.id) }
            emit(.resync(position: resync.position))
        case .ack(let id, _), .error(let id?, _), .pong(let id?):
            if let clientID = sends.answered(id) { sendAnswered(clientID, frame) }
            waiting.removeValue(forKey: id)?.resume(returning: frame)
        case .error(nil, _), .pong(nil), .unknown:
            break
        }
        return false
    }

    private func emit(_ event: LiveEvent) {
        eventListeners.yield(event)
    }

    /// Takes one event's position as processed (in its own shard).
    private func advance(to position: Int64) {
        var cursor = state.resumePoint ?? LogCursor(shards: 1)
        guard cursor.advance(to: position) else { return }
        state.cursor = cursor
        state.position = cursor.newest
        persist()
    }

    /// Takes the server's cursor (`ready`, `resync`): the newest of each shard; one of another
    /// number of shards (a server that now has another log) replaces ours.
    private func advance(to server: LogCursor) {
        var cursor = state.resumePoint ?? server
        if cursor.shards == server.shards { cursor.advance(to: server) } else { cursor = server }
        guard cursor != state.cursor else { return }
        state.cursor = cursor
        state.position = cursor.newest
        persist()
    }

    /// Saves the state; a failure is told to the app (``LiveEvent/saveFailed(_:)``), never
    /// swallowed. The state stays in memory and the next save writes it whole.
    private func persist() {
        do {
            try store.save(state)
        } catch {
            emit(.saveFailed(.stateNotSaved(String(describing: error))))
        }
    }

    private func apply(_ event: ConversationEvent) {
        // Kept on the device before the position moves: a crash between the two replays the
        // event, and applying it again changes nothing.
        if let me = state.user?.id { keep { try $0.apply(event, me: me) } }
        advance(to: event.position)
        emit(.event(event))
        let me = state.user?.id
        switch event.type {
        case .messageCreated where event.message?.sender.id != me:
            if let seq = event.seq { scheduleDelivered(event.conversationID, seq) }
            // The sender has seen everything up to what they sent (the server's rule).
            if let seq = event.seq, let sender = event.message?.sender.id {
                publish(receipts.posted(sender, seq: seq, in: event.conversationID))
            }
        case .receiptUpdated where event.userID != me:
            guard let user = event.userID else { break }
            publish(receipts.receipt(user, delivered: event.deliveredSeq ?? 0, read: event.readSeq ?? 0, in: event.conversationID))
        case .deliveryUpdated where event.userID == me:
            publish(receipts.deliveries(event.deliveries ?? [], in: event.conversationID))
        case .memberAdded where event.userID != me:
            if let user = event.userID { receipts.joined(user, in: event.conversationID) }
        case .memberRemoved:
            if let user = event.userID { publish(receipts.left(user, in: event.conversationID)) }
        default:
            break
        }
    }

    /// Marks received messages delivered, one receipt per conversation per burst.
    private func scheduleDelivered(_ conversation: ConversationID, _ seq: Int64) {
        pendingDelivered[conversation] = max(pendingDelivered[conversation] ?? 0, seq)
        guard !deliveredFlushScheduled else { return }
        deliveredFlushScheduled = true
        Task {
            try? await Task.sleep(for: .milliseconds(50))
            self.flushDelivered()
        }
    }

    private func flushDelivered() {
        deliveredFlushScheduled = false
        for (conversation, seq) in pendingDelivered {
            commandCounter += 1
            write(.markDelivered(id: "d\(commandCounter)", conversationID: conversation, seq: seq))
        }
        pendingDelivered = [:]
    }

    // MARK: - Outbox

    private func transmit(_ item: OutboxItem) {
        guard connection != nil, !sends.isInFlight(item.clientID) else { return }
        commandCounter += 1
        let id = "s\(commandCounter)"
        sends.sent(item.clientID, as: id)
        write(.send(id: id, conversationID: item.conversationID,
                    message: SendMessageRequest(clientID: item.clientID, content: item.content, metadata: item.metadata, replyTo: item.replyTo,
                                                threadID: item.threadID, alsoInConversation: item.alsoInConversation,
                                                previewLinks: item.previewLinks)))
    }

    private func sendAnswered(_ clientID: String, _ frame: ServerFrame) {
        guard let index = state.outbox.firstIndex(where: { $0.clientID == clientID }) else { return }
        let item = state.outbox[index]
        if case .ack(_, .sent(_, let message)) = frame {
            temporaryRefusals[clientID] = nil
            state.outbox.remove(at: index)
            persist()
            sends.finished(clientID, .success(message))
            publish(OutgoingUpdate(clientID: clientID, conversationID: item.conversationID, status: .sent(message)))
            publish(receipts.sent(clientID, seq: message.seq, in: item.conversationID))
        } else if let error = frame.error, !error.isTemporary {
            temporaryRefusals[clientID] = nil
            state.outbox.remove(at: index)
            persist()
            sends.finished(clientID, .failure(.server(error)))
            publish(OutgoingUpdate(clientID: clientID, conversationID: item.conversationID, status: .failed(.server(error))))
        } else if let error = frame.error {
            // A temporary refusal (rate limited, the store unavailable) stays in the outbox and
            // goes again after the server's Retry-After, else after a jittered backoff (0.5 s,
            // 1 s, 2 s … up to 30 s), or sooner on the next reconnect.
            let retries = temporaryRefusals[clientID, default: 0]
            temporaryRefusals[clientID] = retries + 1
            let backoff = min(30.0, 0.5 * pow(2.0, Double(min(retries, 6)))) * Double.random(in: 0.75...1.25)
            let delay = error.retryAfterSeconds.map { Double(max(1, $0)) } ?? backoff
            Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
                await self?.retransmit(clientID)
            }
        }
    }

    /// Sends an outbox item again after a temporary refusal, if it is still waiting.
    private func retransmit(_ clientID: String) {
        guard let item = state.outbox.first(where: { $0.clientID == clientID }) else { return }
        transmit(item)
    }


    /// Learns the other members' watermarks (once per conversation) so statuses can move.
    public func track(_ conversation: ConversationID) async throws {
        publish(receipts.learn(try await receipts(in: conversation), except: state.user?.id, in: conversation))
    }

    /// Every member's watermarks in a conversation (the first 100 members), this user's too.
    public func receipts(in conversation: ConversationID) async throws -> [Receipt] {
        let list: ReceiptList = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/receipts", query: [("limit", "100")],
                                                    token: try requireToken())
        return list.receipts
    }

    // MARK: - Commands

    private func write(_ frame: ClientFrame) {
        guard let connection, let data = try? JSONEncoder().encode(frame) else { return }
        connection.send(String(decoding: data, as: UTF8.self))
    }

    /// Sends the command `make` builds with a fresh id and waits for its answer.
    private func command(_ make: (String) -> ClientFrame) async throws -> ServerFrame {
        guard connection != nil, connectionState == .online else { throw ParleyError.unreachable("not connected") }
        commandCounter += 1
        let id = "c\(commandCounter)"
        let frame = make(id)
        let answer = try await withCheckedThrowingContinuation { continuation in
            waiting[id] = continuation
            write(frame)
        }
        if case .error(_, let error) = answer { throw ParleyError.server(error) }
        return answer
    }
}
