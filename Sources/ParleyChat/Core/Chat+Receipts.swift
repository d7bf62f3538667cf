import Foundation
import ParleyStore
import ParleySync
package import ParleyWire

extension Chat {
    /// Moves the caller's watermarks forward. Values behind the current ones change nothing;
    /// values past the conversation's last seq are clamped to it; reading implies delivery.
    ///
    /// Receipts of one member in one conversation coalesce (decision 0026): one that arrives
    /// while another is waiting for the writer joins it, and both are answered, once the one
    /// write with the higher marks has committed, with the watermarks it left.
    ///
    /// - Throws: 400 for a negative value; 403 `not_member`; 404.
    package func updateReceipt(_ caller: Caller, conversation id: ConversationID, _ update: ReceiptUpdate) async throws -> Receipt {
        guard update.deliveredSeq != nil || update.readSeq != nil else { throw ChatError.invalid("give deliveredSeq, readSeq or both") }
        guard (update.deliveredSeq ?? 0) >= 0, (update.readSeq ?? 0) >= 0 else { throw ChatError.invalid("seq values are not negative") }
        let key = ReceiptCoalescer.Key(user: caller.userKey, session: caller.sessionKey, asApp: caller.actsAsApp, conversation: id)
        switch receipts.enter(key, update) {
        case .joined(let answer):
            return try await answer.value()
        case .leading(let answer):
            do {
                let receipt = try await writeReceipt(caller, conversation: id, key: key)
                answer.succeed(receipt)
                return receipt
            } catch {
                receipts.abandon(key, answer)
                answer.fail(error)
                throw error
            }
        }
    }

    /// The leader's write: takes the marks of every receipt that joined it, as the writer
    /// begins, and moves the watermarks to them.
    private func writeReceipt(_ caller: Caller, conversation id: ConversationID, key: ReceiptCoalescer.Key) async throws -> Receipt {
        let now = nowMilliseconds
        let receipts = receipts
        // What this write took from the coalescer, kept if the store runs the body again.
        let taken = LockedValue<ReceiptUpdate?>(nil)
        let (receipt, moved): (Receipt, (conversation: Int64, old: (Int64, Int64), new: (Int64, Int64))?) = try await run {
            try await write { db in
                // From here on, a new receipt of this member starts a write of its own.
                let update = taken.withLock { taken in
                    if taken == nil { taken = receipts.begin(key) ?? ReceiptUpdate() }
                    return taken ?? ReceiptUpdate()
                }
                let access = try Chat.access(db, caller: caller, id: id, for: .keepOwnState)
                let read = min(update.readSeq ?? 0, access.lastSeq)
                let delivered = max(min(update.deliveredSeq ?? 0, access.lastSeq), read)
                guard let before = try db.fetchOne("""
                    SELECT delivered_seq, read_seq FROM member WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                    """) else { throw ChatError.notMember }
                let old = (delivered: try before.get("delivered_seq", as: Int64.self), read: try before.get("read_seq", as: Int64.self))
                let new = (delivered: max(old.delivered, delivered), read: max(old.read, read))
                if new != old {
                    try db.enqueue("""
                        UPDATE member SET delivered_seq = \(new.delivered), read_seq = \(new.read)
                        WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                        """)
                    // Stored with a position and no seq: see EventKind.receiptUpdated.
                    let recipients = try Chat.receiptRecipients(db, access: access, member: caller.userKey, from: old, to: new)
                    var payload = EventPayload()
                    payload.deliveredSeq = new.delivered
                    payload.readSeq = new.read
                    // Built here, not read back after the write (decision 0026).
                    try db.append(conversation: access.key, kind: .receiptUpdated, actor: caller.userKey, user: caller.userKey,
                                  payload: payload, now: now, recipients: recipients) { position in
                        let record = EventRecord(position: position, conversationID: access.id.rawValue, seq: nil, type: .receiptUpdated,
                                                 actorID: caller.userID.rawValue, createdAt: now, userID: caller.userID.rawValue, payload: payload)
                        var event = AppendedEvent(record: record, conversationKey: access.key, conversationKind: access.kind,
                                                  userKey: caller.userKey, recipient: recipients?.first)
                        event.alsoTo = Array(recipients?.dropFirst() ?? [])
                        return event
                    }
                }
                let receipt = Receipt(userID: caller.userID, deliveredSeq: new.delivered, readSeq: new.read)
                // In a public channel the author learns it through delivery.updated (Chat+Deliveries).
                guard access.kind == .public, new != old else { return (receipt, nil) }
                return (receipt, (access.key, (old.delivered, old.read), (new.delivered, new.read)))
            }
        }
        if let moved { noteDelivery(conversation: moved.conversation, from: moved.old, to: moved.new) }
        return receipt
    }

    /// The most authors one receipt names; past it the receipt goes to every member.
    static let receiptAuthorsNamed = 32

    /// Who hears a member's watermarks move (``EventAudience/subjectAndAuthors``, decision
    /// 0028): the member's own devices and the members whose messages the move passed, from
    /// `old` to `new` — they show delivered and read, nobody else does. Nil (every member) in a
    /// direct chat, where that is everyone anyway, and when the authors are more than
    /// ``receiptAuthorsNamed`` or all the others; the member alone in a public channel, whose
    /// authors hear counts instead (decision 0017).
    static func receiptRecipients(_ db: any Database, access: Access, member: Int64,
                                  from old: (delivered: Int64, read: Int64), to new: (delivered: Int64, read: Int64)) throws -> [Int64]? {
        if access.kind == .public { return [member] }
        if access.memberCount <= 2 { return nil }
        let authors = try db.fetchAll("""
            SELECT DISTINCT m.author_id AS author FROM message m
            JOIN member mb ON mb.conversation_id = m.conversation_id AND mb.user_id = m.author_id
            WHERE m.conversation_id = \(access.key) AND m.author_id != \(member)
              AND ((m.seq > \(old.read) AND m.seq <= \(new.read)) OR (m.seq > \(old.delivered) AND m.seq <= \(new.delivered)))
            LIMIT \(receiptAuthorsNamed + 1)
            """).map { try $0.get("author", as: Int64.self) }
        guard authors.count <= receiptAuthorsNamed, authors.count + 1 < access.memberCount else { return nil }
        return [member] + authors
    }

    /// Every member's watermarks, a page at a time.
    package func receipts(_ caller: Caller, conversation id: ConversationID, limit: Int?, offset: Int?) async throws -> ReceiptList {
        let members = try await members(caller, id: id, limit: limit, offset: offset)
        return ReceiptList(receipts: members.members.map(\.receipt))
    }

    /// Who has one of the caller's messages: its status and the members it reached and who
    /// read it (at most 1,000 of each are listed). Only the author may ask.
    package func messageReceipts(_ caller: Caller, conversation id: ConversationID, message messageID: MessageID) async throws -> MessageReceipts {
        try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .read)
                let (row, _) = try Chat.messageRow(db, access: access, id: messageID)
                try access.require(try row.get("m_author_key", as: Int64.self) == caller.userKey ? .seeWhoHasOwnMessage : .seeWhoHasOthersMessage)
                let seq: Int64 = try row.get("m_seq")
                func users(_ column: SQL) throws -> [UserID] {
                    try db.fetchAll("""
                        SELECT u.public_id FROM member mb JOIN account u ON u.id = mb.user_id
                        WHERE mb.conversation_id = \(access.key) AND mb.user_id != \(caller.userKey) AND \(column) >= \(seq)
                        ORDER BY u.public_id LIMIT 1000
                        """).map { UserID(rawValue: try $0.get("public_id")) }
                }
                let others = access.memberCount - (access.role == nil ? 0 : 1)
                let deliveredTo = try users("mb.delivered_seq")
                let readBy = try users("mb.read_seq")
                let status: DeliveryStatus = others > 0 && readBy.count >= others ? .read
                    : others > 0 && deliveredTo.count >= others ? .delivered : .sent
                return MessageReceipts(status: status, deliveredTo: deliveredTo, readBy: readBy)
            }
        }
    }
}

/// Receipts waiting for the writer, by member and conversation (decision 0026, part 3): the
/// first starts a write; those that arrive before the writer begins it join, raising its marks,
/// and are answered with its result.
final class ReceiptCoalescer: Sendable {
    /// One member's receipts in one conversation, from one session (the caller's standing is
    /// the session's, so two sessions never share a write).
    struct Key: Hashable, Sendable {
        var user: Int64
        var session: Int64
        var asApp: Bool
        var conversation: ConversationID
    }

    enum Role {
        /// This call writes; it must settle `answer` for those that join.
        case leading(Answer)
        /// A write is waiting for the writer; this call's marks are in it.
        case joined(Answer)
    }

    /// The answer every call of one write gets, set once.
    final class Answer: Sendable {
        private let state = LockedValue<(result: Result<Receipt, any Error>?, waiters: [CheckedContinuation<Receipt, any Error>])>((nil, []))

        func succeed(_ receipt: Receipt) { settle(.success(receipt)) }
        func fail(_ error: any Error) { settle(.failure(error)) }

        private func settle(_ result: Result<Receipt, any Error>) {
            let waiters = state.withLock { state -> [CheckedContinuation<Receipt, any Error>] in
                guard state.result == nil else { return [] }
                state.result = result
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(with: result) }
        }

        func value() async throws -> Receipt {
            try await withCheckedThrowingContinuation { continuation in
                let settled = state.withLock { state -> Result<Receipt, any Error>? in
                    if let result = state.result { return result }
                    state.waiters.append(continuation)
                    return nil
                }
                if let settled { continuation.resume(with: settled) }
            }
        }
    }

    private struct Pending {
        var update: ReceiptUpdate
        let answer: Answer
        /// The calls waiting on this write, the leader's included.
        var calls = 1
    }

    private let pending = LockedValue([Key: Pending]())

    /// Joins the member's waiting write, or starts one.
    func enter(_ key: Key, _ update: ReceiptUpdate) -> Role {
        pending.withLock { table in
            if var waiting = table[key] {
                waiting.update.deliveredSeq = Self.highest(waiting.update.deliveredSeq, update.deliveredSeq)
                waiting.update.readSeq = Self.highest(waiting.update.readSeq, update.readSeq)
                waiting.calls += 1
                table[key] = waiting
                return .joined(waiting.answer)
            }
            let answer = Answer()
            table[key] = Pending(update: update, answer: answer)
            return .leading(answer)
        }
    }

    /// The writer has begun the key's write: its marks, as high as every joined call's; later
    /// calls start a new write. Nil when it began already (the leader keeps what it took, for
    /// a retried body).
    func begin(_ key: Key) -> ReceiptUpdate? {
        pending.withLock { $0.removeValue(forKey: key)?.update }
    }

    /// How many calls wait on writes in a conversation that the writer has not begun.
    func waitingCalls(in conversation: ConversationID) -> Int {
        pending.withLock { table in table.filter { $0.key.conversation == conversation }.reduce(0) { $0 + $1.value.calls } }
    }

    /// The key's write failed before the writer began it: calls that join from now on start anew.
    func abandon(_ key: Key, _ answer: Answer) {
        pending.withLock { table in
            if table[key]?.answer === answer { table.removeValue(forKey: key) }
        }
    }

    private static func highest(_ a: Int64?, _ b: Int64?) -> Int64? {
        switch (a, b) {
        case (nil, nil): nil
        case (let a?, nil): a
        case (nil, let b?): b
        case (let a?, let b?): max(a, b)
        }
    }
}
