public import Foundation

/// One entry of a conversation's event log. Every change is one: `seq` counts the
/// conversation's history per conversation with no gaps, `position` orders every event across
/// the whole server. A client that remembers the last position it saw can ask for everything
/// after it.
///
/// The envelope (position, conversation, seq, kind, actor, time) is what every event has; the
/// ``body`` is what its kind carries (``EventShape``). Annotations — receipts, delivery
/// counts, reactions, pins, profile and notification changes — have a position but no `seq`:
/// they are not part of the conversation's history, so they never make it unread.
public struct ConversationEvent: Hashable, Codable, Sendable {
    /// The name of a kind of event (open: see ``EventKind``).
    public typealias Kind = EventKind

    /// Server-wide, strictly increasing.
    public var position: Int64
    /// The conversation it belongs to.
    public var conversationID: ConversationID
    /// Per conversation: 1, 2, 3, … with no gaps; nil for annotations.
    public var seq: Int64?
    /// What happened.
    public var type: EventKind
    /// Who caused it.
    public var actorID: UserID?
    /// When it was created.
    public var createdAt: Date
    /// What the kind carries. A kind this build does not know (a newer server's) is kept
    /// whole as ``EventBody/unknown(_:)``, never dropped and never a decoding failure
    /// (docs/decisions/0015-typed-frames-and-open-event-kinds.md).
    public var body: EventBody

    /// Creates an event.
    public init(position: Int64, conversationID: ConversationID, seq: Int64?, type: EventKind, actorID: UserID?, createdAt: Date,
                body: EventBody) {
        self.position = position
        self.conversationID = conversationID
        self.seq = seq
        self.type = type
        self.actorID = actorID
        self.createdAt = createdAt
        self.body = body
    }

    enum CodingKeys: String, CodingKey {
        case position, conversationID = "conversationId", seq, type, actorID = "actorId", createdAt
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        position = try container.decode(Int64.self, forKey: .position)
        conversationID = try container.decode(ConversationID.self, forKey: .conversationID)
        type = try container.decode(EventKind.self, forKey: .type)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        seq = try container.decodeIfPresent(Int64.self, forKey: .seq)
        actorID = try container.decodeIfPresent(UserID.self, forKey: .actorID)
        body = try EventBody(kind: type, from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        if case .unknown(let whole) = body { return try whole.encode(to: encoder) }  // every field it came with
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(position, forKey: .position)
        try container.encode(conversationID, forKey: .conversationID)
        try container.encodeIfPresent(seq, forKey: .seq)
        try container.encode(type, forKey: .type)
        try container.encodeIfPresent(actorID, forKey: .actorID)
        try container.encode(createdAt, forKey: .createdAt)
        try body.encode(to: encoder)
    }

    // MARK: - The body's fields, by name

    /// The message as it is now (message, reaction and pin events): a tombstone once deleted.
    public var message: Message? {
        switch body {
        case .message(let message, _), .reaction(_, _, let message?): message
        default: nil
        }
    }
    /// The user the event is about (membership, receipt, reaction, ban, mute, profile and
    /// notification events; the author of a delivery count; the moderator a report is for).
    public var userID: UserID? {
        switch body {
        case .membership(let user, _), .receipt(let user, _, _), .reaction(let user, _, _), .restriction(let user, _, _),
             .profile(let user, _, _), .notifications(let user, _, _), .report(let user, _, _, _), .state(let user, _),
             .draft(let user, _), .scheduled(let user, _): user
        case .deliveries(let user, _): user
        case .unknown(.object(let fields)): fields["userId"].flatMap { if case .string(let id) = $0 { UserID(rawValue: id) } else { nil } }
        default: nil
        }
    }
    /// A member's role after a membership change.
    public var role: MemberRole? { if case .membership(_, let role) = body { role } else { nil } }
    /// The title after a conversation update that set one.
    public var title: String? { if case .conversation(let change) = body { change.title } else { nil } }
    /// The custom data after a conversation update that set it.
    public var customData: JSONValue? { if case .conversation(let change) = body { change.customData } else { nil } }
    /// Slow mode after a conversation update that changed it (0: off).
    public var slowModeSeconds: Int? { if case .conversation(let change) = body { change.slowModeSeconds } else { nil } }
    /// The retention policy after a conversation update that changed it.
    public var retentionDays: Int? { if case .conversation(let change) = body { change.retentionDays } else { nil } }
    /// A conversation's photo after an update that changed it ("" when removed), or a user's.
    public var photoURL: String? {
        switch body {
        case .conversation(let change): change.photoURL
        case .profile(_, let photoURL, _): photoURL
        default: nil
        }
    }
    /// A user's display name after a profile change.
    public var displayName: String? { if case .profile(_, _, let name) = body { name } else { nil } }
    /// A member's delivered watermark after a receipt change.
    public var deliveredSeq: Int64? { if case .receipt(_, let delivered, _) = body { delivered } else { nil } }
    /// A member's read watermark after a receipt change.
    public var readSeq: Int64? { if case .receipt(_, _, let read) = body { read } else { nil } }
    /// Where the author's messages stand, newest last (`delivery.updated`).
    public var deliveries: [MessageDelivery]? { if case .deliveries(_, let deliveries) = body { deliveries } else { nil } }
    /// A reaction's emoji.
    public var emoji: String? { if case .reaction(_, let emoji, _) = body { emoji } else { nil } }
    /// A thread reply's thread after the change (its `message.created` and `message.deleted`).
    public var thread: ThreadSummary? { if case .message(_, let thread) = body { thread } else { nil } }
    /// When a ban or a moderator's mute ends (nil: until lifted), or a member's own mute (nil: not muted).
    public var until: Date? {
        switch body {
        case .restriction(_, let until, _), .notifications(_, _, let until): until
        default: nil
        }
    }
    /// A ban's reason.
    public var reason: String? {
        switch body {
        case .restriction(_, _, let reason): reason
        case .report(_, _, let reason, _): reason
        default: nil
        }
    }
    /// The report a `report.created` is about (`rp_…`).
    public var reportID: String? { if case .report(_, let id, _, _) = body { id } else { nil } }
    /// Every message up to and including this seq is gone (`messages.expired`).
    public var throughSeq: Int64? { if case .expiry(let through, _) = body { through } else { nil } }
    /// How many messages an expiry removed.
    public var count: Int? { if case .expiry(_, let count) = body { count } else { nil } }
    /// What pushes the member now (`notifications.updated`).
    public var notifications: NotificationLevel? { if case .notifications(_, let level, _) = body { level } else { nil } }
    /// The member's place for the conversation in their own list after the change (`state.updated`).
    public var state: ConversationState? { if case .state(_, let state) = body { state } else { nil } }
    /// The member's draft after they saved or cleared it (`draft.updated`; text "" when cleared).
    public var draft: Draft? { if case .draft(_, let draft) = body { draft } else { nil } }
    /// The member's scheduled message as it stands (`scheduled.updated`).
    public var scheduled: ScheduledMessage? { if case .scheduled(_, let scheduled) = body { scheduled } else { nil } }
    /// An event this build cannot read (a kind it does not know), exactly as it arrived;
    /// nil for the others.
    public var unknownPayload: JSONValue? { if case .unknown(let whole) = body { whole } else { nil } }
}

/// What an event carries beside its envelope, one case per ``EventShape``.
public enum EventBody: Hashable, Sendable {
    /// Nothing more (`conversation.created`).
    case bare
    /// The message as it is now, and for a thread reply the thread after the change.
    case message(Message, thread: ThreadSummary?)
    /// Who a membership change is about, and their role after it (nil when they left).
    case membership(user: UserID, role: MemberRole?)
    /// The settings a conversation change set.
    case conversation(ConversationChange)
    /// A member's watermarks after the change.
    case receipt(user: UserID, deliveredSeq: Int64, readSeq: Int64)
    /// How far an author's messages have got in a public channel.
    case deliveries(author: UserID?, [MessageDelivery])
    /// Who reacted with what, and the message with its counts after the change.
    case reaction(user: UserID, emoji: String, message: Message?)
    /// A ban or a moderator's mute: whom, until when (nil: until lifted), why.
    case restriction(user: UserID, until: Date?, reason: String?)
    /// Retention removed every message through `throughSeq`: `count` of them.
    case expiry(throughSeq: Int64, count: Int)
    /// A user's photo and display name after they changed.
    case profile(user: UserID, photoURL: String?, displayName: String?)
    /// A member's notification level and mute (nil: not muted) after they changed.
    case notifications(user: UserID, level: NotificationLevel?, until: Date?)
    /// A member's place for the conversation in their own list after they changed it.
    case state(user: UserID, ConversationState)
    /// A member's draft after they saved it (text "" when cleared).
    case draft(user: UserID, Draft)
    /// A member's scheduled message as it stands after a change.
    case scheduled(user: UserID, ScheduledMessage)
    /// A report for the moderator `user`: its id, the reporter's reason, and the message.
    case report(user: UserID, reportID: String, reason: String, message: Message?)
    /// An event of a kind this build does not know (or that does not read as its kind):
    /// every field, envelope included, exactly as it arrived.
    case unknown(JSONValue)

    private enum Key: String, CodingKey {
        case message, thread, userID = "userId", role, title, customData, slowModeSeconds, retentionDays, photoURL, deliveredSeq,
             readSeq, deliveries, emoji, until, reason, throughSeq, count, displayName, notifications, reportID = "reportId",
             pinnedRank, archived, markedUnread, draft, scheduled
    }

    /// Reads the body of an event of `kind` from the event's fields: by the kind's shape, or
    /// whole as ``unknown(_:)`` when this build does not know the kind or its fields do not
    /// read as that shape.
    init(kind: EventKind, from decoder: any Decoder) throws {
        guard let shape = kind.rule?.shape, let body = try? Self.read(shape, try decoder.container(keyedBy: Key.self)) else {
            self = .unknown(try JSONValue(from: decoder))
            return
        }
        self = body
    }

    private static func read(_ shape: EventShape, _ fields: KeyedDecodingContainer<Key>) throws -> EventBody {
        func user() throws -> UserID { try fields.decode(UserID.self, forKey: .userID) }
        switch shape {
        case .bare, .channel:
            return .bare
        case .message:
            return .message(try fields.decode(Message.self, forKey: .message), thread: try fields.decodeIfPresent(ThreadSummary.self, forKey: .thread))
        case .membership:
            return .membership(user: try user(), role: try fields.decodeIfPresent(MemberRole.self, forKey: .role))
        case .conversationChange:
            return .conversation(ConversationChange(
                title: try fields.decodeIfPresent(String.self, forKey: .title), customData: try fields.decodeIfPresent(JSONValue.self, forKey: .customData),
                slowModeSeconds: try fields.decodeIfPresent(Int.self, forKey: .slowModeSeconds),
                retentionDays: try fields.decodeIfPresent(Int.self, forKey: .retentionDays), photoURL: try fields.decodeIfPresent(String.self, forKey: .photoURL)))
        case .receipt:
            return .receipt(user: try user(), deliveredSeq: try fields.decode(Int64.self, forKey: .deliveredSeq),
                            readSeq: try fields.decode(Int64.self, forKey: .readSeq))
        case .deliveries:
            return .deliveries(author: try fields.decodeIfPresent(UserID.self, forKey: .userID),
                               try fields.decode([MessageDelivery].self, forKey: .deliveries))
        case .reaction:
            return .reaction(user: try user(), emoji: try fields.decode(String.self, forKey: .emoji),
                             message: try fields.decodeIfPresent(Message.self, forKey: .message))
        case .restriction:
            return .restriction(user: try user(), until: try fields.decodeIfPresent(Date.self, forKey: .until),
                                reason: try fields.decodeIfPresent(String.self, forKey: .reason))
        case .expiry:
            return .expiry(throughSeq: try fields.decode(Int64.self, forKey: .throughSeq), count: try fields.decode(Int.self, forKey: .count))
        case .profile:
            return .profile(user: try user(), photoURL: try fields.decodeIfPresent(String.self, forKey: .photoURL),
                            displayName: try fields.decodeIfPresent(String.self, forKey: .displayName))
        case .notifications:
            return .notifications(user: try user(), level: try fields.decodeIfPresent(NotificationLevel.self, forKey: .notifications),
                                  until: try fields.decodeIfPresent(Date.self, forKey: .until))
        case .state:
            return .state(user: try user(), ConversationState(pinnedRank: try fields.decodeIfPresent(Int.self, forKey: .pinnedRank),
                                                              archived: try fields.decode(Bool.self, forKey: .archived),
                                                              markedUnread: try fields.decode(Bool.self, forKey: .markedUnread)))
        case .draft:
            return .draft(user: try user(), try fields.decode(Draft.self, forKey: .draft))
        case .scheduled:
            return .scheduled(user: try user(), try fields.decode(ScheduledMessage.self, forKey: .scheduled))
        case .report:
            return .report(user: try user(), reportID: try fields.decode(String.self, forKey: .reportID),
                           reason: try fields.decode(String.self, forKey: .reason), message: try fields.decodeIfPresent(Message.self, forKey: .message))
        }
    }

    /// Writes the body's fields beside the envelope's (``unknown(_:)`` is written whole by
    /// ``ConversationEvent/encode(to:)``).
    func encode(to encoder: any Encoder) throws {
        var fields = encoder.container(keyedBy: Key.self)
        switch self {
        case .bare, .unknown:
            break
        case .message(let message, let thread):
            try fields.encode(message, forKey: .message)
            try fields.encodeIfPresent(thread, forKey: .thread)
        case .membership(let user, let role):
            try fields.encode(user, forKey: .userID)
            try fields.encodeIfPresent(role, forKey: .role)
        case .conversation(let change):
            try fields.encodeIfPresent(change.title, forKey: .title)
            try fields.encodeIfPresent(change.customData, forKey: .customData)
            try fields.encodeIfPresent(change.slowModeSeconds, forKey: .slowModeSeconds)
            try fields.encodeIfPresent(change.retentionDays, forKey: .retentionDays)
            try fields.encodeIfPresent(change.photoURL, forKey: .photoURL)
        case .receipt(let user, let delivered, let read):
            try fields.encode(user, forKey: .userID)
            try fields.encode(delivered, forKey: .deliveredSeq)
            try fields.encode(read, forKey: .readSeq)
        case .deliveries(let author, let deliveries):
            try fields.encodeIfPresent(author, forKey: .userID)
            try fields.encode(deliveries, forKey: .deliveries)
        case .reaction(let user, let emoji, let message):
            try fields.encode(user, forKey: .userID)
            try fields.encode(emoji, forKey: .emoji)
            try fields.encodeIfPresent(message, forKey: .message)
        case .restriction(let user, let until, let reason):
            try fields.encode(user, forKey: .userID)
            try fields.encodeIfPresent(until, forKey: .until)
            try fields.encodeIfPresent(reason, forKey: .reason)
        case .expiry(let through, let count):
            try fields.encode(through, forKey: .throughSeq)
            try fields.encode(count, forKey: .count)
        case .profile(let user, let photoURL, let displayName):
            try fields.encode(user, forKey: .userID)
            try fields.encodeIfPresent(photoURL, forKey: .photoURL)
            try fields.encodeIfPresent(displayName, forKey: .displayName)
        case .notifications(let user, let level, let until):
            try fields.encode(user, forKey: .userID)
            try fields.encodeIfPresent(level, forKey: .notifications)
            try fields.encodeIfPresent(until, forKey: .until)
        case .state(let user, let state):
            try fields.encode(user, forKey: .userID)
            try fields.encodeIfPresent(state.pinnedRank, forKey: .pinnedRank)
            try fields.encode(state.archived, forKey: .archived)
            try fields.encode(state.markedUnread, forKey: .markedUnread)
        case .draft(let user, let draft):
            try fields.encode(user, forKey: .userID)
            try fields.encode(draft, forKey: .draft)
        case .scheduled(let user, let scheduled):
            try fields.encode(user, forKey: .userID)
            try fields.encode(scheduled, forKey: .scheduled)
        case .report(let user, let reportID, let reason, let message):
            try fields.encode(user, forKey: .userID)
            try fields.encode(reportID, forKey: .reportID)
            try fields.encode(reason, forKey: .reason)
            try fields.encodeIfPresent(message, forKey: .message)
        }
    }
}

/// What a `conversation.updated` set: each field present when it changed.
public struct ConversationChange: Hashable, Sendable {
    /// The new title.
    public var title: String?
    /// The new custom data.
    public var customData: JSONValue?
    /// Slow mode after the change (0: off).
    public var slowModeSeconds: Int?
    /// The retention policy after the change (0: forever).
    public var retentionDays: Int?
    /// The photo after the change ("" when removed).
    public var photoURL: String?

    /// Creates the value; each argument sets the property of the same name.
    public init(title: String? = nil, customData: JSONValue? = nil, slowModeSeconds: Int? = nil, retentionDays: Int? = nil, photoURL: String? = nil) {
        self.title = title
        self.customData = customData
        self.slowModeSeconds = slowModeSeconds
        self.retentionDays = retentionDays
        self.photoURL = photoURL
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
