public import Foundation

/// One entry of a conversation's event log. Every change is one: `seq` counts them per
/// conversation with no gaps, `position` orders them across the whole server. A client that
/// remembers the last position it saw can ask for everything after it.
///
/// Receipt changes (``Kind/receiptUpdated``) have a position but no `seq`: they are not part
/// of the conversation's history, so marking a conversation read never makes it unread.
public struct ConversationEvent: Hashable, Codable, Sendable {
    /// What happened.
    public enum Kind: String, Hashable, Codable, Sendable {
        /// A message was sent; `message` is set.
        case messageCreated = "message.created"
        /// Its author edited a message; `message` holds the new content.
        case messageEdited = "message.edited"
        /// A message was deleted; `message` is its tombstone.
        case messageDeleted = "message.deleted"
        /// Someone joined or was added; `userID` and `role` say who and as what.
        case memberAdded = "member.added"
        /// Someone left or was removed; `userID` says who.
        case memberRemoved = "member.removed"
        /// A member's role changed; `userID` and `role`.
        case memberUpdated = "member.updated"
        /// The conversation was created: the event after its first members' `member.added`.
        case conversationCreated = "conversation.created"
        /// Title or custom data changed; `title` and `customData` hold what was set.
        case conversationUpdated = "conversation.updated"
        /// A member's watermarks moved; `userID`, `deliveredSeq` and `readSeq`. Has no `seq`.
        case receiptUpdated = "receipt.updated"
    }

    /// Server-wide, strictly increasing.
    public var position: Int64
    /// The conversation it belongs to.
    public var conversationID: ConversationID
    /// Per conversation: 1, 2, 3, … with no gaps; nil for ``Kind/receiptUpdated``.
    public var seq: Int64?
    /// What happened.
    public var type: Kind
    /// Who caused it.
    public var actorID: UserID?
    /// When it was created.
    public var createdAt: Date
    /// The message as it is now (message events): a tombstone once deleted.
    public var message: Message?
    /// The user a membership event is about, and their role after it.
    public var userID: UserID?
    /// The member's role (after the change, for membership events).
    public var role: MemberRole?
    /// The title and custom data after a conversation update.
    public var title: String?
    /// App-defined JSON; at most ``Limits/customDataBytes`` encoded.
    public var customData: JSONValue?
    /// For ``Kind/receiptUpdated``: the member's delivered watermark after the change.
    public var deliveredSeq: Int64?
    /// For ``Kind/receiptUpdated``: the member's read watermark after the change.
    public var readSeq: Int64?

    enum CodingKeys: String, CodingKey {
        case position, conversationID = "conversationId", seq, type, actorID = "actorId", createdAt, message,
             userID = "userId", role, title, customData, deliveredSeq, readSeq
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(position: Int64, conversationID: ConversationID, seq: Int64?, type: Kind, actorID: UserID?, createdAt: Date,
                message: Message? = nil, userID: UserID? = nil, role: MemberRole? = nil, title: String? = nil,
                customData: JSONValue? = nil, deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
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
