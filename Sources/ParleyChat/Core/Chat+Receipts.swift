import Foundation
import ParleyStore
package import ParleyWire

extension Chat {
    /// Moves the caller's watermarks forward. Values behind the current ones change nothing;
    /// values past the conversation's last seq are clamped to it; reading implies delivery.
    ///
    /// - Throws: 400 for a negative value; 403 `not_member`; 404.
    package func updateReceipt(_ caller: Caller, conversation id: ConversationID, _ update: ReceiptUpdate) async throws -> Receipt {
        guard update.deliveredSeq != nil || update.readSeq != nil else { throw ChatError.invalid("give deliveredSeq, readSeq or both") }
        guard (update.deliveredSeq ?? 0) >= 0, (update.readSeq ?? 0) >= 0 else { throw ChatError.invalid("seq values are not negative") }
        let now = nowMilliseconds
        let (receipt, moved): (Receipt, (conversation: Int64, old: (Int64, Int64), new: (Int64, Int64))?) = try await run {
            try await write { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .keepOwnState)
                let read = min(update.readSeq ?? 0, access.lastSeq)
                let delivered = max(min(update.deliveredSeq ?? 0, access.lastSeq), read)
                guard let before = try db.fetchOne("""
                    SELECT delivered_seq, read_seq FROM member WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                    """) else { throw ChatError.notMember }
                let old = (delivered: try before.get("delivered_seq", as: Int64.self), read: try before.get("read_seq", as: Int64.self))
                let new = (delivered: max(old.delivered, delivered), read: max(old.read, read))
                if new != old {
                    try db.execute("""
                        UPDATE member SET delivered_seq = \(new.delivered), read_seq = \(new.read)
                        WHERE conversation_id = \(access.key) AND user_id = \(caller.userKey)
                        """)
                    // Stored with a position and no seq: see EventKind.receiptUpdated.
                    var payload = EventPayload()
                    payload.deliveredSeq = new.delivered
                    payload.readSeq = new.read
                    try db.append(conversation: access.key, kind: .receiptUpdated, actor: caller.userKey, user: caller.userKey, payload: payload, now: now)
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
