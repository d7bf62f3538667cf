public import ParleyWire

extension Conversation {
    /// This conversation after `event`, for a list or header kept up to date from the live
    /// stream without a request: a `notifications.updated` (the user muted, unmuted or chose
    /// what pushes them on another device) sets ``mutedUntil`` and ``notifications``; a `conversation.updated` sets what it changed (title,
    /// custom data, slow mode, photo; a retention change needs a read of the conversation, as
    /// the app's own policy may apply). Other events, and events of another conversation,
    /// return `self`.
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
