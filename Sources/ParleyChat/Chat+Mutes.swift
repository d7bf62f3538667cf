import Foundation
import ParleyStore
public import ParleyWire

extension Chat {
    /// "Until unmuted": 9999-12-31T23:59:59Z, a date every JSON library reads.
    static let mutedForever: Int64 = 253_402_300_799_000

    /// Mutes a conversation for the caller (`PUT /v1/conversations/{id}/mute`): nothing in it is
    /// pushed to their devices until `until` (or until unmuted), except a mention of them.
    /// Muting again changes the end.
    ///
    /// - Throws: 400 for an end not in the future; 403 `not_member`; 404.
    public func mute(_ caller: Caller, conversation id: ConversationID, _ request: MuteRequest) async throws -> Conversation {
        let now = nowMilliseconds
        let until = request.until.map(Chat.milliseconds) ?? Chat.mutedForever
        guard until > now else { throw ChatError.invalid("until must be in the future; to unmute, DELETE the mute") }
        return try await setMute(caller, id, min(until, Chat.mutedForever))
    }

    /// Ends the caller's mute of a conversation (`DELETE /v1/conversations/{id}/mute`); nothing
    /// happens when it was not muted.
    public func unmute(_ caller: Caller, conversation id: ConversationID) async throws {
        _ = try await setMute(caller, id, nil)
    }

    /// Sets the caller's mute and tells their own devices (`mute.updated`, no seq, only to
    /// them), so a phone and a browser signed in as one person show the same state at once.
    private func setMute(_ caller: Caller, _ id: ConversationID, _ until: Int64?) async throws -> Conversation {
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id)
                _ = try access.requireMember()
                let was = try tx.fetchOne("SELECT muted_until FROM member WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)")?
                    .get("muted_until", as: Int64?.self)
                // Unmuting what is not muted (or whose mute ran out), or muting to the same end,
                // changes nothing a device shows: no event.
                let wasMuted = (was ?? 0) > now
                guard until.map({ $0 != was }) ?? wasMuted else { return try Chat.view(tx, key: access.key, caller: caller) }
                try tx.execute("UPDATE member SET muted_until = \(until) WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)")
                try tx.appendAnnotation(conversation: access.key, type: .muteUpdated, actor: caller.userKey, message: nil,
                                        user: caller.userKey, payload: until.map { "{\"until\":\($0)}" }, now: now)
                return try Chat.view(tx, key: access.key, caller: caller)
            }
        }
    }
}
