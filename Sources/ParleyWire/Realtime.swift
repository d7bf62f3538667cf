public import Foundation

/// A frame a client sends over the realtime WebSocket (docs/protocol.md). One flat shape for
/// every command: `type` says which, `id` is the client's command id that the answer echoes,
/// and each command reads the fields it names.
///
/// ```json
/// {"type":"auth","token":"…","position":1041}
/// {"type":"message.send","id":"7","conversationId":"c_…","message":{"clientId":"a1","content":{"type":"text","text":"hi"}}}
/// ```
public struct ClientFrame: Hashable, Codable, Sendable {
    /// The commands.
    public enum Kind: String, Hashable, Codable, Sendable, CaseIterable {
        /// The first frame: `token`, optional `position` to resume after.
        case auth
        /// `conversationId`, `message` (as the REST send body).
        case send = "message.send"
        /// `conversationId`, `messageId`, `content`, optional `metadata`.
        case edit = "message.edit"
        /// `conversationId`, `messageIds` (one or several; all or none).
        case delete = "message.delete"
        /// `conversationId`, `seq`: everything up to `seq` reached this device.
        case markDelivered = "receipt.delivered"
        /// `conversationId`, `seq`: everything up to `seq` was shown.
        case markRead = "receipt.read"
        /// `conversationId`: the user started typing (repeat every few seconds while typing).
        case typingStarted = "typing.start"
        /// `conversationId`: the user stopped typing.
        case typingStopped = "typing.stop"
        /// `conversationId` of a public channel.
        case join = "channel.join"
        /// `conversationId`: leave a channel or group.
        case leave = "channel.leave"
        /// `userIds`: who of them is online.
        case presence = "presence.query"
        /// Answered with `pong`.
        case ping
    }

    /// The command's name (a ``Kind`` raw value; anything else is answered `unknown_command`).
    public var type: String
    /// The client's id for this command, echoed by its `ack` or `error`; 1–64 characters.
    public var id: String?
    /// `auth`: the session token from sign-in.
    public var token: String?
    /// `auth`: the last position this device processed; events after it are replayed.
    public var position: Int64?
    /// `auth`: the epoch that position belongs to (from `ready` or `resync`); when it is not
    /// the server's, the device is told to resync instead of resuming.
    public var epoch: String?
    /// The conversation a command is about.
    public var conversationID: ConversationID?
    /// `message.send`: the message.
    public var message: SendMessageRequest?
    /// `message.edit`: which message.
    public var messageID: MessageID?
    /// `message.delete`: which messages.
    public var messageIDs: [MessageID]?
    /// `message.edit`: the new content.
    public var content: MessageContent?
    /// `message.edit`: the new metadata.
    public var metadata: [String: String]?
    /// `receipt.delivered`, `receipt.read`: the watermark.
    public var seq: Int64?
    /// `presence.query`: whom to ask about.
    public var userIDs: [UserID]?

    enum CodingKeys: String, CodingKey {
        case type, id, token, position, epoch, conversationID = "conversationId", message, messageID = "messageId",
             messageIDs = "messageIds", content, metadata, seq, userIDs = "userIds"
    }

    /// A frame of `kind`; set the fields the command reads.
    public init(_ kind: Kind, id: String? = nil) {
        type = kind.rawValue
        self.id = id
    }

    /// The command, when `type` names one.
    public var kind: Kind? { Kind(rawValue: type) }
}

/// A frame the server sends (docs/protocol.md), as the SDK decodes it. The server writes
/// these with ``JSONWriter`` (``RealtimeFrames``); the keys are the same.
public struct ServerFrame: Hashable, Codable, Sendable {
    /// The kinds of server frames.
    public enum Kind: String, Hashable, Codable, Sendable {
        /// Caught up: live from `position` on.
        case ready
        /// A command succeeded: `id`, `result`.
        case ack
        /// A command (or the connection) failed: `id` (when a command's), `error`.
        case error
        /// A stored event: `event`.
        case event
        /// Someone is typing: `conversationId`, `userId`, `typing`, `expiresInMs`.
        case typing
        /// Someone came online or went offline: `userId`, `status`, `lastSeenAt`.
        case presence
        /// The position asked for cannot be replayed: reload over REST, then continue from `position`.
        case resync
        /// The answer to `ping`: `id`.
        case pong
    }

    /// Which frame.
    public var type: Kind
    /// The command id an `ack`, `error` or `pong` answers.
    public var id: String?
    /// An `ack`'s result (the command's REST answer).
    public var result: JSONValue?
    /// An `error`'s details.
    public var error: ChatError?
    /// An `event`'s event.
    public var event: ConversationEvent?
    /// `typing`: where.
    public var conversationID: ConversationID?
    /// `typing`, `presence`, `ready`: who.
    public var userID: UserID?
    /// `typing`: started (true) or stopped.
    public var typing: Bool?
    /// `typing`: forget it after this long unless repeated.
    public var expiresInMs: Int?
    /// `presence`: `online` or `offline`.
    public var status: PresenceStatus?
    /// `presence`: when an offline user was last connected.
    public var lastSeenAt: Date?
    /// `ready`: the position the device is now at; `resync`: the position to continue from.
    public var position: Int64?
    /// `ready`: the interval at which the server pings, and expects the client to be heard.
    public var heartbeatSeconds: Int?
    /// `ready`, `resync`: the name of the history `position` belongs to; it changes only when
    /// the server's history does (a restore from backup). Keep it with the position.
    public var epoch: String?
    /// `resync`: why.
    public var reason: String?

    enum CodingKeys: String, CodingKey {
        case type, id, result, error, event, conversationID = "conversationId", userID = "userId", typing, expiresInMs, status,
             lastSeenAt, position, heartbeatSeconds, reason, epoch
    }

    /// A frame of `type`; set the fields it carries.
    public init(_ type: Kind) { self.type = type }
}

/// Online or not.
public enum PresenceStatus: String, Hashable, Codable, Sendable {
    /// At least one device is connected (or was, within the grace period).
    case online
    /// No device has been connected for longer than the grace period.
    case offline
}

/// One user's presence, as `presence.query` answers it.
public struct Presence: Hashable, Codable, Sendable {
    /// Who.
    public var userID: UserID
    /// Online or offline.
    public var status: PresenceStatus
    /// When they were last connected (offline only; nil if never).
    public var lastSeenAt: Date?

    enum CodingKeys: String, CodingKey { case userID = "userId", status, lastSeenAt }

    /// Creates the value; each argument sets the property of the same name.
    public init(userID: UserID, status: PresenceStatus, lastSeenAt: Date?) {
        self.userID = userID
        self.status = status
        self.lastSeenAt = lastSeenAt
    }
}

/// The answer to `presence.query`.
public struct PresenceList: Hashable, Codable, Sendable {
    /// One entry per user asked about who shares a conversation with the caller.
    public var users: [Presence]
    /// Creates the value.
    public init(users: [Presence]) { self.users = users }
}

/// The close codes of the realtime WebSocket, beyond RFC 6455's (docs/protocol.md).
public enum RealtimeCloseCode: Sendable {
    /// 4000: the client fell too far behind (or the server is shedding load): reconnect and
    /// resume from the last position processed. Nothing is lost.
    public static let resume: UInt16 = 4000
    /// 4001: the token is unknown, expired, of another app, or was signed out. Sign in again.
    public static let unauthorized: UInt16 = 4001
    /// 4002: no `auth` frame within the deadline.
    public static let authTimeout: UInt16 = 4002
    /// 4003: the first frame was not a valid `auth`, or a binary frame was sent.
    public static let protocolViolation: UInt16 = 4003
}

/// Limits of the realtime protocol (docs/limits.md).
extension Limits {
    /// Largest client frame in bytes; larger closes with 1009.
    public static let realtimeFrameBytes = 128 * 1024
    /// Command ids: 1–64 characters.
    public static let commandID = 1...64
    /// Users in one presence query.
    public static let presencePerQuery = 100
}

/// Writers for the server's frames, shared by the server and tests. Keys are sorted, as
/// ``WireCoding/encoder()`` writes them.
public enum RealtimeFrames: Sendable {
    /// `{"id":…,"result":…,"type":"ack"}` around a result already encoded.
    public static func ack(id: String?, result: [UInt8]) -> [UInt8] {
        var writer = JSONWriter(capacity: result.count + 48)
        writer.object { json in
            if let id { json.key("id"); json.string(id) }
            json.key("result"); json.raw(String(decoding: result, as: UTF8.self))
            json.key("type"); json.string("ack")
        }
        return writer.bytes
    }

    /// `{"error":{…},"id":…,"type":"error"}`.
    public static func error(id: String?, _ error: ChatError) -> [UInt8] {
        var writer = JSONWriter(capacity: 160)
        writer.object { json in
            json.key("error")
            json.object { body in
                body.key("code"); body.string(error.code)
                body.key("message"); body.string(error.message)
                if let seconds = error.retryAfterSeconds { body.key("retryAfterSeconds"); body.integer(Int64(seconds)) }
                body.key("status"); body.integer(Int64(error.status))
            }
            if let id { json.key("id"); json.string(id) }
            json.key("type"); json.string("error")
        }
        return writer.bytes
    }

    /// `{"id":…,"type":"pong"}`.
    public static func pong(id: String?) -> [UInt8] {
        var writer = JSONWriter(capacity: 48)
        writer.object { json in
            if let id { json.key("id"); json.string(id) }
            json.key("type"); json.string("pong")
        }
        return writer.bytes
    }

    /// `{"epoch":…,"heartbeatSeconds":…,"position":…,"type":"ready","userId":…}`.
    public static func ready(position: Int64, epoch: String, userID: String, heartbeatSeconds: Int) -> [UInt8] {
        var writer = JSONWriter(capacity: 160)
        writer.object { json in
            json.key("epoch"); json.string(epoch)
            json.key("heartbeatSeconds"); json.integer(Int64(heartbeatSeconds))
            json.key("position"); json.integer(position)
            json.key("type"); json.string("ready")
            json.key("userId"); json.string(userID)
        }
        return writer.bytes
    }

    /// `{"epoch":…,"position":…,"reason":…,"type":"resync"}`.
    public static func resync(position: Int64, epoch: String, reason: String) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.object { json in
            json.key("epoch"); json.string(epoch)
            json.key("position"); json.integer(position)
            json.key("reason"); json.string(reason)
            json.key("type"); json.string("resync")
        }
        return writer.bytes
    }

    /// `{"conversationId":…,"expiresInMs":…,"type":"typing","typing":…,"userId":…}`.
    public static func typing(conversationID: String, userID: String, typing: Bool, expiresInMs: Int) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.object { json in
            json.key("conversationId"); json.string(conversationID)
            json.key("expiresInMs"); json.integer(Int64(expiresInMs))
            json.key("type"); json.string("typing")
            json.key("typing"); json.bool(typing)
            json.key("userId"); json.string(userID)
        }
        return writer.bytes
    }

    /// `{"lastSeenAt":…,"status":…,"type":"presence","userId":…}`.
    public static func presence(userID: String, status: PresenceStatus, lastSeenAtMilliseconds: Int64?) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.object { json in
            if let lastSeenAtMilliseconds { json.key("lastSeenAt"); json.date(milliseconds: lastSeenAtMilliseconds) }
            json.key("status"); json.string(status.rawValue)
            json.key("type"); json.string("presence")
            json.key("userId"); json.string(userID)
        }
        return writer.bytes
    }
}
