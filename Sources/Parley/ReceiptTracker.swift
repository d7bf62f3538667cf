import Foundation
import ParleyWire

/// Where this client's own messages stand (sent → delivered → read), from the other members'
/// watermarks as receipts arrive. Plain data: the client feeds it what it learns and publishes
/// the updates it returns. The rule itself is ``DeliveryStatus/of(seq:lowestDelivered:lowestRead:)``.
struct ReceiptTracker {
    typealias OutgoingUpdate = ParleyClient.OutgoingUpdate

    private struct Mine {
        var seq: Int64
        var clientID: String
        var status: DeliveryStatus
        var progress: ParleyClient.DeliveryProgress?
    }

    /// Other members' watermarks per conversation.
    private var watermarks: [ConversationID: [UserID: (delivered: Int64, read: Int64)]] = [:]
    /// This client's sent messages not yet read by everyone.
    private var mine: [ConversationID: [Mine]] = [:]

    /// A message of this client's was stored with `seq`.
    mutating func sent(_ clientID: String, seq: Int64, in conversation: ConversationID) -> [OutgoingUpdate] {
        mine[conversation, default: []].append(Mine(seq: seq, clientID: clientID, status: .sent, progress: nil))
        return updates(in: conversation)
    }

    /// Someone else's watermarks moved.
    mutating func receipt(_ user: UserID, delivered: Int64, read: Int64, in conversation: ConversationID) -> [OutgoingUpdate] {
        watermarks[conversation, default: [:]][user] = (delivered, read)
        return updates(in: conversation)
    }

    /// The server's counts for this client's messages in a public channel (`delivery.updated`):
    /// an update whenever a message's status or counts moved.
    mutating func deliveries(_ deliveries: [MessageDelivery], in conversation: ConversationID) -> [OutgoingUpdate] {
        guard var messages = mine[conversation] else { return [] }
        var updates: [OutgoingUpdate] = []
        for delivery in deliveries {
            guard let index = messages.firstIndex(where: { $0.seq == delivery.seq }) else { continue }
            let progress = ParleyClient.DeliveryProgress(delivered: delivery.deliveredCount, read: delivery.readCount,
                                                         recipients: delivery.recipientCount)
            guard progress != messages[index].progress || delivery.status != messages[index].status else { continue }
            messages[index].progress = progress
            messages[index].status = delivery.status
            guard let status = Self.outgoing(delivery.status, progress) else { continue }
            updates.append(OutgoingUpdate(clientID: messages[index].clientID, conversationID: conversation, status: status, progress: progress))
        }
        // Kept until read by everyone: counts keep moving as more members read.
        mine[conversation] = messages.filter { $0.status != .read }
        return updates
    }

    /// The outgoing status for a status and counts; nil while nobody has it (still just sent).
    private static func outgoing(_ status: DeliveryStatus, _ progress: ParleyClient.DeliveryProgress) -> ParleyClient.OutgoingStatus? {
        switch status {
        case .read: .read
        case .delivered: .delivered
        case .sent: progress.delivered > 0 ? .deliveredToSome : nil
        }
    }

    /// Someone else posted at `seq`: the server moved their watermarks there (one has seen what
    /// one answers), and no receipt of theirs says so. Only a member already known counts.
    mutating func posted(_ user: UserID, seq: Int64, in conversation: ConversationID) -> [OutgoingUpdate] {
        guard let old = watermarks[conversation]?[user], old.read < seq || old.delivered < seq else { return [] }
        watermarks[conversation]?[user] = (max(old.delivered, seq), max(old.read, seq))
        return updates(in: conversation)
    }

    /// Someone joined: nothing reached them yet.
    mutating func joined(_ user: UserID, in conversation: ConversationID) {
        watermarks[conversation, default: [:]][user] = (0, 0)
    }

    /// Someone left: they no longer count.
    mutating func left(_ user: UserID, in conversation: ConversationID) -> [OutgoingUpdate] {
        watermarks[conversation]?[user] = nil
        return updates(in: conversation)
    }

    /// Every other member's watermarks as the server lists them, merged with what arrived
    /// live meanwhile (watermarks only move forward).
    mutating func learn(_ receipts: [Receipt], except me: UserID?, in conversation: ConversationID) -> [OutgoingUpdate] {
        var marks: [UserID: (delivered: Int64, read: Int64)] = [:]
        for receipt in receipts where receipt.userID != me { marks[receipt.userID] = (receipt.deliveredSeq, receipt.readSeq) }
        for (user, mark) in watermarks[conversation] ?? [:] {
            let known = marks[user] ?? (0, 0)
            marks[user] = (max(known.delivered, mark.delivered), max(known.read, mark.read))
        }
        watermarks[conversation] = marks
        return updates(in: conversation)
    }

    /// The statuses that moved; messages read by everyone are forgotten.
    private mutating func updates(in conversation: ConversationID) -> [OutgoingUpdate] {
        guard let messages = mine[conversation], !messages.isEmpty, let others = watermarks[conversation], !others.isEmpty else { return [] }
        let lowestDelivered = others.values.map(\.delivered).min() ?? 0
        let lowestRead = others.values.map(\.read).min() ?? 0
        var updates: [OutgoingUpdate] = []
        var kept: [Mine] = []
        let counter = DeliveryStatus.Counter(others.values)
        for var message in messages {
            let status = DeliveryStatus.of(seq: message.seq, lowestDelivered: lowestDelivered, lowestRead: lowestRead)
            let (delivered, read) = counter.counts(at: message.seq)
            let progress = ParleyClient.DeliveryProgress(delivered: delivered, read: read, recipients: others.count)
            if status != message.status || (others.count > 1 && progress != message.progress) {
                message.status = status
                message.progress = progress
                if let outgoing = Self.outgoing(status, progress) {
                    updates.append(OutgoingUpdate(clientID: message.clientID, conversationID: conversation, status: outgoing,
                                                  progress: others.count > 1 ? progress : nil))
                }
            }
            if status != .read { kept.append(message) }
        }
        mine[conversation] = kept
        return updates
    }
}

/// The subscribers to one kind of update: each call of a stream method gets its own stream,
/// and a stream that ends is forgotten. Used by ``ParleyClient`` for events, connection
/// states and outgoing updates alike.
struct Listeners<Value: Sendable> {
    private var continuations: [UUID: AsyncStream<Value>.Continuation] = [:]

    /// A new stream keeping the newest `buffer` values; `forget` is called with its id when
    /// the consumer stops listening (hop back to the owner and call ``remove(_:)``).
    mutating func add(buffer: Int, first: Value? = nil, forget: @escaping @Sendable (UUID) -> Void) -> AsyncStream<Value> {
        let (stream, continuation) = AsyncStream<Value>.makeStream(bufferingPolicy: .bufferingNewest(buffer))
        let id = UUID()
        continuations[id] = continuation
        if let first { continuation.yield(first) }
        continuation.onTermination = { _ in forget(id) }
        return stream
    }

    /// Forgets a stream.
    mutating func remove(_ id: UUID) { continuations[id] = nil }

    /// Hands `value` to every stream.
    func yield(_ value: Value) {
        for continuation in continuations.values { continuation.yield(value) }
    }
}
