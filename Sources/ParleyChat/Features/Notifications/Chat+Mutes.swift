import Foundation
import ParleyStore
package import ParleyWire

extension Notifications {
    /// Mutes a conversation for the caller (`PUT /v1/conversations/{id}/mute`): nothing in it is
    /// pushed to their devices until `until` (or until unmuted), except a mention of them.
    /// Muting again changes the end.
    ///
    /// - Throws: 400 for an end not in the future; 403 `not_member`; 404.
    package func mute(_ caller: Caller, conversation id: ConversationID, _ request: MuteRequest) async throws -> Conversation {
        let now = nowMilliseconds
        let until = request.until.map(Chat.milliseconds) ?? Chat.mutedForever
        guard until > now else { throw ChatError.invalid("until must be in the future; to unmute, DELETE the mute") }
        return try await setLevel(caller, id) { $0.mutedUntil = min(until, Chat.mutedForever) }
    }

    /// Ends the caller's mute of a conversation (`DELETE /v1/conversations/{id}/mute`); nothing
    /// happens when it was not muted.
    package func unmute(_ caller: Caller, conversation id: ConversationID) async throws {
        _ = try await setLevel(caller, id) { $0.mutedUntil = nil }
    }

    /// Sets what pushes the caller in a conversation (`PUT /v1/conversations/{id}/notifications`):
    /// every new message, only mentions of them, or (nil) the conversation's default — all in
    /// direct chats, groups and private channels, mentions in public channels. A mute still
    /// silences everything but mentions while it lasts.
    ///
    /// - Throws: 403 `not_member`; 404.
    package func setLevel(_ caller: Caller, conversation id: ConversationID, _ request: NotificationsRequest) async throws -> Conversation {
        try await setLevel(caller, id) { $0.level = request.level }
    }

    /// Changes the caller's mute and level (`change` edits the settings as stored) and tells their own
    /// devices (`notifications.updated`, no seq, only to them), so a phone and a browser signed
    /// in as one person show the same at once. A change that changes nothing a device shows
    /// says nothing.
    private func setLevel(_ caller: Caller, _ id: ConversationID,

                                  _ change: @escaping @Sendable (inout Chat.NotificationSettings) -> Void) async throws -> Conversation {
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .keepOwnState)
                guard let row = try tx.fetchOne("""
                    SELECT muted_until, push_level FROM member WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                    """) else { throw ChatError.notMember }
                let was = Chat.NotificationSettings(mutedUntil: try row.get("muted_until", as: Int64?.self).flatMap { $0 > now ? $0 : nil },
                                               level: try row.get("push_level", as: String?.self).flatMap(NotificationLevel.init(rawValue:)))
                var settings = was
                change(&settings)
                guard settings != was else { return try Chat.view(tx, key: access.key, caller: caller) }
                try tx.execute("""
                    UPDATE member SET muted_until = \(settings.mutedUntil), push_level = \(settings.level?.rawValue)
                    WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                    """)
                let shown = settings.level ?? NotificationLevel.default(for: access.kind)
                var payload = EventPayload()
                payload.notifications = shown.rawValue
                payload.until = settings.mutedUntil
                try tx.append(conversation: access.key, kind: .notificationsUpdated, actor: caller.userKey, user: caller.userKey, payload: payload, now: now)
                return try Chat.view(tx, key: access.key, caller: caller)
            }
        }
    }
}

extension Chat {
    /// "Until unmuted": 9999-12-31T23:59:59Z, a date every JSON library reads.
    static let mutedForever: Int64 = 253_402_300_799_000

    /// A member's push settings in one conversation: the mute's end (nil: not muted, or it ran
    /// out) and their level (nil: the conversation's default).
    struct NotificationSettings: Equatable {
        var mutedUntil: Int64?
        var level: NotificationLevel?
    }
}
