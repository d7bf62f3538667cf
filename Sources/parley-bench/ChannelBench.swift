import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ParleyCrypto
import ParleyNet
import ParleyWire
import ParleySync

// One channel, many subscribers (issue 15): the same fan-out through Parley's own protocol (a
// public channel whose members' devices receive each message) and through the Pusher protocol
// (sockets subscribed to a channel, each event triggered by the backend's signed HTTP call).
// Both store every message or event before delivering it. See docs/benchmarks.md.

func runChannelFanout(_ options: Options, group: EventLoopGroup) async throws {
    let protocolName = options.string("protocol") ?? "native"
    let base = options.string("url") ?? "", appKey = options.string("app-key") ?? ""
    guard protocolName == "redis" || (!base.isEmpty && !appKey.isEmpty) else {
        throw BenchError("channel-fanout needs --url http://HOST:PORT and --app-key KEY (or --protocol redis --redis HOST:PORT)")
    }
    let subscribers = try options.int("subscribers", 1000)
    var plan = try FanoutPlan(options, users: 1, groupSize: subscribers)
    plan.rates = try (options.string("rates") ?? "20,50,100").split(separator: ",").map {
        guard let rate = Int($0), rate > 0 else { throw BenchError("--rates is a comma-separated list of messages per second") }
        return rate
    }
    let stats = FanoutStats()
    let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    switch protocolName {
    case "native":
        try await nativeChannel(options, plan: plan, base: base, appKey: appKey, run: run, stats: stats, group: group)
    case "redis":
        guard let redis = options.string("redis") else { throw BenchError("--protocol redis needs --redis HOST:PORT") }
        try await redisChannel(options, plan: plan, redis: redis, stats: stats, group: group)
    case "pusher":
        guard let secret = options.string("app-secret"), let pusherID = options.string("pusher-app-id") else {
            throw BenchError("--protocol pusher needs --app-secret and --pusher-app-id")
        }
        try await pusherChannel(options, plan: plan, base: base, appKey: appKey, secret: secret, pusherID: pusherID, run: run,
                                stats: stats, group: group)
    case let other:
        throw BenchError("--protocol is native, pusher or redis, not '\(other)'")
    }
}

/// A public channel with `subscribers` members, each with one device; one member sends.
private func nativeChannel(_ options: Options, plan: FanoutPlan, base: String, appKey: String, run: String, stats: FanoutStats,
                           group: EventLoopGroup) async throws {
    let setup = SetupClient(base: base, appKey: appKey)
    let clients = try await signInUsers(setup, prefix: "ch\(run)u", count: plan.groupSize + 1)
    let channel = try await clients[0].call("POST", "/v1/conversations",
                                             body: CreateConversationRequest(kind: .public, title: "bench \(run)"), as: Conversation.self)
    try await forEachParallel(Array(clients.dropFirst()), parallel: 16) { client in
        _ = try await client.call("POST", "/v1/conversations/\(channel.id.rawValue)/join", body: [String: String](), as: Conversation.self)
    }
    progress("\(plan.groupSize) members joined a public channel")
    let marker = Array(#""text":"b"#.utf8)
    let eventPrefix = Array(#"{"event":{"#.utf8)
    let ackPrefix = Array(#"{"id":"#.utf8)
    let url = base.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime"
    var sockets: [WebSocket] = []
    for (index, client) in clients.enumerated() {
        let isSender = index == 0
        let socket = try await connectDevice(url: url, appKey: appKey, token: client.token ?? "", on: group.loops[index % group.loops.count]) { text in
            if hasPrefix(text, eventPrefix) {
                guard !isSender, let sent = sentAt(in: text, after: marker) else { return }
                stats.delivered(sentAt: sent, now: monotonicNanoseconds())
            } else if hasPrefix(text, ackPrefix) {
                stats.ack()
            }
        }
        sockets.append(socket)
    }
    progress("\(sockets.count) devices connected; offering \(plan.rates.map(String.init).joined(separator: ", ")) messages/s")
    let sender = sockets[0]
    let room = channel.id.rawValue
    try await driveRates(plan, stats: stats, options: options, benchmark: "channel-native") { _, sequence in
        sender.send(text: #"{"type":"message.send","id":"\#(sequence)","conversationId":"\#(room)","message":{"clientId":"c\#(sequence)-\#(UInt32.random(in: 0...UInt32.max))","content":{"type":"text","text":"b\#(monotonicNanoseconds())"}}}"#)
    }
    _ = sockets
}

/// The reference (issue 29): `subscribers` connections subscribed to one Redis pub/sub channel,
/// one publisher; nothing is stored.
private func redisChannel(_ options: Options, plan: FanoutPlan, redis: String, stats: FanoutStats, group: EventLoopGroup) async throws {
    let parts = redis.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]), let address = try SocketAddress.resolve(host: String(parts[0]), port: port).first
    else { throw BenchError("--redis must be HOST:PORT") }
    let channel = "channel"
    var subscribers: [RedisFanoutSubscriber] = []
    for index in 0..<plan.groupSize {
        let subscriber = RedisFanoutSubscriber(channel: channel, stats: stats)
        _ = try await Connection.connect(to: address, on: group.loops[index % group.loops.count]) { subscriber }
        subscribers.append(subscriber)
        if (index + 1) % 2500 == 0 { progress("\(index + 1) Redis subscribers connected") }
    }
    for subscriber in subscribers { await subscriber.ready.wait() }
    let publisher = RedisFanoutPublisher(stats: stats)
    let publishing = try await Connection.connect(to: address, on: group.loops[0]) { publisher }
    progress("\(subscribers.count) Redis subscribers on one channel; offering \(plan.rates.map(String.init).joined(separator: ", ")) messages/s")
    try await driveRates(plan, stats: stats, options: options, benchmark: "channel-redis") { _, _ in
        let payload = "b\(monotonicNanoseconds())"
        let command = Array("*3\r\n$7\r\nPUBLISH\r\n$\(channel.utf8.count)\r\n\(channel)\r\n$\(payload.utf8.count)\r\n\(payload)\r\n".utf8)
        publishing.executeOnLoop { $0.write(command) }
    }
    _ = subscribers
}

/// `subscribers` Pusher sockets on one channel; the backend triggers each event over HTTP.
private func pusherChannel(_ options: Options, plan: FanoutPlan, base: String, appKey: String, secret: String, pusherID: String,
                           run: String, stats: FanoutStats, group: EventLoopGroup) async throws {
    let channel = "bench-\(run)"
    let marker = Array(#""data":"b"#.utf8)
    let url = base.replacingOccurrences(of: "http://", with: "ws://") + "/app/\(appKey)?protocol=7&client=parley-bench&version=1"
    var sockets: [WebSocket] = []
    for index in 0..<plan.groupSize {
        let subscribed = Completion<Void>()
        let handler = WebSocketHandler(
            onMessage: { socket, message in
                guard case .text(let text) = message else { return }
                if text.contains("pusher:connection_established") {
                    socket.send(text: #"{"event":"pusher:subscribe","data":{"channel":"\#(channel)"}}"#)
                } else if text.contains("pusher_internal:subscription_succeeded") {
                    subscribed.complete(())
                } else if let sent = sentAt(in: text, after: marker) {
                    stats.delivered(sentAt: sent, now: monotonicNanoseconds())
                }
            },
            onClose: { _, _, _ in subscribed.complete(()) })
        sockets.append(try await WebSocketClient.connect(to: url, headers: HTTPHeaders(), on: group.loops[index % group.loops.count], handler: handler))
        await subscribed.wait()
        if (index + 1) % 250 == 0 { progress("\(index + 1) Pusher sockets subscribed") }
    }
    progress("\(sockets.count) sockets on \(channel); offering \(plan.rates.map(String.init).joined(separator: ", ")) triggers/s")
    let path = "/apps/\(pusherID)/events"
    try await driveRates(plan, stats: stats, options: options, benchmark: "channel-pusher") { _, _ in
        let body = Array(#"{"name":"bench","channel":"\#(channel)","data":"b\#(monotonicNanoseconds())"}"#.utf8)
        let query = "auth_key=\(appKey)&auth_timestamp=\(Int(Date().timeIntervalSince1970))&auth_version=1.0&body_md5=\(Crypto.md5(body).hexString)"
        let signature = Crypto.hmacSHA256(key: Array(secret.utf8), message: Array("POST\n\(path)\n\(query)".utf8)).hexString
        guard let target = URL(string: "\(base)\(path)?\(query)&auth_signature=\(signature)") else { return }
        var request = URLRequest(url: target)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body)
        Task {
            if let (_, response) = try? await URLSession.shared.data(for: request), (response as? HTTPURLResponse)?.statusCode == 200 {
                stats.ack()
            }
        }
    }
    _ = sockets
}

// MARK: - Delivery counts in a large public channel

/// `channel-receipts`: one author's message in a public channel of `members` members, each of
/// whom marks it read (`parallel` HTTP clients at once); the author's device counts the
/// `delivery.updated` events it receives. Reports receipts/s, the events the author got, and
/// how long after the last receipt the author's counts showed every member.
func runChannelReceipts(_ options: Options, group: EventLoopGroup) async throws {
    guard let base = options.string("url"), let appKey = options.string("app-key") else {
        throw BenchError("channel-receipts needs --url http://HOST:PORT and --app-key KEY")
    }
    let members = try options.int("members", 10_000)
    let parallel = try options.int("parallel", 32)
    let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    let setup = SetupClient(base: base, appKey: appKey)
    let clients = try await signInUsers(setup, prefix: "rc\(run)u", count: members + 1, parallel: 32)
    let author = clients[0]
    let channel = try await author.call("POST", "/v1/conversations", body: CreateConversationRequest(kind: .public, title: "receipts \(run)"),
                                        as: Conversation.self)
    try await forEachParallel(Array(clients.dropFirst()), parallel: parallel) { client in
        _ = try await client.call("POST", "/v1/conversations/\(channel.id.rawValue)/join", body: [String: String](), as: Conversation.self)
    }
    progress("\(members) members joined the channel")
    let events = LockedValue<(count: Int, lastFull: UInt64?)>((0, nil))
    let eventPrefix = Array(#"{"event":{"#.utf8)
    let url = base.replacingOccurrences(of: "http://", with: "ws://") + "/v1/realtime"
    let socket = try await connectDevice(url: url, appKey: appKey, token: author.token ?? "", on: group.loops[0]) { text in
        guard hasPrefix(text, eventPrefix), text.contains(#""type":"delivery.updated""#) else { return }
        let full = text.contains(#""readCount":\#(members),"#)
        events.withLock { state in
            state.count += 1
            if full, state.lastFull == nil { state.lastFull = monotonicNanoseconds() }
        }
    }
    let message = try await author.call("POST", "/v1/conversations/\(channel.id.rawValue)/messages",
                                        body: SendMessageRequest(clientID: "r\(run)", content: .text("read me")), as: Message.self)
    let started = monotonicNanoseconds()
    try await forEachParallel(Array(clients.dropFirst()), parallel: parallel) { client in
        _ = try await client.call("POST", "/v1/conversations/\(channel.id.rawValue)/receipts",
                                  body: ReceiptUpdate(deliveredSeq: message.seq, readSeq: message.seq), as: Receipt.self)
    }
    let finished = monotonicNanoseconds()
    // The author's counts reach every member within an interval and a flush: wait for it (10 s at most).
    for _ in 0..<200 where events.withLock({ $0.lastFull }) == nil { try await Task.sleep(for: .milliseconds(50)) }
    let (count, lastFull) = events.withLock { $0 }
    let seconds = Double(finished - started) / 1e9
    report(options, ["benchmark": "channel-receipts", "members": "\(members)", "receipts_per_s": String(format: "%.0f", Double(members) / seconds),
                     "receipts_seconds": String(format: "%.2f", seconds), "author_events": "\(count)",
                     "all_counted_after_last_receipt_ms": lastFull.map { String(format: "%.0f", Double(Int64($0) - Int64(finished)) / 1e6) } ?? "never"])
    socket.close()
}

/// Runs `body` for every item, `parallel` at a time.
func forEachParallel<T: Sendable>(_ items: [T], parallel: Int, _ body: @escaping @Sendable (T) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        var next = 0
        for _ in 0..<min(parallel, items.count) {
            let item = items[next]
            next += 1
            tasks.addTask { try await body(item) }
        }
        while try await tasks.next() != nil {
            if next < items.count {
                let item = items[next]
                next += 1
                tasks.addTask { try await body(item) }
            }
        }
    }
}
