import ParleyWire

/// What a live frame means to a reader who blocked someone (decision 0027): delivered as it
/// is, as a stub, or not at all. Read from the frame's own JSON, once per frame and only when
/// some recipient blocks anyone, so a fan-out to readers without blocks costs nothing more.
struct BlockedFrames: Sendable {
    /// Who did it: a stored event's actor, a typist, a user whose presence changed.
    private let actor: String?
    /// A message event's message sender.
    private let sender: String?
    /// Whether the frame is only about the actor (a reaction, typing, presence): withheld
    /// entirely from someone who blocked them.
    private let aboutActorOnly: Bool
    private let stub: [UInt8]?

    /// Reads a frame's JSON (``EventRecord/frame`` or a typing or presence frame).
    init(frame: [UInt8]) {
        guard case .object(let root)? = try? JSONValue.decode(String(decoding: frame, as: UTF8.self)) else {
            actor = nil; sender = nil; aboutActorOnly = false; stub = nil
            return
        }
        switch root["type"] {
        case .string("typing")?, .string("presence")?:
            actor = root["userId"]?.stringValue
            sender = nil
            aboutActorOnly = true
            stub = nil
        case .string("event")?:
            guard case .object(var event)? = root["event"] else {
                actor = nil; sender = nil; aboutActorOnly = false; stub = nil
                return
            }
            actor = event["actorId"]?.stringValue
            // A reaction or a vote is about what its actor did, and goes nowhere the actor is blocked.
            aboutActorOnly = event["type"]?.stringValue.map { EventKind(rawValue: $0).rule?.shape == .reaction || $0 == EventKind.pollVoted.rawValue } ?? false
            if case .object(var message)? = event["message"], case .object(let from)? = message["sender"] {
                sender = from["id"]?.stringValue
                for key in ["content", "metadata", "reactions", "myReactions", "mentions", "poll", "myVotes"] { message.removeValue(forKey: key) }
                message["hidden"] = .string(HiddenReason.blocked.rawValue)
                event["message"] = .object(message)
                var stubbed = root
                stubbed["event"] = .object(event)
                stub = (try? JSONValue.object(stubbed).encoded()).map { Array($0.utf8) }
            } else {
                sender = nil
                stub = nil
            }
        default:
            actor = nil; sender = nil; aboutActorOnly = false; stub = nil
        }
    }

    /// What a reader who blocked `blocked` (public ids) receives: the frame (nil: as it is),
    /// or nothing.
    enum Outcome: Equatable {
        case asIs
        case stub([UInt8])
        case withheld
    }

    func outcome(for blocked: Set<String>) -> Outcome {
        if let actor, aboutActorOnly, blocked.contains(actor) { return .withheld }
        if let sender, blocked.contains(sender) { return stub.map(Outcome.stub) ?? .withheld }
        return .asIs
    }
}

extension JSONValue {
    fileprivate var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }
}
