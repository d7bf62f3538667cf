/// The name of a kind of conversation event (`message.created`, `reaction.added`, …).
///
/// Open, the way an HTTP field name is: a kind this build does not know is just a value with
/// its name (a newer server's), never a decoding failure, and its event is kept whole
/// (``EventBody/unknown(_:)``). The kinds this build knows are the statics below, each with
/// its rule in ``rules`` — together, the one declaration of a kind
/// (docs/decisions/0022-an-event-kind-is-one-declaration.md says how to add one).
public struct EventKind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The wire name.
    public let rawValue: String

    /// The kind named `rawValue`, known or not.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The kind named by a literal (the declarations below).
    public init(stringLiteral value: String) { rawValue = value }

    public var description: String { rawValue }

    /// What this build knows of the kind; nil for a kind it does not know.
    public var rule: EventRule? { Self.rules[self] }

    /// Whether this build knows the kind (it has a rule).
    public var isKnown: Bool { rule != nil }

    /// Kinds that annotate the conversation without being part of its history (receipts,
    /// delivery counts, reactions, pins, profile changes, notification settings): they take
    /// no `seq` and never count as unread. False for a kind this build does not know.
    public var hasNoSeq: Bool { rule.map { !$0.history } ?? false }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

// MARK: - The kinds

extension EventKind {
    /// A message was sent; the body is the message (and a thread reply's thread).
    public static let messageCreated: EventKind = "message.created"
    /// Its author edited a message; the body is the message with its new content.
    public static let messageEdited: EventKind = "message.edited"
    /// A message was deleted; the body is its tombstone (and a thread reply's thread).
    public static let messageDeleted: EventKind = "message.deleted"
    /// Someone joined or was added: who, and as what.
    public static let memberAdded: EventKind = "member.added"
    /// Someone left or was removed.
    public static let memberRemoved: EventKind = "member.removed"
    /// A member's role changed: who, and their role now.
    public static let memberUpdated: EventKind = "member.updated"
    /// The conversation was created: the event after its first members' `member.added`.
    public static let conversationCreated: EventKind = "conversation.created"
    /// Settings changed (title, custom data, slow mode, retention, photo): what was set.
    public static let conversationUpdated: EventKind = "conversation.updated"
    /// A member's watermarks moved. In a public channel only the member's own devices hear it.
    public static let receiptUpdated: EventKind = "receipt.updated"
    /// In a public channel, where members' receipts reach only their own devices: how far the
    /// author's messages have got, as counts. Only the author's devices receive it
    /// (docs/protocol.md, "Delivery in channels").
    public static let deliveryUpdated: EventKind = "delivery.updated"
    /// Someone reacted to a message (decision 0021).
    public static let reactionAdded: EventKind = "reaction.added"
    /// Someone took a reaction back.
    public static let reactionRemoved: EventKind = "reaction.removed"
    /// Someone voted in a poll, changed their vote or took it back: the message with the
    /// server's new counts. `actorId` names the voter, except in an anonymous poll, where it
    /// is absent.
    public static let pollVoted: EventKind = "poll.voted"
    /// A poll's author or a moderator (`actorId`) closed it: the message with its final counts.
    public static let pollClosed: EventKind = "poll.closed"
    /// The server attached a link preview to a message (``Message/linkPreview``): the message
    /// as it is now. No `actorId`: the server fetched it, not a member.
    public static let messagePreviewed: EventKind = "message.previewed"
    /// A message was pinned (`actorId` by whom; the message shows `pinnedAt` and `pinnedBy`).
    public static let messagePinned: EventKind = "message.pinned"
    /// A message was unpinned.
    public static let messageUnpinned: EventKind = "message.unpinned"
    /// A moderator banned someone (until, reason): a `member.removed` follows.
    public static let memberBanned: EventKind = "member.banned"
    /// A moderator lifted a ban.
    public static let memberUnbanned: EventKind = "member.unbanned"
    /// A moderator muted a member (until): they read but may not post.
    public static let memberMuted: EventKind = "member.muted"
    /// A moderator unmuted a member.
    public static let memberUnmuted: EventKind = "member.unmuted"
    /// The retention policy removed the conversation's messages up to and including a seq.
    public static let messagesExpired: EventKind = "messages.expired"
    /// A member changed their profile photo or display name: every conversation they are in
    /// gets one, so open chats show the new face and name.
    public static let userUpdated: EventKind = "user.updated"
    /// The member changed what pushes them here (level and mute). Only their own devices hear it.
    public static let notificationsUpdated: EventKind = "notifications.updated"
    /// The member pinned, unpinned, archived, unarchived or marked the conversation unread
    /// (its place in their own list). Only their own devices hear it.
    public static let stateUpdated: EventKind = "state.updated"
    /// The member saved or cleared their draft of a message in the conversation (or one of
    /// its threads). Only their own devices hear it.
    public static let draftUpdated: EventKind = "draft.updated"
    /// The member scheduled a message here, changed or cancelled it, or it was sent or failed
    /// at its time. Only their own devices hear it.
    public static let scheduledUpdated: EventKind = "scheduled.updated"
    /// A member reported a message: one to each of the conversation's moderators (owners and
    /// admins), naming the report, its reason and the message. Only that moderator's devices hear it.
    public static let reportCreated: EventKind = "report.created"
    /// An event on a named channel of the Pusher protocol (docs/pusher.md): stored in the
    /// channel's own log, delivered to the channel's subscribers, never a conversation's.
    public static let channelEvent: EventKind = "channel.event"
}

// MARK: - The rules

/// What an event carries beside its envelope (position, conversation, seq, kind, actor, time).
public enum EventShape: Sendable, Hashable, CaseIterable {
    /// Nothing more.
    case bare
    /// The message as it is now (a tombstone once deleted), and a thread reply's thread summary.
    case message
    /// Who a membership change is about, and their role after it.
    case membership
    /// The settings a conversation change set.
    case conversationChange
    /// A member's watermarks.
    case receipt
    /// An author's delivery counts.
    case deliveries
    /// Who reacted with which emoji, and the message with its counts after the change.
    case reaction
    /// Whom a ban or moderator's mute is about, until when, and why.
    case restriction
    /// Through which seq retention removed messages, and how many.
    case expiry
    /// A user's new photo and display name.
    case profile
    /// A member's notification level and mute.
    case notifications
    /// A member's own place for the conversation in their list: pinned, archived, marked unread.
    case state
    /// A member's draft of a message, as saved last.
    case draft
    /// A member's scheduled message as it stands.
    case scheduled
    /// A named channel's event (the Pusher protocol's), never written as a conversation event.
    case channel
    /// A report for a moderator: which, why, and the message (the reporter is the actor).
    case report
}

/// Who receives an event, live and on replay alike.
public enum EventAudience: Sendable, Hashable {
    /// Every member's devices (a newcomer from their own `member.added` on, a leaver up to
    /// their `member.removed`).
    case members
    /// Only the devices of the user the event is about.
    case subject
    /// The subject's devices, and the devices of the members whose messages the change
    /// passed (a receipt: the authors it tells that their messages were delivered or read).
    /// In a public channel the subject's alone (receipts are counted there, not shown); in a
    /// direct chat, or when the authors are most of the members, every member's. The write
    /// names the authors, and they are stored with the event, so replay agrees with the live
    /// socket (decision 0028).
    case subjectAndAuthors
    /// The subscribers of a named channel (the Pusher protocol's).
    case channel
}

/// A kind's rules: one row of ``EventKind/rules`` tells every path — the write, the live
/// publication, the replay and feed, webhooks, push and clients — what to do with it.
public struct EventRule: Sendable, Hashable {
    /// What the event carries.
    public var shape: EventShape
    /// Part of the conversation's history: takes the next `seq` and moves the conversation's
    /// activity. False for annotations (receipts, reactions, pins, …), which take no `seq`.
    public var history: Bool
    /// Who receives it.
    public var audience: EventAudience
    /// Whether the app's webhooks can hear it (docs/webhooks.md).
    public var webhook: Bool
    /// Whether it pushes members whose phones are asleep (docs/push.md).
    public var push: Bool

    /// Creates a rule; each argument sets the property of the same name.
    public init(_ shape: EventShape, history: Bool, audience: EventAudience = .members, webhook: Bool, push: Bool = false) {
        self.shape = shape
        self.history = history
        self.audience = audience
        self.webhook = webhook
        self.push = push
    }
}

extension EventKind {
    /// Every kind this build knows, with its rule.
    public static let rules: [EventKind: EventRule] = [
        .messageCreated: EventRule(.message, history: true, webhook: true, push: true),
        .messageEdited: EventRule(.message, history: true, webhook: true),
        .messageDeleted: EventRule(.message, history: true, webhook: true),
        .memberAdded: EventRule(.membership, history: true, webhook: true),
        .memberRemoved: EventRule(.membership, history: true, webhook: true),
        .memberUpdated: EventRule(.membership, history: true, webhook: true),
        .conversationCreated: EventRule(.bare, history: true, webhook: true),
        .conversationUpdated: EventRule(.conversationChange, history: true, webhook: true),
        .receiptUpdated: EventRule(.receipt, history: false, audience: .subjectAndAuthors, webhook: false),
        .deliveryUpdated: EventRule(.deliveries, history: false, audience: .subject, webhook: false),
        .reactionAdded: EventRule(.reaction, history: false, webhook: true),
        .reactionRemoved: EventRule(.reaction, history: false, webhook: true),
        .pollVoted: EventRule(.message, history: false, webhook: true),
        .pollClosed: EventRule(.message, history: false, webhook: true),
        .messagePreviewed: EventRule(.message, history: false, webhook: true),
        .messagePinned: EventRule(.message, history: false, webhook: true),
        .messageUnpinned: EventRule(.message, history: false, webhook: true),
        .memberBanned: EventRule(.restriction, history: true, webhook: true),
        .memberUnbanned: EventRule(.membership, history: true, webhook: true),
        .memberMuted: EventRule(.restriction, history: true, webhook: true),
        .memberUnmuted: EventRule(.membership, history: true, webhook: true),
        .messagesExpired: EventRule(.expiry, history: true, webhook: true),
        .userUpdated: EventRule(.profile, history: false, webhook: false),
        .notificationsUpdated: EventRule(.notifications, history: false, audience: .subject, webhook: false),
        .stateUpdated: EventRule(.state, history: false, audience: .subject, webhook: false),
        .draftUpdated: EventRule(.draft, history: false, audience: .subject, webhook: false),
        .scheduledUpdated: EventRule(.scheduled, history: false, audience: .subject, webhook: false),
        .reportCreated: EventRule(.report, history: false, audience: .subject, webhook: false),
        .channelEvent: EventRule(.channel, history: true, audience: .channel, webhook: false),
    ]
}
