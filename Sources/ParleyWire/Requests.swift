public import Foundation

// Request and response bodies of the REST API (docs/openapi.yaml). The SDK encodes the same
// types the server decodes, so the two cannot drift apart.

/// `POST /v1/users`: register.
public struct RegisterRequest: Hashable, Codable, Sendable {
    /// The username (unique in the app, compared case-insensitively).
    public var username: String
    /// The password; sent only in this request, stored only as an Argon2id hash.
    public var password: String
    /// Defaults to the username.
    public var displayName: String?
    /// A label for the session this creates. Default: "unnamed device".
    public var device: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(username: String, password: String, displayName: String? = nil, device: String? = nil) {
        self.username = username
        self.password = password
        self.displayName = displayName
        self.device = device
    }
}

/// `POST /v1/sessions`: sign in.
public struct SignInRequest: Hashable, Codable, Sendable {
    /// The username (unique in the app, compared case-insensitively).
    public var username: String
    /// The password; sent only in this request, stored only as an Argon2id hash.
    public var password: String
    /// A label for the new session ("Ana's iPhone"). Default: "unnamed device".
    public var device: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(username: String, password: String, device: String? = nil) {
        self.username = username
        self.password = password
        self.device = device
    }
}

/// `POST /v1/sessions/guest`: an anonymous account with a display name only.
public struct GuestSignInRequest: Hashable, Codable, Sendable {
    /// The name shown on message bubbles.
    public var displayName: String
    /// A label for the new session ("Ana's iPhone"). Default: "unnamed device".
    public var device: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(displayName: String, device: String? = nil) {
        self.displayName = displayName
        self.device = device
    }
}

/// `PATCH /v1/me`. Absent fields stay as they are; `customData: null` clears it.
public struct UpdateProfileRequest: Hashable, Codable, Sendable {
    /// The name shown on message bubbles.
    public var displayName: String?
    /// App-defined JSON; at most ``Limits/customDataBytes`` encoded.
    public var customData: JSONValue?
    /// Creates the value; each argument sets the property of the same name.
    public init(displayName: String? = nil, customData: JSONValue? = nil) {
        self.displayName = displayName
        self.customData = customData
    }
}

/// `POST /v1/me/password`: change the password; other devices are signed out.
public struct ChangePasswordRequest: Hashable, Codable, Sendable {
    /// The password now, to prove it is the account holder at the keyboard.
    public var currentPassword: String
    /// The new password (``Limits/passwordBytes``, not the username).
    public var newPassword: String
    /// Creates the value; each argument sets the property of the same name.
    public init(currentPassword: String, newPassword: String) {
        self.currentPassword = currentPassword
        self.newPassword = newPassword
    }
}

/// `DELETE /v1/me`: delete the caller's own account (App Store guideline 5.1.1(v)).
public struct DeleteAccountRequest: Hashable, Codable, Sendable {
    /// The account's password; required when it has one. Guests and accounts the app's
    /// backend made have none and prove themselves with a recent session instead.
    public var password: String?
    /// Also erase what the user said: each of their messages becomes a tombstone (text,
    /// attachments, reactions and search entries gone) and their uploads are released.
    public var erase: Bool?
    /// Creates the value; each argument sets the property of the same name.
    public init(password: String? = nil, erase: Bool? = nil) {
        self.password = password
        self.erase = erase
    }
}

/// How a directory search orders its results (`sort=` on `GET /v1/users`).
public enum UserSort: String, Sendable, Hashable, CaseIterable {
    /// By username, A to Z (the default); `-username` for Z to A.
    case username, usernameDescending = "-username"
    /// By display name, then username; `-displayName` reversed.
    case displayName, displayNameDescending = "-displayName"
    /// Oldest accounts first; `-createdAt` newest first.
    case createdAt, createdAtDescending = "-createdAt"
}

/// `GET /v1/users`: one page of a directory search.
public struct UserPage: Hashable, Codable, Sendable {
    /// The users, in the order asked for or sorted as asked.
    public var users: [User]
    /// How many users match in all.
    public var total: Int
    /// Pass as `offset` for the next page; nil on the last page.
    public var nextOffset: Int?
    /// Creates the value; each argument sets the property of the same name.
    public init(users: [User], total: Int, nextOffset: Int?) {
        self.users = users
        self.total = total
        self.nextOffset = nextOffset
    }
}

/// `POST /v1/users/resolve`.
public struct ResolveUsersRequest: Hashable, Codable, Sendable {
    /// Usernames, compared case-insensitively.
    public var usernames: [String]
    /// Creates the value; each argument sets the property of the same name.
    public init(usernames: [String]) { self.usernames = usernames }
}

/// The users found, and the names that match nobody (Magnet's `invalidUsernames`).
public struct ResolveUsersResponse: Hashable, Codable, Sendable {
    /// The users, in the order asked for or sorted as asked.
    public var users: [User]
    /// The names that match no user in this app.
    public var invalidUsernames: [String]
    /// Creates the value; each argument sets the property of the same name.
    public init(users: [User], invalidUsernames: [String]) {
        self.users = users
        self.invalidUsernames = invalidUsernames
    }
}

/// `POST /v1/conversations`.
public struct CreateConversationRequest: Hashable, Codable, Sendable {
    /// Direct, group, public or private.
    public var kind: ConversationKind
    /// Usernames to add besides the caller (a direct conversation takes exactly one).
    public var members: [String]?
    /// The title (groups and channels).
    public var title: String?
    /// App-defined JSON; at most ``Limits/customDataBytes`` encoded.
    public var customData: JSONValue?
    /// Creates the value; each argument sets the property of the same name.
    public init(kind: ConversationKind, members: [String]? = nil, title: String? = nil, customData: JSONValue? = nil) {
        self.kind = kind
        self.members = members
        self.title = title
        self.customData = customData
    }
}

/// `PATCH /v1/conversations/{id}`.
public struct UpdateConversationRequest: Hashable, Codable, Sendable {
    /// The title (groups and channels).
    public var title: String?
    /// App-defined JSON; at most ``Limits/customDataBytes`` encoded.
    public var customData: JSONValue?
    /// Slow mode, 0 (off) to 3600 seconds (groups and channels; owners and admins).
    public var slowModeSeconds: Int?
    /// Keep messages this many days, 1–36500, or 0 to keep them forever whatever the app's
    /// policy; -1 goes back to the app's policy (owners and admins).
    public var retentionDays: Int?
    /// Creates the value; each argument sets the property of the same name.
    public init(title: String? = nil, customData: JSONValue? = nil, slowModeSeconds: Int? = nil, retentionDays: Int? = nil) {
        self.title = title
        self.customData = customData
        self.slowModeSeconds = slowModeSeconds
        self.retentionDays = retentionDays
    }
}

/// `POST /v1/conversations/{id}/members`.
public struct AddMembersRequest: Hashable, Codable, Sendable {
    /// Usernames, compared case-insensitively.
    public var usernames: [String]
    /// Default: member.
    public var role: MemberRole?
    /// Creates the value; each argument sets the property of the same name.
    public init(usernames: [String], role: MemberRole? = nil) {
        self.usernames = usernames
        self.role = role
    }
}

/// `PATCH /v1/conversations/{id}/members/{userId}`.
public struct UpdateMemberRequest: Hashable, Codable, Sendable {
    /// The member's role (after the change, for membership events).
    public var role: MemberRole
    /// Creates the value; each argument sets the property of the same name.
    public init(role: MemberRole) { self.role = role }
}

/// `POST /v1/conversations/{id}/messages`.
public struct SendMessageRequest: Hashable, Codable, Sendable {
    /// The client's own id for this send; a retry with the same id returns the same message.
    public var clientID: String
    /// What the message carries.
    public var content: MessageContent
    /// App-defined string pairs; at most ``Limits/metadataEntries``.
    public var metadata: [String: String]?
    /// The message this one answers.
    public var replyTo: MessageID?
    /// A reply in the thread under this message (the thread's root, itself not a reply).
    public var threadID: MessageID?
    /// With ``threadID``: show the reply in the conversation too (Slack's "also send to the
    /// channel"). Default false: the reply is in the thread only.
    public var alsoInConversation: Bool?
    /// `false`: no link preview for this message, now or after an edit (default: the server
    /// previews the first link when the app has previews on).
    public var previewLinks: Bool?
    enum CodingKeys: String, CodingKey { case clientID = "clientId", content, metadata, replyTo, threadID = "threadId", alsoInConversation, previewLinks }
    /// Creates the value; each argument sets the property of the same name.
    public init(clientID: String, content: MessageContent, metadata: [String: String]? = nil, replyTo: MessageID? = nil,
                threadID: MessageID? = nil, alsoInConversation: Bool? = nil, previewLinks: Bool? = nil) {
        self.clientID = clientID
        self.content = content
        self.metadata = metadata
        self.replyTo = replyTo
        self.threadID = threadID
        self.alsoInConversation = alsoInConversation
        self.previewLinks = previewLinks
    }
}

/// A thread as one member sees it: its root message (with ``Message/replyCount`` and
/// ``Message/lastReplyAt``), how many replies they have not read, and whether they take part.
public struct ThreadInfo: Hashable, Codable, Sendable {
    /// The message the thread is under.
    public var root: Message
    /// Replies by others after ``readSeq``, not deleted (capped like a conversation's).
    public var unreadCount: Int
    /// The caller's read watermark in the thread: the seq of the last reply they read.
    public var readSeq: Int64
    /// The caller wrote the root or a reply, or a reply mentions them.
    public var participating: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(root: Message, unreadCount: Int, readSeq: Int64, participating: Bool) {
        self.root = root
        self.unreadCount = unreadCount
        self.readSeq = readSeq
        self.participating = participating
    }
}

/// `GET /v1/conversations/{id}/threads`: the conversation's threads, latest reply first.
public struct ThreadList: Hashable, Codable, Sendable {
    /// The threads.
    public var threads: [ThreadInfo]
    /// More follow (ask with `before` = the last thread's `lastReplyAt` … see docs/api.md).
    public var hasMore: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(threads: [ThreadInfo], hasMore: Bool) {
        self.threads = threads
        self.hasMore = hasMore
    }
}

/// `POST /v1/conversations/{id}/threads/{rootId}/read`.
public struct ThreadReadRequest: Hashable, Codable, Sendable {
    /// Every reply up to this seq was shown (never moves back).
    public var seq: Int64
    /// Creates the value; each argument sets the property of the same name.
    public init(seq: Int64) { self.seq = seq }
}

/// `POST /v1/messages`: send to a set of usernames; the server finds (or creates) the direct
/// conversation (one name) or the group with exactly those members.
public struct SendToUsersRequest: Hashable, Codable, Sendable {
    /// The recipients' usernames (besides the sender).
    public var to: [String]
    /// The client's own id for the send: a retry with it returns the same message.
    public var clientID: String
    /// What the message carries.
    public var content: MessageContent
    /// App-defined string pairs; at most ``Limits/metadataEntries``.
    public var metadata: [String: String]?
    enum CodingKeys: String, CodingKey { case to, clientID = "clientId", content, metadata, conversationID = "conversationId" }
    /// Creates the value; each argument sets the property of the same name.
    public init(to: [String], clientID: String, content: MessageContent, metadata: [String: String]? = nil) {
        self.to = to
        self.clientID = clientID
        self.content = content
        self.metadata = metadata
    }

    /// Reads the fields; a body naming a conversation instead of people is told where it goes.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if !container.contains(.to), container.contains(.conversationID) {
            throw DecodingError.dataCorruptedError(forKey: .conversationID, in: container, debugDescription:
                "this endpoint sends to usernames given in 'to'; to send into a conversation, POST /v1/conversations/{id}/messages")
        }
        to = try container.decode([String].self, forKey: .to)
        clientID = try container.decode(String.self, forKey: .clientID)
        content = try container.decode(MessageContent.self, forKey: .content)
        metadata = try container.decodeIfPresent([String: String].self, forKey: .metadata)
    }

    /// Writes the fields.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(to, forKey: .to)
        try container.encode(clientID, forKey: .clientID)
        try container.encode(content, forKey: .content)
        try container.encodeIfPresent(metadata, forKey: .metadata)
    }
}

/// The answer to ``SendToUsersRequest``: the message went to the names that exist;
/// `invalidUsernames` lists the others (Magnet's `invalidUsernames`).
public struct SendToUsersResponse: Hashable, Codable, Sendable {
    /// The message (nil when nothing was sent).
    public var message: Message?
    /// The conversation it went to.
    public var conversation: Conversation?
    /// The names that match no user in this app.
    public var invalidUsernames: [String]
    /// When some names matched nobody, where the message went instead, in words
    /// ("sent to the direct chat with bob; not found: bobby").
    public var note: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(message: Message?, conversation: Conversation?, invalidUsernames: [String], note: String? = nil) {
        self.message = message
        self.conversation = conversation
        self.invalidUsernames = invalidUsernames
        self.note = note
    }
}

/// `PATCH /v1/conversations/{id}/messages/{messageId}`: the author replaces the content.
public struct EditMessageRequest: Hashable, Codable, Sendable {
    /// What the message carries.
    public var content: MessageContent
    /// App-defined string pairs; at most ``Limits/metadataEntries``.
    public var metadata: [String: String]?
    /// Creates the value; each argument sets the property of the same name.
    public init(content: MessageContent, metadata: [String: String]? = nil) {
        self.content = content
        self.metadata = metadata
    }
}

/// `POST /v1/conversations/{id}/messages/delete`: all or nothing.
public struct DeleteMessagesRequest: Hashable, Codable, Sendable {
    /// The messages to delete: 1…100 ids.
    public var ids: [MessageID]
    /// Creates the value; each argument sets the property of the same name.
    public init(ids: [MessageID]) { self.ids = ids }
}

/// One page of history.
public struct MessagePage: Hashable, Codable, Sendable {
    /// In the order asked for.
    public var messages: [Message]
    /// More messages exist before the oldest in this page.
    public var hasOlder: Bool
    /// More messages exist after the newest in this page.
    public var hasNewer: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(messages: [Message], hasOlder: Bool, hasNewer: Bool) {
        self.messages = messages
        self.hasOlder = hasOlder
        self.hasNewer = hasNewer
    }
}

/// One page of a conversation's event log.
public struct EventPage: Hashable, Codable, Sendable {
    /// The events, oldest first.
    public var events: [ConversationEvent]
    /// More events follow the last one in this page.
    public var hasMore: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(events: [ConversationEvent], hasMore: Bool) {
        self.events = events
        self.hasMore = hasMore
    }
}

/// `GET /v1/conversations`: newest activity first.
public struct ConversationPage: Hashable, Codable, Sendable {
    /// The conversations, newest activity first.
    public var conversations: [Conversation]
    /// Pass as `before` for the next page; nil on the last page.
    public var nextCursor: String?
    /// Where the realtime stream stood when this page was read (the log's newest position of
    /// each shard): a device that shows this page and then resumes from it misses nothing
    /// after it (nil from servers before cursors).
    public var liveCursor: LogCursor?
    /// Creates the value; each argument sets the property of the same name.
    public init(conversations: [Conversation], nextCursor: String?, liveCursor: LogCursor? = nil) {
        self.conversations = conversations
        self.nextCursor = nextCursor
        self.liveCursor = liveCursor
    }
}

/// `POST /v1/conversations/{id}/receipts`: move the caller's watermarks forward. Values
/// behind the current ones are ignored; values past the last seq are clamped to it.
public struct ReceiptUpdate: Hashable, Codable, Sendable {
    /// Move the delivered watermark up to this seq.
    public var deliveredSeq: Int64?
    /// Move the read watermark up to this seq (implies delivered).
    public var readSeq: Int64?
    /// Creates the value; each argument sets the property of the same name.
    public init(deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}

/// `GET /v1/conversations/{id}/messages/{messageId}/receipts`: who has it.
public struct MessageReceipts: Hashable, Codable, Sendable {
    /// Sent, delivered or read, for its sender.
    public var status: DeliveryStatus
    /// Members (besides the author) whose delivered watermark passed it; at most 1,000.
    public var deliveredTo: [UserID]
    /// Members (besides the author) whose read watermark passed it; at most 1,000.
    public var readBy: [UserID]
    /// Creates the value; each argument sets the property of the same name.
    public init(status: DeliveryStatus, deliveredTo: [UserID], readBy: [UserID]) {
        self.status = status
        self.deliveredTo = deliveredTo
        self.readBy = readBy
    }
}

/// `GET /v1/search`.
public struct SearchResults: Hashable, Codable, Sendable {
    /// Best match first (newest first when the search has no words, only filters).
    public var messages: [Message]
    /// Pass as `cursor` for the next page; nil on the last.
    public var nextCursor: String? = nil
    /// Creates the value; each argument sets the property of the same name.
    public init(messages: [Message], nextCursor: String? = nil) {
        self.messages = messages
        self.nextCursor = nextCursor
    }
}

/// What a message search keeps, besides its words (`GET /v1/search`'s query parameters):
/// every field set must hold.
public struct SearchFilters: Hashable, Codable, Sendable {
    /// Sent by this username.
    public var from: String?
    /// Sent before this time.
    public var before: Date?
    /// Sent at or after this time.
    public var after: Date?
    /// Of this content type: `text`, `markdown`, `photo`, `video`, `audio`, `file`, `location`,
    /// `custom` or `system`.
    public var kind: String?
    /// With (true) or without (false) an attachment.
    public var hasAttachment: Bool?
    /// A reply in the thread under this message.
    public var threadID: MessageID?

    /// Whether no filter is set.
    public var isEmpty: Bool { self == SearchFilters() }

    /// Creates the value; each argument sets the property of the same name.
    public init(from: String? = nil, before: Date? = nil, after: Date? = nil, kind: String? = nil, hasAttachment: Bool? = nil,
                threadID: MessageID? = nil) {
        self.from = from
        self.before = before
        self.after = after
        self.kind = kind
        self.hasAttachment = hasAttachment
        self.threadID = threadID
    }
}

/// A list of members.
public struct MemberList: Hashable, Codable, Sendable {
    /// The members.
    public var members: [Member]
    /// Creates the value; each argument sets the property of the same name.
    public init(members: [Member]) { self.members = members }
}

/// A list of sessions (devices).
public struct SessionList: Hashable, Codable, Sendable {
    /// The sessions, newest first, without tokens.
    public var sessions: [Session]
    /// Creates the value; each argument sets the property of the same name.
    public init(sessions: [Session]) { self.sessions = sessions }
}

/// Receipts of every member.
public struct ReceiptList: Hashable, Codable, Sendable {
    /// One receipt per member.
    public var receipts: [Receipt]
    /// Creates the value; each argument sets the property of the same name.
    public init(receipts: [Receipt]) { self.receipts = receipts }
}

/// A list of conversations (public channel directory).
public struct ChannelPage: Hashable, Codable, Sendable {
    /// The public channels, by title.
    public var channels: [Conversation]
    /// Pass as `offset` for the next page; nil on the last page.
    public var nextOffset: Int?
    /// Creates the value; each argument sets the property of the same name.
    public init(channels: [Conversation], nextOffset: Int?) {
        self.channels = channels
        self.nextOffset = nextOffset
    }
}

/// `POST /v1/conversations/{id}/messages/{messageId}/reactions`, and the realtime
/// `reaction.add` / `reaction.remove`.
public struct ReactionRequest: Hashable, Codable, Sendable {
    /// One emoji (a single grapheme cluster, at most ``Limits/emojiBytes`` bytes).
    public var emoji: String
    /// Creates the value; each argument sets the property of the same name.
    public init(emoji: String) { self.emoji = emoji }
}

/// One person's reaction, in a "who reacted" list.
public struct Reaction: Hashable, Codable, Sendable {
    /// Who reacted.
    public var user: Sender
    /// With what.
    public var emoji: String
    /// When.
    public var reactedAt: Date
    /// Creates the value; each argument sets the property of the same name.
    public init(user: Sender, emoji: String, reactedAt: Date) {
        self.user = user
        self.emoji = emoji
        self.reactedAt = reactedAt
    }
}

/// `GET /v1/conversations/{id}/messages/{messageId}/reactions`: who reacted, oldest first.
public struct ReactionPage: Hashable, Codable, Sendable {
    /// The reactions on this page.
    public var reactions: [Reaction]
    /// More follow (ask again with a larger `offset`).
    public var hasMore: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(reactions: [Reaction], hasMore: Bool) {
        self.reactions = reactions
        self.hasMore = hasMore
    }
}

/// A list of messages: a conversation's pins (most recently pinned first) or the caller's
/// mentions (newest first).
public struct MessageList: Hashable, Codable, Sendable {
    /// The messages.
    public var messages: [Message]
    /// More follow (mentions: ask again with `before` set to the last message's id).
    public var hasMore: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(messages: [Message], hasMore: Bool) {
        self.messages = messages
        self.hasMore = hasMore
    }
}

/// `POST /v1/conversations/{id}/bans`.
public struct BanRequest: Hashable, Codable, Sendable {
    /// Who (a member, or anyone of the app for a public channel).
    public var userID: UserID
    /// When the ban ends; nil: until lifted.
    public var until: Date?
    /// Shown to moderators and in the event; at most 500 characters.
    public var reason: String?
    enum CodingKeys: String, CodingKey { case userID = "userId", until, reason }
    /// Creates the value; each argument sets the property of the same name.
    public init(userID: UserID, until: Date? = nil, reason: String? = nil) {
        self.userID = userID
        self.until = until
        self.reason = reason
    }

    /// Reads `until` as an ISO 8601 date, whatever the decoder's date strategy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        userID = try container.decode(UserID.self, forKey: .userID)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        until = try WireCoding.decodeDate(container, .until)
    }

    /// Writes `until` as the API's dates are written.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userID, forKey: .userID)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(until.map(WireCoding.formatDate), forKey: .until)
    }
}

/// One ban of a conversation.
public struct Ban: Hashable, Codable, Sendable {
    /// Who is banned.
    public var user: Sender
    /// The moderator who banned them.
    public var bannedBy: UserID?
    /// The moderator's reason.
    public var reason: String?
    /// When it ends; nil: until lifted.
    public var until: Date?
    /// When it began.
    public var createdAt: Date
    /// Creates the value; each argument sets the property of the same name.
    public init(user: Sender, bannedBy: UserID?, reason: String?, until: Date?, createdAt: Date) {
        self.user = user
        self.bannedBy = bannedBy
        self.reason = reason
        self.until = until
        self.createdAt = createdAt
    }
}

/// `GET /v1/conversations/{id}/bans`: bans in force, newest first.
public struct BanList: Hashable, Codable, Sendable {
    /// The bans.
    public var bans: [Ban]
    /// Creates the value; each argument sets the property of the same name.
    public init(bans: [Ban]) { self.bans = bans }
}

/// `PUT /v1/conversations/{id}/members/{userId}/mute`: a moderator's mute of a member.
public struct MuteMemberRequest: Hashable, Codable, Sendable {
    /// When it ends; nil: until unmuted.
    public var until: Date?
    /// Creates the value; each argument sets the property of the same name.
    public init(until: Date? = nil) { self.until = until }

    private enum CodingKeys: String, CodingKey { case until }

    /// Reads `until` as an ISO 8601 date, whatever the decoder's date strategy.
    public init(from decoder: any Decoder) throws {
        until = try WireCoding.decodeDate(try decoder.container(keyedBy: CodingKeys.self), .until)
    }

    /// Writes `until` as the API's dates are written.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(until.map(WireCoding.formatDate), forKey: .until)
    }
}

/// Why a message is reported.
public enum ReportReason: String, Codable, Sendable, CaseIterable {
    /// Unwanted advertising or repetition.
    case spam
    /// Insults, threats, harassment.
    case abuse
    /// Sexual or violent content.
    case inappropriate
    /// Anything else (say what in `note`).
    case other
}

/// `POST /v1/conversations/{id}/messages/{messageId}/reports`.
public struct ReportRequest: Hashable, Codable, Sendable {
    /// Why.
    public var reason: ReportReason
    /// More for the moderators; at most 1,000 characters.
    public var note: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(reason: ReportReason, note: String? = nil) {
        self.reason = reason
        self.note = note
    }
}

/// What a moderator did about a report.
public enum ReportResolution: String, Codable, Sendable, CaseIterable {
    /// Nothing wrong: closed.
    case dismissed
    /// The message was deleted.
    case messageDeleted = "message_deleted"
    /// The message was deleted and its author banned (until lifted).
    case authorBanned = "author_banned"
}

/// `POST /v1/conversations/{id}/reports/{reportId}/resolve`.
public struct ResolveReportRequest: Hashable, Codable, Sendable {
    /// What to do.
    public var resolution: ReportResolution
    /// For the record; at most 1,000 characters.
    public var note: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(resolution: ReportResolution, note: String? = nil) {
        self.resolution = resolution
        self.note = note
    }
}

/// A report of a message, as moderators see it (the reporter sees their own answer only).
public struct Report: Hashable, Codable, Sendable {
    /// `rp_…`.
    public var id: String
    /// Where.
    public var conversationID: ConversationID
    /// The message as it is now (a tombstone once deleted).
    public var message: Message
    /// Who reported it.
    public var reporter: Sender
    /// Why.
    public var reason: ReportReason
    /// The reporter's note.
    public var note: String?
    /// When.
    public var createdAt: Date
    /// `open` or `resolved`.
    public var state: String
    /// The moderator who resolved it.
    public var resolvedBy: UserID?
    /// When it was resolved.
    public var resolvedAt: Date?
    /// What was done.
    public var resolution: ReportResolution?
    /// The moderator's note.
    public var resolutionNote: String?

    enum CodingKeys: String, CodingKey {
        case id, conversationID = "conversationId", message, reporter, reason, note, createdAt, state, resolvedBy, resolvedAt,
             resolution, resolutionNote
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(id: String, conversationID: ConversationID, message: Message, reporter: Sender, reason: ReportReason, note: String?,
                createdAt: Date, state: String, resolvedBy: UserID? = nil, resolvedAt: Date? = nil, resolution: ReportResolution? = nil,
                resolutionNote: String? = nil) {
        self.id = id
        self.conversationID = conversationID
        self.message = message
        self.reporter = reporter
        self.reason = reason
        self.note = note
        self.createdAt = createdAt
        self.state = state
        self.resolvedBy = resolvedBy
        self.resolvedAt = resolvedAt
        self.resolution = resolution
        self.resolutionNote = resolutionNote
    }
}

/// A page of reports, oldest open first.
public struct ReportList: Hashable, Codable, Sendable {
    /// The reports.
    public var reports: [Report]
    /// More follow (ask with `after` = the last report's id).
    public var hasMore: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(reports: [Report], hasMore: Bool) {
        self.reports = reports
        self.hasMore = hasMore
    }
}

/// `GET /v1/me/blocks`: the people the caller blocked.
public struct BlockList: Hashable, Codable, Sendable {
    /// The blocked users.
    public var users: [User]
    /// Creates the value; each argument sets the property of the same name.
    public init(users: [User]) { self.users = users }
}

/// `GET` and `PUT /v1/server/retention`: the app's retention policy.
public struct RetentionPolicy: Hashable, Codable, Sendable {
    /// Messages older than this many days are removed, in every conversation without a policy
    /// of its own; 0: kept forever.
    public var days: Int
    /// Creates the value; each argument sets the property of the same name.
    public init(days: Int) { self.days = days }
}

/// `PUT /v1/me/photo` and `PUT /v1/conversations/{id}/photo`.
public struct PhotoRequest: Hashable, Codable, Sendable {
    /// A photo the caller uploaded (`POST /v1/media`, kind photo): checked, its metadata
    /// removed, its thumbnail made by the media pipeline.
    public var attachmentID: String
    enum CodingKeys: String, CodingKey { case attachmentID = "attachmentId" }
    /// Creates the value; each argument sets the property of the same name.
    public init(attachmentID: String) { self.attachmentID = attachmentID }
}
