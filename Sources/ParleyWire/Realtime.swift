public import Foundation

/// A frame a client sends over the realtime WebSocket (docs/protocol.md): one case per
/// command, each with exactly the fields it needs, so a frame that decodes is a complete
/// command. On the wire it is one flat object: `type` names the command, `id` is the
/// client's command id that the answer echoes, and the other keys are the command's fields.
///
/// ```json
/// {"type":"auth","token":"…","cursor":[1041],"epoch":"e_…"}
/// {"type":"message.send","id":"7","conversationId":"c_…","message":{"clientId":"a1","content":{"type":"text","text":"hi"}}}
/// ```
///
/// Decoding throws ``DecodingFailure`` (with the frame's `id` when it had one) for an
/// unknown type, a missing or malformed field of a known command, or a missing `id`; other
/// decoding errors mean the frame was not a JSON object with a `type`.
public enum ClientFrame: Hashable, Sendable, Codable {
    /// The first frame: the session token, and where to resume.
    case auth(Auth)
    /// Send a message (as the REST send body).
    case send(id: String, conversationID: ConversationID, message: SendMessageRequest)
    /// Replace a message's content.
    case edit(id: String, conversationID: ConversationID, messageID: MessageID, content: MessageContent, metadata: [String: String]?)
    /// Delete messages (all or none).
    case delete(id: String, conversationID: ConversationID, messageIDs: [MessageID])
    /// Add (`reaction.add`) or take back (`reaction.remove`) the caller's reaction; the ack's
    /// result is the message with its counts.
    case react(id: String, conversationID: ConversationID, messageID: MessageID, emoji: String, adding: Bool)
    /// Everything up to `seq` reached this device.
    case markDelivered(id: String, conversationID: ConversationID, seq: Int64)
    /// Everything up to `seq` was shown.
    case markRead(id: String, conversationID: ConversationID, seq: Int64)
    /// The user started (`typing.start`) or stopped (`typing.stop`) typing, in the conversation
    /// or in one of its threads (`threadId`, the thread's root); the id is optional.
    case typing(id: String?, conversationID: ConversationID, isTyping: Bool, threadID: MessageID? = nil)
    /// Join a public channel.
    case join(id: String, conversationID: ConversationID)
    /// Leave a channel or group.
    case leave(id: String, conversationID: ConversationID)
    /// Who of these users is online.
    case presence(id: String, userIDs: [UserID])
    /// Answered with `pong`.
    case ping(id: String?)

    /// `auth`'s fields.
    public struct Auth: Hashable, Sendable {
        /// The session token from sign-in.
        public var token: String
        /// The last position this device processed, from a client before cursors; events after
        /// it are replayed. A server whose log has more than one shard answers it `resync`.
        public var position: Int64?
        /// Where this device stands, one position per shard of the log (from `ready`, `resync`
        /// and the events since); events after it are replayed. Wins over `position`.
        public var cursor: LogCursor?
        /// The epoch that cursor belongs to (from `ready` or `resync`); when it is not the
        /// server's, the device is told to resync instead of resuming.
        public var epoch: String?
        /// An optional id, echoed by an error about this frame.
        public var id: String?

        /// Creates the value; each argument sets the property of the same name.
        public init(token: String, position: Int64? = nil, cursor: LogCursor? = nil, epoch: String? = nil, id: String? = nil) {
            self.token = token
            self.position = position
            self.cursor = cursor
            self.epoch = epoch
            self.id = id
        }
    }

    /// The command names (`type`).
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        case auth
        case send = "message.send"
        case edit = "message.edit"
        case delete = "message.delete"
        case reactionAdd = "reaction.add"
        case reactionRemove = "reaction.remove"
        case markDelivered = "receipt.delivered"
        case markRead = "receipt.read"
        case typingStarted = "typing.start"
        case typingStopped = "typing.stop"
        case join = "channel.join"
        case leave = "channel.leave"
        case presence = "presence.query"
        case ping
    }

    /// Why a frame is not a command, with the frame's `id` when it had a readable one.
    public struct DecodingFailure: Error, Hashable, Sendable {
        /// The frame's `id`, to echo in the error answer.
        public var id: String?
        /// What to answer.
        public var error: ChatError
    }

    /// Which command.
    public var kind: Kind {
        switch self {
        case .auth: .auth
        case .send: .send
        case .edit: .edit
        case .delete: .delete
        case .react(_, _, _, _, let adding): adding ? .reactionAdd : .reactionRemove
        case .markDelivered: .markDelivered
        case .markRead: .markRead
        case .typing(_, _, let isTyping, _): isTyping ? .typingStarted : .typingStopped
        case .join: .join
        case .leave: .leave
        case .presence: .presence
        case .ping: .ping
        }
    }

    /// The client's command id.
    public var id: String? {
        switch self {
        case .auth(let auth): auth.id
        case .send(let id, _, _), .edit(let id, _, _, _, _), .delete(let id, _, _), .react(let id, _, _, _, _), .markDelivered(let id, _, _),
             .markRead(let id, _, _), .join(let id, _), .leave(let id, _), .presence(let id, _): id
        case .typing(let id, _, _, _), .ping(let id): id
        }
    }

    /// The conversation a command is about.
    public var conversationID: ConversationID? {
        switch self {
        case .send(_, let conversation, _), .edit(_, let conversation, _, _, _), .delete(_, let conversation, _), .react(_, let conversation, _, _, _),
             .markDelivered(_, let conversation, _), .markRead(_, let conversation, _), .typing(_, let conversation, _, _),
             .join(_, let conversation), .leave(_, let conversation): conversation
        case .auth, .presence, .ping: nil
        }
    }

    enum CodingKeys: String, CodingKey {
        case type, id, token, position, cursor, epoch, conversationID = "conversationId", message, messageID = "messageId",
             messageIDs = "messageIds", content, metadata, seq, userIDs = "userIds", emoji, threadID = "threadId"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        let id = try? container.decodeIfPresent(String.self, forKey: .id)
        guard let kind = Kind(rawValue: type) else {
            throw DecodingFailure(id: id, error: .unknownCommand(known: Kind.allCases.map(\.rawValue)))
        }
        do {
            func required<T: Decodable>(_ key: CodingKeys) throws -> T {
                guard container.contains(key) else { throw DecodingFailure(id: id, error: .invalid("\(type) needs \(key.stringValue)")) }
                return try container.decode(T.self, forKey: key)
            }
            func commandID() throws -> String {
                guard let id = try container.decodeIfPresent(String.self, forKey: .id) else {
                    throw DecodingFailure(id: nil, error: .invalid("\(type) needs an id, which its answer echoes"))
                }
                return id
            }
            let optionalID = try container.decodeIfPresent(String.self, forKey: .id)
            switch kind {
            case .auth:
                self = .auth(Auth(token: try required(.token), position: try container.decodeIfPresent(Int64.self, forKey: .position),
                                  cursor: try container.decodeIfPresent(LogCursor.self, forKey: .cursor),
                                  epoch: try container.decodeIfPresent(String.self, forKey: .epoch), id: optionalID))
            case .send:
                self = .send(id: try commandID(), conversationID: try required(.conversationID), message: try required(.message))
            case .edit:
                self = .edit(id: try commandID(), conversationID: try required(.conversationID), messageID: try required(.messageID),
                             content: try required(.content), metadata: try container.decodeIfPresent([String: String].self, forKey: .metadata))
            case .delete:
                self = .delete(id: try commandID(), conversationID: try required(.conversationID), messageIDs: try required(.messageIDs))
            case .reactionAdd, .reactionRemove:
                self = .react(id: try commandID(), conversationID: try required(.conversationID), messageID: try required(.messageID),
                              emoji: try required(.emoji), adding: kind == .reactionAdd)
            case .markDelivered:
                self = .markDelivered(id: try commandID(), conversationID: try required(.conversationID), seq: try required(.seq))
            case .markRead:
                self = .markRead(id: try commandID(), conversationID: try required(.conversationID), seq: try required(.seq))
            case .typingStarted, .typingStopped:
                self = .typing(id: optionalID, conversationID: try required(.conversationID), isTyping: kind == .typingStarted,
                               threadID: try container.decodeIfPresent(MessageID.self, forKey: .threadID))
            case .join:
                self = .join(id: try commandID(), conversationID: try required(.conversationID))
            case .leave:
                self = .leave(id: try commandID(), conversationID: try required(.conversationID))
            case .presence:
                self = .presence(id: try commandID(), userIDs: try required(.userIDs))
            case .ping:
                self = .ping(id: optionalID)
            }
        } catch let failure as DecodingFailure {
            throw failure
        } catch {
            throw DecodingFailure(id: id, error: .invalid("\(type): \(Self.describe(error))"))
        }
    }

    /// A field-level decoding error, named as REST names it.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as ChatError: error.message
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type"
        case DecodingError.keyNotFound(let key, let context):
            "missing field '\((context.codingPath.map(\.stringValue) + [key.stringValue]).joined(separator: "."))'"
        case DecodingError.dataCorrupted(let context):
            "field '\(context.codingPath.map(\.stringValue).joined(separator: "."))' is invalid"
        default: "the frame is invalid"
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind.rawValue, forKey: .type)
        try container.encodeIfPresent(id, forKey: .id)
        try container.encodeIfPresent(conversationID, forKey: .conversationID)
        switch self {
        case .auth(let auth):
            try container.encode(auth.token, forKey: .token)
            try container.encodeIfPresent(auth.position, forKey: .position)
            try container.encodeIfPresent(auth.cursor, forKey: .cursor)
            try container.encodeIfPresent(auth.epoch, forKey: .epoch)
        case .send(_, _, let message):
            try container.encode(message, forKey: .message)
        case .edit(_, _, let messageID, let content, let metadata):
            try container.encode(messageID, forKey: .messageID)
            try container.encode(content, forKey: .content)
            try container.encodeIfPresent(metadata, forKey: .metadata)
        case .delete(_, _, let messageIDs):
            try container.encode(messageIDs, forKey: .messageIDs)
        case .react(_, _, let messageID, let emoji, _):
            try container.encode(messageID, forKey: .messageID)
            try container.encode(emoji, forKey: .emoji)
        case .markDelivered(_, _, let seq), .markRead(_, _, let seq):
            try container.encode(seq, forKey: .seq)
        case .presence(_, let userIDs):
            try container.encode(userIDs, forKey: .userIDs)
        case .typing(_, _, _, let threadID):
            try container.encodeIfPresent(threadID, forKey: .threadID)
        case .join, .leave, .ping:
            break
        }
    }
}

/// A frame the server sends (docs/protocol.md), as the SDK decodes it: one case per kind, each
/// with its fields. The server writes these with ``JSONWriter`` (``RealtimeFrames``); the keys
/// are the same. A frame type this build does not know decodes as ``unknown(type:_:)``, whole.
public enum ServerFrame: Hashable, Sendable, Codable {
    /// Caught up: live from `position` on.
    case ready(Ready)
    /// A command succeeded: its id and result.
    case ack(id: String, result: AckResult)
    /// A command (or the connection) failed: the command's id, when a command's.
    case error(id: String?, ChatError)
    /// A stored event.
    case event(ConversationEvent)
    /// Someone is typing (or stopped).
    case typing(Typing)
    /// Someone came online or went offline.
    case presence(Presence)
    /// The position asked for cannot be replayed: reload over REST, then continue from `position`.
    case resync(Resync)
    /// The answer to `ping`.
    case pong(id: String?)
    /// The signed-in user's block list changed (on this or another device): everyone they
    /// block now. Live frames after it already follow it.
    case blocks(Blocks)
    /// A frame type this build does not know (a newer server's), kept whole.
    case unknown(type: String, JSONValue)

    /// `ready`'s fields.
    public struct Ready: Hashable, Sendable, Codable {
        /// The newest position the device is now at (with one shard, the whole of `cursor`).
        public var position: Int64
        /// Where the device now stands, one position per shard (nil from servers before cursors).
        public var cursor: LogCursor?
        /// How many shards the server's log has (nil from servers before cursors: one).
        public var shards: Int?
        /// The name of the history `position` belongs to (nil from servers before epochs).
        public var epoch: String?
        /// Who is signed in.
        public var userID: UserID
        /// The interval at which the server pings, and expects the client to be heard.
        public var heartbeatSeconds: Int

        enum CodingKeys: String, CodingKey { case position, cursor, shards, epoch, userID = "userId", heartbeatSeconds }

        /// Creates the value; each argument sets the property of the same name.
        public init(position: Int64, cursor: LogCursor? = nil, shards: Int? = nil, epoch: String?, userID: UserID, heartbeatSeconds: Int) {
            self.position = position
            self.cursor = cursor
            self.shards = shards
            self.epoch = epoch
            self.userID = userID
            self.heartbeatSeconds = heartbeatSeconds
        }

        /// Where the device stands: `cursor`, or from a server before cursors, `position`.
        public var resumePoint: LogCursor { cursor ?? LogCursor(position: position) }
    }

    /// `blocks`' fields.
    public struct Blocks: Hashable, Sendable, Codable {
        /// Everyone the user blocks now.
        public var userIDs: [UserID]

        enum CodingKeys: String, CodingKey { case userIDs = "userIds" }

        /// Creates the value; each argument sets the property of the same name.
        public init(userIDs: [UserID]) {
            self.userIDs = userIDs
        }
    }

    /// `resync`'s fields.
    public struct Resync: Hashable, Sendable, Codable {
        /// The newest position to continue from after reloading (with one shard, the whole of `cursor`).
        public var position: Int64
        /// Where to continue from after reloading, one position per shard (nil from servers before cursors).
        public var cursor: LogCursor?
        /// The history's name; keep it with `cursor`.
        public var epoch: String?
        /// Why the device must reload.
        public var reason: String

        /// Creates the value; each argument sets the property of the same name.
        public init(position: Int64, cursor: LogCursor? = nil, epoch: String?, reason: String) {
            self.position = position
            self.cursor = cursor
            self.epoch = epoch
            self.reason = reason
        }

        /// Where to continue from: `cursor`, or from a server before cursors, `position`.
        public var resumePoint: LogCursor { cursor ?? LogCursor(position: position) }
    }

    /// `typing`'s fields.
    public struct Typing: Hashable, Sendable, Codable {
        /// Where.
        public var conversationID: ConversationID
        /// Who.
        public var userID: UserID
        /// Started (true) or stopped.
        public var isTyping: Bool
        /// Forget it after this long unless repeated.
        public var expiresInMs: Int
        /// In a thread: its root message (nil: in the conversation itself).
        public var threadID: MessageID? = nil

        enum CodingKeys: String, CodingKey {
            case conversationID = "conversationId", userID = "userId", isTyping = "typing", expiresInMs, threadID = "threadId"
        }

        /// Creates the value; each argument sets the property of the same name.
        public init(conversationID: ConversationID, userID: UserID, isTyping: Bool, expiresInMs: Int, threadID: MessageID? = nil) {
            self.conversationID = conversationID
            self.userID = userID
            self.isTyping = isTyping
            self.expiresInMs = expiresInMs
            self.threadID = threadID
        }
    }

    /// An `ack`'s result: the command's REST answer. A send's is decoded straight into its
    /// message; others are kept as JSON.
    public enum AckResult: Hashable, Sendable, Codable {
        /// `message.send`: the stored message, and whether this send created it.
        case sent(created: Bool, message: Message)
        /// Any other command's answer.
        case value(JSONValue)

        private enum CodingKeys: String, CodingKey { case created, message }

        public init(from decoder: any Decoder) throws {
            if let container = try? decoder.container(keyedBy: CodingKeys.self),
               let created = try? container.decode(Bool.self, forKey: .created),
               let message = try? container.decode(Message.self, forKey: .message) {
                self = .sent(created: created, message: message)
            } else {
                self = .value(try JSONValue(from: decoder))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            switch self {
            case .sent(let created, let message):
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(created, forKey: .created)
                try container.encode(message, forKey: .message)
            case .value(let value):
                try value.encode(to: encoder)
            }
        }
    }

    /// The kinds of server frames.
    public enum Kind: String, Hashable, Sendable, CaseIterable {
        case ready, ack, error, event, typing, presence, resync, pong, blocks
    }

    /// Which frame; nil for ``unknown(type:_:)``.
    public var type: Kind? {
        switch self {
        case .ready: .ready
        case .ack: .ack
        case .error: .error
        case .event: .event
        case .typing: .typing
        case .presence: .presence
        case .resync: .resync
        case .pong: .pong
        case .blocks: .blocks
        case .unknown: nil
        }
    }

    /// The command id an `ack`, `error` or `pong` answers.
    public var id: String? {
        switch self {
        case .ack(let id, _): id
        case .error(let id, _), .pong(let id): id
        case .ready, .event, .typing, .presence, .resync, .blocks, .unknown: nil
        }
    }

    /// The event of an `event` frame.
    public var event: ConversationEvent? {
        if case .event(let event) = self { return event }
        return nil
    }

    /// The error of an `error` frame.
    public var error: ChatError? {
        if case .error(_, let error) = self { return error }
        return nil
    }

    private enum CodingKeys: String, CodingKey { case type, id, result, error, event }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch Kind(rawValue: type) {
        case .ready: self = .ready(try Ready(from: decoder))
        case .ack: self = .ack(id: try container.decode(String.self, forKey: .id), result: try container.decode(AckResult.self, forKey: .result))
        case .error: self = .error(id: try container.decodeIfPresent(String.self, forKey: .id), try container.decode(ChatError.self, forKey: .error))
        case .event: self = .event(try container.decode(ConversationEvent.self, forKey: .event))
        case .typing: self = .typing(try Typing(from: decoder))
        case .presence: self = .presence(try Presence(from: decoder))
        case .resync: self = .resync(try Resync(from: decoder))
        case .pong: self = .pong(id: try container.decodeIfPresent(String.self, forKey: .id))
        case .blocks: self = .blocks(try Blocks(from: decoder))
        case nil: self = .unknown(type: type, try JSONValue(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if case .unknown(_, let value) = self { return try value.encode(to: encoder) }
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let type { try container.encode(type.rawValue, forKey: .type) }
        switch self {
        case .ready(let ready): try ready.encode(to: encoder)
        case .ack(let id, let result):
            try container.encode(id, forKey: .id)
            try container.encode(result, forKey: .result)
        case .error(let id, let error):
            try container.encodeIfPresent(id, forKey: .id)
            try container.encode(error, forKey: .error)
        case .event(let event):
            try container.encode(event, forKey: .event)  // an unknown kind: every field it came with
        case .typing(let typing): try typing.encode(to: encoder)
        case .presence(let presence): try presence.encode(to: encoder)
        case .resync(let resync): try resync.encode(to: encoder)
        case .pong(let id): try container.encodeIfPresent(id, forKey: .id)
        case .blocks(let blocks): try blocks.encode(to: encoder)
        case .unknown: break
        }
    }
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
    /// 1013 (RFC 6455's "try again later"): the server could not reach its store to check the
    /// token or catch the device up. The session is not over: reconnect after a moment and
    /// resume from the last position processed. Nothing is lost.
    public static let tryAgainLater: UInt16 = 1013
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

    /// `{"type":"blocks","userIds":[…]}`: the user's block list as it is now.
    public static func blocks(userIDs: [String]) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 + 24 * userIDs.count)
        writer.object { json in
            json.key("type"); json.string("blocks")
            json.key("userIds")
            json.array { array in for id in userIDs { array.string(id) } }
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

    /// `{"cursor":[…],"epoch":…,"heartbeatSeconds":…,"position":…,"shards":…,"type":"ready","userId":…}`:
    /// the ``ServerFrame/ready(_:)`` value, encoded (once per connection; not a hot path).
    /// `position` is the cursor's newest, for clients before cursors.
    public static func ready(cursor: LogCursor, epoch: String, userID: String, heartbeatSeconds: Int) -> [UInt8] {
        encoded(.ready(.init(position: cursor.newest, cursor: cursor, shards: cursor.shards, epoch: epoch,
                             userID: UserID(rawValue: userID), heartbeatSeconds: heartbeatSeconds)))
    }

    /// `{"cursor":[…],"epoch":…,"position":…,"reason":…,"type":"resync"}`: ``ServerFrame/resync(_:)``, encoded.
    public static func resync(cursor: LogCursor, epoch: String, reason: String) -> [UInt8] {
        encoded(.resync(.init(position: cursor.newest, cursor: cursor, epoch: epoch, reason: reason)))
    }

    /// A frame through the wire encoder (sorted keys), for the frames rare enough not to need
    /// a hand-written writer. Encoding these value types cannot fail.
    private static func encoded(_ frame: ServerFrame) -> [UInt8] {
        (try? Array(WireCoding.encoder().encode(frame))) ?? Array(#"{"type":"error"}"#.utf8)
    }

    /// `{"conversationId":…,"expiresInMs":…,"threadId":…,"type":"typing","typing":…,"userId":…}`
    /// (`threadId` only for typing in a thread).
    public static func typing(conversationID: String, userID: String, typing: Bool, expiresInMs: Int, threadID: String? = nil) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.object { json in
            json.key("conversationId"); json.string(conversationID)
            json.key("expiresInMs"); json.integer(Int64(expiresInMs))
            if let threadID { json.key("threadId"); json.string(threadID) }
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
