import Foundation
import ParleyStore
import ParleySync
import ParleyWire

/// Delivery status in public channels (docs/protocol.md, "Delivery in channels"; decision 0017).
///
/// A public channel's receipts reach only their own member's devices (decision 0009), so an
/// author would never learn how far a message got. Instead, when members' watermarks move,
/// the seq ranges they passed are noted here (nothing stored, nothing sent); at most once per
/// ``Chat/Configuration/deliveryUpdateInterval`` the channel's watermarks are read once, and
/// each author whose messages lie in those ranges gets one `delivery.updated` event with the
/// counts of their newest affected messages. The cost grows with the authors affected and the
/// flushes, not with the members who moved: 10,000 members reading the same message in one
/// second give its author one event.
final class DeliveryCoalescer: Sendable {
    /// The seq ranges passed by watermark moves in one channel since the last flush.
    struct Moves: Sendable, Equatable {
        var lowest: Int64
        var highest: Int64
    }

    private let state = LockedValue((pending: [Int64: Moves](), scheduled: false))

    /// Notes that a member's watermarks moved from `old` to `new` (delivered and read).
    /// - Returns: whether a flush must be scheduled (none was).
    func note(conversation: Int64, from old: (delivered: Int64, read: Int64), to new: (delivered: Int64, read: Int64)) -> Bool {
        let lowest = min(old.delivered, old.read) + 1
        let highest = max(new.delivered, new.read)
        guard highest >= lowest else { return false }
        return state.withLock { state in
            let moves = state.pending[conversation].map { Moves(lowest: min($0.lowest, lowest), highest: max($0.highest, highest)) }
                ?? Moves(lowest: lowest, highest: highest)
            state.pending[conversation] = moves
            defer { state.scheduled = true }
            return !state.scheduled
        }
    }

    /// Takes everything noted so far.
    func take() -> [Int64: Moves] {
        state.withLock { state in
            defer { state = ([:], false) }
            return state.pending
        }
    }
}

extension Chat {
    /// The most messages of one author one `delivery.updated` reports (its newest affected).
    static let deliveriesPerAuthor = 50

    /// Notes a watermark move in a public channel and schedules a flush.
    func noteDelivery(conversation: Int64, from old: (delivered: Int64, read: Int64), to new: (delivered: Int64, read: Int64)) {
        guard deliveries.note(conversation: conversation, from: old, to: new) else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + configuration.deliveryUpdateInterval.dispatchInterval) { [self] in
            Task { try? await flushDeliveries() }
        }
    }

    /// Sends every author whose messages moved since the last flush one `delivery.updated`
    /// per channel. Runs by itself after each interval; tests call it to flush at once.
    ///
    /// - Returns: the number of `delivery.updated` events written.
    @discardableResult
    package func flushDeliveries() async throws -> Int {
        let moves = deliveries.take()
        guard !moves.isEmpty else { return 0 }
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                var written = 0
                for (conversation, range) in moves.sorted(by: { $0.key < $1.key }) {
                    written += try Chat.appendDeliveries(tx, conversation: conversation, range: range, now: now)
                }
                return written
            }
        }
    }

    /// One channel's flush: the messages in `range`, grouped by author, counted against the
    /// channel's watermarks, read once (``DeliveryStatus/Counter``: each count a binary search).
    private static func appendDeliveries(_ tx: Transaction, conversation: Int64, range: DeliveryCoalescer.Moves, now: Int64) throws -> Int {
        let rows = try tx.fetchAll("""
            SELECT m.public_id, m.seq, m.author_id FROM message m
            WHERE m.conversation_id = \(conversation) AND m.seq >= \(range.lowest) AND m.seq <= \(range.highest) AND m.deleted_at IS NULL
            ORDER BY m.seq DESC LIMIT 1000
            """).reversed()
        guard !rows.isEmpty else { return 0 }
        var byAuthor: [Int64: [(id: String, seq: Int64)]] = [:]
        for row in rows {
            byAuthor[try row.get("author_id"), default: []].append((try row.get("public_id"), try row.get("seq")))
        }
        var marks: [Int64: (delivered: Int64, read: Int64)] = [:]
        for row in try tx.fetchAll("SELECT user_id, delivered_seq, read_seq FROM member WHERE conversation_id = \(conversation)") {
            marks[try row.get("user_id")] = (try row.get("delivered_seq"), try row.get("read_seq"))
        }
        let counter = DeliveryStatus.Counter(marks.values)
        var written = 0
        for (author, messages) in byAuthor.sorted(by: { $0.key < $1.key }) {
            // The author's own watermarks do not count for their messages.
            let own = marks[author]
            let recipients = counter.members - (own == nil ? 0 : 1)
            let items = messages.suffix(deliveriesPerAuthor).map { message -> MessageDelivery in
                let (deliveredCount, readCount) = counter.counts(at: message.seq, excluding: own)
                return MessageDelivery(messageID: MessageID(rawValue: message.id), seq: message.seq, deliveredCount: deliveredCount,
                                       readCount: readCount, recipientCount: recipients,
                                       status: .of(deliveredCount: deliveredCount, readCount: readCount, recipients: recipients))
            }
            let json = String(decoding: try WireCoding.encoder().encode(items), as: UTF8.self)
            var payload = EventPayload()
            payload.deliveriesJSON = json
            try tx.append(conversation: conversation, kind: .deliveryUpdated, actor: nil, user: author, payload: payload, now: now)
            written += 1
        }
        return written
    }
}
