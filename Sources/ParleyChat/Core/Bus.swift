package import Foundation
import ParleySync

/// Who receives a publication on the nodes that hold their connections.
package enum Audience: Sendable, Hashable {
    /// Every connection subscribed to the conversation (its members' devices).
    case members(conversation: Int64)
    /// The conversation's members' devices except one user's (typing: not back to the typist).
    case membersExcept(conversation: Int64, user: Int64)
    /// These users' devices.
    case users([Int64])
}

/// What the domain hands to the bus once a change is committed, and what every node's
/// ``Fanout`` receives. Users and conversations are named by internal keys, which are the
/// same on every node sharing a database.
package enum Publication: Sendable {
    /// A stored event, in position order. `joins` starts delivering the conversation to a
    /// user's devices with this event; `leaves` stops it after this event.
    case event(position: Int64, conversation: Int64, audience: Audience, joins: Int64?, leaves: Int64?, frame: [UInt8])
    /// Typing and presence: never stored, never replayed.
    case ephemeral(audience: Audience, frame: [UInt8])
    /// Sessions of a user were signed out: `only` that one, or all but `except`, or all. Their
    /// sockets close (4001).
    case signedOut(user: Int64, only: Int64?, except: Int64?)
    /// An event on a named channel (the Pusher protocol's): stored (with a position) when the
    /// app's backend triggered it, or passed on without being stored (a client event). Only
    /// sockets subscribed to the channel by name receive it; the native fan-out ignores it.
    case channel(ChannelEvent)
    /// The app's backend asked to close every Pusher socket signed in as `userID`, on every
    /// node (Pusher's `terminate_connections`).
    case channelUserTerminated(app: Int64, userID: String)
    /// A request on some node wants the unfinished upload `clientID` of `user`: the node whose
    /// request is receiving it interrupts that request (its bytes so far are kept), so the
    /// client's continuation on another node need not wait for the old connection to time out.
    case uploadWanted(user: Int64, clientID: String)
    /// A user blocked or unblocked someone: `blocked` is everyone they block now (public
    /// ids). Their devices on every node stop or start receiving those people's messages,
    /// reactions, typing and presence from the next event on (decision 0027).
    case blocksChanged(user: Int64, blocked: [String])
}

/// An event on a named channel of an app (docs/pusher.md).
package struct ChannelEvent: Sendable, Hashable {
    /// The app's internal key.
    package var app: Int64
    /// The channel's name (`my-channel`, `private-…`, `presence-…`).
    package var channel: String
    /// The event's name.
    package var name: String
    /// The event's data as JSON: a JSON string for events the backend triggered (Pusher's
    /// `data` is a string), whatever the client sent for client events.
    package var dataJSON: String
    /// Its place in the event log; nil for events that are not stored (client events).
    package var position: Int64?
    /// Its number in the channel's log (1, 2, 3, … with no gaps); nil when not stored.
    package var seq: Int64?
    /// The presence user who sent a client event.
    package var userID: String?
    /// The socket that must not receive it (the sender of a client event, or the `socket_id`
    /// a trigger excluded).
    package var excludedSocket: String?
    /// Milliseconds since 1970.
    package var createdAt: Int64

    /// Creates the value; each argument sets the property of the same name.
    package init(app: Int64, channel: String, name: String, dataJSON: String, position: Int64?, seq: Int64?, userID: String?,
                excludedSocket: String?, createdAt: Int64) {
        self.app = app
        self.channel = channel
        self.name = name
        self.dataJSON = dataJSON
        self.position = position
        self.seq = seq
        self.userID = userID
        self.excludedSocket = excludedSocket
        self.createdAt = createdAt
    }
}

/// Carries publications from the node that committed a change to every node's ``Fanout``.
///
/// The domain publishes from the store's after-commit hook, in commit order; a bus must
/// deliver each publisher's batches to every receiver in the order they were published
/// (docs/decisions/0008-publish-in-commit-order.md). The in-process implementation is the
/// whole story on one node; a Redis or PostgreSQL LISTEN bus is the path to several.
package protocol Bus: Sendable {
    /// Hands `publications` to every receiver. Must not block for long: it runs on the
    /// store's writer thread.
    func publish(_ publications: [Publication])
    /// Hands the events one committed write appended to every receiver, with their place in
    /// the log (``EventLink``, one per shard it appended to) when ``linksEvents`` asked the
    /// domain for it.
    func publish(_ publications: [Publication], links: [EventLink])
    /// Whether the bus wants each write's ``EventLink``: a bus between nodes orders what it
    /// receives and finds what it lost by the links; in one process nothing is lost.
    var linksEvents: Bool { get }
    /// Adds a receiver; it is called with each batch, in publication order.
    func subscribe(_ receiver: @escaping @Sendable ([Publication]) -> Void)
}

extension Bus {
    package func publish(_ publications: [Publication], links: [EventLink]) { publish(publications) }
    package var linksEvents: Bool { false }
}

/// Where one committed write's events sit in one shard of the event log: after `previous`
/// (the newest position of the shard committed before the write, taken under the shard's
/// lock) up to `last` (its own newest there). The links of consecutive writes to a shard chain
/// (each `previous` is the last `last`), so a node that receives a write whose `previous` is
/// past what it has delivered of that shard knows that something is missing and reads it
/// from the database (docs/decisions/0018-positions-across-nodes.md; per shard: 0026, part 4).
/// A log of one shard has one chain, shard 0 of 1.
package struct EventLink: Sendable, Hashable {
    /// The shard, and how many the log has.
    package var shard: Int
    package var shards: Int
    /// The newest position of the shard committed before the write.
    package var previous: Int64
    /// The write's newest position in the shard.
    package var last: Int64

    /// Creates the value; each argument sets the property of the same name.
    package init(shard: Int = 0, shards: Int = 1, previous: Int64, last: Int64) {
        self.shard = shard
        self.shards = shards
        self.previous = previous
        self.last = last
    }

    /// One write's publications cut by shard, each part with its link: an event goes with its
    /// shard's link, anything without a position with the first part. One link: one part.
    package static func parts(of publications: [Publication], links: [EventLink]) -> [(link: EventLink?, publications: [Publication])] {
        guard links.count > 1 else { return [(links.first, publications)] }
        var parts: [Int: [Publication]] = [:]
        let first = links[0].shard
        for publication in publications {
            let shard = publication.position.map { Int($0 % Int64(links[0].shards)) } ?? first
            parts[shard, default: []].append(publication)
        }
        return links.map { ($0, parts[$0.shard] ?? []) }
    }
}

extension Publication {
    /// The stored event's position (nil for what is not stored).
    package var position: Int64? {
        switch self {
        case .event(let position, _, _, _, _, _): position
        case .channel(let event): event.position
        case .ephemeral, .signedOut, .channelUserTerminated, .uploadWanted, .blocksChanged: nil
        }
    }
}


/// The one-node bus: a publish calls every receiver directly, in order.
package final class InProcessBus: Bus {
    private let receivers = LockedValue<[@Sendable ([Publication]) -> Void]>([])

    /// An empty bus.
    package init() {}

    package func publish(_ publications: [Publication]) {
        guard !publications.isEmpty else { return }
        for receiver in receivers.withLock({ $0 }) { receiver(publications) }
    }

    package func subscribe(_ receiver: @escaping @Sendable ([Publication]) -> Void) {
        receivers.withLock { $0.append(receiver) }
    }
}

extension Duration {
    /// The same span for Dispatch's timers, to the microsecond.
    package var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        return .microseconds(Int(seconds) * 1_000_000 + Int(attoseconds / 1_000_000_000_000))
    }
}

/// Wakes idle outbox workers when there may be work: rows made for them, or a change
/// committed. A signal with nobody waiting costs nothing.
package final class Wakeup: Sendable {
    package init() {}

    /// Waiters by a number of their own. Never `UUID()`: on Linux it returns one constant when
    /// the process has no file descriptor left (PLATFORM.md §10), and waiters would overwrite
    /// each other and never wake (issue 31).
    private let waiters = LockedValue((table: [UInt64: CheckedContinuation<Void, Never>](), next: UInt64(0)))

    /// Resumes every waiter now.
    package func signal() {
        let all = waiters.withLock { waiters in
            defer { waiters.table.removeAll() }
            return Array(waiters.table.values)
        }
        for waiter in all { waiter.resume() }
    }

    /// Waits for a signal, for the task to be cancelled, or `limit` at most. With `ready`,
    /// returns at once if it holds once this waiter is listening: a signal sent after what
    /// `ready` looks at changed is then never missed (check, then wait, would miss one sent in
    /// between).
    package func wait(upTo limit: Duration, unless ready: (() -> Bool)? = nil) async {
        let id = waiters.withLock { waiters in
            waiters.next &+= 1
            return waiters.next
        }
        let waiters = waiters
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                waiters.withLock { $0.table[id] = continuation }
                // Cancelled before it listened, or ready: the handler below found nothing to resume.
                if Task.isCancelled || ready?() == true, let waiter = waiters.withLock({ $0.table.removeValue(forKey: id) }) {
                    return waiter.resume()
                }
                Task {
                    try? await Task.sleep(for: limit)
                    if let waiter = waiters.withLock({ $0.table.removeValue(forKey: id) }) { waiter.resume() }
                }
            }
        } onCancel: {
            if let waiter = waiters.withLock({ $0.table.removeValue(forKey: id) }) { waiter.resume() }
        }
    }
}
