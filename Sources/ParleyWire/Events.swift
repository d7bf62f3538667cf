public import Foundation

/// One entry of a conversation's event log. Every change is one: `seq` counts them per
/// conversation with no gaps, `position` orders them across the whole server. A client that
/// remembers the last position it saw can ask for everything after it.
///
/// Receipt changes (``Kind/receiptUpdated``) have a position but no `seq`: they are not part
/// of the conversation's history, so marking a conversation read never makes it unread.
public struct ConversationEvent: Hashable, Codable, Sendable {
    /// What happened. Open: a kind this SDK does not know (a newer server's, e.g.
    /// `reaction.added`) decodes as ``unknown(_:)`` with its name, and the event is kept
    /// and passed on whole (``unknownPayload``), never dropped and never a decoding failure
    /// (docs/decisions/0015-typed-frames-and-open-event-kinds.md).
    public enum Kind: Hashable, Sendable, Codable, RawRepresentable, CustomStringConvertible {
        /// A message was sent; `message` is set.
        case messageCreated
        /// Its author edited a message; `message` holds the new content.
        case messageEdited
        /// A message was deleted; `message` is its tombstone.
        case messageDeleted
        /// Someone joined or was added; `userID` and `role` say who and as what.
        case memberAdded
        /// Someone left or was removed; `userID` says who.
        case memberRemoved
        /// A member's role changed; `userID` and `role`.
        case memberUpdated
        /// The conversation was created: the event after its first members' `member.added`.
        case conversationCreated
        /// Title or custom data changed; `title` and `customData` hold what was set.
        case conversationUpdated
        /// A member's watermarks moved; `userID`, `deliveredSeq` and `readSeq`. Has no `seq`.
        case receiptUpdated
        /// In a public channel, where members' receipts reach only their own devices: how far
        /// the author's (`userID`'s) messages have got, as counts (`deliveries`). Only the
        /// author's devices receive it. Has no `seq` (docs/protocol.md, "Delivery in channels").
        case deliveryUpdated
        /// Someone reacted to a message: `userId` and `emoji` say who and with what, `message`
        /// is the message with its counts after the change. Has no `seq` and moves neither the
        /// unread count nor the conversation's place in the list (decision 0021).
        case reactionAdded
        /// Someone took a reaction back; as ``reactionAdded``.
        case reactionRemoved
        /// A message was pinned (`actorId` by whom; `message` shows `pinnedAt` and `pinnedBy`).
        /// Has no `seq`.
        case messagePinned
        /// A message was unpinned. Has no `seq`.
        case messageUnpinned
        /// A moderator banned `userId` (`until`, `reason`): they are removed (a `member.removed`
        /// follows) and cannot join or be added again until the ban ends or is lifted.
        case memberBanned
        /// A moderator lifted `userId`'s ban.
        case memberUnbanned
        /// A moderator muted `userId` until `until` (nil: until unmuted): they read but may not post.
        case memberMuted
        /// A moderator unmuted `userId`.
        case memberUnmuted
        /// The retention policy removed the conversation's messages up to and including seq
        /// `throughSeq` (`count` of them): devices remove them too. Their events are gone from
        /// the log; this one says so.
        case messagesExpired
        /// A member changed their profile photo or display name (`userId`, `photoURL`,
        /// `displayName`): every conversation they are in gets one, so open chats show the new
        /// face and name. No `seq`.
        case userUpdated
        /// The member (`userId`) changed what pushes them here: `notifications` (`all` or
        /// `mentions`) and their mute, `until` (absent: not muted; 9999-12-31T23:59:59Z: until
        /// unmuted), as ``Conversation/notifications`` and ``Conversation/mutedUntil`` now say.
        /// Only that member's own devices receive it. No `seq`.
        case notificationsUpdated
        /// A kind this build does not know, by its wire name.
        case unknown(String)

        /// The kinds this build knows, in the order they were added to the protocol.
        public static let known: [Kind] = [.messageCreated, .messageEdited, .messageDeleted, .memberAdded, .memberRemoved,
                                           .memberUpdated, .conversationCreated, .conversationUpdated, .receiptUpdated,
                                           .deliveryUpdated, .reactionAdded, .reactionRemoved, .messagePinned, .messageUnpinned,
                                           .memberBanned, .memberUnbanned, .memberMuted, .memberUnmuted, .messagesExpired,
                                           .userUpdated, .notificationsUpdated]
        private static let byName: [String: Kind] = Dictionary(uniqueKeysWithValues: known.map { ($0.rawValue, $0) })

        /// The kind named `rawValue`; ``unknown(_:)`` for a name this build does not know.
        public init(rawValue: String) { self = Self.byName[rawValue] ?? .unknown(rawValue) }

        /// The wire name (`message.created`, …).
        public var rawValue: String {
            switch self {
            case .messageCreated: "message.created"
            case .messageEdited: "message.edited"
            case .messageDeleted: "message.deleted"
            case .memberAdded: "member.added"
            case .memberRemoved: "member.removed"
            case .memberUpdated: "member.updated"
            case .conversationCreated: "conversation.created"
            case .conversationUpdated: "conversation.updated"
            case .receiptUpdated: "receipt.updated"
            case .deliveryUpdated: "delivery.updated"
            case .reactionAdded: "reaction.added"
            case .reactionRemoved: "reaction.removed"
            case .messagePinned: "message.pinned"
            case .messageUnpinned: "message.unpinned"
            case .memberBanned: "member.banned"
            case .memberUnbanned: "member.unbanned"
            case .memberMuted: "member.muted"
            case .memberUnmuted: "member.unmuted"
            case .messagesExpired: "messages.expired"
            case .userUpdated: "user.updated"
            case .notificationsUpdated: "notifications.updated"
            case .unknown(let name): name
            }
        }

        /// Kinds that annotate the conversation without a `seq` of their own (receipts,
        /// delivery counts, reactions, pins, profile changes, mutes): they never count as unread.
        public var hasNoSeq: Bool {
            [.receiptUpdated, .deliveryUpdated, .reactionAdded, .reactionRemoved, .messagePinned, .messageUnpinned, .userUpdated,
             .notificationsUpdated].contains(self)
        }

        /// False for ``unknown(_:)``.
        public var isKnown: Bool {
            if case .unknown = self { return false }
            return true
        }

        public var description: String { rawValue }

        public init(from decoder: any Decoder) throws {
            self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
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
    /// For ``Kind/deliveryUpdated``: where the author's messages stand, newest last.
    public var deliveries: [MessageDelivery]? = nil
    /// For ``Kind/reactionAdded`` and ``Kind/reactionRemoved``: the emoji (`userId` is who).
    public var emoji: String? = nil
    /// For the `message.created` and `message.deleted` of a reply in a thread: the thread's
    /// root and its reply count after the change, so clients update the root without a read.
    public var thread: ThreadSummary? = nil
    /// For ``Kind/memberBanned`` and ``Kind/memberMuted``: when it ends (nil: until lifted);
    /// for ``Kind/notificationsUpdated``: the mute's end (nil: not muted).
    public var until: Date? = nil
    /// For ``Kind/memberBanned``: the moderator's reason, if given.
    public var reason: String? = nil
    /// For ``Kind/conversationUpdated``: slow mode after the change (0: off), when it changed.
    public var slowModeSeconds: Int? = nil
    /// For ``Kind/messagesExpired``: every message up to and including this seq is gone.
    public var throughSeq: Int64? = nil
    /// For ``Kind/messagesExpired``: how many messages this removal took.
    public var count: Int? = nil
    /// For ``Kind/conversationUpdated``: the retention policy after the change, when it changed.
    public var retentionDays: Int? = nil
    /// For ``Kind/conversationUpdated``: the conversation's photo after the change, when it
    /// changed (an empty string: removed); for ``Kind/userUpdated``: the user's.
    public var photoURL: String? = nil
    /// For ``Kind/userUpdated``: the user's display name after the change.
    public var displayName: String? = nil
    /// For ``Kind/notificationsUpdated``: what pushes the member now (with ``until``, their mute).
    public var notifications: NotificationLevel? = nil
    /// An event of a kind this build does not know, exactly as it arrived (every field,
    /// including those this build has no property for); nil for known kinds. A
    /// ``ServerFrame`` carrying such an event encodes this back, so forwarding it loses
    /// nothing; encoding the event alone writes the fields this build knows.
    public var unknownPayload: JSONValue? = nil

    enum CodingKeys: String, CodingKey {
        case position, conversationID = "conversationId", seq, type, actorID = "actorId", createdAt, message,
             userID = "userId", role, title, customData, deliveredSeq, readSeq, deliveries, emoji, thread, until, reason, slowModeSeconds,
             throughSeq, count, retentionDays, photoURL, displayName, notifications
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

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        position = try container.decode(Int64.self, forKey: .position)
        conversationID = try container.decode(ConversationID.self, forKey: .conversationID)
        type = try container.decode(Kind.self, forKey: .type)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        seq = try container.decodeIfPresent(Int64.self, forKey: .seq)
        actorID = try container.decodeIfPresent(UserID.self, forKey: .actorID)
        userID = try container.decodeIfPresent(UserID.self, forKey: .userID)
        guard type.isKnown else {
            // A newer server's kind: keep all of it; its fields may not fit ours.
            unknownPayload = try JSONValue(from: decoder)
            return
        }
        message = try container.decodeIfPresent(Message.self, forKey: .message)
        role = try container.decodeIfPresent(MemberRole.self, forKey: .role)
        title = try container.decodeIfPresent(String.self, forKey: .title)
        customData = try container.decodeIfPresent(JSONValue.self, forKey: .customData)
        deliveredSeq = try container.decodeIfPresent(Int64.self, forKey: .deliveredSeq)
        readSeq = try container.decodeIfPresent(Int64.self, forKey: .readSeq)
        deliveries = try container.decodeIfPresent([MessageDelivery].self, forKey: .deliveries)
        emoji = try container.decodeIfPresent(String.self, forKey: .emoji)
        thread = try container.decodeIfPresent(ThreadSummary.self, forKey: .thread)
        until = try container.decodeIfPresent(Date.self, forKey: .until)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        slowModeSeconds = try container.decodeIfPresent(Int.self, forKey: .slowModeSeconds)
        throughSeq = try container.decodeIfPresent(Int64.self, forKey: .throughSeq)
        count = try container.decodeIfPresent(Int.self, forKey: .count)
        retentionDays = try container.decodeIfPresent(Int.self, forKey: .retentionDays)
        photoURL = try container.decodeIfPresent(String.self, forKey: .photoURL)
        displayName = try container.decodeIfPresent(String.self, forKey: .displayName)
        notifications = try container.decodeIfPresent(NotificationLevel.self, forKey: .notifications)
    }
}

/// A thread's root and its replies' count, as a reply's event leaves them.
public struct ThreadSummary: Hashable, Codable, Sendable {
    /// The root message.
    public var rootID: MessageID
    /// Replies not deleted.
    public var replyCount: Int
    /// When the latest reply was sent.
    public var lastReplyAt: Date?

    enum CodingKeys: String, CodingKey { case rootID = "rootId", replyCount, lastReplyAt }

    /// Creates the value; each argument sets the property of the same name.
    public init(rootID: MessageID, replyCount: Int, lastReplyAt: Date?) {
        self.rootID = rootID
        self.replyCount = replyCount
        self.lastReplyAt = lastReplyAt
    }
}

/// How far one message has got in a public channel: how many of the members other than its
/// author have it and have read it, and the status that gives (``DeliveryStatus/of(deliveredCount:readCount:recipients:)``).
public struct MessageDelivery: Hashable, Codable, Sendable {
    /// The message.
    public var messageID: MessageID
    /// Its seq in the conversation.
    public var seq: Int64
    /// Members other than the author whose delivered watermark reached it.
    public var deliveredCount: Int
    /// Members other than the author whose read watermark reached it.
    public var readCount: Int
    /// Members other than the author, when counted.
    public var recipientCount: Int
    /// `sent`, `delivered` (every recipient has it) or `read` (every recipient read it).
    public var status: DeliveryStatus

    enum CodingKeys: String, CodingKey {
        case messageID = "messageId", seq, deliveredCount, readCount, recipientCount, status
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(messageID: MessageID, seq: Int64, deliveredCount: Int, readCount: Int, recipientCount: Int, status: DeliveryStatus) {
        self.messageID = messageID
        self.seq = seq
        self.deliveredCount = deliveredCount
        self.readCount = readCount
        self.recipientCount = recipientCount
        self.status = status
    }
}
