public import Foundation

/// Where a device's push notifications go.
public enum PushPlatform: String, Codable, Sendable, Hashable, CaseIterable {
    /// Apple Push Notification service (iOS, iPadOS, macOS): the token is the hex of the
    /// bytes `didRegisterForRemoteNotificationsWithDeviceToken` gives.
    case apns
    /// Firebase Cloud Messaging (Android, and iOS through Firebase): the registration token.
    case fcm
}

/// Which APNs environment issued a token: an app built for development gets sandbox tokens.
public enum PushEnvironment: String, Codable, Sendable, Hashable, CaseIterable {
    /// `api.push.apple.com`: App Store, TestFlight and ad-hoc builds.
    case production
    /// `api.sandbox.push.apple.com`: builds signed for development.
    case sandbox
}

/// `POST /v1/devices`: registers the calling session's device for push notifications.
public struct RegisterDeviceRequest: Hashable, Codable, Sendable {
    /// `apns` or `fcm`.
    public var platform: PushPlatform
    /// The token the platform gave the app (``Limits/apnsTokenHex`` hex digits for APNs,
    /// ``Limits/fcmTokenBytes`` characters of `A-Z a-z 0-9 - _ :` for FCM).
    public var token: String
    /// APNs only: which environment issued the token. Default `production`.
    public var environment: PushEnvironment?

    /// Creates the value; each argument sets the property of the same name.
    public init(platform: PushPlatform, token: String, environment: PushEnvironment? = nil) {
        self.platform = platform
        self.token = token
        self.environment = environment
    }
}

/// A device registered for push notifications.
public struct PushDevice: Hashable, Codable, Sendable {
    /// Its id (`d_…`), for `DELETE /v1/devices/{id}`.
    public var id: String
    /// `apns` or `fcm`.
    public var platform: PushPlatform
    /// The token, as registered.
    public var token: String
    /// The APNs environment (`production` for FCM).
    public var environment: PushEnvironment
    /// The session that registered it (it is removed when that session signs out).
    public var sessionId: String
    /// When it was registered, or registered again.
    public var updatedAt: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(id: String, platform: PushPlatform, token: String, environment: PushEnvironment, sessionId: String, updatedAt: Date) {
        self.id = id
        self.platform = platform
        self.token = token
        self.environment = environment
        self.sessionId = sessionId
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/devices`: the caller's devices registered for push, newest first.
public struct PushDeviceList: Hashable, Codable, Sendable {
    /// The devices.
    public var devices: [PushDevice]
    /// Creates the value; each argument sets the property of the same name.
    public init(devices: [PushDevice]) { self.devices = devices }
}

/// What pushes a member of a conversation: every new message, or only those that mention them.
/// A member who chose nothing gets the conversation's default: ``all`` in direct chats, groups
/// and private channels, ``mentions`` in public channels (Slack's and Stream's defaults).
public enum NotificationLevel: String, Hashable, Codable, Sendable, CaseIterable {
    /// Every new message (except in a muted conversation, where only mentions push).
    case all
    /// Only messages that mention the member.
    case mentions

    /// The default for a conversation of `kind`.
    public static func `default`(for kind: ConversationKind) -> NotificationLevel {
        kind == .public ? .mentions : .all
    }
}

/// `PUT /v1/conversations/{id}/notifications`: `{"level": "all" | "mentions" | "default"}`.
public struct NotificationsRequest: Hashable, Codable, Sendable {
    /// The member's choice; nil (`"default"` on the wire) goes back to the conversation's default.
    public var level: NotificationLevel?
    /// Creates the value; each argument sets the property of the same name.
    public init(level: NotificationLevel?) { self.level = level }

    private enum CodingKeys: String, CodingKey { case level }

    /// Reads `level`, which must be present: `all`, `mentions` or `default`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let text = try container.decode(String.self, forKey: .level)
        guard text == "default" || NotificationLevel(rawValue: text) != nil else {
            throw DecodingError.dataCorruptedError(forKey: .level, in: container, debugDescription: "level is all, mentions or default")
        }
        level = NotificationLevel(rawValue: text)
    }

    /// Writes `level`, `default` for nil.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(level?.rawValue ?? "default", forKey: .level)
    }
}

/// `PUT /v1/conversations/{id}/mute`: no push for this conversation until `until` (a mention
/// of the member still pushes). Without `until`, until unmuted.
public struct MuteRequest: Hashable, Codable, Sendable {
    /// When the mute ends; in the future. Nil: until `DELETE …/mute`.
    public var until: Date?
    /// Creates the value; each argument sets the property of the same name.
    public init(until: Date? = nil) { self.until = until }

    private enum CodingKeys: String, CodingKey { case until }

    /// Reads `until` as an ISO 8601 date (with or without fractional seconds), whatever the
    /// decoder's date strategy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let text = try container.decodeIfPresent(String.self, forKey: .until) else { return }
        guard let date = WireCoding.parseDate(text) else {
            throw DecodingError.dataCorruptedError(forKey: .until, in: container, debugDescription: "until is not an ISO 8601 date")
        }
        until = date
    }

    /// Writes `until` as the API's dates are written.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(until.map(WireCoding.formatDate), forKey: .until)
    }
}
