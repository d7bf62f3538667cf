public import Foundation

// `GET /v1/server/messages/{id}/trace` (docs/trace.md): where a message went, device by
// device, for the app's backend only.

/// What happened to one new message on its way to its recipients' devices: each step a
/// node recorded, grouped by recipient, and the app's webhook attempts for it.
public struct MessageTrace: Hashable, Codable, Sendable {
    /// The message.
    public var messageId: MessageID
    /// Its conversation.
    public var conversationId: ConversationID
    /// Its author.
    public var authorId: UserID
    /// Its seq in the conversation.
    public var seq: Int64
    /// Its `message.created` event's position.
    public var position: Int64
    /// When it was stored.
    public var createdAt: Date
    /// The node that stored it (`host:port`, or `--node-name`); nil when not recorded.
    public var committedOn: String?
    /// Only its author sees it: the author was shadow-banned when it was sent. Nobody else
    /// receives it, live, on resume or by push.
    public var shadow: Bool
    /// Its recipients (the conversation's other members; in a public channel, those any step
    /// names), each with what reached which of their devices, or why nothing did.
    public var recipients: [TraceRecipient]
    /// Each attempt to deliver its events (`message.created`, and later edits, reactions …) to
    /// the app's webhook endpoints.
    public var webhooks: [TraceStep]
    /// When this trace's steps are removed (the server's `--trace-retention` after the message).
    public var keptUntil: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(messageId: MessageID, conversationId: ConversationID, authorId: UserID, seq: Int64, position: Int64, createdAt: Date,
                committedOn: String?, shadow: Bool, recipients: [TraceRecipient], webhooks: [TraceStep], keptUntil: Date) {
        self.messageId = messageId
        self.conversationId = conversationId
        self.authorId = authorId
        self.seq = seq
        self.position = position
        self.createdAt = createdAt
        self.committedOn = committedOn
        self.shadow = shadow
        self.recipients = recipients
        self.webhooks = webhooks
        self.keptUntil = keptUntil
    }
}

/// One recipient of a traced message.
public struct TraceRecipient: Hashable, Codable, Sendable {
    /// Who.
    public var userId: UserID
    /// In a word (docs/trace.md): `socket` (a connected device took it live), `replayed`
    /// (a device took it on resume), `pushed` (a provider accepted a push), `push_failed`,
    /// `push_pending` (queued or being retried), `not_pushed` (see ``notPushed``), or
    /// `nothing_yet`.
    public var outcome: String
    /// Why no push was sent to this recipient, when none was: `delivered` (a device confirmed
    /// it within the push window), `muted`, `mentions_only`, `thread_not_followed`, `blocked`
    /// (they block the author), `no_device`, `push_off` (push is off on the server).
    public var notPushed: String?
    /// What each node did for this recipient's devices, oldest first.
    public var steps: [TraceStep]

    /// Creates the value; each argument sets the property of the same name.
    public init(userId: UserID, outcome: String, notPushed: String?, steps: [TraceStep]) {
        self.userId = userId
        self.outcome = outcome
        self.notPushed = notPushed
        self.steps = steps
    }
}

/// One thing a node did with a traced message.
public struct TraceStep: Hashable, Codable, Sendable {
    /// `routed` (to a connected device's socket), `replayed` (to a device resuming),
    /// `receipt` (the device marked it delivered or read), `push.queued`, `push.attempt`,
    /// `push.removed` (the provider said the token is dead; the device was removed),
    /// `push.skipped`, `webhook.attempt`.
    public var step: String
    /// When.
    public var at: Date
    /// Which node.
    public var node: String
    /// The device's session (`s_…`), for socket, replay and receipt steps.
    public var session: String?
    /// The push device (`d_…`), for push steps.
    public var device: String?
    /// `apns` or `fcm`, for push steps.
    public var platform: String?
    /// The provider's or endpoint's HTTP status; nil when no answer came.
    public var status: Int?
    /// What the provider answered (`BadDeviceToken`, `UNREGISTERED`, …), why it was skipped,
    /// or why an attempt failed.
    public var reason: String?
    /// APNs's `apns-id` or FCM's message name, for an accepted push.
    public var providerId: String?
    /// `outcome` of an attempt: `sent`, `retry`, `failed`, `removed`.
    public var outcome: String?
    /// The push carried no text: the app is `id-only`.
    public var idOnly: Bool?
    /// The webhook endpoint (`wh_…`).
    public var endpoint: String?
    /// The event a webhook attempt delivered (`message.created`, `message.edited`, …).
    public var event: String?
    /// The highest seq the device marked delivered or read, for a receipt step.
    public var deliveredSeq: Int64?
    /// See ``deliveredSeq``.
    public var readSeq: Int64?

    /// Creates the value; each argument sets the property of the same name.
    public init(step: String, at: Date, node: String, session: String? = nil, device: String? = nil, platform: String? = nil,
                status: Int? = nil, reason: String? = nil, providerId: String? = nil, outcome: String? = nil, idOnly: Bool? = nil,
                endpoint: String? = nil, event: String? = nil, deliveredSeq: Int64? = nil, readSeq: Int64? = nil) {
        self.step = step
        self.at = at
        self.node = node
        self.session = session
        self.device = device
        self.platform = platform
        self.status = status
        self.reason = reason
        self.providerId = providerId
        self.outcome = outcome
        self.idOnly = idOnly
        self.endpoint = endpoint
        self.event = event
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}

// Test mode (`parley-server --test-mode`, docs/test-mode.md).

/// `GET` and `POST /v1/test/clock`: the server's clock in test mode.
public struct TestClockState: Hashable, Codable, Sendable {
    /// Now, by the server's clock.
    public var now: Date
    /// How far ahead of the wall clock it is, in seconds.
    public var offsetSeconds: Double
    /// Creates the value; each argument sets the property of the same name.
    public init(now: Date, offsetSeconds: Double) {
        self.now = now
        self.offsetSeconds = offsetSeconds
    }
}

/// `POST /v1/test/clock`: moves the server's clock forward.
public struct AdvanceClockRequest: Hashable, Codable, Sendable {
    /// Seconds to move it by: more than 0, at most ten years (315,360,000).
    public var advanceSeconds: Double
    /// Creates the value; each argument sets the property of the same name.
    public init(advanceSeconds: Double) { self.advanceSeconds = advanceSeconds }
}

/// One push test mode's built-in APNs or FCM accepted (`GET /v1/test/pushes`).
public struct TestPush: Hashable, Codable, Sendable {
    /// `apns` or `fcm`.
    public var platform: String
    /// The device token it went to.
    public var token: String
    /// The request's headers as the provider got them (names lowercased; never `authorization`).
    public var headers: [String: String]
    /// The request's JSON body, exactly: APNs's payload (`aps`, `parley`), or FCM's `{message}`.
    public var payload: JSONValue
    /// What the provider answered as its id (`apns-id`, or the FCM message name).
    public var providerId: String
    /// When it was accepted (wall clock).
    public var at: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(platform: String, token: String, headers: [String: String], payload: JSONValue, providerId: String, at: Date) {
        self.platform = platform
        self.token = token
        self.headers = headers
        self.payload = payload
        self.providerId = providerId
        self.at = at
    }
}

/// `GET /v1/test/pushes`.
public struct TestPushList: Hashable, Codable, Sendable {
    /// Oldest first.
    public var pushes: [TestPush]
    /// Creates the value; each argument sets the property of the same name.
    public init(pushes: [TestPush]) { self.pushes = pushes }
}

/// `POST /v1/test/faults/store` and `/redis`: the store (or Redis) is out of reach.
public struct Outage: Hashable, Codable, Sendable {
    /// For this many seconds from now (0 to 3600; 0: back at once).
    public var unavailableSeconds: Double
    /// Creates the value; each argument sets the property of the same name.
    public init(unavailableSeconds: Double) { self.unavailableSeconds = unavailableSeconds }
}

/// `POST /v1/test/faults/drop-connections`: cuts a user's sockets as a network would.
public struct DropConnections: Hashable, Codable, Sendable {
    /// The user (their username).
    public var username: String
    /// Creates the value; each argument sets the property of the same name.
    public init(username: String) { self.username = username }
}

/// The answer to ``DropConnections``.
public struct DroppedConnections: Hashable, Codable, Sendable {
    /// How many of the user's sockets were cut (on this node).
    public var dropped: Int
    /// Creates the value; each argument sets the property of the same name.
    public init(dropped: Int) { self.dropped = dropped }
}

/// The answer to `POST /v1/test/reset`.
public struct TestReset: Hashable, Codable, Sendable {
    /// Rows removed (users, conversations, messages, devices, sessions, outboxes, traces …).
    public var removedRows: Int
    /// Creates the value; each argument sets the property of the same name.
    public init(removedRows: Int) { self.removedRows = removedRows }
}
