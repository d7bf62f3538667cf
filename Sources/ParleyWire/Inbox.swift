import Foundation

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
