import Foundation
package import ParleyChat
import ParleyWire
import ParleyCrypto
import ParleySync

/// The bus between nodes: every node publishes each committed write to one Redis Pub/Sub
/// channel and hands what it receives to its own ``Fanout`` and Pusher hub, in position order.
///
/// Redis is not the truth (docs/decisions/0018-positions-across-nodes.md). Each write's
/// publication carries its ``EventLink``, the span of positions it covers after the newest
/// committed before it; consecutive writes chain. A node delivers a write when its link
/// starts where the node's delivered head is; a write that starts further on waits, and if the
/// missing span has not arrived within the gap timeout (a node died between commit and publish,
/// Redis dropped the message or restarted) the node reads it from the database and delivers
/// it from there. A node that hears nothing polls the committed position, so a lost last
/// message is found too. In a log of several shards (decision 0026, part 4) each shard is its
/// own chain with its own head, and a write to several shards is one message per shard. Losing Redis therefore only delays delivery; nothing acknowledged is
/// lost and nothing is delivered twice (a write already delivered is recognised by its link).
///
/// A node's own writes are delivered locally at once (not through Redis), so its devices do
/// not wait for Redis and keep working when Redis is down.
package final class RedisBus: Bus, @unchecked Sendable {
    // @unchecked: the ordering state lives on `queue`; the rest is behind locks.

    /// Timers and limits.
    package struct Configuration: Sendable {
        /// How long a gap may stay open before it is read from the database. Default: 200 ms.
        package var gapTimeout: Duration = .milliseconds(200)
        /// How often an idle node compares its head with the database's. Default: 1 s.
        package var pollInterval: Duration = .seconds(1)
        /// How long to wait for Redis to accept a connection or answer. Default: 2 s.
        package var timeout: Duration = .seconds(2)
        /// Most events read from the database per repair. Default: 1,000.
        package var repairBatch = 1_000
        /// Most messages waiting to be published; older ones are dropped (and repaired by the
        /// receivers). Default: 100,000.
        package var maxOutgoing = 100_000
        /// The defaults.
        package init() {}
    }

    /// What the bus has done, for `/metrics`.
    package struct Statistics: Sendable {
        /// Messages published to Redis.
        package var published = 0
        /// Messages that could not be published (Redis down); the other nodes repair them.
        package var droppedPublishes = 0
        /// Messages received from other nodes.
        package var received = 0
        /// Messages that could not be decoded.
        package var undecodable = 0
        /// Messages from a node of another log (another database, or a log of another number
        /// of shards) on the same channel: decoded, and not delivered.
        package var foreign = 0
        /// Gaps filled from the database.
        package var repairs = 0
        /// Events delivered from the database rather than from Redis.
        package var repairedEvents = 0
        /// Writes received twice (already delivered) and dropped.
        package var duplicates = 0
        /// True while the subscription is up.
        package var subscribed = false
        /// The newest position delivered on this node (of any shard).
        package var head: Int64 = 0
    }

    /// This node's id in messages (its own are not delivered twice).
    package let node: String
    /// Where Redis is.
    package let url: RedisURL
    private let configuration: Configuration
    private let statistics = LockedValue(Statistics())
    private let receivers = LockedValue<[@Sendable ([Publication]) -> Void]>([])
    private let stopped = LockedValue(false)

    // On `queue` only:
    private let queue = DispatchQueue(label: "parley.redis-bus")
    private var source: (any BusSource)?
    /// Per shard: the newest position delivered (empty before ``start(source:channel:)``),
    /// writes waiting for a gap before them (by their `previous`), whether a repair is running
    /// or a gap check due, and since when the head has been behind the database.
    private var heads: [Int64] = []
    private var pending: [[Int64: (link: EventLink, publications: [Publication])]] = []
    private var repairing: Set<Int> = []
    private var gapCheckScheduled: Set<Int> = []
    private var behind: [(target: Int64, since: ContinuousClock.Instant)?] = []
    private var poller: (any DispatchSourceTimer)?

    // The publisher's queue.
    private let outgoing = NSCondition()
    private var outgoingMessages: [[UInt8]] = []
    private var channel: [UInt8] = []
    private var subscriber: RedisConnection?
    private let threadsRunning = LockedValue(0)

    /// Checks that Redis answers at `url`; nothing is published or received until ``start(source:channel:)``.
    ///
    /// - Throws: ``RedisError`` when Redis cannot be reached or refuses the password.
    package init(url: RedisURL, configuration: Configuration = Configuration()) throws(RedisError) {
        self.url = url
        self.configuration = configuration
        node = Crypto.randomID(prefix: "n_", length: 16)
        let probe = try RedisConnection(url, timeout: configuration.timeout)
        guard try probe.command("PING").text == "PONG" else { throw .protocolError("PING was not answered with PONG") }
        probe.close()
    }

    package var linksEvents: Bool { true }

    package func subscribe(_ receiver: @escaping @Sendable ([Publication]) -> Void) {
        receivers.withLock { $0.append(receiver) }
    }

    package func publish(_ publications: [Publication]) {
        publish(publications, links: [])
    }

    package func publish(_ publications: [Publication], links: [EventLink]) {
        guard !publications.isEmpty else { return }
        let parts = EventLink.parts(of: publications, links: links)
        queue.async { for part in parts { self.accept(part.link, part.publications) } }
        let messages = parts.map { BusCodec.encode(BusCodec.Message(node: node, link: $0.link, publications: $0.publications)) }
        outgoing.withLock {
            outgoingMessages += messages
            if outgoingMessages.count > configuration.maxOutgoing {
                let dropped = outgoingMessages.count - configuration.maxOutgoing
                outgoingMessages.removeFirst(dropped)
                statistics.withLock { $0.droppedPublishes += dropped }
            }
            outgoing.signal()
        }
    }

    /// Starts ordering, publishing and receiving on `channel` (every node of one database must
    /// use the same: the server names it after the database's epoch). Each shard's head starts
    /// at the database's committed position of that shard.
    ///
    /// - Throws: the store's error when the committed positions cannot be read.
    package func start(source: any BusSource, channel: String) async throws {
        let start = try await source.committedCursor()
        self.channel = Array(channel.utf8)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.source = source
                self.heads = start.positions
                self.pending = Array(repeating: [:], count: start.shards)
                self.behind = Array(repeating: nil, count: start.shards)
                self.statistics.withLock { $0.head = start.newest }
                let interval = self.configuration.pollInterval
                self.poller = self.queue.repeating(every: interval, after: interval) { [weak self] in self?.poll() }
                continuation.resume()
            }
        }
        spawn("redis-publisher") { [weak self] in self?.publishLoop() }
        spawn("redis-subscriber") { [weak self] in self?.subscribeLoop() }
    }

    /// Stops the threads and the poll. Publications after this are delivered locally only.
    package func stop() {
        stopped.withLock { $0 = true }
        outgoing.withLock { outgoing.broadcast() }
        queue.sync {
            poller?.cancel()
            poller = nil
        }
        outgoing.withLock { subscriber?.close() }
    }

    /// A snapshot of the counters.
    package var currentStatistics: Statistics { statistics.withLock { $0 } }

    // MARK: - Ordering (on `queue`)

    private func accept(_ link: EventLink?, _ publications: [Publication]) {
        guard let link, !heads.isEmpty else { return deliver(publications) }
        guard heads.indices.contains(link.shard), link.shards == heads.count else {
            // A link of another shape of log than the one this node read at start: not ours to
            // order (a node of another database on the same channel); deliver nothing of it.
            statistics.withLock { $0.foreign += 1 }
            return
        }
        let shard = link.shard
        if link.last <= heads[shard] {
            statistics.withLock { $0.duplicates += 1 }
            return
        }
        if link.previous <= heads[shard] {
            deliver(after: heads[shard], publications)
            advance(shard, to: link.last)
            drain(shard)
            return
        }
        pending[shard][link.previous] = (link, publications)
        scheduleGapCheck(shard)
    }

    /// Delivers the waiting writes of a shard that now follow on.
    private func drain(_ shard: Int) {
        while !pending[shard].isEmpty {
            if let next = pending[shard].removeValue(forKey: heads[shard]) {
                deliver(next.publications)
                advance(shard, to: next.link.last)
                continue
            }
            let head = heads[shard]
            let stale = pending[shard].filter { $0.value.link.last <= head }.map(\.key)
            for key in stale { pending[shard].removeValue(forKey: key) }
            statistics.withLock { $0.duplicates += stale.count }
            guard let overlapping = pending[shard].first(where: { $0.key < head }) else { break }
            pending[shard].removeValue(forKey: overlapping.key)
            deliver(after: head, overlapping.value.publications)
            advance(shard, to: overlapping.value.link.last)
        }
    }

    private func advance(_ shard: Int, to position: Int64) {
        guard position > heads[shard] else { return }
        heads[shard] = position
        statistics.withLock { $0.head = max($0.head, position) }
    }

    private func scheduleGapCheck(_ shard: Int) {
        guard !gapCheckScheduled.contains(shard) else { return }
        gapCheckScheduled.insert(shard)
        queue.asyncAfter(deadline: .now() + configuration.gapTimeout.dispatchInterval) { [weak self] in
            guard let self else { return }
            gapCheckScheduled.remove(shard)
            guard let lowest = pending[shard].keys.min(), lowest > heads[shard] else { return }
            repair(shard, upTo: lowest)
        }
    }

    /// An idle node's check: a shard's head still behind what the database had committed one
    /// poll ago means a message was lost.
    private func poll() {
        guard let source else { return }
        Task {
            guard let committed = try? await source.committedCursor() else { return }
            queue.async { [self] in
                guard committed.shards == heads.count else { return }
                for shard in heads.indices where !repairing.contains(shard) {
                    let head = heads[shard]
                    if let since = behind[shard], head < since.target, ContinuousClock.now - since.since >= configuration.gapTimeout {
                        behind[shard] = nil
                        repair(shard, upTo: since.target)
                    } else if committed[shard] > head {
                        if behind[shard] == nil || head >= (behind[shard]?.target ?? 0) { behind[shard] = (committed[shard], ContinuousClock.now) }
                    } else {
                        behind[shard] = nil
                    }
                }
            }
        }
    }

    /// Reads the events of a shard after its head up to `upTo` from the database and delivers them.
    private func repair(_ shard: Int, upTo: Int64) {
        guard let source, !repairing.contains(shard), upTo > heads[shard] else { return }
        repairing.insert(shard)
        let from = heads[shard]
        let limit = configuration.repairBatch
        Task {
            let result = try? await source.publications(shard: shard, after: from, upTo: upTo, limit: limit)
            queue.async { [self] in
                repairing.remove(shard)
                guard let result else {
                    scheduleGapCheck(shard)  // the database is down too: try again shortly
                    return
                }
                let head = heads[shard]
                let fresh = result.publications.filter { $0.position.map { $0 > head } ?? false }
                deliver(fresh)
                statistics.withLock {
                    $0.repairs += 1
                    $0.repairedEvents += fresh.count
                }
                advance(shard, to: result.through)
                drain(shard)
                if heads[shard] < upTo || (pending[shard].keys.min().map { $0 > heads[shard] } ?? false) {
                    repair(shard, upTo: max(upTo, pending[shard].keys.min() ?? upTo))
                }
            }
        }
    }

    private func deliver(after position: Int64, _ publications: [Publication]) {
        deliver(publications.filter { $0.position.map { $0 > position } ?? true })
    }

    private func deliver(_ publications: [Publication]) {
        guard !publications.isEmpty else { return }
        for receiver in receivers.withLock({ $0 }) { receiver(publications) }
    }

    // MARK: - Threads

    private func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        threadsRunning.withLock { $0 += 1 }
        let thread = Thread { [threadsRunning] in
            body()
            threadsRunning.withLock { $0 -= 1 }
        }
        thread.name = name
        thread.start()
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    /// Sends what is queued, pipelined; on a failure the batch is dropped (receivers repair it)
    /// and the connection is made again with a growing pause.
    private func publishLoop() {
        var connection: RedisConnection?
        var pause = Duration.milliseconds(50)
        while !isStopped {
            let batch: [[UInt8]] = outgoing.withLock {
                while outgoingMessages.isEmpty && !isStopped { outgoing.wait() }
                defer { outgoingMessages.removeAll(keepingCapacity: true) }
                return outgoingMessages
            }
            guard !batch.isEmpty else { continue }
            do {
                let live = try connection ?? RedisConnection(url, timeout: configuration.timeout)
                connection = live
                var bytes: [UInt8] = []
                for message in batch { bytes += RESPCommand.encode([Array("PUBLISH".utf8), channel, message]) }
                try live.write(bytes)
                for _ in batch {
                    if case .error(let message) = try live.read() { throw RedisError.server(message) }
                }
                statistics.withLock { $0.published += batch.count }
                pause = .milliseconds(50)
            } catch {
                connection?.close()
                connection = nil
                statistics.withLock { $0.droppedPublishes += batch.count }
                Thread.sleep(forTimeInterval: pause.inSeconds)
                pause = min(pause * 2, .seconds(1))
            }
        }
        connection?.close()
    }

    /// Subscribes, hands each message to the orderer, and subscribes again after a failure.
    /// Every (re)subscription is followed by a check against the database, since messages
    /// published while it was down are gone.
    private func subscribeLoop() {
        var pause = Duration.milliseconds(50)
        while !isStopped {
            do {
                let connection = try RedisConnection(url, timeout: configuration.timeout)
                let keep = outgoing.withLock { () -> Bool in
                    guard !isStopped else { return false }
                    subscriber = connection
                    return true
                }
                guard keep else { connection.close(); break }
                try connection.write(RESPCommand.encode([Array("SUBSCRIBE".utf8), channel]))
                connection.setReadTimeout(.seconds(1))
                var lastHeard = ContinuousClock.now
                var pinged = false
                while !isStopped {
                    let value: RESPValue
                    switch Result(catching: { () throws(RedisError) -> RESPValue in try connection.read() }) {
                    case .success(let read): value = read
                    case .failure(.timeout):
                        // Quiet: ask Redis for a sign of life; no answer within the timeout is a dead link.
                        guard ContinuousClock.now - lastHeard <= configuration.timeout * 2 else { throw RedisError.timeout }
                        if !pinged {
                            try connection.write(RESPCommand.encode("PING"))
                            pinged = true
                        }
                        continue
                    case .failure(let error): throw error
                    }
                    lastHeard = ContinuousClock.now
                    pinged = false
                    handle(value)
                    pause = .milliseconds(50)
                }
            } catch {
                statistics.withLock { $0.subscribed = false }
            }
            outgoing.withLock { subscriber = nil }
            guard !isStopped else { break }
            Thread.sleep(forTimeInterval: pause.inSeconds)
            pause = min(pause * 2, .seconds(1))
        }
        statistics.withLock { $0.subscribed = false }
    }

    private func handle(_ value: RESPValue) {
        guard case .array(let parts?) = value, let kind = parts.first?.text else { return }
        switch kind {
        case "subscribe":
            statistics.withLock { $0.subscribed = true }
            // Whatever was published while this node was not subscribed is gone from Redis
            // and only in the database: read up to what is committed now.
            guard let source = queue.sync(execute: { self.source }) else { return }
            Task {
                guard let committed = try? await source.committedCursor() else { return }
                queue.async { [self] in
                    guard committed.shards == heads.count else { return }
                    for shard in heads.indices {
                        behind[shard] = nil
                        repair(shard, upTo: committed[shard])
                    }
                }
            }
        case "message":
            guard parts.count == 3, let payload = parts[2].bytes else { return }
            do {
                let message = try BusCodec.decode(payload)
                guard message.node != node else { return }
                statistics.withLock { $0.received += 1 }
                queue.async { self.accept(message.link, message.publications) }
            } catch {
                statistics.withLock { $0.undecodable += 1 }
            }
        default:
            break  // pong
        }
    }
}
