import Foundation
import ParleyNet
import ParleyRedis
import ParleyWire
import ParleySync

// Benchmarks of the realtime WebSocket (issue 4): fan-out at several rates against Redis
// pub/sub doing the same fan-out, and many idle authenticated sockets. See docs/benchmarks.md.

/// Counters shared by every connection of a fan-out run.
final class FanoutStats: Sendable {
    private struct Counts {
        var acks = 0
        var deliveries = 0
        var latencies: [UInt64] = []
        var recording = false
    }
    private let counted = LockedValue(Counts())

    func ack() { counted.withLock { if $0.recording { $0.acks += 1 } } }

    func delivered(sentAt: UInt64, now: UInt64) {
        counted.withLock { counts in
            guard counts.recording else { return }
            counts.deliveries += 1
            counts.latencies.append(now &- sentAt)
        }
    }

    func start() {
        counted.withLock { counts in
            counts = Counts(latencies: counts.latencies, recording: true)
            counts.latencies.removeAll(keepingCapacity: true)
        }
    }

    func stop() -> (acks: Int, deliveries: Int, latencies: [UInt64]) {
        counted.withLock { counts in
            counts.recording = false
            return (counts.acks, counts.deliveries, counts.latencies)
        }
    }

    var counts: (acks: Int, deliveries: Int) { counted.withLock { ($0.acks, $0.deliveries) } }
}

/// Nanoseconds on the monotonic clock (one process: senders and receivers share it).
@inline(__always) func monotonicNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// The send time a payload carries: `b<nanoseconds>` after `marker`. A plain byte scan: the
/// generic `firstRange(of:)` cost the load generator more CPU than the server it measures.
func sentAt(in text: String, after marker: [UInt8]) -> UInt64? {
    var text = text
    return text.withUTF8 { bytes -> UInt64? in
        guard let first = marker.first, bytes.count >= marker.count else { return nil }
        var at = -1
        var candidate = 0
        while candidate <= bytes.count - marker.count {
            if bytes[candidate] == first, marker.indices.allSatisfy({ bytes[candidate + $0] == marker[$0] }) {
                at = candidate
                break
            }
            candidate += 1
        }
        guard at >= 0 else { return nil }
        var index = at + marker.count
        var value: UInt64 = 0
        let start = index
        while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
            value = value &* 10 &+ UInt64(bytes[index] - 48)
            index += 1
        }
        return index > start ? value : nil
    }
}

/// The event's `seq` and `conversationId` (keys are sorted: the event's own come before its message's).
let seqMarker = Array(#""seq":"#.utf8)
let conversationMarker = Array(#""conversationId":""#.utf8)

/// Whether `text` holds `needle` (a byte scan, for the same reason as ``sentAt(in:after:)``).
func contains(_ text: String, _ needle: [UInt8]) -> Bool {
    var text = text
    return text.withUTF8 { bytes in
        guard let first = needle.first, bytes.count >= needle.count else { return false }
        for start in 0...(bytes.count - needle.count) where bytes[start] == first {
            if needle.indices.allSatisfy({ bytes[start + $0] == needle[$0] }) { return true }
        }
        return false
    }
}

/// The string value that follows `marker` up to the next quote.
func quoted(in text: String, after marker: [UInt8]) -> String? {
    var text = text
    return text.withUTF8 { bytes -> String? in
        guard let first = marker.first, bytes.count >= marker.count else { return nil }
        for start in 0...(bytes.count - marker.count) where bytes[start] == first {
            guard marker.indices.allSatisfy({ bytes[start + $0] == marker[$0] }) else { continue }
            var end = start + marker.count
            while end < bytes.count, bytes[end] != UInt8(ascii: "\"") { end += 1 }
            return String(decoding: bytes[(start + marker.count)..<end], as: UTF8.self)
        }
        return nil
    }
}

/// Whether `text` starts with `prefix`.
func hasPrefix(_ text: String, _ prefix: [UInt8]) -> Bool {
    var text = text
    return text.withUTF8 { bytes in bytes.count >= prefix.count && prefix.indices.allSatisfy { bytes[$0] == prefix[$0] } }
}

struct FanoutPlan {
    var users: Int
    var groupSize: Int
    var rates: [Int]
    var duration: Double
    /// Each message's text is padded to this many bytes (0: just the send time).
    var bodyBytes = 0
    /// Every receiver marks each message delivered and read, as an app showing it would.
    var receipts = false
    /// The server's processes (or redis-server's), whose CPU time is counted per message.
    var serverPIDs: [Int32] = []

    init(_ options: Options) throws {
        users = try options.int("users", 1000)
        groupSize = try options.int("group-size", 10)
        rates = try (options.string("rates") ?? "1000,2000,4000,8000").split(separator: ",").map {
            guard let rate = Int($0), rate > 0 else { throw BenchError("--rates is a comma-separated list of messages per second") }
            return rate
        }
        duration = Double(try options.int("duration", 5))
        guard users % groupSize == 0 else { throw BenchError("--users must be a multiple of --group-size") }
        if options.string("body-bytes") != nil { bodyBytes = try options.int("body-bytes", 0) }
        receipts = options.string("receipts") == "1"
        serverPIDs = try Self.serverPIDs(options)
    }

    /// `--server-pid PID[,PID…]`, each a running process.
    static func serverPIDs(_ options: Options) throws -> [Int32] {
        try (options.string("server-pid") ?? "").split(separator: ",").map {
            guard let pid = Int32($0), ServerProcess.cpuNanoseconds(pid) != nil else { throw BenchError("--server-pid \($0) is not a running process") }
            return pid
        }
    }

    /// A plan of `users` senders whose every message reaches `groupSize` devices.
    init(_ options: Options, users: Int, groupSize: Int) throws {
        self.users = users
        self.groupSize = groupSize
        rates = []
        duration = Double(try options.int("duration", 5))
        serverPIDs = try Self.serverPIDs(options)
    }

    func group(of user: Int) -> Int { user / groupSize }

    /// A message's text: its send time first (`b<nanoseconds>`), the sender, then padding.
    func text(sender: Int) -> String {
        let head = "b\(monotonicNanoseconds()) u\(sender) "
        return head.utf8.count >= bodyBytes ? head : head + String(repeating: "x", count: bodyBytes - head.utf8.count)
    }
}

/// What a benchmark reads of the server's processes: CPU time and memory, from /proc.
enum ServerProcess {
    /// CPU time in nanoseconds: the sum of every thread's run time from
    /// `/proc/PID/task/*/schedstat` (nanosecond resolution; `/proc/PID/stat` counts 10 ms
    /// ticks, too coarse for a few hundred messages). Nil when the process is gone.
    static func cpuNanoseconds(_ pid: Int32) -> Int? {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return nil }
        var total = 0
        for thread in threads {
            guard let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8),
                  let first = line.split(separator: " ").first, let nanoseconds = Int(first) else { continue }
            total += nanoseconds
        }
        return total
    }

    /// Resident and private (not shared with other processes: no library pages) memory, MiB.
    static func memory(_ pid: Int32) -> (resident: Double, private: Double)? {
        guard let rollup = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return nil }
        var fields: [String: Double] = [:]
        for line in rollup.split(separator: "\n") {
            let parts = line.split(whereSeparator: { $0 == " " || $0 == ":" })
            if parts.count >= 2, let kib = Double(parts[1]) { fields[String(parts[0])] = kib / 1024 }
        }
        guard let rss = fields["Rss"] else { return nil }
        return (rss, (fields["Private_Clean"] ?? 0) + (fields["Private_Dirty"] ?? 0))
    }

}

/// Sends `rate` messages per second spread over every user for `duration`, then waits for the
/// deliveries to settle; reports one line per rate.
func driveRates(_ plan: FanoutPlan, stats: FanoutStats, options: Options, benchmark: String,
                send: @escaping @Sendable (_ user: Int, _ sequence: Int) -> Void) async throws {
    var sequence = 0
    for rate in plan.rates {
        stats.start()
        let started = monotonicNanoseconds()
        let end = started + UInt64(plan.duration * 1e9)
        var sent = 0
        var user = 0
        let cpuBefore = plan.serverPIDs.compactMap(ServerProcess.cpuNanoseconds).reduce(0, +)
        while true {
            let now = monotonicNanoseconds()
            if now >= end { break }
            let due = Int(Double(now - started) / 1e9 * Double(rate))
            while sent < due {
                send(user, sequence)
                sent += 1
                sequence += 1
                user = (user + 1) % plan.users
            }
            try await Task.sleep(for: .milliseconds(2))
        }
        // Deliveries of the last sends still in flight: wait until they stop coming (or 5 s).
        var last = stats.counts.deliveries
        for _ in 0..<50 {
            try await Task.sleep(for: .milliseconds(100))
            let now = stats.counts.deliveries
            if now == last, now >= sent * plan.groupSize { break }
            last = now
        }
        let (acks, deliveries, latencies) = stats.stop()
        let sorted = latencies.sorted()
        // The server's CPU for everything the window's messages caused (their deliveries and
        // receipts included: the count stops once deliveries have settled), per message sent.
        let cpuMilliseconds = Double(plan.serverPIDs.compactMap(ServerProcess.cpuNanoseconds).reduce(0, +) - cpuBefore) / 1e6
        let memory = plan.serverPIDs.compactMap(ServerProcess.memory).reduce((0.0, 0.0)) { ($0.0 + $1.resident, $0.1 + $1.private) }
        report(options, ["benchmark": benchmark, "offered_per_s": "\(rate)", "sent": "\(sent)",
                         "accepted_per_s": String(format: "%.0f", Double(acks) / plan.duration),
                         "deliveries_per_s": String(format: "%.0f", Double(deliveries) / plan.duration),
                         "expected_deliveries": "\(sent * plan.groupSize)", "deliveries": "\(deliveries)",
                         "p50_ms": String(format: "%.2f", percentile(sorted, 0.50) / 1000),
                         "p99_ms": String(format: "%.2f", percentile(sorted, 0.99) / 1000),
                         "server_cpu_ms_per_message": plan.serverPIDs.isEmpty ? "0" : String(format: "%.3f", cpuMilliseconds / Double(max(sent, 1))),
                         "server_rss_mib": String(format: "%.1f", memory.0), "server_private_mib": String(format: "%.1f", memory.1)])
    }
}

// MARK: - Parley

/// Signs in `count` users named `prefix0…`, `parallel` at a time.
func signInUsers(_ setup: SetupClient, prefix: String, count: Int, parallel: Int = 16) async throws -> [SetupClient] {
    var clients = [SetupClient?](repeating: nil, count: count)
    try await withThrowingTaskGroup(of: (Int, SetupClient).self) { tasks in
        var next = 0
        func add() {
            let index = next
            next += 1
            tasks.addTask { (index, try await setup.signedIn("\(prefix)\(index)")) }
        }
        for _ in 0..<min(parallel, count) { add() }
        while let (index, client) = try await tasks.next() {
            clients[index] = client
            if (index + 1) % 500 == 0 { progress("\(index + 1) users signed in") }
            if next < count { add() }
        }
    }
    return clients.compactMap { $0 }
}

/// Connects and authenticates a realtime socket; `onText` sees every frame after `ready`.
func connectDevice(url: String, appKey: String, token: String, from source: SocketAddress? = nil, on loop: EventLoop,
                   onClose: @escaping @Sendable () -> Void = {}, onText: @escaping @Sendable (String) -> Void) async throws -> WebSocket {
    let ready = Completion<Void>()
    let isReady = LockedValue(false)
    // `ready` by its first key (sorted): `cursor` since cursors, `epoch` since epochs,
    // `heartbeatSeconds` before.
    let readyPrefixes = [Array(#"{"cursor":"#.utf8), Array(#"{"epoch":"#.utf8), Array(#"{"heartbeatSeconds":"#.utf8)]
    let handler = WebSocketHandler(
        onMessage: { _, message in
            guard case .text(let text) = message else { return }
            if isReady.withLock({ $0 }) {
                onText(text)
            } else if readyPrefixes.contains(where: { hasPrefix(text, $0) }), text.contains(#""type":"ready""#) {
                isReady.withLock { $0 = true }
                ready.complete(())
            }
        },
        onClose: { _, _, _ in
            ready.complete(())  // unblocks a connect that never got ready
            onClose()
        })
    let socket = try await WebSocketClient.connect(to: url, headers: HTTPHeaders([("X-Parley-App-Key", appKey)]),
                                                   from: source, on: loop, handler: handler)
    socket.send(text: #"{"type":"auth","token":"\#(token)"}"#)
    await ready.wait()
    guard isReady.withLock({ $0 }) else { throw BenchError("the server closed the socket before it was ready") }
    return socket
}

func runFanout(_ options: Options, group: EventLoopGroup) async throws {
    let plan = try FanoutPlan(options)
    if let redis = options.string("redis") { return try await runFanoutRedis(options, plan: plan, redis: redis, group: group) }
    guard let urls = options.string("url")?.split(separator: ",").map(String.init), let base = urls.first,
          let appKey = options.string("app-key") else {
        throw BenchError("fanout needs --url http://HOST:PORT[,http://HOST:PORT…] and --app-key KEY (or --redis HOST:PORT)")
    }
    let setup = SetupClient(base: base, appKey: appKey)
    let clients = try await signInUsers(setup, prefix: "fan", count: plan.users)
    var conversations: [String] = []
    for start in stride(from: 0, to: plan.users, by: plan.groupSize) {
        let members = (start + 1..<start + plan.groupSize).map { "fan\($0)" }
        let conversation = try await clients[start].call("POST", "/v1/conversations",
                                                          body: CreateConversationRequest(kind: .group, members: members, title: "fan \(start)"),
                                                          as: Conversation.self)
        conversations.append(conversation.id.rawValue)
    }
    progress("\(plan.users) users in \(conversations.count) conversations of \(plan.groupSize)")
    let stats = FanoutStats()
    let marker = Array(#""text":"b"#.utf8)
    let eventPrefix = Array(#"{"event":{"#.utf8)
    let ackPrefix = Array(#"{"id":"#.utf8)
    let receiptAckPrefix = Array(#"{"id":"r"#.utf8)
    // With several nodes, devices are dealt over them: a group's members sit on different
    // nodes, so most deliveries cross from the sender's node to another through the bus.
    let socketURLs = urls.map { $0.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime" }
    var sockets: [WebSocket] = []
    let byUser = LockedValue([Int: WebSocket]())
    for (index, client) in clients.enumerated() {
        let me = Array(" u\(index) ".utf8)
        let socket = try await connectDevice(url: socketURLs[index % socketURLs.count], appKey: appKey, token: client.token ?? "", on: group.loops[index % group.loops.count]) { text in
            if hasPrefix(text, eventPrefix) {
                guard let sent = sentAt(in: text, after: marker) else { return }
                stats.delivered(sentAt: sent, now: monotonicNanoseconds())
                // An app showing the message marks it delivered, then read (not its own).
                if plan.receipts, !contains(text, me), let seq = sentAt(in: text, after: seqMarker),
                   let conversation = quoted(in: text, after: conversationMarker), let socket = byUser.withLock({ $0[index] }) {
                    socket.send(text: #"{"type":"receipt.delivered","id":"rd\#(seq)","conversationId":"\#(conversation)","seq":\#(seq)}"#)
                    socket.send(text: #"{"type":"receipt.read","id":"rr\#(seq)","conversationId":"\#(conversation)","seq":\#(seq)}"#)
                }
            } else if hasPrefix(text, ackPrefix), !hasPrefix(text, receiptAckPrefix) {
                stats.ack()  // {"id":…,"result":…,"type":"ack"}; errors start with {"error"
            }
        }
        byUser.withLock { $0[index] = socket }
        sockets.append(socket)
    }
    progress("\(sockets.count) devices connected; offering \(plan.rates.map(String.init).joined(separator: ", ")) messages/s")
    let targets = sockets
    let rooms = conversations
    try await driveRates(plan, stats: stats, options: options, benchmark: "fanout-parley") { user, sequence in
        let frame = #"{"type":"message.send","id":"\#(sequence)","conversationId":"\#(rooms[plan.group(of: user)])","message":{"clientId":"f\#(sequence)-\#(UInt32.random(in: 0...UInt32.max))","content":{"type":"text","text":"\#(plan.text(sender: user))"}}}"#
        targets[user].send(text: frame)
    }
}

// MARK: - Redis: the same fan-out through pub/sub, nothing stored

/// A subscriber to one channel that records each message's latency.
final class RedisFanoutSubscriber: ConnectionHandler, @unchecked Sendable {
    // @unchecked: `parser` and `subscribed` are touched only by the connection's loop thread (its handler callbacks).
    let channel: String
    let stats: FanoutStats
    let ready = Completion<Void>()
    /// Called with each message payload that is not a receipt (a message someone sent).
    let onMessage: @Sendable (String) -> Void
    private var parser = RESPParser()
    private var subscribed = false

    init(channel: String, stats: FanoutStats, onMessage: @escaping @Sendable (String) -> Void = { _ in }) {
        self.channel = channel
        self.stats = stats
        self.onMessage = onMessage
    }

    func connectionActive(_ connection: Connection) {
        connection.write(Array("*2\r\n$9\r\nSUBSCRIBE\r\n$\(channel.utf8.count)\r\n\(channel)\r\n".utf8))
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        parser.append(bytes)
        while let value = try? parser.next() {
            guard case .array(let items?) = value, let kind = items.first?.text else { continue }
            if kind == "message", let payload = items.last?.text, payload.hasPrefix("b"),
               let sent = UInt64(payload.dropFirst().prefix(while: \.isNumber)) {
                stats.delivered(sentAt: sent, now: monotonicNanoseconds())
                onMessage(payload)
            } else if kind == "subscribe", !subscribed {
                subscribed = true
                ready.complete(())
            }
        }
    }
}

/// A publisher that counts the integer replies (the server accepted the PUBLISH).
final class RedisFanoutPublisher: ConnectionHandler, @unchecked Sendable {
    // @unchecked: `parser` is touched only by the connection's loop thread (its handler callbacks).
    let stats: FanoutStats
    private var parser = RESPParser()
    init(stats: FanoutStats) { self.stats = stats }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        parser.append(bytes)
        while let value = try? parser.next() {
            if case .integer = value { stats.ack() }
        }
    }
}

func runFanoutRedis(_ options: Options, plan: FanoutPlan, redis: String, group: EventLoopGroup) async throws {
    let parts = redis.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]), let address = try SocketAddress.resolve(host: String(parts[0]), port: port).first
    else { throw BenchError("--redis must be HOST:PORT") }
    let stats = FanoutStats()
    // --redis-durable 1: each message is also appended to the room's stream (XADD) and each
    // receipt stored (SET) before its PUBLISH, in one pipeline; with redis-server's
    // `--appendonly yes --appendfsync always` those writes are fsynced before any reply or
    // published message leaves the server, as Parley's are before its ack and deliveries.
    let durable = try options.int("redis-durable", 0) == 1
    var subscribers: [RedisFanoutSubscriber] = []
    var publishers: [Connection] = []
    for user in 0..<plan.users {
        let loop = group.loops[user % group.loops.count]
        let publisher = RedisFanoutPublisher(stats: stats)
        let publishing = try await Connection.connect(to: address, on: loop) { publisher }
        publishers.append(publishing)
        let channel = "g\(plan.group(of: user))"
        let me = " u\(user) "
        // With receipts, a receiver publishes a delivered and a read mark for each message of
        // another's, to the room, as Parley's members' devices send theirs.
        let subscriber = RedisFanoutSubscriber(channel: channel, stats: stats) { payload in
            guard plan.receipts, !payload.contains(me) else { return }
            var command: [UInt8] = []
            for mark in ["d", "r"] {
                let receipt = mark + payload.prefix(24)
                if durable { command += redisCommand(["SET", "rc:\(channel):u\(user):\(mark)", String(receipt)]) }
                command += redisCommand(["PUBLISH", channel, String(receipt)])
            }
            let bytes = command
            publishing.executeOnLoop { $0.write(bytes) }
        }
        _ = try await Connection.connect(to: address, on: loop) { subscriber }
        subscribers.append(subscriber)
    }
    for subscriber in subscribers { await subscriber.ready.wait() }
    progress("\(plan.users) Redis subscribers and publishers ready")
    let targets = publishers
    try await driveRates(plan, stats: stats, options: options, benchmark: "fanout-redis") { user, _ in
        let channel = "g\(plan.group(of: user))"
        let payload = plan.text(sender: user)
        var command: [UInt8] = []
        if durable { command += redisCommand(["XADD", "h\(channel)", "MAXLEN", "~", "10000", "*", "b", payload]) }
        command += redisCommand(["PUBLISH", channel, payload])
        let bytes = command
        targets[user].executeOnLoop { $0.write(bytes) }
    }
    _ = subscribers
}

/// One command in RESP's array-of-bulk-strings form.
func redisCommand(_ parts: [String]) -> [UInt8] {
    var text = "*\(parts.count)\r\n"
    for part in parts { text += "$\(part.utf8.count)\r\n\(part)\r\n" }
    return Array(text.utf8)
}

// MARK: - Many idle authenticated sockets

/// Opens N authenticated realtime sockets from several loopback source addresses, reports the
/// server's RSS per socket, then (with `--restart-wait`) waits for the server to be restarted
/// and reports how long until every socket was reconnected and authenticated again.
func runConnections(_ options: Options, group: EventLoopGroup) async throws {
    guard let base = options.string("url"), let appKey = options.string("app-key") else {
        throw BenchError("connections needs --url http://HOST:PORT and --app-key KEY")
    }
    let count = try options.int("connections", 20_000)
    let userCount = try options.int("users", 1_000)
    let sources = try (options.string("sources") ?? "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5").split(separator: ",").map { host in
        guard let address = try SocketAddress.resolve(host: String(host), port: 0).first else { throw BenchError("bad source \(host)") }
        return address
    }
    let offset = try options.int("offset", 0)
    // Reconnects from other addresses than the first connections: the server closed those
    // first (RFC 6455 §7.1.1), so their 4-tuples sit in TIME_WAIT on its side, and a new SYN
    // that reuses one is answered late. Real clients come from many addresses.
    let reconnectSources = try (options.string("reconnect-sources") ?? "").split(separator: ",").map { host in
        guard let address = try SocketAddress.resolve(host: String(host), port: 0).first else { throw BenchError("bad source \(host)") }
        return address
    }
    let setup = SetupClient(base: base, appKey: appKey)
    let users = try await signInUsers(setup, prefix: "idle", count: userCount)
    let url = base.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime"
    let closed = LockedValue(0)
    /// Connects device `index` (its source address and token by index), 128 at a time.
    func connectAll(from sources: [SocketAddress],
                    _ body: @escaping @Sendable (_ index: Int, _ source: SocketAddress, _ token: String, _ loop: EventLoop) async throws -> WebSocket)
        async throws -> [WebSocket] {
        var sockets: [WebSocket] = []
        sockets.reserveCapacity(count)
        try await withThrowingTaskGroup(of: WebSocket.self) { tasks in
            var next = 0
            func add() {
                let index = next
                next += 1
                let (source, token) = (sources[(index + offset) % sources.count], users[(index + offset) % users.count].token ?? "")
                let loop = group.loops[index % group.loops.count]
                tasks.addTask { try await body(index, source, token, loop) }
            }
            for _ in 0..<min(128, count) { add() }
            while let socket = try await tasks.next() {
                sockets.append(socket)
                if sockets.count % 2000 == 0 { progress("\(sockets.count) authenticated sockets open") }
                if next < count { add() }
            }
        }
        return sockets
    }
    let started = ContinuousClock.now
    let sockets = try await connectAll(from: sources) { _, source, token, loop in
        try await connectDevice(url: url, appKey: appKey, token: token, from: source, on: loop,
                                onClose: { closed.withLock { $0 += 1 } }, onText: { _ in })
    }
    report(options, ["benchmark": "connections-open", "connections": "\(count)",
                     "open_seconds": String(format: "%.2f", seconds(ContinuousClock.now - started))])
    guard options.string("restart-wait") != nil else {
        if options.string("hold") != nil { try await Task.sleep(for: .seconds(3600)) }
        return
    }
    // The script restarts the server now; every socket reconnects (with jittered backoff, as
    // the SDK does) and authenticates again.
    progress("holding \(count) sockets; waiting for the server to restart")
    while closed.withLock({ $0 }) < count { try await Task.sleep(for: .milliseconds(20)) }
    let restarted = ContinuousClock.now
    progress("all \(count) sockets closed by the restart; reconnecting")
    let failures = LockedValue(0)
    let firstBack = LockedValue<ContinuousClock.Instant?>(nil)
    let again = try await connectAll(from: reconnectSources.isEmpty ? sources : reconnectSources) { _, source, token, loop in
        var delay = 0.05
        while true {
            do {
                let socket = try await connectDevice(url: url, appKey: appKey, token: token, from: source, on: loop, onText: { _ in })
                firstBack.withLock { $0 = $0 ?? ContinuousClock.now }
                return socket
            } catch {
                if failures.withLock({ $0 += 1; return $0 }) <= 3 { progress("reconnect failed: \(error); retrying") }
                try await Task.sleep(for: .milliseconds(Int(delay * 1000 * Double.random(in: 0.5...1.5))))
                delay = min(delay * 2, 2)
            }
        }
    }
    report(options, ["benchmark": "connections-reconnect", "connections": "\(again.count)",
                     "failed_attempts": "\(failures.withLock { $0 })",
                     "reconnect_seconds": String(format: "%.2f", seconds(ContinuousClock.now - restarted)),
                     "after_first_seconds": String(format: "%.2f", seconds(ContinuousClock.now - (firstBack.withLock { $0 } ?? restarted)))])
    _ = sockets
}
