public import Foundation

/// A member's own place for a conversation in their list (`PATCH /v1/conversations/{id}/state`,
/// the `state.updated` event): seen only by them and their devices.
public struct ConversationState: Hashable, Codable, Sendable {
    /// Pinned to the top: pinned conversations come first, lowest rank first; nil: not pinned.
    public var pinnedRank: Int?
    /// Left out of the main list until a new message arrives (unless muted).
    public var archived: Bool
    /// Shown as unread although the read watermark did not move back.
    public var markedUnread: Bool

    /// Creates the value; each argument sets the property of the same name.
    public init(pinnedRank: Int? = nil, archived: Bool = false, markedUnread: Bool = false) {
        self.pinnedRank = pinnedRank
        self.archived = archived
        self.markedUnread = markedUnread
    }
}

/// `PATCH /v1/conversations/{id}/state`: each field given changes; the others stay.
///
/// Pinning puts the conversation at the top of the pinned ones and takes it out of the
/// archive; archiving unpins it. Marking unread keeps the read watermark where it is; reading
/// further clears the mark, as does `markedUnread: false`.
public struct ConversationStateRequest: Hashable, Codable, Sendable {
    /// Pin (true) or unpin (false).
    public var pinned: Bool?
    /// Archive (true) or bring back (false).
    public var archived: Bool?
    /// Mark unread (true) or clear the mark (false).
    public var markedUnread: Bool?

    /// Creates the value; each argument sets the property of the same name.
    public init(pinned: Bool? = nil, archived: Bool? = nil, markedUnread: Bool? = nil) {
        self.pinned = pinned
        self.archived = archived
        self.markedUnread = markedUnread
    }
}

/// `GET` and `PUT /v1/me/pinned-conversations`: the caller's pinned conversations, in order.
public struct PinnedConversations: Hashable, Codable, Sendable {
    /// Top first. A `PUT` pins exactly these (at most ``Limits/pinnedConversations``), in this
    /// order, and unpins every other.
    public var conversationIDs: [ConversationID]

    /// Creates the value; each argument sets the property of the same name.
    public init(conversationIDs: [ConversationID]) { self.conversationIDs = conversationIDs }

    private enum CodingKeys: String, CodingKey { case conversationIDs = "conversationIds" }
}

/// A message being written: one per user, conversation and thread, kept on the server so every
/// device of the user shows it (`PUT /v1/conversations/{id}/draft`, the `draft.updated` event).
public struct Draft: Hashable, Codable, Sendable {
    /// What is written so far; "" when cleared.
    public var text: String
    /// The thread it is a reply in; nil for the conversation itself.
    public var threadID: MessageID?
    /// The `clientId` the message will be sent with: the send that carries it clears the draft.
    public var clientID: String?
    /// When the device wrote it (its own clock, no later than the server's): the latest wins.
    public var updatedAt: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(text: String, threadID: MessageID? = nil, clientID: String? = nil, updatedAt: Date) {
        self.text = text
        self.threadID = threadID
        self.clientID = clientID
        self.updatedAt = updatedAt
    }

    private enum CodingKeys: String, CodingKey { case text, threadID = "threadId", clientID = "clientId", updatedAt }

    /// Reads the fields, `updatedAt` as an ISO 8601 date (with or without fractional seconds)
    /// whatever the decoder's date strategy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        text = try container.decode(String.self, forKey: .text)
        threadID = try container.decodeIfPresent(MessageID.self, forKey: .threadID)
        clientID = try container.decodeIfPresent(String.self, forKey: .clientID)
        guard let date = WireCoding.parseDate(try container.decode(String.self, forKey: .updatedAt)) else {
            throw DecodingError.dataCorruptedError(forKey: .updatedAt, in: container, debugDescription: "updatedAt is not an ISO 8601 date")
        }
        updatedAt = date
    }

    /// Writes the fields, `updatedAt` as the API's dates are written.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(text, forKey: .text)
        try container.encodeIfPresent(threadID, forKey: .threadID)
        try container.encodeIfPresent(clientID, forKey: .clientID)
        try container.encode(WireCoding.formatDate(updatedAt), forKey: .updatedAt)
    }
}

/// `GET /v1/conversations/{id}/draft`: the caller's draft there, if any.
public struct DraftAnswer: Hashable, Codable, Sendable {
    /// Absent when there is none (never saved, cleared, or sent).
    public var draft: Draft?

    /// Creates the value; each argument sets the property of the same name.
    public init(draft: Draft?) { self.draft = draft }
}
