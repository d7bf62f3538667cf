import ParleyWire

/// The outbox's memory of what is on the wire and how recent sends ended: which command
/// carries which client id (so an answer finds its message, and a message is never sent
/// twice on one connection), and the last 1,000 outcomes (so ``ParleyClient/waitUntilSent(_:)``
/// called after the fact still answers). The queued items themselves live in the persisted
/// ``ClientState/outbox``. Plain data, owned by the client actor.
struct SendTracker {
    private var inFlight: [String: String] = [:]  // command id → client id
    private var outcomes: [String: Result<Message, ParleyError>] = [:]
    private var order: [String] = []
    private let capacity = 1_000

    /// Whether `clientID` was sent on this connection and is not answered yet.
    func isInFlight(_ clientID: String) -> Bool { inFlight.values.contains(clientID) }

    /// `clientID` went out as command `commandID`.
    mutating func sent(_ clientID: String, as commandID: String) { inFlight[commandID] = clientID }

    /// The client id command `commandID` carried, now answered; nil for other commands.
    mutating func answered(_ commandID: String) -> String? { inFlight.removeValue(forKey: commandID) }

    /// The connection dropped: nothing is on the wire any more (the outbox sends it all again).
    mutating func connectionLost() { inFlight = [:] }

    /// How the send of `clientID` ended.
    mutating func finished(_ clientID: String, _ outcome: Result<Message, ParleyError>) {
        outcomes[clientID] = outcome
        order.append(clientID)
        if order.count > capacity { outcomes[order.removeFirst()] = nil }
    }

    /// The outcome of a recent send, if it ended.
    func outcome(of clientID: String) -> Result<Message, ParleyError>? { outcomes[clientID] }
}
