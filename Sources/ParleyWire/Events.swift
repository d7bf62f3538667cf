public import Foundation

/// One entry of a conversation's event log. Every change is one: `seq` counts them per
/// conversation with no gaps, `position` orders them across the whole server. A client that
/// remembers the last position it saw can ask for everything after it.
public struct ConversationEvent: Hashable, Codable, Sendable {
    /// What happened.
    public enum Kind: String, Hashable, Codable, Sendable {
        case messageCreated = "message.created"
        case messageEdited = "message.edited"
        case messageDeleted = "message.deleted"
        case memberAdded = "member.added"
        case memberRemoved = "member.removed"
        case memberUpdated = "member.updated"
        case conversationCreated = "conversation.created"
        case conversationUpdated = "conversation.updated"
    }

    /// Server-wide, strictly increasing.
    public var position: Int64
    public var conversationID: ConversationID
    /// Per conversation: 1, 2, 3, … with no gaps.
    public var seq: Int64
    public var type: Kind
    /// Who caused it.
    public var actorID: UserID?
    public var createdAt: Date
    /// The message as it is now (message events): a tombstone once deleted.
    public var message: Message?
    /// The user a membership event is about, and their role after it.
    public var userID: UserID?
    public var role: MemberRole?
    /// The title and custom data after a conversation update.
    public var title: String?
    public var customData: JSONValue?

    enum CodingKeys: String, CodingKey {
        case position, conversationID = "conversationId", seq, type, actorID = "actorId", createdAt, message,
             userID = "userId", role, title, customData
    }

    public init(position: Int64, conversationID: ConversationID, seq: Int64, type: Kind, actorID: UserID?, createdAt: Date,
                message: Message? = nil, userID: UserID? = nil, role: MemberRole? = nil, title: String? = nil,
                customData: JSONValue? = nil) {
        self.position = position
        self.conversationID = conversationID
        self.seq = seq
        self.type = type
        self.actorID = actorID
        self.createdAt = createdAt
        self.message = message
        self.userID = userID
        self.role = role
        self.title = title
        self.customData = customData
    }
}
