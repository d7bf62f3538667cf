public import Foundation

/// What a webhook endpoint hears about (docs/webhooks.md): every conversation event whose
/// kind's rule says webhooks hear it (``EventRule/webhook``), `user.created`, `user.deleted`, and for
/// Pusher-format endpoints Pusher's own events. Decoding refuses any other name.
public struct WebhookEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The name an endpoint registers (`message.created`, `channel_occupied`, …).
    public let rawValue: String

    /// The type named `rawValue`, if an endpoint can hear it.
    public init?(rawValue: String) {
        guard Self.allCases.contains(where: { $0.rawValue == rawValue }) else { return nil }
        self.rawValue = rawValue
    }

    private init(name: String) { rawValue = name }

    /// The conversation events of `kind` (only those webhooks hear: see ``allCases``).
    public init(_ kind: EventKind) { rawValue = kind.rawValue }

    public var description: String { rawValue }

    /// A user was created (signed up, a guest, or by the server API).
    public static let userCreated = WebhookEventType(name: "user.created")
    /// A user was deleted (by themselves, `DELETE /v1/me`, or by the server API).
    public static let userDeleted = WebhookEventType(name: "user.deleted")
    /// A member reported a message (the report, as the moderators' queue shows it).
    public static let reportCreated = WebhookEventType(name: "report.created")
    /// A moderator or the app's backend resolved a report.
    public static let reportResolved = WebhookEventType(name: "report.resolved")
    // Pusher-format endpoints (`"format": "pusher"`) hear Pusher's own events:
    /// Pusher: a channel got its first subscriber.
    public static let channelOccupied = WebhookEventType(name: "channel_occupied")
    /// Pusher: a channel lost its last subscriber.
    public static let channelVacated = WebhookEventType(name: "channel_vacated")
    /// Pusher: a user joined a presence channel.
    public static let pusherMemberAdded = WebhookEventType(name: "member_added")
    /// Pusher: a user left a presence channel.
    public static let pusherMemberRemoved = WebhookEventType(name: "member_removed")
    /// Pusher: a client event on a private or presence channel.
    public static let clientEvent = WebhookEventType(name: "client_event")

    /// Every type an endpoint can hear, by name.
    public static let allCases: [WebhookEventType] = (
        EventKind.rules.filter(\.value.webhook).keys.map(WebhookEventType.init)
            + [.userCreated, .userDeleted, .reportCreated, .reportResolved, .channelOccupied, .channelVacated, .pusherMemberAdded, .pusherMemberRemoved, .clientEvent]
    ).sorted { $0.rawValue < $1.rawValue }

    /// Whether a Pusher-format endpoint hears it (else a Parley-format one does).
    public var isPusher: Bool { !rawValue.contains(".") }

    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let type = WebhookEventType(rawValue: name) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                    debugDescription: "unknown webhook event type '\(name)'"))
        }
        self = type
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// The format of an endpoint's deliveries.
public enum WebhookFormat: String, Codable, Sendable, CaseIterable {
    /// `{"id","type","createdAt","data"}` signed with `Parley-Signature`.
    case parley
    /// Pusher's `{"time_ms","events":[…]}` signed with `X-Pusher-Key` / `X-Pusher-Signature`.
    case pusher
}

/// `POST /v1/server/webhooks`.
public struct CreateWebhookRequest: Hashable, Codable, Sendable {
    /// Where deliveries are POSTed (http or https).
    public var url: String
    /// The event types it hears (at least one).
    public var events: [WebhookEventType]
    /// Default `parley`.
    public var format: WebhookFormat?
    /// A note for people.
    public var description: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(url: String, events: [WebhookEventType], format: WebhookFormat? = nil, description: String? = nil) {
        self.url = url
        self.events = events
        self.format = format
        self.description = description
    }
}

/// `PATCH /v1/server/webhooks/{id}`: absent fields are kept.
public struct UpdateWebhookRequest: Hashable, Codable, Sendable {
    /// A new URL.
    public var url: String?
    /// New event types.
    public var events: [WebhookEventType]?
    /// A new note.
    public var description: String?
    /// `true` pauses deliveries (events are still kept for it); `false` resumes them.
    public var paused: Bool?
    /// Creates the value; each argument sets the property of the same name.
    public init(url: String? = nil, events: [WebhookEventType]? = nil, description: String? = nil, paused: Bool? = nil) {
        self.url = url
        self.events = events
        self.description = description
        self.paused = paused
    }
}

/// A webhook endpoint.
public struct WebhookEndpoint: Hashable, Codable, Sendable {
    /// `wh_…`.
    public var id: String
    /// Where deliveries go.
    public var url: String
    /// What it hears.
    public var events: [WebhookEventType]
    /// How deliveries are written and signed.
    public var format: WebhookFormat
    /// A note for people.
    public var description: String?
    /// The signing secret (`whsec_…`): only in the answer that created it or rotated it.
    public var secret: String?
    /// The same key as the Standard Webhooks libraries take it (`whsec_` and standard base64),
    /// for checking the `webhook-signature` header with them as they are: only beside ``secret``.
    public var standardWebhooksSecret: String? = nil
    /// When it was registered.
    public var createdAt: Date
    /// Since when its deliveries have been failing (nil: the last one succeeded).
    public var failingSince: Date?
    /// The last failure: a status, a timeout, a refused connection or address.
    public var lastError: String?
    /// When it was paused (by the backend, or by the server after a delivery failed for the
    /// whole retry window); nil while deliveries run.
    public var pausedAt: Date?
    /// Why it was paused.
    public var pausedReason: String?
    /// Deliveries waiting (including retries).
    public var pending: Int
    /// Deliveries given up on (list and replay them).
    public var failed: Int
    /// Creates the value; each argument sets the property of the same name.
    public init(id: String, url: String, events: [WebhookEventType], format: WebhookFormat, description: String?, secret: String?,
                createdAt: Date, failingSince: Date?, lastError: String?, pausedAt: Date?, pausedReason: String?, pending: Int, failed: Int) {
        self.id = id
        self.url = url
        self.events = events
        self.format = format
        self.description = description
        self.secret = secret
        self.createdAt = createdAt
        self.failingSince = failingSince
        self.lastError = lastError
        self.pausedAt = pausedAt
        self.pausedReason = pausedReason
        self.pending = pending
        self.failed = failed
    }
}

/// The app's endpoints.
public struct WebhookEndpointList: Hashable, Codable, Sendable {
    /// Oldest first.
    public var webhooks: [WebhookEndpoint]
    /// Creates the value.
    public init(webhooks: [WebhookEndpoint]) { self.webhooks = webhooks }
}

/// One delivery (`Parley-Webhook-Id`), waiting or given up on.
public struct WebhookDelivery: Hashable, Codable, Sendable {
    /// `whd_…`, the same on every attempt.
    public var id: String
    /// The event type.
    public var type: String
    /// When the event happened.
    public var createdAt: Date
    /// Attempts made.
    public var attempts: Int
    /// When the next attempt is due (waiting deliveries).
    public var dueAt: Date?
    /// When it was given up on (failed deliveries).
    public var failedAt: Date?
    /// Creates the value; each argument sets the property of the same name.
    public init(id: String, type: String, createdAt: Date, attempts: Int, dueAt: Date?, failedAt: Date?) {
        self.id = id
        self.type = type
        self.createdAt = createdAt
        self.attempts = attempts
        self.dueAt = dueAt
        self.failedAt = failedAt
    }
}

/// A page of deliveries, oldest first.
public struct WebhookDeliveryList: Hashable, Codable, Sendable {
    /// The deliveries.
    public var deliveries: [WebhookDelivery]
    /// More follow (ask with `after` = the last id).
    public var hasMore: Bool
    /// Creates the value.
    public init(deliveries: [WebhookDelivery], hasMore: Bool) {
        self.deliveries = deliveries
        self.hasMore = hasMore
    }
}

/// How many failed deliveries a replay put back in line.
public struct ReplayResult: Hashable, Codable, Sendable {
    /// Deliveries queued again.
    public var replayed: Int
    /// Creates the value.
    public init(replayed: Int) { self.replayed = replayed }
}
