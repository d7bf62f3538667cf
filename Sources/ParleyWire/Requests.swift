import Foundation

// Request and response bodies of the REST API (docs/openapi.yaml). The SDK encodes the same
// types the server decodes, so the two cannot drift apart.

/// `POST /v1/users`: register.
public struct RegisterRequest: Hashable, Codable, Sendable {
    public var username: String
    public var password: String
    /// Defaults to the username.
    public var displayName: String?
    /// A label for the session this creates. Default: "unnamed device".
    public var device: String?
    public init(username: String, password: String, displayName: String? = nil, device: String? = nil) {
        self.username = username
        self.password = password
        self.displayName = displayName
        self.device = device
    }
}

/// `POST /v1/sessions`: sign in.
public struct SignInRequest: Hashable, Codable, Sendable {
    public var username: String
    public var password: String
    public var device: String?
    public init(username: String, password: String, device: String? = nil) {
        self.username = username
        self.password = password
        self.device = device
    }
}

/// `POST /v1/sessions/guest`: an anonymous account with a display name only.
public struct GuestSignInRequest: Hashable, Codable, Sendable {
    public var displayName: String
    public var device: String?
    public init(displayName: String, device: String? = nil) {
        self.displayName = displayName
        self.device = device
    }
}

/// `PATCH /v1/me`. Absent fields stay as they are; `customData: null` clears it.
public struct UpdateProfileRequest: Hashable, Codable, Sendable {
    public var displayName: String?
    public var customData: JSONValue?
    public init(displayName: String? = nil, customData: JSONValue? = nil) {
        self.displayName = displayName
        self.customData = customData
    }
}

/// `GET /v1/users`: one page of a directory search.
public struct UserPage: Hashable, Codable, Sendable {
    public var users: [User]
    /// How many users match in all.
    public var total: Int
    /// Pass as `offset` for the next page; nil on the last page.
    public var nextOffset: Int?
    public init(users: [User], total: Int, nextOffset: Int?) {
        self.users = users
        self.total = total
        self.nextOffset = nextOffset
    }
}

/// `POST /v1/users/resolve`.
public struct ResolveUsersRequest: Hashable, Codable, Sendable {
    public var usernames: [String]
    public init(usernames: [String]) { self.usernames = usernames }
}

/// The users found, and the names that match nobody (Magnet's `invalidUsernames`).
public struct ResolveUsersResponse: Hashable, Codable, Sendable {
    public var users: [User]
    public var invalidUsernames: [String]
    public init(users: [User], invalidUsernames: [String]) {
        self.users = users
        self.invalidUsernames = invalidUsernames
    }
}

/// `POST /v1/conversations`.
public struct CreateConversationRequest: Hashable, Codable, Sendable {
    public var kind: ConversationKind
    /// Usernames to add besides the caller (a direct conversation takes exactly one).
    public var members: [String]?
    public var title: String?
    public var customData: JSONValue?
    public init(kind: ConversationKind, members: [String]? = nil, title: String? = nil, customData: JSONValue? = nil) {
        self.kind = kind
        self.members = members
        self.title = title
        self.customData = customData
    }
}

/// `PATCH /v1/conversations/{id}`.
public struct UpdateConversationRequest: Hashable, Codable, Sendable {
    public var title: String?
    public var customData: JSONValue?
    public init(title: String? = nil, customData: JSONValue? = nil) {
        self.title = title
        self.customData = customData
    }
}

/// `POST /v1/conversations/{id}/members`.
public struct AddMembersRequest: Hashable, Codable, Sendable {
    public var usernames: [String]
    /// Default: member.
    public var role: MemberRole?
    public init(usernames: [String], role: MemberRole? = nil) {
        self.usernames = usernames
        self.role = role
    }
}

/// `PATCH /v1/conversations/{id}/members/{userId}`.
public struct UpdateMemberRequest: Hashable, Codable, Sendable {
    public var role: MemberRole
    public init(role: MemberRole) { self.role = role }
}

/// `POST /v1/conversations/{id}/messages`.
public struct SendMessageRequest: Hashable, Codable, Sendable {
    /// The client's own id for this send; a retry with the same id returns the same message.
    public var clientID: String
    public var content: MessageContent
    public var metadata: [String: String]?
    public var replyTo: MessageID?
    enum CodingKeys: String, CodingKey { case clientID = "clientId", content, metadata, replyTo }
    public init(clientID: String, content: MessageContent, metadata: [String: String]? = nil, replyTo: MessageID? = nil) {
        self.clientID = clientID
        self.content = content
        self.metadata = metadata
        self.replyTo = replyTo
    }
}

/// `POST /v1/messages`: send to a set of usernames; the server finds (or creates) the direct
/// conversation (one name) or the group with exactly those members.
public struct SendToUsersRequest: Hashable, Codable, Sendable {
    public var to: [String]
    public var clientID: String
    public var content: MessageContent
    public var metadata: [String: String]?
    enum CodingKeys: String, CodingKey { case to, clientID = "clientId", content, metadata }
    public init(to: [String], clientID: String, content: MessageContent, metadata: [String: String]? = nil) {
        self.to = to
        self.clientID = clientID
        self.content = content
        self.metadata = metadata
    }
}

/// The answer to ``SendToUsersRequest``: the message went to the names that exist;
/// `invalidUsernames` lists the others (Magnet's `invalidUsernames`).
public struct SendToUsersResponse: Hashable, Codable, Sendable {
    public var message: Message?
    public var conversation: Conversation?
    public var invalidUsernames: [String]
    public init(message: Message?, conversation: Conversation?, invalidUsernames: [String]) {
        self.message = message
        self.conversation = conversation
        self.invalidUsernames = invalidUsernames
    }
}

/// `PATCH /v1/conversations/{id}/messages/{messageId}`: the author replaces the content.
public struct EditMessageRequest: Hashable, Codable, Sendable {
    public var content: MessageContent
    public var metadata: [String: String]?
    public init(content: MessageContent, metadata: [String: String]? = nil) {
        self.content = content
        self.metadata = metadata
    }
}

/// `POST /v1/conversations/{id}/messages/delete`: all or nothing.
public struct DeleteMessagesRequest: Hashable, Codable, Sendable {
    public var ids: [MessageID]
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
    public init(messages: [Message], hasOlder: Bool, hasNewer: Bool) {
        self.messages = messages
        self.hasOlder = hasOlder
        self.hasNewer = hasNewer
    }
}

/// One page of a conversation's event log.
public struct EventPage: Hashable, Codable, Sendable {
    public var events: [ConversationEvent]
    public var hasMore: Bool
    public init(events: [ConversationEvent], hasMore: Bool) {
        self.events = events
        self.hasMore = hasMore
    }
}

/// `GET /v1/conversations`: newest activity first.
public struct ConversationPage: Hashable, Codable, Sendable {
    public var conversations: [Conversation]
    /// Pass as `before` for the next page; nil on the last page.
    public var nextCursor: String?
    public init(conversations: [Conversation], nextCursor: String?) {
        self.conversations = conversations
        self.nextCursor = nextCursor
    }
}

/// `POST /v1/conversations/{id}/receipts`: move the caller's watermarks forward. Values
/// behind the current ones are ignored; values past the last seq are clamped to it.
public struct ReceiptUpdate: Hashable, Codable, Sendable {
    public var deliveredSeq: Int64?
    public var readSeq: Int64?
    public init(deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}

/// `GET /v1/conversations/{id}/messages/{messageId}/receipts`: who has it.
public struct MessageReceipts: Hashable, Codable, Sendable {
    public var status: DeliveryStatus
    public var deliveredTo: [UserID]
    public var readBy: [UserID]
    public init(status: DeliveryStatus, deliveredTo: [UserID], readBy: [UserID]) {
        self.status = status
        self.deliveredTo = deliveredTo
        self.readBy = readBy
    }
}

/// `GET /v1/search`.
public struct SearchResults: Hashable, Codable, Sendable {
    /// Best match first.
    public var messages: [Message]
    public init(messages: [Message]) { self.messages = messages }
}

/// A list of members.
public struct MemberList: Hashable, Codable, Sendable {
    public var members: [Member]
    public init(members: [Member]) { self.members = members }
}

/// A list of sessions (devices).
public struct SessionList: Hashable, Codable, Sendable {
    public var sessions: [Session]
    public init(sessions: [Session]) { self.sessions = sessions }
}

/// Receipts of every member.
public struct ReceiptList: Hashable, Codable, Sendable {
    public var receipts: [Receipt]
    public init(receipts: [Receipt]) { self.receipts = receipts }
}

/// A list of conversations (public channel directory).
public struct ChannelPage: Hashable, Codable, Sendable {
    public var channels: [Conversation]
    public var nextOffset: Int?
    public init(channels: [Conversation], nextOffset: Int?) {
        self.channels = channels
        self.nextOffset = nextOffset
    }
}
