import Foundation
import ParleyNet
import ParleyRedis
import ParleySync

// parley-bench: load generator and benchmark runner. Each command prints one result line
// (and `--json` prints it as JSON for scripts/bench.sh). See docs/benchmarks.md.

let usage = """
    parley-bench: measure Parley against references in the same run.

    USAGE: parley-bench <command> [options]

    COMMANDS:
      echo        Round trips on one WebSocket: p50/p99 latency and round trips/s.
                    --url ws://HOST:PORT/echo/ws  --count N (20000)  --size BYTES (100)
      broadcast   One publisher, many subscribers: deliveries/s.
                    --url ws://HOST:PORT/echo/broadcast | --redis HOST:PORT
                    --clients N (1000)  --messages N (2000)  --size BYTES (64)  --window N (32)
      idle        Open N idle WebSockets and report the server's RSS growth per connection.
                    --url ws://HOST:PORT/echo/ws  --connections N (10000)  --server-pid PID
      sends       Durable message sends over HTTP keep-alive, one connection per sender.
                    --url http://HOST:PORT  --app-key KEY  --senders N (100)  --conversations N (10)
                    --duration S (10)  --receivers N (0: members of every conversation who never send)
                    --devices 1 (every sender and receiver registers an APNs device first: scripts/bench-push.sh)
      sqlite-insert  The same message rows through the sqlite3 CLI (the reference for sends).
                    --rows N (100000)  --mode autocommit|batch  --synchronous full|normal
      history     Fill one conversation in the server's database, then time latest-50 pages.
                    --url http://HOST:PORT  --app-key KEY  --db DATA_DIR/parley.sqlite
                    --messages N (1000000)  --duration S (10)
      annotations Reactions against sends on the write path, and latest-50 pages with reactions,
                  mentions and pins against plain ones, in one run.
                    --url http://HOST:PORT  --app-key KEY  --senders N (50)  --conversations N (10)
                    --duration S (5)
      signin      Sequential sign-ins: the latency the Argon2id cost gives.
                    --url http://HOST:PORT  --app-key KEY  --count N (50)
      fanout      Users in conversations, each sending at a steady rate over the realtime
                  WebSocket: accepted messages/s, deliveries/s, send-to-receive p50/p99 per rate.
                    --url http://HOST:PORT  --app-key KEY | --redis HOST:PORT (the same through pub/sub)
                    --users N (1000)  --group-size N (10)  --rates R,R,… (1000,2000,4000,8000)
                    --duration S (5)  --body-bytes N (each text padded to N bytes)
                    --receipts 1 (every receiver marks each message delivered and read)
                    --redis-durable 1 (redis: each message XADDed and each receipt SET before
                      its PUBLISH; run redis-server with --appendonly yes --appendfsync always)
                    --server-pid PID[,PID…] (report the server's CPU ms per message and its memory)
      connections Many idle authenticated realtime sockets from several source addresses; with
                  --restart-wait, the time to reconnect them all after the server restarts.
                    --url http://HOST:PORT  --app-key KEY  --connections N (20000)  --users N (1000)
                    --sources 127.0.0.2,127.0.0.3,… --offset N (0)  --restart-wait 1 | --hold 1
                    --reconnect-sources 127.0.0.6,… (default: --sources)
      channel-fanout  One channel, many subscribers: each message a sender sends (native) or the
                  backend triggers (pusher) reaches every subscriber; deliveries/s and
                  send-to-receive p50/p99 per offered rate; redis: the same through pub/sub.
                    --url URL --app-key KEY --protocol native|pusher|redis (--app-secret S
                    --pusher-app-id N for pusher; --redis HOST:PORT for redis)
                    --subscribers N (1000) --rates R,R,... (20,50,100) --duration S (5)
                    --server-pid PID (report the server's CPU ms per message and its memory)
      channel-receipts  Delivery counts in a large public channel: every member of a channel
                  of N marks one message read; receipts/s, the delivery.updated events its
                  author received, and when the author's counts showed everyone.
                    --url URL --app-key KEY --members N (10000) --parallel N (32)
      thumbnail   The server's photo path (header with pixel limits, thumbnail) on one image, in
                  process: p50/p99 per image.
                    --image PATH  --count N (20)  --size PX (512)

    OPTIONS:
      --threads N   client event loops (default: one per core)
      --json        print the result as one JSON object
      -h, --help    show this help

    Start a server first (`--enable-echo` for the networking benchmarks, `--signups-per-hour
    1000000` for the chat ones); scripts/bench.sh does it all.
    """

struct Options {
    var command = ""
    var values: [String: String] = [:]
    var json = false

    func string(_ name: String) -> String? { values[name] }

    func int(_ name: String, _ fallback: Int) throws -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text), value > 0 else { throw BenchError("--\(name) must be a positive whole number, not '\(text)'") }
        return value
    }

    static func parse(_ arguments: [String]) throws -> Options? {
        var options = Options()
        var rest = arguments[...]
        guard let command = rest.popFirst(), !["-h", "--help", "help"].contains(command) else { return nil }
        options.command = command
        while let argument = rest.popFirst() {
            if argument == "-h" || argument == "--help" { return nil }
            if argument == "--json" {
                options.json = true
                continue
            }
            guard argument.hasPrefix("--") else { throw BenchError("unexpected argument '\(argument)'") }
            guard let value = rest.popFirst() else { throw BenchError("\(argument) needs a value") }
            options.values[String(argument.dropFirst(2))] = value
        }
        return options
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func report(_ options: Options, _ fields: KeyValuePairs<String, String>) {
    if options.json {
        let object = fields.map { "\"\($0.key)\":\(Double($0.value) != nil ? $0.value : "\"\($0.value)\"")" }
        print("{" + object.joined(separator: ",") + "}")
    } else {
        print(fields.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
    }
    fflush(nil)
}

func progress(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Waits for a value set from a loop thread.
final class Completion<Value: Sendable>: Sendable {
    private let state = LockedValue<(value: Value?, waiter: CheckedContinuation<Value, Never>?)>((nil, nil))

    func complete(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: value)
    }

    func wait() async -> Value {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Value? in
                if let value = state.value { return value }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// A duration in seconds, as a Double.
func seconds(_ duration: Duration) -> Double {
    let (whole, attoseconds) = duration.components
    return Double(whole) + Double(attoseconds) / 1e18
}

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
    return Double(sorted[max(0, index)]) / 1000
}

// MARK: - echo

/// Sequential round trips driven from the loop callback itself, so the figure is the network
/// and the server, not task hops in the client.
func runEcho(_ options: Options, group: EventLoopGroup) async throws {
    guard let url = options.string("url") else { throw BenchError("echo needs --url ws://HOST:PORT/echo/ws") }
    let count = try options.int("count", 20000)
    let size = try options.int("size", 100)
    let warmup = min(1000, count / 10)
    let payload = String(repeating: "x", count: size)
    let latencies = LockedValue<[UInt64]>([])
    let done = Completion<Void>()
    let state = LockedValue((sent: 0, sentAt: UInt64(0)))
    let handler = WebSocketHandler(onMessage: { socket, _ in
        let now = monotonicNanoseconds()
        let next: Int = state.withLock { state in
            if state.sent > warmup { latencies.withLock { $0.append(now - state.sentAt) } }
            state.sent += 1
            state.sentAt = monotonicNanoseconds()
            return state.sent
        }
        if next > count + warmup { done.complete(()) } else { socket.send(text: payload) }
    })
    let socket = try await WebSocketClient.connect(to: url, on: group.loops[0], handler: handler)
    let started = ContinuousClock.now
    state.withLock { $0 = (1, monotonicNanoseconds()) }
    socket.send(text: payload)
    await done.wait()
    let elapsed = ContinuousClock.now - started
    socket.close()
    let sorted = latencies.withLock { $0.sorted() }
    report(options, ["benchmark": "echo", "round_trips": "\(sorted.count)", "size": "\(size)",
                     "round_trips_per_s": String(format: "%.0f", Double(count + warmup) / seconds(elapsed)),
                     "p50_us": String(format: "%.1f", percentile(sorted, 0.5)),
                     "p99_us": String(format: "%.1f", percentile(sorted, 0.99)),
                     "max_us": String(format: "%.1f", percentile(sorted, 1.0))])
}

// MARK: - broadcast

/// Counts deliveries at subscribers; the publisher keeps at most `window` messages ahead of
/// the average subscriber (deliveries / clients), the same rule for both targets.
final class BroadcastState: Sendable {
    private struct Counts {
        var sent = 0
        var delivered = 0
        var publisher: CheckedContinuation<Void, Never>?
    }

    let clients: Int
    let messages: Int
    let window: Int
    let finished = Completion<Void>()
    private let counts = LockedValue(Counts())

    init(clients: Int, messages: Int, window: Int) {
        self.clients = clients
        self.messages = messages
        self.window = window
    }

    private func hasRoom(_ counts: Counts) -> Bool { counts.sent - counts.delivered / clients < window }

    /// Subscribers report deliveries (several at once when they arrive together).
    func delivered(_ count: Int = 1) {
        let (total, publisher) = counts.withLock { counts -> (Int, CheckedContinuation<Void, Never>?) in
            counts.delivered += count
            guard counts.publisher != nil, hasRoom(counts) else { return (counts.delivered, nil) }
            defer { counts.publisher = nil }
            return (counts.delivered, counts.publisher)
        }
        publisher?.resume()
        if total >= clients * messages { finished.complete(()) }
    }

    /// The publisher waits until it is less than `window` messages ahead, then counts one sent.
    func waitToSend() async {
        await withCheckedContinuation { continuation in
            let ready = counts.withLock { counts -> Bool in
                if hasRoom(counts) { return true }
                counts.publisher = continuation
                return false
            }
            if ready { continuation.resume() }
        }
        counts.withLock { $0.sent += 1 }
    }
}

func runBroadcast(_ options: Options, group: EventLoopGroup) async throws {
    let clients = try options.int("clients", 1000)
    let messages = try options.int("messages", 2000)
    let size = try options.int("size", 64)
    let window = try options.int("window", 32)
    let state = BroadcastState(clients: clients, messages: messages, window: window)
    let payload = String(repeating: "m", count: size)
    let started: ContinuousClock.Instant
    if let redis = options.string("redis") {
        let parts = redis.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1]),
              let address = try SocketAddress.resolve(host: String(parts[0]), port: port).first
        else { throw BenchError("--redis must be HOST:PORT") }
        var subscribed: [RedisSubscriber] = []
        for index in 0..<clients {
            let subscriber = RedisSubscriber(state: state)
            _ = try await Connection.connect(to: address, on: group.loops[index % group.loops.count]) { subscriber }
            subscribed.append(subscriber)
        }
        for subscriber in subscribed { await subscriber.ready.wait() }
        let publisher = RedisPublisher()
        let connection = try await Connection.connect(to: address, on: group.loops[0]) { publisher }
        progress("\(clients) Redis subscribers ready; publishing \(messages) messages")
        started = ContinuousClock.now
        let command = Array("*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n$\(size)\r\n\(payload)\r\n".utf8)
        for _ in 0..<messages {
            await state.waitToSend()
            connection.executeOnLoop { $0.write(command) }
        }
        await state.finished.wait()
        _ = subscribed
    } else {
        guard let url = options.string("url") else { throw BenchError("broadcast needs --url or --redis") }
        var sockets: [WebSocket] = []
        for index in 0..<clients {
            sockets.append(try await WebSocketClient.connect(
                to: url, on: group.loops[index % group.loops.count],
                handler: WebSocketHandler(onMessage: { _, _ in state.delivered() })))
        }
        let publisher = try await WebSocketClient.connect(to: url, on: group.loops[0], handler: WebSocketHandler())
        progress("\(clients) WebSocket subscribers ready; publishing \(messages) messages")
        started = ContinuousClock.now
        for _ in 0..<messages {
            await state.waitToSend()
            publisher.send(text: payload)
        }
        await state.finished.wait()
        _ = sockets
    }
    let elapsed = seconds(ContinuousClock.now - started)
    report(options, ["benchmark": options.string("redis") == nil ? "broadcast-parley" : "broadcast-redis",
                     "clients": "\(clients)", "messages": "\(messages)", "size": "\(size)",
                     "deliveries_per_s": String(format: "%.0f", Double(clients * messages) / elapsed),
                     "seconds": String(format: "%.2f", elapsed)])
}

/// A RESP subscriber: SUBSCRIBE bench, then counts `message` pushes.
final class RedisSubscriber: ConnectionHandler, @unchecked Sendable {
    // @unchecked: `parser` is touched only on the connection's loop thread.
    let state: BroadcastState
    let ready = Completion<Void>()
    private var parser = RESPParser()
    private var subscribed = false

    init(state: BroadcastState) { self.state = state }

    func connectionActive(_ connection: Connection) {
        connection.write(Array("*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nbench\r\n".utf8))
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        parser.append(bytes)
        var messages = 0
        while let value = try? parser.next() {
            if case .array(let items?) = value, let kind = items.first?.text {
                if kind == "message" {
                    messages += 1
                } else if kind == "subscribe", !subscribed {
                    subscribed = true
                    ready.complete(())
                }
            }
        }
        if messages > 0 { state.delivered(messages) }
    }
}

/// A RESP publisher: replies (subscriber counts) are read and dropped.
final class RedisPublisher: ConnectionHandler, Sendable {
    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {}
}

// MARK: - idle

func residentKiB(pid: Int) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])
    }
    return nil
}

func runIdle(_ options: Options, group: EventLoopGroup) async throws {
    guard let url = options.string("url") else { throw BenchError("idle needs --url ws://HOST:PORT/echo/ws") }
    let connections = try options.int("connections", 10000)
    guard let pid = Int(options.string("server-pid") ?? ""), let before = residentKiB(pid: pid) else {
        throw BenchError("idle needs --server-pid of a running parley-server")
    }
    var sockets: [WebSocket] = []
    sockets.reserveCapacity(connections)
    let started = ContinuousClock.now
    // A few connects in flight at once; the accept queue absorbs the rest.
    try await withThrowingTaskGroup(of: WebSocket.self) { tasks in
        var next = 0
        func add() {
            let loop = group.loops[next % group.loops.count]
            next += 1
            tasks.addTask { try await WebSocketClient.connect(to: url, on: loop, handler: WebSocketHandler()) }
        }
        for _ in 0..<min(64, connections) { add() }
        while let socket = try await tasks.next() {
            sockets.append(socket)
            if sockets.count % 2000 == 0 { progress("\(sockets.count) connections open") }
            if next < connections { add() }
        }
    }
    let opened = ContinuousClock.now - started
    // Let the server settle, then read its RSS.
    try await Task.sleep(for: .seconds(1))
    guard let after = residentKiB(pid: pid) else { throw BenchError("cannot read the server's RSS") }
    let perConnection = Double((after - before) * 1024) / Double(connections)
    report(options, ["benchmark": "idle", "connections": "\(connections)",
                     "rss_before_kib": "\(before)", "rss_after_kib": "\(after)",
                     "bytes_per_connection": String(format: "%.0f", perConnection),
                     "open_seconds": String(format: "%.2f", seconds(opened))])
    _ = sockets  // kept open until the process exits
}

// MARK: - main

let options: Options
do {
    guard let parsed = try Options.parse(Array(CommandLine.arguments.dropFirst())) else {
        print(usage)
        exit(0)
    }
    options = parsed
} catch {
    FileHandle.standardError.write(Data("parley-bench: \(error)\nRun 'parley-bench --help' for usage.\n".utf8))
    exit(64)
}
ProcessSetup.prepare()
let group = try EventLoopGroup(loopCount: (try? options.int("threads", EventLoopGroup.coreCount)) ?? EventLoopGroup.coreCount)
do {
    switch options.command {
    case "echo": try await runEcho(options, group: group)
    case "broadcast": try await runBroadcast(options, group: group)
    case "idle": try await runIdle(options, group: group)
    case "sends": try await runSends(options, group: group)
    case "sqlite-insert": try await runSQLiteReference(options)
    case "history": try await runHistory(options, group: group)
    case "annotations": try await runAnnotations(options, group: group)
    case "signin": try await runSignIn(options)
    case "fanout": try await runFanout(options, group: group)
    case "channel-fanout": try await runChannelFanout(options, group: group)
    case "channel-receipts": try await runChannelReceipts(options, group: group)
    case "connections": try await runConnections(options, group: group)
    case "thumbnail": try await runThumbnail(options)
    default: throw BenchError("unknown command '\(options.command)'")
    }
} catch {
    FileHandle.standardError.write(Data("parley-bench: \(error)\nRun 'parley-bench --help' for usage.\n".utf8))
    group.shutdown()
    exit(1)
}
// Stop the loops before exit: exiting under running loop threads tears globals down under them.
group.shutdown()
exit(0)
