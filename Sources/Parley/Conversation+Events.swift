import Foundation
public import ParleyWire

extension Conversation {
    /// This conversation after `event`, for a list or header kept up to date from the live
    /// stream without a request: a `notifications.updated` (the user muted, unmuted or chose
    /// what pushes them on another device) sets ``mutedUntil`` and ``notifications``; a
    /// `state.updated` (pinned, archived, marked unread on another device) sets
    /// ``pinnedRank``, ``archived`` and ``markedUnread``; a `conversation.updated` sets what it
    /// changed (title, custom data, slow mode, photo; a retention change needs a read of the
    /// conversation, as the app's own policy may apply). The server's own rules are applied
    /// too: a new message brings an archived conversation back unless it is muted, and the
    /// user's read watermark moving on clears their unread mark. A `draft.updated` sets
    /// ``draft`` (a thread's draft is the thread's: ``ParleyClient/draft(in:thread:)``), and the
    /// user's message sent with the draft's client id clears it. Other events, and events of
    /// another conversation, return `self`.
    ///
    /// ```swift
    /// if let index = conversations.firstIndex(where: { $0.id == event.conversationID }) {
    ///     conversations[index] = conversations[index].updated(by: event)
    /// }
    /// ```
    public func updated(by event: ConversationEvent) -> Conversation {
        guard event.conversationID == id else { return self }
        var updated = self
        switch event.type {
        case .notificationsUpdated:
            updated.mutedUntil = event.until
            if let level = event.notifications { updated.notifications = level }
        case .stateUpdated:
            if let state = event.state {
                updated.pinnedRank = state.pinnedRank
                updated.archived = state.archived ? true : nil
                updated.markedUnread = state.markedUnread ? true : nil
            }
        case .draftUpdated:
            if let draft = event.draft, draft.threadID == nil { updated.draft = draft.text.isEmpty ? nil : draft }
        case .messageCreated where event.message.map { $0.threadID == nil || $0.alsoInConversation == true } ?? false:
            if archived == true, (mutedUntil ?? .distantPast) <= Date() { updated.archived = nil }
            if let sent = event.message?.clientID, sent == draft?.clientID, event.message?.sender.id == receipt?.userID { updated.draft = nil }
        case .receiptUpdated:
            if let me = receipt?.userID, event.userID == me, let read = event.readSeq, read > (receipt?.readSeq ?? 0) {
                updated.markedUnread = nil
                updated.receipt?.readSeq = read
                updated.receipt?.deliveredSeq = max(event.deliveredSeq ?? 0, receipt?.deliveredSeq ?? 0)
            }
        case .conversationUpdated:
            if let title = event.title { updated.title = title }
            if let customData = event.customData { updated.customData = customData }
            if let slow = event.slowModeSeconds { updated.slowModeSeconds = slow > 0 ? slow : nil }
            if let photo = event.photoURL { updated.photoURL = photo.isEmpty ? nil : photo }
        default:
            break
        }
        return updated
    }
}

extension Conversation {
    /// This conversation as a conversation list shows it after `event`: ``updated(by:)``, and
    /// a new message (not a reply only in its thread) becomes ``lastMessage``, moves
    /// ``lastSeq`` and ``lastPosition`` and counts as unread unless `me` sent it (sending marks
    /// everything before it read); an edit, deletion or preview of the last message shows in
    /// it; retention that removed it leaves none; the user's read watermark reaching the last
    /// message clears the unread count. ``ConversationListModel`` and ``LocalStore`` keep their
    /// lists with it.
    public func listed(after event: ConversationEvent, me: UserID?) -> Conversation {
        guard event.conversationID == id else { return self }
        var updated = updated(by: event)
        switch event.type {
        case .messageCreated where event.message.map { $0.threadID == nil || $0.alsoInConversation == true } ?? false:
            updated.lastMessage = event.message
            updated.lastPosition = max(updated.lastPosition, event.position)
            if let seq = event.seq { updated.lastSeq = max(updated.lastSeq, seq) }
            if event.message?.sender.id == me {
                updated.unreadCount = 0   // sending marks everything up to it read
            } else {
                updated.unreadCount = min(updated.unreadCount + 1, 9_999)
            }
        case .messageCreated, .messageEdited, .messageDeleted, .messagePreviewed:
            if let message = event.message, message.id == updated.lastMessage?.id { updated.lastMessage = message }
        case .messagesExpired:
            if let through = event.throughSeq, let last = updated.lastMessage, last.seq <= through { updated.lastMessage = nil }
        case .receiptUpdated where event.userID == me:
            if let read = event.readSeq, read >= updated.lastSeq { updated.unreadCount = 0 }
        default:
            break
        }
        return updated
    }
}
