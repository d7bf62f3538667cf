public import Foundation

/// `POST /v1/conversations/{id}/scheduled`: a message to send at a time, as its author.
public struct ScheduleMessageRequest: Hashable, Codable, Sendable {
    /// When to send it: in the future, at most a year ahead.
    public var sendAt: Date
    /// The message, as a send would give it (its `clientId` makes the send happen once).
    /// No attachments: those are sent when the file is at hand.
    public var message: SendMessageRequest

    /// Creates the value; each argument sets the property of the same name.
    public init(sendAt: Date, message: SendMessageRequest) {
        self.sendAt = sendAt
        self.message = message
    }

    private enum CodingKeys: String, CodingKey { case sendAt, message }

    /// Reads `sendAt` as an ISO 8601 date whatever the decoder's date strategy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let sendAt = try WireCoding.decodeDate(container, .sendAt) else {
            throw DecodingError.keyNotFound(CodingKeys.sendAt, .init(codingPath: container.codingPath, debugDescription: "sendAt is required"))
        }
        self.sendAt = sendAt
        message = try container.decode(SendMessageRequest.self, forKey: .message)
    }

    /// Writes `sendAt` as the API's dates are written.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(WireCoding.formatDate(sendAt), forKey: .sendAt)
        try container.encode(message, forKey: .message)
    }
}

/// `PATCH /v1/scheduled/{id}`: a new time, new content, or both, while it is still to be sent.
public struct EditScheduledRequest: Hashable, Codable, Sendable {
    /// The new time.
    public var sendAt: Date?
    /// The new content.
    public var content: MessageContent?

    /// Creates the value; each argument sets the property of the same name.
    public init(sendAt: Date? = nil, content: MessageContent? = nil) {
        self.sendAt = sendAt
        self.content = content
    }

    private enum CodingKeys: String, CodingKey { case sendAt, content }

    /// Reads `sendAt` as an ISO 8601 date whatever the decoder's date strategy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sendAt = try WireCoding.decodeDate(container, .sendAt)
        content = try container.decodeIfPresent(MessageContent.self, forKey: .content)
    }

    /// Writes `sendAt` as the API's dates are written.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(sendAt.map(WireCoding.formatDate), forKey: .sendAt)
        try container.encodeIfPresent(content, forKey: .content)
    }
}

/// Where a scheduled message stands.
public enum ScheduledStatus: String, Hashable, Codable, Sendable {
    /// Waiting for its time.
    case scheduled
    /// Sent: ``ScheduledMessage/messageID`` is the message.
    case sent
    /// Not sent: at its time its author could no longer post there (``ScheduledMessage/error`` says why).
    case failed
    /// Cancelled by its author.
    case cancelled
}

/// A message its author scheduled (`GET /v1/scheduled`, the `scheduled.updated` event).
public struct ScheduledMessage: Hashable, Codable, Sendable {
    /// `sm_…`.
    public var id: String
    /// Where it goes.
    public var conversationID: ConversationID
    /// When it goes.
    public var sendAt: Date
    /// What goes.
    public var message: SendMessageRequest
    /// Where it stands.
    public var status: ScheduledStatus
    /// Why it failed.
    public var error: String?
    /// The message it became, once sent.
    public var messageID: MessageID?
    /// When it was scheduled.
    public var createdAt: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(id: String, conversationID: ConversationID, sendAt: Date, message: SendMessageRequest, status: ScheduledStatus,
                error: String? = nil, messageID: MessageID? = nil, createdAt: Date) {
        self.id = id
        self.conversationID = conversationID
        self.sendAt = sendAt
        self.message = message
        self.status = status
        self.error = error
        self.messageID = messageID
        self.createdAt = createdAt
    }

    private enum CodingKeys: String, CodingKey {
        case id, conversationID = "conversationId", sendAt, message, status, error, messageID = "messageId", createdAt
    }
}

/// `GET /v1/scheduled`: the caller's messages still to be sent, soonest first.
public struct ScheduledList: Hashable, Codable, Sendable {
    /// At most ``Limits/scheduledPerUser``.
    public var scheduled: [ScheduledMessage]

    /// Creates the value; each argument sets the property of the same name.
    public init(scheduled: [ScheduledMessage]) { self.scheduled = scheduled }
}
