public import ParleyWire

extension ParleyClient {
    // MARK: - The user's own conversation list

    /// Pins a conversation to the top of this user's list (above the ones pinned before) and
    /// brings it out of the archive. Their other devices hear of it at once (`state.updated`;
    /// ``Conversation/updated(by:)`` applies it).
    ///
    /// ```swift
    /// let pinned = try await client.pin(conversation.id)
    /// print(pinned.pinnedRank ?? 0)
    /// ```
    @discardableResult
    public func pin(_ conversation: ConversationID) async throws -> Conversation {
        try await setState(of: conversation, ConversationStateRequest(pinned: true))
    }

    /// Unpins a conversation: it goes back to its place by activity.
    @discardableResult
    public func unpin(_ conversation: ConversationID) async throws -> Conversation {
        try await setState(of: conversation, ConversationStateRequest(pinned: false))
    }

    /// Archives a conversation: left out of ``conversations(limit:before:customData:archived:)``
    /// until a new message arrives in it (a muted one stays archived), and unpinned.
    @discardableResult
    public func archive(_ conversation: ConversationID) async throws -> Conversation {
        try await setState(of: conversation, ConversationStateRequest(archived: true))
    }

    /// Brings an archived conversation back to the main list.
    @discardableResult
    public func unarchive(_ conversation: ConversationID) async throws -> Conversation {
        try await setState(of: conversation, ConversationStateRequest(archived: false))
    }

    /// Marks a conversation unread (`true`) without moving the read watermark back, or clears
    /// the mark (`false`: what an app does when the user opens it). Reading past the mark
    /// clears it too.
    @discardableResult
    public func markUnread(_ conversation: ConversationID, _ marked: Bool = true) async throws -> Conversation {
        try await setState(of: conversation, ConversationStateRequest(markedUnread: marked))
    }

    /// Changes any of a conversation's pin, archive and unread mark for this user at once.
    @discardableResult
    public func setState(of conversation: ConversationID, _ change: ConversationStateRequest) async throws -> Conversation {
        try await http.call("PATCH", "/v1/conversations/\(conversation.rawValue)/state", body: change, token: try requireToken())
    }

    /// This user's pinned conversations, top first.
    public func pinnedConversations() async throws -> [ConversationID] {
        let pinned: PinnedConversations = try await http.call("GET", "/v1/me/pinned-conversations", token: try requireToken())
        return pinned.conversationIDs
    }

    /// Pins exactly `conversations`, top first, and unpins every other: how a list reordered
    /// by dragging is saved (at most ``Limits/pinnedConversations``).
    ///
    /// ```swift
    /// var order = try await client.pinnedConversations()
    /// order.reverse()
    /// try await client.setPinnedConversations(order)
    /// ```
    public func setPinnedConversations(_ conversations: [ConversationID]) async throws {
        let _: PinnedConversations = try await http.call("PUT", "/v1/me/pinned-conversations", body: PinnedConversations(conversationIDs: conversations),
                                                         token: try requireToken())
    }
}
