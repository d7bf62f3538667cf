import Foundation
import FoundationNetworking
import ParleyNet
import ParleyStore
import ParleyStoreSQLite
import ParleyWire
import ParleySync

// Benchmarks of the chat core (issue 3): durable sends over HTTP keep-alive, history page
// latency in a conversation of a million messages, and sign-in latency. See docs/benchmarks.md.

// MARK: - Setup over HTTP (URLSession: setup speed does not matter)

/// A small blocking-free JSON client for the setup steps.
struct SetupClient: Sendable {
    let base: String
    let appKey: String
    var token: String?

    func call<Response: Decodable>(_ method: String, _ path: String, body: some Encodable, as: Response.Type) async throws -> Response {
        guard let url = URL(string: base + path) else { throw BenchError("bad URL \(base + path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.setValue(appKey, forHTTPHeaderField: "X-Parley-App-Key")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.httpBody = try WireCoding.encoder().encode(body)
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else {
            throw BenchError("\(method) \(path) answered \(status): \(String(decoding: data, as: UTF8.self)); "
                             + "start the server with --signups-per-hour 1000000 and pass its --app-key")
        }
        return try WireCoding.decoder().decode(Response.self, from: data)
    }

    /// Registers (or signs in, if the name exists from an earlier run) and returns a client with the token.
    func signedIn(_ username: String) async throws -> SetupClient {
        let password = "benchmark password"
        let signedIn: SignedIn
        do {
            signedIn = try await call("POST", "/v1/users", body: RegisterRequest(username: username, password: password), as: SignedIn.self)
        } catch {
            signedIn = try await call("POST", "/v1/sessions", body: SignInRequest(username: username, password: password), as: SignedIn.self)
        }
        var client = self
        client.token = signedIn.session.token
        return client
    }
}

// MARK: - A keep-alive HTTP load client on ParleyNet

/// One keep-alive connection sending requests back to back (a new one as soon as the answer
/// arrives), recording each answer's latency and status. All on its loop thread.
final class LoadConnection: ConnectionHandler, @unchecked Sendable {
    // @unchecked: every mutable property is touched only by the connection's loop thread; `finished` hands the object to the collector after the last callback.
    private let makeRequest: (Int) -> [UInt8]
    private let deadline: UInt64
    private let finished: @Sendable (LoadConnection) -> Void
    private var buffer = ByteBuffer()
    private var head: HTTPResponseHead?
    private var sentAt: UInt64 = 0
    private var index = 0
    private(set) var latencies: [UInt64] = []
    private(set) var failures: [Int: Int] = [:]
    private(set) var lastFailure = ""

    init(deadline: UInt64, makeRequest: @escaping (Int) -> [UInt8], finished: @escaping @Sendable (LoadConnection) -> Void) {
        self.deadline = deadline
        self.makeRequest = makeRequest
        self.finished = finished
    }

    func connectionActive(_ connection: Connection) { sendNext(connection) }

    private func sendNext(_ connection: Connection) {
        sentAt = monotonicNanoseconds()
        guard sentAt < deadline else {
            connection.close()
            return
        }
        connection.write(makeRequest(index))
        index += 1
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        buffer.write(bytes)
        while true {
            if head == nil {
                do {
                    guard let parsed = try HTTPResponseHeadParser().parse(&buffer) else { return }
                    head = parsed
                } catch {
                    failures[0, default: 0] += 1
                    connection.close()
                    return
                }
            }
            guard let current = head else { return }
            let length = Int(current.headers["content-length"] ?? "0") ?? 0
            guard let body = buffer.readBytes(length) else { return }
            head = nil
            let status = current.status.code
            if (200..<300).contains(status) {
                latencies.append(monotonicNanoseconds() - sentAt)
            } else {
                failures[status, default: 0] += 1
                lastFailure = String(decoding: body, as: UTF8.self)
            }
            sendNext(connection)
        }
    }

    func connectionDidClose(_ connection: Connection, error: IOError?) { finished(self) }
}

/// Runs `connections` load connections for `duration` seconds; returns every latency (sorted,
/// in nanoseconds), failures by status, and the elapsed time.
func runLoad(url: String, connections: Int, duration: Double, group: EventLoopGroup,
             makeRequest: @escaping @Sendable (_ connection: Int, _ index: Int) -> [UInt8]) async throws
    -> (latencies: [UInt64], failures: [Int: Int], lastFailure: String, elapsed: Double) {
    let (host, port) = try hostAndPort(url)
    guard let address = try SocketAddress.resolve(host: host, port: port).first else { throw BenchError("cannot resolve \(host)") }
    let done = Completion<Void>()
    let results = LockedValue<[LoadConnection]>([])
    let started = monotonicNanoseconds()
    let deadline = started + UInt64(duration * 1e9)
    for number in 0..<connections {
        let loop = group.loops[number % group.loops.count]
        _ = try await Connection.connect(to: address, on: loop) {
            LoadConnection(deadline: deadline, makeRequest: { makeRequest(number, $0) }, finished: { connection in
                let count = results.withLock { $0.append(connection); return $0.count }
                if count == connections { done.complete(()) }
            })
        }
    }
    await done.wait()
    let elapsed = Double(monotonicNanoseconds() - started) / 1e9
    let all = results.withLock { $0 }
    var failures: [Int: Int] = [:]
    for connection in all { failures.merge(connection.failures, uniquingKeysWith: +) }
    return (all.flatMap(\.latencies).sorted(), failures, all.map(\.lastFailure).first { !$0.isEmpty } ?? "", elapsed)
}

func hostAndPort(_ url: String) throws -> (String, UInt16) {
    guard url.hasPrefix("http://") else { throw BenchError("--url must be http://HOST:PORT") }
    let rest = url.dropFirst("http://".count).split(separator: "/").first.map(String.init) ?? ""
    guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]) else {
        throw BenchError("--url must name a port: http://HOST:PORT")
    }
    return (String(rest[..<colon]), port)
}

func httpRequest(_ method: String, _ path: String, host: String, appKey: String, token: String, body: String? = nil) -> [UInt8] {
    var text = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nX-Parley-App-Key: \(appKey)\r\nAuthorization: Bearer \(token)\r\n"
    if let body {
        text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    } else {
        text += "\r\n"
    }
    return Array(text.utf8)
}

/// Reads one counter from the server's /metrics.
func metric(_ url: String, _ name: String) async -> Double? {
    guard let target = URL(string: url + "/metrics"), let (data, _) = try? await URLSession.shared.data(from: target) else { return nil }
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") where line.hasPrefix(name + " ") {
        return Double(line.split(separator: " ").last ?? "")
    }
    return nil
}

// MARK: - sends

func runSends(_ options: Options, group: EventLoopGroup) async throws {
    guard let url = options.string("url"), let appKey = options.string("app-key") else {
        throw BenchError("sends needs --url http://HOST:PORT and --app-key KEY")
    }
    let senders = try options.int("senders", 100)
    guard senders >= 1 else { throw BenchError("--senders must be at least 1") }
    // Each conversation is created by one of the senders, and every sender sends to one: there
    // are never more conversations than senders (`--senders 1` once crashed here).
    let asked = try options.int("conversations", 10)
    guard asked >= 1 else { throw BenchError("--conversations must be at least 1") }
    let conversationCount = min(asked, senders)
    if conversationCount < asked { progress("sends: \(senders) sender(s) make at most \(conversationCount) conversation(s), not \(asked)") }
    let duration = Double(try options.int("duration", 10))
    let setup = SetupClient(base: url, appKey: appKey)
    let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    progress("sends: registering \(senders) senders and \(conversationCount) conversations…")
    var clients: [SetupClient] = []
    for index in 0..<senders { clients.append(try await setup.signedIn("bench\(run)s\(index)")) }
    // Members who never send (each with a device under --devices): what an offline receiver is.
    let receiverCount = try options.int("receivers", 0)
    var receivers: [SetupClient] = []
    for index in 0..<receiverCount { receivers.append(try await setup.signedIn("bench\(run)r\(index)")) }
    if try options.int("devices", 0) == 1 {
        progress("sends: registering a push device for each sender and receiver…")
        for client in clients + receivers {
            let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            _ = try await client.call("POST", "/v1/devices", body: RegisterDeviceRequest(platform: .apns, token: token), as: PushDevice.self)
        }
    }
    var conversations: [String] = []
    for index in 0..<conversationCount {
        let members = stride(from: index, to: senders, by: conversationCount).map { "bench\(run)s\($0)" }.filter { $0 != "bench\(run)s\(index)" }
            + (0..<receiverCount).map { "bench\(run)r\($0)" }
        let conversation = try await clients[index].call("POST", "/v1/conversations",
                                                           body: CreateConversationRequest(kind: .group, members: members, title: "bench \(index)"),
                                                           as: Conversation.self)
        conversations.append(conversation.id.rawValue)
    }
    let (host, _) = try hostAndPort(url)
    let tokens = clients.map { $0.token ?? "" }
    let targets = conversations
    let writesBefore = await metric(url, "parley_store_writes_total") ?? 0
    let commitsBefore = await metric(url, "parley_store_commits_total") ?? 0
    progress("sends: \(senders) connections for \(Int(duration)) s…")
    let result = try await runLoad(url: url, connections: senders, duration: duration, group: group) { connection, index in
        let body = #"{"clientId":"\#(run)-\#(connection)-\#(index)","content":{"type":"text","text":"benchmark message \#(index) from sender \#(connection)"}}"#
        return httpRequest("POST", "/v1/conversations/\(targets[connection % conversationCount])/messages",
                           host: host, appKey: appKey, token: tokens[connection], body: body)
    }
    let writes = (await metric(url, "parley_store_writes_total") ?? 0) - writesBefore
    let commits = (await metric(url, "parley_store_commits_total") ?? 0) - commitsBefore
    if !result.failures.isEmpty { progress("sends: failures by status \(result.failures); last: \(result.lastFailure)") }
    report(options, ["benchmark": "sends", "senders": "\(senders)", "sends": "\(result.latencies.count)",
                     "errors": "\(result.failures.values.reduce(0, +))",
                     "sends_per_s": String(format: "%.0f", Double(result.latencies.count) / result.elapsed),
                     "p50_ms": String(format: "%.2f", percentile(result.latencies, 0.5) / 1000),
                     "p99_ms": String(format: "%.2f", percentile(result.latencies, 0.99) / 1000),
                     "writes_per_commit": String(format: "%.1f", commits > 0 ? writes / commits : 0)])
}

// MARK: - sqlite3 CLI reference

/// The same message rows through the sqlite3 command-line shell, as a plain INSERT loop:
/// `autocommit` makes each INSERT its own durable transaction (what one send needs),
/// `batch` puts them all in one transaction (the ceiling for raw inserts).
func runSQLiteReference(_ options: Options) async throws {
    let rows = try options.int("rows", 100_000)
    let mode = options.string("mode") ?? "autocommit"
    guard mode == "autocommit" || mode == "batch" else { throw BenchError("--mode must be autocommit or batch") }
    let synchronous = (options.string("synchronous") ?? "full").uppercased()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-bench-sqlite-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var script = """
        PRAGMA journal_mode = WAL;
        PRAGMA synchronous = \(synchronous);
        CREATE TABLE message (id INTEGER PRIMARY KEY, public_id TEXT NOT NULL UNIQUE, conversation_id INTEGER NOT NULL,
            seq INTEGER NOT NULL, author_id INTEGER NOT NULL, client_id TEXT NOT NULL, content TEXT, created_at INTEGER NOT NULL,
            UNIQUE (conversation_id, seq), UNIQUE (author_id, client_id));

        """
    if mode == "batch" { script += "BEGIN;\n" }
    for row in 0..<rows {
        let sender = row % 100
        script += "INSERT INTO message (public_id, conversation_id, seq, author_id, client_id, content, created_at) VALUES "
            + "('m_\(row)', \(row % 10), \(row / 10 + 1), \(sender), 'c-\(row)', "
            + #"'{"text":"benchmark message \#(row) from sender \#(sender)","type":"text"}', 1800000000000);"# + "\n"
    }
    if mode == "batch" { script += "COMMIT;\n" }
    let input = directory + "/script.sql"
    try script.write(toFile: input, atomically: false, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = [directory + "/reference.sqlite", ".read \(input)"]
    process.standardOutput = FileHandle.nullDevice
    let started = monotonicNanoseconds()
    try process.run()
    process.waitUntilExit()
    let elapsed = Double(monotonicNanoseconds() - started) / 1e9
    guard process.terminationStatus == 0 else { throw BenchError("sqlite3 exited \(process.terminationStatus); is the sqlite3 package installed?") }
    report(options, ["benchmark": "sqlite3-cli", "mode": mode, "synchronous": synchronous, "rows": "\(rows)",
                     "rows_per_s": String(format: "%.0f", Double(rows) / elapsed)])
}

// MARK: - history

/// Fills one conversation with `--messages` rows straight into the server's database file
/// (the same tables, events and full-text index a send writes), then measures the latest-50
/// page over HTTP on one keep-alive connection.
func runHistory(_ options: Options, group: EventLoopGroup) async throws {
    guard let url = options.string("url"), let appKey = options.string("app-key"), let database = options.string("db") else {
        throw BenchError("history needs --url, --app-key and --db DATA_DIR/parley.sqlite")
    }
    let count = try options.int("messages", 1_000_000)
    let duration = Double(try options.int("duration", 10))
    let setup = SetupClient(base: url, appKey: appKey)
    let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
    let reader = try await setup.signedIn("bench\(run)h")
    let conversation = try await reader.call("POST", "/v1/conversations", body: CreateConversationRequest(kind: .group, title: "history"),
                                             as: Conversation.self)
    let sizeBefore = fileSize(database) + fileSize(database + "-wal")
    progress("history: writing \(count) messages into \(database)…")
    let store = try SQLiteStore(path: database)
    let fillStarted = monotonicNanoseconds()
    try await store.write { db in
        guard let row = try db.fetchOne("SELECT c.id, c.last_seq, m.user_id FROM conversation c JOIN member m ON m.conversation_id = c.id WHERE c.public_id = \(conversation.id.rawValue)") else {
            throw BenchError("the conversation is not in \(database); pass the server's own database file")
        }
        let key: Int64 = try row.get("id")
        let base: Int64 = try row.get("last_seq")
        let author: Int64 = try row.get("user_id")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try db.execute("""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count))
            INSERT INTO message (public_id, conversation_id, seq, author_id, client_id, content, created_at)
            SELECT 'm_' || \(run) || '_' || i, \(key), \(base) + i, \(author), \(run) || '-' || i,
                   json_object('text', 'history benchmark message number ' || i || ', with a few more words to index', 'type', 'text'),
                   \(now) - \(count) + i
            FROM n
            """)
        try db.execute("""
            INSERT INTO event (conversation_id, seq, type, actor_id, message_id, created_at)
            SELECT conversation_id, seq, 'message.created', author_id, id, created_at FROM message
            WHERE conversation_id = \(key) AND seq > \(base) ORDER BY seq
            """)
        try db.execute("""
            INSERT INTO message_fts (rowid, body) SELECT id, json_extract(content, '$.text') FROM message
            WHERE conversation_id = \(key) AND seq > \(base)
            """)
        try db.execute("""
            UPDATE conversation SET last_seq = \(base) + \(count),
                last_position = (SELECT max(position) FROM event WHERE conversation_id = \(key)),
                last_message_id = (SELECT id FROM message WHERE conversation_id = \(key) AND seq = \(base) + \(count))
            WHERE id = \(key)
            """)
        try db.execute("UPDATE member SET delivered_seq = \(base) + \(count), read_seq = \(base) + \(count) WHERE conversation_id = \(key)")
    }
    _ = try await store.read { db in try db.fetchAll("PRAGMA wal_checkpoint(TRUNCATE)") }
    store.close()
    let fillSeconds = Double(monotonicNanoseconds() - fillStarted) / 1e9
    // The fill left hundreds of megabytes of dirty pages; flush them now so the kernel's
    // writeback does not land in the middle of the measurement.
    sync()
    let bytesPerMessage = Double(fileSize(database) + fileSize(database + "-wal") - sizeBefore) / Double(count)
    let (host, _) = try hostAndPort(url)
    let token = reader.token ?? ""
    let path = "/v1/conversations/\(conversation.id.rawValue)/messages?limit=50"
    progress("history: filled in \(String(format: "%.1f", fillSeconds)) s; 2 s of warm-up, then latest-50 pages on 1 connection for \(Int(duration)) s…")
    // Warm-up: the fill went through another connection, so every reader connection of the
    // server starts with a cold page cache; the figure is for a server in service.
    _ = try await runLoad(url: url, connections: 1, duration: 2, group: group) { _, _ in
        httpRequest("GET", path, host: host, appKey: appKey, token: token)
    }
    let result = try await runLoad(url: url, connections: 1, duration: duration, group: group) { _, _ in
        httpRequest("GET", path, host: host, appKey: appKey, token: token)
    }
    report(options, ["benchmark": "history", "messages": "\(count)", "pages": "\(result.latencies.count)",
                     "errors": "\(result.failures.values.reduce(0, +))",
                     "p50_ms": String(format: "%.3f", percentile(result.latencies, 0.5) / 1000),
                     "p99_ms": String(format: "%.3f", percentile(result.latencies, 0.99) / 1000),
                     "bytes_per_message": String(format: "%.0f", bytesPerMessage)])
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
}

// MARK: - sign-in

/// Sequential sign-ins of one user: the latency a person waits, set by the Argon2id cost.
func runSignIn(_ options: Options) async throws {
    guard let url = options.string("url"), let appKey = options.string("app-key") else {
        throw BenchError("signin needs --url http://HOST:PORT and --app-key KEY")
    }
    let count = try options.int("count", 50)
    let setup = SetupClient(base: url, appKey: appKey)
    let name = "bench\(String(UInt32.random(in: 0...UInt32.max), radix: 36))i"
    _ = try await setup.signedIn(name)
    var latencies: [UInt64] = []
    for _ in 0..<count {
        let started = monotonicNanoseconds()
        _ = try await setup.call("POST", "/v1/sessions", body: SignInRequest(username: name, password: "benchmark password"), as: SignedIn.self)
        latencies.append(monotonicNanoseconds() - started)
    }
    latencies.sort()
    report(options, ["benchmark": "signin", "count": "\(count)",
                     "p50_ms": String(format: "%.1f", percentile(latencies, 0.5) / 1000),
                     "p99_ms": String(format: "%.1f", percentile(latencies, 0.99) / 1000)])
}
