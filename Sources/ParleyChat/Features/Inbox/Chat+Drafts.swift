import Foundation
import ParleyStore
package import ParleyWire

extension Inbox {
    /// Saves the caller's draft of a message in a conversation or one of its threads
    /// (`PUT /v1/conversations/{id}/draft`), text "" to clear it. The latest `updatedAt` wins
    /// (a device's clock, taken no later than the server's, so one set ahead cannot win
    /// forever): an older save changes nothing and is answered with the draft in effect. Each
    /// change reaches the caller's own devices (`draft.updated`, no seq).
    ///
    /// - Throws: 400 for a text or client id past its limit, or a thread id that is a reply;
    ///   403 `not_member`; 404 for the conversation or the thread.
    package func saveDraft(_ caller: Caller, conversation id: ConversationID, _ draft: Draft) async throws -> Draft {
        guard draft.text.count <= Limits.textCharacters.upperBound else {
            throw ChatError.invalid("a draft is at most \(Limits.textCharacters.upperBound) characters")
        }
        if let clientID = draft.clientID, !Limits.clientID.contains(clientID.utf8.count) {
            throw ChatError.invalid("clientId is 1–\(Limits.clientID.upperBound) bytes")
        }
        let now = nowMilliseconds
        let at = min(Chat.milliseconds(draft.updatedAt), now)
        return try await run {
            try await write { tx in
                let access = try Chat.access(tx, caller: caller, id: id, for: .keepOwnState)
                let thread = try Chat.draftThread(tx, access: access, id: draft.threadID)
                if let kept = try Chat.storedDraft(tx, user: caller.userKey, conversation: access.key, thread: thread, threadID: draft.threadID),
                   Chat.milliseconds(kept.updatedAt) >= at {
                    return kept
                }
                let saved = Draft(text: draft.text, threadID: draft.threadID, clientID: draft.clientID, updatedAt: Chat.date(at))
                try tx.execute("""
                    INSERT INTO draft (user_id, conversation_id, thread_key, text, client_id, updated_at)
                    VALUES (\(caller.userKey), \(access.key), \(thread), \(saved.text), \(saved.clientID), \(at))
                    ON CONFLICT (user_id, conversation_id, thread_key)
                    DO UPDATE SET text = excluded.text, client_id = excluded.client_id, updated_at = excluded.updated_at
                    """)
                var payload = EventPayload()
                payload.draftJSON = Chat.draftJSON(saved)
                try tx.append(conversation: access.key, kind: .draftUpdated, actor: caller.userKey, user: caller.userKey, payload: payload, now: now)
                return saved
            }
        }
    }

    /// The caller's draft in a conversation or one of its threads
    /// (`GET /v1/conversations/{id}/draft?threadId=`): nil when there is none, it was cleared,
    /// or the message it was for was sent.
    package func draft(_ caller: Caller, conversation id: ConversationID, thread threadID: MessageID?) async throws -> DraftAnswer {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .keepOwnState)
                let thread = try Chat.draftThread(db, access: access, id: threadID)
                let draft = try Chat.storedDraft(db, user: caller.userKey, conversation: access.key, thread: thread, threadID: threadID)
                return DraftAnswer(draft: draft.flatMap { $0.text.isEmpty ? nil : $0 })
            }
        }
    }
}

extension Chat {
    /// A draft's thread key: the root message's id, 0 for the conversation itself.
    static func draftThread(_ db: any Database, access: Access, id: MessageID?) throws -> Int64 {
        guard let id else { return 0 }
        let (row, key) = try messageRow(db, access: access, id: id)
        guard try row.get("m_thread_root", as: String?.self) == nil else {
            throw ChatError.invalid("threadId names a reply; give the thread's first message")
        }
        return key
    }

    /// The draft as stored (text "" when cleared), or nil when none is, or its message was sent.
    static func storedDraft(_ db: any Database, user: Int64, conversation: Int64, thread: Int64, threadID: MessageID?) throws -> Draft? {
        guard let row = try db.fetchOne("""
            SELECT d.text, d.client_id, d.updated_at FROM draft d
            WHERE d.user_id = \(user) AND d.conversation_id = \(conversation) AND d.thread_key = \(thread)
            AND (d.client_id IS NULL OR NOT EXISTS (SELECT 1 FROM message m WHERE m.author_id = d.user_id AND m.client_id = d.client_id))
            """) else { return nil }
        return Draft(text: try row.get("text"), threadID: threadID, clientID: try row.get("client_id"), updatedAt: date(try row.get("updated_at")))
    }

    /// A draft as the event carries it: canonical JSON, keys sorted.
    static func draftJSON(_ draft: Draft) -> String {
        var writer = JSONWriter(capacity: 64 + draft.text.utf8.count)
        writer.object { json in
            if let clientID = draft.clientID { json.key("clientId"); json.string(clientID) }
            json.key("text"); json.string(draft.text)
            if let thread = draft.threadID { json.key("threadId"); json.string(thread.rawValue) }
            json.key("updatedAt"); json.date(milliseconds: milliseconds(draft.updatedAt))
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
