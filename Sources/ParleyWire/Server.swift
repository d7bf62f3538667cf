public import Foundation

// The server API's bodies (`/v1/server/…`, docs/server-api.md): what an app's own backend
// sends with the app secret.

/// `POST /v1/server/users`: creates the user, or updates the one with this username
/// (absent fields are kept). The app authenticates its users itself: no password.
public struct UpsertUserRequest: Hashable, Codable, Sendable {
    /// Unique in the app (the app's own user id or name works: letters, digits, `. _ -`, or
    /// an e-mail address).
    public var username: String
    /// The name shown on bubbles; default: the username (on creation).
    public var displayName: String?
    /// App-defined data; at most ``Limits/customDataBytes``.
    public var customData: JSONValue?
    /// Creates the value; each argument sets the property of the same name.
    public init(username: String, displayName: String? = nil, customData: JSONValue? = nil) {
        self.username = username
        self.displayName = displayName
        self.customData = customData
    }
}

/// A user as the app's backend sees it: the user, and whether the account is deactivated.
public struct ServerUser: Hashable, Codable, Sendable {
    /// The user as every client sees them.
    public var user: User
    /// When the account was deactivated; nil while active.
    public var deactivatedAt: Date?
    /// Sessions (signed-in devices) the account has now.
    public var sessionCount: Int
    /// Creates the value; each argument sets the property of the same name.
    public init(user: User, deactivatedAt: Date?, sessionCount: Int) {
        self.user = user
        self.deactivatedAt = deactivatedAt
        self.sessionCount = sessionCount
    }
}

/// A page of users for the app's backend.
public struct ServerUserList: Hashable, Codable, Sendable {
    /// The users, by username.
    public var users: [ServerUser]
    /// More match after the last one (ask again with `offset`).
    public var hasMore: Bool
    /// Creates the value; each argument sets the property of the same name.
    public init(users: [ServerUser], hasMore: Bool) {
        self.users = users
        self.hasMore = hasMore
    }
}

/// `POST /v1/server/users/{username}/sessions`: a session token for the user, as a sign-in
/// gives, for an app whose users sign in elsewhere.
public struct IssueSessionRequest: Hashable, Codable, Sendable {
    /// Names the device in the user's session list; default "server".
    public var device: String?
    /// Seconds until the token stops working: 60 up to the server's session lifetime
    /// (default: the session lifetime, 30 days).
    public var expiresInSeconds: Int?
    /// Creates the value; each argument sets the property of the same name.
    public init(device: String? = nil, expiresInSeconds: Int? = nil) {
        self.device = device
        self.expiresInSeconds = expiresInSeconds
    }
}

/// `POST /v1/server/conversations`: a conversation created by the app. With `createdBy` it is
/// created as that user would create it (they own it); without, the app creates it and every
/// member is a plain member (roles are set afterwards; direct conversations need `createdBy`).
public struct ServerCreateConversationRequest: Hashable, Codable, Sendable {
    /// The kind.
    public var kind: ConversationKind
    /// Groups and channels: the title.
    public var title: String?
    /// Usernames of the members (besides `createdBy`).
    public var members: [String]?
    /// The username of the user who creates it, and owns it.
    public var createdBy: String?
    /// App-defined data.
    public var customData: JSONValue?
    /// Creates the value; each argument sets the property of the same name.
    public init(kind: ConversationKind, title: String? = nil, members: [String]? = nil, createdBy: String? = nil, customData: JSONValue? = nil) {
        self.kind = kind
        self.title = title
        self.members = members
        self.createdBy = createdBy
        self.customData = customData
    }
}

/// `POST /v1/server/conversations/{id}/messages`: a message as the user named by `from`, or
/// a system message (`{"type":"system","text":…}` content) when `from` is absent.
public struct ServerSendMessageRequest: Hashable, Codable, Sendable {
    /// The sender's username; nil: the app itself (a system message).
    public var from: String?
    /// The backend's own id for this send; a retry with the same id returns the same message.
    public var clientID: String
    /// What the message carries.
    public var content: MessageContent
    /// App-defined string pairs.
    public var metadata: [String: String]?
    /// The message this one answers.
    public var replyTo: MessageID?
    enum CodingKeys: String, CodingKey { case from, clientID = "clientId", content, metadata, replyTo }
    /// Creates the value; each argument sets the property of the same name.
    public init(from: String?, clientID: String, content: MessageContent, metadata: [String: String]? = nil, replyTo: MessageID? = nil) {
        self.from = from
        self.clientID = clientID
        self.content = content
        self.metadata = metadata
        self.replyTo = replyTo
    }

    /// The same send as a user's request.
    public var message: SendMessageRequest {
        SendMessageRequest(clientID: clientID, content: content, metadata: metadata, replyTo: replyTo)
    }
}

/// `POST /v1/server/users/{username}/password`: sets the user's password (they are signed out
/// everywhere).
public struct SetPasswordRequest: Hashable, Codable, Sendable {
    /// The new password (``Limits/passwordBytes``).
    public var password: String
    /// Creates the value.
    public init(password: String) { self.password = password }
}
