import Foundation
import ParleySync
package import ParleyWire

/// One node's router from the ``Bus`` to the connected devices: who is subscribed to which
/// conversation, who is online. Its state is guarded by one lock, and publications are routed
/// on the thread the bus delivers them on (the store's writer, right after COMMIT, or the
/// Redis bus's ordering queue), in the order it delivers them, so every device receives its
/// events in position order with no queue between the commit and the devices' loops
/// (decision 0026).
///
/// Subscriptions follow the event log itself: a `member.added` subscribes the newcomer's
/// devices before it is delivered, a `member.removed` unsubscribes the leaver's after. A
/// device that connects is attached in two steps around one read of its memberships; the
/// events routed in between are kept (once, for every device attaching at the time) and,
/// once its memberships are known, replayed through them in order (``attach(_:)``):
/// attaching is atomic with respect to publication, so a device never misses an event
/// published after the position `attach` returns.
///
/// `Frame` is what the server sends (an encoded WebSocket frame), made once per publication
/// however many devices receive it.
package final class Fanout<Frame: Sendable>: @unchecked Sendable {
    // @unchecked: every mutable property is touched only while `lock` is held.

    /// What a device receives.
    package enum Delivery: Sendable {
        /// A stored event.
        case event(position: Int64, frame: Frame)
        /// Typing or presence.
        case ephemeral(Frame)
        /// The device's session was signed out.
        case signedOut
        /// Test mode cut the device's connection (it reconnects and resumes).
        case dropped
    }

    /// One connected device.
    package final class Subscriber: @unchecked Sendable {
        // @unchecked: `attached`, `attachedFrom` and `conversations` are touched only under the fanout's lock; the rest is immutable.
        /// Whose device.
        package let caller: Caller
        let receive: @Sendable (Delivery) -> Void
        // Under the fanout's lock only:
        var attached = false
        /// While attaching: the number of events routed before it registered; what came
        /// after is in the fanout's ``Fanout/recent`` and is replayed when it subscribes.
        var attachedFrom = 0
        var conversations: Set<Int64> = []
        /// The people this device's user blocked (public ids), whose messages reach it as stubs
        /// and whose reactions, typing and presence do not reach it (decision 0027); and
        /// whether a ``Publication/blocksChanged(user:blocked:)`` set them while attaching.
        var blocked: Set<String> = []
        var blocksRouted = false

        /// A device of `caller`; `receive` is called under the fanout's lock, in order, and must
        /// only hand the delivery over (to the connection's loop): never call the fanout.
        package init(caller: Caller, receive: @escaping @Sendable (Delivery) -> Void) {
            self.caller = caller
            self.receive = receive
        }
    }

    private struct PresenceEntry {
        var devices = 0
        var generation = 0
        var online = false
    }

    private let chat: Chat
    /// The most devices one message's trace row names on this node (a channel of thousands
    /// counts the rest): a trace must not cost what the message does.
    private let tracedDevicesPerMessage: Int
    private let bus: any Bus
    private let directory: (any PresenceDirectory)?
    private let makeFrame: @Sendable ([UInt8]) -> Frame
    private let presenceGrace: Duration
    private let lock = LockedValue(())
    /// Runs the presence grace timers (their work takes the lock).
    private let timers = DispatchQueue(label: "parley.fanout.timers")
    private var byUser: [Int64: [ObjectIdentifier: Subscriber]] = [:]
    private var byConversation: [Int64: [ObjectIdentifier: Subscriber]] = [:]
    private var presence: [Int64: PresenceEntry] = [:]
    /// Devices between the two steps of ``attach(_:)``.
    private var attaching: [ObjectIdentifier: Subscriber] = [:]
    /// The events routed while any device is attaching, once for all of them (cleared when
    /// none is): `recent[i]` is event number `recentBase + i` (counting from 0) of those
    /// routed since start; `routedEvents` is the number the next one gets.
    private var recent: [Publication] = []
    private var recentBase = 0
    private var routedEvents = 0
    private var routed = 0

    /// The most events kept for attaching devices (their memberships are one store read, so
    /// this is reached only when the store stalls under load). When it is passed, the oldest
    /// half goes, and a device that began attaching before them fails with a temporary error
    /// and connects again. Default: 65,536.
    private let maxRecentWhileAttaching: Int

    /// Routes `bus`'s publications; `presenceGrace` is how long a user stays online after
    /// their last device disconnects (a reconnect within it is not announced).
    /// With a `directory`, whether a user is online is decided across nodes: this node tells
    /// it when a user comes and goes here, announces only what is news everywhere, and asks
    /// it about users connected elsewhere.
    package init(chat: Chat, bus: any Bus, presenceGrace: Duration, maxRecentWhileAttaching: Int = 65_536,
                directory: (any PresenceDirectory)? = nil, tracedDevicesPerMessage: Int = 1_000,
                makeFrame: @escaping @Sendable ([UInt8]) -> Frame) {
        self.maxRecentWhileAttaching = max(2, maxRecentWhileAttaching)
        self.tracedDevicesPerMessage = max(1, tracedDevicesPerMessage)
        self.directory = directory
        self.chat = chat
        self.bus = bus
        self.makeFrame = makeFrame
        self.presenceGrace = presenceGrace
        bus.subscribe { [weak self] publications in
            guard let self else { return }
            lock.withLock { _ in self.route(publications) }
        }
    }

    // MARK: - Devices

    /// Attaches a device: it receives every event after the returned cursor for its
    /// conversations, including those published while it was attaching (held, then delivered
    /// in order before anything newer). Events at or before that cursor are for the caller
    /// to replay from the store (``Chat/replay(_:after:limit:)``) when the device resumes; the
    /// two may overlap, never leave a gap, and the device drops what it already has by position.
    ///
    /// - Returns: the committed cursor the memberships were read at (``EventLog``): every
    ///   event after it reaches the device.
    /// - Throws: the store's error, or ``ChatError/storeUnavailable`` when more events arrived
    ///   while attaching than the device may hold.
    @discardableResult
    package func attach(_ subscriber: Subscriber) async throws -> LogCursor {
        try await attach(subscriber, beforeSubscribing: nil)
    }

    /// ``attach(_:)`` with a hook between reading the memberships and subscribing, where tests
    /// make the membership changes that must not be lost.
    func attach(_ subscriber: Subscriber, beforeSubscribing: (@Sendable () async throws -> Void)?) async throws -> LogCursor {
        underLock {
            self.byUser[subscriber.caller.userKey, default: [:]][ObjectIdentifier(subscriber)] = subscriber
            self.attaching[ObjectIdentifier(subscriber)] = subscriber
            subscriber.attachedFrom = self.routedEvents
        }
        let memberships: (conversations: [Int64], blocked: Set<String>, asOf: LogCursor)
        do {
            memberships = try await chat.memberships(subscriber.caller)
        } catch {
            detach(subscriber)
            throw error
        }
        do {
            try await beforeSubscribing?()
        } catch {
            detach(subscriber)
            throw error
        }
        let outcome: (cameOnline: Bool, overflowed: Bool) = underLock {
            let overflowed = subscriber.attachedFrom < self.recentBase
            let pending = overflowed ? [] : self.recent[(subscriber.attachedFrom - self.recentBase)...]
            self.stopAttaching(subscriber)
            guard self.byUser[subscriber.caller.userKey]?[ObjectIdentifier(subscriber)] != nil else { return (false, false) }  // detached meanwhile
            guard !overflowed else { return (false, true) }
            // Replay what was routed meanwhile through the memberships as they stood at
            // `asOf`, applying each join and leave in its place, exactly as route() would have.
            let user = subscriber.caller.userKey
            // Read before the device registered, so a change routed since (which set it) is newer.
            if !subscriber.blocksRouted { subscriber.blocked = memberships.blocked }
            var conversations = Set(memberships.conversations)
            for publication in pending {
                guard case .event(let position, let conversation, let audience, let joins, let leaves, let bytes) = publication,
                      !memberships.asOf.includes(position) else { continue }
                if joins == user { conversations.insert(conversation) }
                let receives = switch audience {
                case .members(let key): conversations.contains(key)
                case .membersExcept(let key, let except): conversations.contains(key) && except != user
                case .users(let users): users.contains(user)
                }
                if receives {
                    var frame: Frame?
                    var hiding: Hiding?
                    self.deliver(bytes, to: subscriber, frame: &frame, hiding: &hiding) { .event(position: position, frame: $0) }
                }
                if leaves == user { conversations.remove(conversation) }
            }
            for conversation in conversations { self.subscribe(subscriber, to: conversation) }
            subscriber.attached = true
            var entry = self.presence[subscriber.caller.userKey] ?? PresenceEntry()
            entry.devices += 1
            entry.generation += 1
            let cameOnline = !entry.online
            entry.online = true
            self.presence[subscriber.caller.userKey] = entry
            return (cameOnline, false)
        }
        if outcome.overflowed {
            detach(subscriber)
            throw ChatError.storeUnavailable
        }
        if outcome.cameOnline { announce(subscriber.caller, online: true) }
        return memberships.asOf
    }

    /// Detaches a device (its connection closed). The user goes offline once no device has
    /// been attached for the grace period.
    /// Test mode's fault: cuts every connection of `user`'s devices on this node, as a network
    /// would; returns how many.
    @discardableResult
    package func dropConnections(user: Int64) -> Int {
        lock.withLock { _ in
            let devices = Array((byUser[user] ?? [:]).values)
            for subscriber in devices { subscriber.receive(.dropped) }
            return devices.count
        }
    }

    /// Test mode's reset: cuts every device's connection on this node; returns how many.
    @discardableResult
    package func dropAllConnections() -> Int {
        lock.withLock { _ in
            let devices = byUser.values.flatMap(\.values)
            for subscriber in devices { subscriber.receive(.dropped) }
            return devices.count
        }
    }

    package func detach(_ subscriber: Subscriber) {
        lock.withLock { _ in
            let id = ObjectIdentifier(subscriber)
            stopAttaching(subscriber)
            guard byUser[subscriber.caller.userKey]?.removeValue(forKey: id) != nil else { return }
            if byUser[subscriber.caller.userKey]?.isEmpty == true { byUser.removeValue(forKey: subscriber.caller.userKey) }
            for conversation in subscriber.conversations { unsubscribe(subscriber, from: conversation) }
            guard subscriber.attached, var entry = presence[subscriber.caller.userKey] else { return }
            subscriber.attached = false
            entry.devices -= 1
            entry.generation += 1
            presence[subscriber.caller.userKey] = entry
            guard entry.devices == 0 else { return }
            let generation = entry.generation
            let caller = subscriber.caller
            let user = caller.userKey
            timers.asyncAfter(deadline: .now() + presenceGrace.dispatchInterval) { [self] in
                let gone = lock.withLock { _ -> Bool in
                    guard let entry = presence[user], entry.devices == 0, entry.generation == generation else { return false }
                    presence.removeValue(forKey: user)
                    return true
                }
                if gone { announce(caller, online: false) }
            }
        }
    }

    /// Which of `users` are online (connected, or within the grace period): on this node, and
    /// with a directory on any node.
    package func online(_ users: [Int64]) async -> Set<Int64> {
        let here = underLock { Set(users.filter { self.presence[$0]?.online == true }) }
        guard let directory else { return here }
        let elsewhere = users.filter { !here.contains($0) }
        guard !elsewhere.isEmpty else { return here }
        return here.union(await directory.onlineElsewhere(elsewhere))
    }

    /// Devices attached on this node.
    package var deviceCount: Int {
        get async { underLock { self.byUser.values.reduce(0) { $0 + $1.count } } }
    }

    /// Publications routed since start.
    package var routedCount: Int {
        get async { underLock { self.routed } }
    }

    // MARK: - Routing

    private func route(_ publications: [Publication]) {
        for publication in publications {
            routed += 1
            switch publication {
            case .event(let position, let conversation, let audience, let joins, let leaves, let bytes):
                // This is event number `routedEvents`; `recent` holds numbers recentBase… .
                if attaching.isEmpty {
                    recentBase = routedEvents + 1
                } else {
                    recent.append(publication)
                    if recent.count > maxRecentWhileAttaching {
                        let dropped = recent.count / 2
                        recent.removeFirst(dropped)
                        recentBase += dropped
                    }
                }
                routedEvents += 1
                if let joins { membershipChanged(user: joins, conversation: conversation, position: position, joined: true) }
                var frame: Frame?
                var hiding: Hiding?
                // A new message's time is read once (nil for every other kind): `/metrics`
                // observes it once per node, weighted by the devices it reached, and the trace
                // records each of those devices (docs/trace.md).
                let sentAt = EventRecord.messageSentAt(frame: bytes)
                let tracing = sentAt != nil && chat.traceRecorder.isOn
                var reached = 0
                var devices = ""
                forEachRecipient(of: audience) { subscriber in
                    if deliver(bytes, to: subscriber, frame: &frame, hiding: &hiding, { .event(position: position, frame: $0) }) {
                        reached += 1
                        if tracing, reached <= tracedDevicesPerMessage {
                            if !devices.isEmpty { devices += "," }
                            devices += "\(subscriber.caller.userKey):\(subscriber.caller.sessionKey)"
                        }
                    }
                }
                if reached > 0, let sentAt {
                    chat.sendToDelivered.observe("socket", sentAt: sentAt, count: reached)
                    // One row for every device this node reached with the message.
                    if tracing {
                        // A large channel's message names its first devices and counts the rest.
                        let more = reached > tracedDevicesPerMessage
                            ? TraceRecorder.detail(reason: "\(reached) devices reached on this node; the first \(tracedDevicesPerMessage) are listed") : nil
                        chat.traceRecorder.record(TraceRecorder.Row(position: position, step: "routed", devices: devices, at: chat.traceRecorder.now(),
                                                                    detail: more))
                    }
                }
                if let leaves { membershipChanged(user: leaves, conversation: conversation, position: position, joined: false) }
            case .ephemeral(let audience, let bytes):
                var frame: Frame?
                var hiding: Hiding?
                forEachRecipient(of: audience) { subscriber in
                    deliver(bytes, to: subscriber, frame: &frame, hiding: &hiding) { .ephemeral($0) }
                }
            case .blocksChanged(let user, let blocked):
                let now = Set(blocked)
                var frame: Frame?
                for subscriber in (byUser[user] ?? [:]).values {
                    subscriber.blocked = now
                    subscriber.blocksRouted = true
                    // The user's devices hear the new list, after which every frame follows it.
                    guard subscriber.attached else { continue }
                    let made = frame ?? makeFrame(RealtimeFrames.blocks(userIDs: blocked))
                    frame = made
                    subscriber.receive(.ephemeral(made))
                }
            case .channel, .channelUserTerminated, .uploadWanted:
                continue  // named channels have their own router (ParleyPusher)
            case .signedOut(let user, let only, let except):
                for subscriber in (byUser[user] ?? [:]).values {
                    let session = subscriber.caller.sessionKey
                    if only.map({ $0 == session }) ?? true, except != session { subscriber.receive(.signedOut) }
                }
            }
        }
    }

    /// Hands `bytes` to one recipient: as they are (one frame made for every recipient), or,
    /// for a device whose user blocks someone, as what ``BlockedFrames`` says, read once per
    /// publication the first time such a device is met.
    /// True when the frame went as it is (false: withheld, or a stub in its place).
    @inline(__always) @discardableResult
    private func deliver(_ bytes: [UInt8], to subscriber: Subscriber, frame: inout Frame?, hiding: inout Hiding?,
                         _ delivery: (Frame) -> Delivery) -> Bool {
        if !subscriber.blocked.isEmpty, deliverHiding(bytes, to: subscriber, hiding: &hiding, delivery) { return false }
        let made = frame ?? makeFrame(bytes)
        frame = made
        subscriber.receive(delivery(made))
        return true
    }

    /// The rare path of ``deliver(_:to:frame:hiding:_:)``: true when it delivered a stub or
    /// withheld the frame, false when the frame goes as it is.
    @inline(never)
    private func deliverHiding(_ bytes: [UInt8], to subscriber: Subscriber, hiding: inout Hiding?, _ delivery: (Frame) -> Delivery) -> Bool {
        var state = hiding ?? Hiding(reading: BlockedFrames(frame: bytes))
        defer { hiding = state }
        switch state.reading.outcome(for: subscriber.blocked) {
        case .withheld:
            return true
        case .stub(let stub):
            let made = state.stub ?? makeFrame(stub)
            state.stub = made
            subscriber.receive(delivery(made))
            return true
        case .asIs:
            return false
        }
    }

    /// One publication as read for recipients with blocks, and its stub frame once made.
    private struct Hiding {
        var reading: BlockedFrames
        var stub: Frame? = nil
    }

    private func forEachRecipient(of audience: Audience, _ body: (Subscriber) -> Void) {
        switch audience {
        case .members(let conversation):
            for subscriber in (byConversation[conversation] ?? [:]).values { body(subscriber) }
        case .membersExcept(let conversation, let user):
            for subscriber in (byConversation[conversation] ?? [:]).values where subscriber.caller.userKey != user { body(subscriber) }
        case .users(let users):
            for user in users {
                for subscriber in (byUser[user] ?? [:]).values where subscriber.attached { body(subscriber) }
            }
        }
    }

    /// Ends a device's attaching; the kept events go once no device is attaching.
    private func stopAttaching(_ subscriber: Subscriber) {
        attaching.removeValue(forKey: ObjectIdentifier(subscriber))
        if attaching.isEmpty {
            recent.removeAll(keepingCapacity: true)
            recentBase = routedEvents
        }
    }

    /// Subscribes or unsubscribes the user's attached devices; one still attaching applies the
    /// change when it replays what it held.
    private func membershipChanged(user: Int64, conversation: Int64, position: Int64, joined: Bool) {
        for subscriber in (byUser[user] ?? [:]).values where subscriber.attached {
            if joined { subscribe(subscriber, to: conversation) } else { unsubscribe(subscriber, from: conversation) }
        }
    }

    private func subscribe(_ subscriber: Subscriber, to conversation: Int64) {
        subscriber.conversations.insert(conversation)
        byConversation[conversation, default: [:]][ObjectIdentifier(subscriber)] = subscriber
    }

    private func unsubscribe(_ subscriber: Subscriber, from conversation: Int64) {
        subscriber.conversations.remove(conversation)
        byConversation[conversation]?.removeValue(forKey: ObjectIdentifier(subscriber))
        if byConversation[conversation]?.isEmpty == true { byConversation.removeValue(forKey: conversation) }
    }

    // MARK: - Presence

    /// Tells the user's contacts (on every node, through the bus) that they came online or
    /// went offline; going offline records the time as "last seen".
    private func announce(_ caller: Caller, online: Bool) {
        let chat = chat
        let bus = bus
        let directory = directory
        Task {
            do {
                // Across nodes: news only if no other node has the user (best effort, like all presence).
                if let directory {
                    let news = online ? await directory.cameOnline(caller.userKey) : await directory.wentOffline(caller.userKey)
                    guard news else { return }
                }
                let audience = try await chat.presenceAudience(user: caller.userKey)
                let lastSeen = online ? nil : try await chat.recordLastSeen(user: caller.userKey)
                guard !audience.isEmpty else { return }
                let frame = RealtimeFrames.presence(userID: caller.userID.rawValue, status: online ? .online : .offline,
                                                    lastSeenAtMilliseconds: lastSeen)
                bus.publish([.ephemeral(audience: .users(audience), frame: frame)])
            } catch {
                // Presence is best effort: a failed store read only skips this announcement.
            }
        }
    }

    private func underLock<T>(_ body: () -> T) -> T {
        lock.withLock { _ in body() }
    }
}

/// Where nodes share who is online (with several nodes, Redis: ``Fanout``'s `directory`).
/// Every call is best effort: a directory that cannot be reached answers as if this node were
/// alone (announce; nobody online elsewhere).
package protocol PresenceDirectory: Sendable {
    /// The user is online on this node now. Returns true when no other node had them online,
    /// so the change is news for their contacts.
    func cameOnline(_ user: Int64) async -> Bool
    /// The user is no longer online on this node (their grace period passed). Returns true
    /// when no other node has them online either.
    func wentOffline(_ user: Int64) async -> Bool
    /// Which of `users` other nodes have online.
    func onlineElsewhere(_ users: [Int64]) async -> Set<Int64>
}
