public import Foundation
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

    // MARK: - Drafts

    /// Saves what the user is writing in a conversation (or a thread), so every device of
    /// theirs shows it (`draft.updated`); "" clears it. The latest `updatedAt` wins, so a save
    /// that arrives late from a device that was offline does not overwrite a newer one: the
    /// answer is the draft in effect. Send the message with the draft's `clientID`
    /// (``send(_:to:metadata:replyTo:inThread:alsoInConversation:clientID:)``) and the draft
    /// clears everywhere. Call it when the user pauses typing, not on every key.
    ///
    /// ```swift
    /// let draftID = UUID().uuidString
    /// try await client.saveDraft("See you at", in: conversation.id, clientID: draftID)
    /// // …later, when the user presses Send:
    /// try await client.send(.text("See you at 8"), to: conversation.id, clientID: draftID)
    /// ```
    @discardableResult
    public func saveDraft(_ text: String, in conversation: ConversationID, thread: MessageID? = nil, clientID: String? = nil,
                          at time: Date = Date()) async throws -> Draft {
        try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/draft",
                            body: Draft(text: text, threadID: thread, clientID: clientID, updatedAt: time), token: try requireToken())
    }

    /// The user's draft in a conversation or one of its threads; nil when there is none (or it was sent).
    public func draft(in conversation: ConversationID, thread: MessageID? = nil) async throws -> Draft? {
        let answer: DraftAnswer = try await http.call("GET", "/v1/conversations/\(conversation.rawValue)/draft",
                                                      query: thread.map { [("threadId", $0.rawValue)] } ?? [], token: try requireToken())
        return answer.draft
    }
}

extension ParleyClient {
    // MARK: - Scheduled messages

    /// Schedules a message: at `date` the server sends it as this user, exactly as
    /// ``send(_:to:metadata:replyTo:inThread:alsoInConversation:clientID:)`` would, once (by
    /// its client id), whether or not any device of theirs is online then. No attachments.
    /// The user's other devices hear of it (`scheduled.updated`).
    ///
    /// ```swift
    /// let tomorrow = Date().addingTimeInterval(86_400)
    /// let planned = try await client.schedule(.text("Happy birthday!"), to: conversation.id, at: tomorrow)
    /// print(planned.id, planned.status)
    /// ```
    @discardableResult
    public func schedule(_ content: MessageContent, to conversation: ConversationID, at date: Date, inThread root: MessageID? = nil,
                         clientID: String = UUID().uuidString.lowercased()) async throws -> ScheduledMessage {
        let request = ScheduleMessageRequest(sendAt: date, message: SendMessageRequest(clientID: clientID, content: content, threadID: root))
        return try await http.call("POST", "/v1/conversations/\(conversation.rawValue)/scheduled", body: request, token: try requireToken())
    }

    /// This user's scheduled messages, in one conversation or all: those waiting, soonest
    /// first, then those that failed at their time (``ScheduledMessage/error`` says why).
    public func scheduledMessages(in conversation: ConversationID? = nil) async throws -> [ScheduledMessage] {
        let list: ScheduledList = try await http.call("GET", "/v1/scheduled", query: conversation.map { [("conversationId", $0.rawValue)] } ?? [],
                                                      token: try requireToken())
        return list.scheduled
    }

    /// Changes a waiting scheduled message's time, content, or both.
    @discardableResult
    public func reschedule(_ id: String, to date: Date? = nil, content: MessageContent? = nil) async throws -> ScheduledMessage {
        try await http.call("PATCH", "/v1/scheduled/\(id)", body: EditScheduledRequest(sendAt: date, content: content), token: try requireToken())
    }

    /// Cancels a waiting scheduled message, or dismisses one that failed.
    public func cancelScheduled(_ id: String) async throws {
        let _: Empty = try await http.call("DELETE", "/v1/scheduled/\(id)", token: try requireToken())
    }
}
