package import Foundation
package import ParleyChat
import ParleyCrypto
package import ParleyStore
import ParleyStoreSQLite
import ParleyStorePostgres
package import ParleyWire
import ParleySync

/// A clock tests move by hand.
package final class ManualClock: Sendable {
    private let current: LockedValue<Date>

    /// Starts at `start`.
    package init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = LockedValue(start) }

    /// The time now.
    package var now: Date { current.withLock { $0 } }

    /// Moves time forward.
    package func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

/// Which engine the domain tests run on: SQLite, unless `PARLEY_TEST_POSTGRES` names a
/// PostgreSQL server in libpq's `key=value` form (`host=127.0.0.1 port=55432 user=postgres`),
/// where every harness gets a fresh database of its own. `make test` runs the domain tests
/// once on each (scripts/test.sh).
package enum TestEngine: Sendable {
    /// An embedded SQLite file.
    case sqlite
    /// A PostgreSQL server; `conninfo` without a `dbname`.
    case postgres(conninfo: String)

    /// The engine the environment selects.
    package static var current: TestEngine {
        if let conninfo = ProcessInfo.processInfo.environment["PARLEY_TEST_POSTGRES"], !conninfo.isEmpty {
            return .postgres(conninfo: conninfo)
        }
        return .sqlite
    }

    /// The shards of the event log the domain tests' PostgreSQL databases are created with:
    /// `PARLEY_TEST_LOG_SHARDS` (default 1), so the whole domain suite also runs on a log of
    /// several shards (scripts/test.sh).
    package static var logShards: Int {
        ProcessInfo.processInfo.environment["PARLEY_TEST_LOG_SHARDS"].flatMap { Int($0) } ?? 1
    }

    /// True when tests run on PostgreSQL.
    package static var isPostgres: Bool {
        if case .postgres = current { return true }
        return false
    }

    /// A fresh, empty PostgreSQL database as a `postgres://` URL (for a server's
    /// `--database-url`) and a closure that drops it; nil when the tests run on SQLite.
    /// Reads `PARLEY_TEST_POSTGRES_URL` (the server's maintenance database URL).
    package static func freshPostgresURL() throws -> (url: String, drop: @Sendable () -> Void)? {
        guard isPostgres, let base = ProcessInfo.processInfo.environment["PARLEY_TEST_POSTGRES_URL"],
              var components = URLComponents(string: base) else { return nil }
        let (name, drop) = try createDatabase(maintenance: base)
        components.path = "/" + name
        return (components.string ?? base, drop)
    }

    /// A fresh, empty PostgreSQL database; its conninfo and a closure that drops it.
    package static func freshPostgresDatabase(_ conninfo: String) throws -> (conninfo: String, drop: @Sendable () -> Void) {
        let (name, drop) = try createDatabase(maintenance: conninfo + " dbname=postgres")
        return ("\(conninfo) dbname=\(name)", drop)
    }

    /// Creates a database with a fresh name through the maintenance connection `maintenance`.
    private static func createDatabase(maintenance: String) throws -> (name: String, drop: @Sendable () -> Void) {
        let name = "parley_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        try PostgresAdmin.run(maintenance, "CREATE DATABASE \(name)")
        return (name, { try? PostgresAdmin.run(maintenance, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") })
    }
}

/// The real domain over a real store (see ``TestEngine``: a SQLite file in a fresh temporary
/// directory, or a fresh PostgreSQL database), with cheap password hashing and a manual
/// clock: what Chat's logic tests run against (no sockets).
package final class ChatHarness: Sendable {
    /// The domain under test.
    package let chat: Chat
    /// The real store underneath (close it to simulate a storage failure). Typed as the
    /// protocol: tests go through `read`/`write` as the domain does, whatever the engine.
    package let store: any Store
    /// The time the domain sees; advance it by hand.
    package let clock: ManualClock
    /// The app every helper registers users in.
    package let app: AppRef
    /// A temporary directory (holding the database file on SQLite).
    package let directory: String

    /// Creates the directory, store, schema and one app.
    ///
    /// - Parameters:
    ///   - hooks: transaction hooks the domain runs in every write that appends events.
    ///   - wrap: puts a store around the real one (a test's faulty engine); the domain sees it.
    package static func make(bus: (any Bus)? = nil, hooks: [any TransactionHook] = [],
                            configure: (inout Chat.Configuration) -> Void = { _ in },
                            wrap: ((any Store) -> any Store)? = nil) async throws -> ChatHarness {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-chat-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store: any Store
        var drop: (@Sendable () -> Void)?
        var database: String?
        var shards: Int?
        switch TestEngine.current {
        case .sqlite:
            store = try SQLiteStore(path: directory + "/parley.sqlite")
        case .postgres(let conninfo):
            let fresh = try TestEngine.freshPostgresDatabase(conninfo)
            var configuration = PostgresStore.Configuration()
            configuration.readers = 2
            store = try PostgresStore(url: fresh.conninfo, configuration: configuration)
            shards = TestEngine.logShards
            database = fresh.conninfo
            drop = fresh.drop
        }
        let clock = ManualClock()
        var configuration = Chat.Configuration()
        configuration.passwordCost = .minimum
        configuration.now = { clock.now }
        configuration.logShards = shards
        configure(&configuration)
        let chat = Chat(store: wrap?(store) ?? store, configuration: configuration, bus: bus, hooks: hooks)
        try await chat.migrate()
        let app = try await chat.app(publicKey: try await chat.createApp(name: "test").publicKey)
        return ChatHarness(chat: chat, store: store, clock: clock, app: app, directory: directory, conninfo: database, drop: drop)
    }

    private let drop: (@Sendable () -> Void)?
    /// The database on PostgreSQL, for ``anotherNode()``.
    private let conninfo: String?

    private init(chat: Chat, store: any Store, clock: ManualClock, app: AppRef, directory: String, conninfo: String?,
                 drop: (@Sendable () -> Void)?) {
        self.conninfo = conninfo
        self.chat = chat
        self.store = store
        self.clock = clock
        self.app = app
        self.directory = directory
        self.drop = drop
    }

    /// On PostgreSQL, a second node on the same database: its own store (connections) and
    /// domain, the same clock, started as a server starts one (its migration finds nothing to
    /// do and reads the log's shards). Nil on SQLite, which has one node. The caller closes the store.
    package func anotherNode() async throws -> (chat: Chat, store: any Store)? {
        guard let conninfo else { return nil }
        let store = try PostgresStore(url: conninfo)
        var configuration = Chat.Configuration()
        configuration.passwordCost = .minimum
        let clock = clock
        configuration.now = { clock.now }
        let chat = Chat(store: store, configuration: configuration)
        try await chat.migrate()
        return (chat, store)
    }

    /// Registers `username` and returns the signed-in caller and their token.
    package func register(_ username: String, address: String = "127.0.0.1") async throws -> (caller: Caller, token: String) {
        let signedIn = try await chat.register(RegisterRequest(username: username, password: "correct horse battery"), app: app, address: address)
        let token = signedIn.session.token ?? ""
        return (try await chat.authenticate(token: token, app: app), token)
    }

    /// Two people, ann and ben, in a group ann made, titled "room": the start of most tests of
    /// what one member does and the other sees.
    package func twoInAGroup() async throws -> (ann: Caller, ben: Caller, room: ConversationID) {
        let ann = try await register("ann").caller
        let ben = try await register("ben").caller
        let room = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: ["ben"], title: "room")).0.id
        return (ann, ben, room)
    }

    /// Records an upload as the server would after storing its bytes (no blob store here: the
    /// domain only keeps the record), and returns its id. Distinct `seed`s give distinct blobs.
    package func upload(_ caller: Caller, kind: MediaKind, mimeType: String? = nil, name: String? = nil, width: Int? = nil,
                       height: Int? = nil, sizeBytes: Int64 = 1_000, seed: String = UUID().uuidString,
                       policy: Chat.MediaPolicy = Chat.MediaPolicy()) async throws -> MediaInfo {
        let blob = SHA256.hash(Array(seed.utf8)).hexString
        let defaultType = ["photo": "image/jpeg", "video": "video/mp4", "audio": "audio/mpeg", "file": "application/octet-stream"][kind.rawValue]
        let thumbnail = kind == .photo ? (blob: SHA256.hash(Array(("thumb" + seed).utf8)).hexString,
                                          info: MediaThumbnail(width: 10, height: 10, sizeBytes: 100)) : nil
        let upload = NewAttachment(kind: kind, mimeType: mimeType ?? defaultType ?? "application/octet-stream", sizeBytes: sizeBytes,
                                   name: name, width: width ?? (kind == .photo ? 800 : nil), height: height ?? (kind == .photo ? 600 : nil),
                                   blob: blob, thumbnail: thumbnail)
        return try await chat.attachments.record(caller, upload, policy: policy).0
    }

    /// Closes the store and removes the directory.
    /// Waits until `condition` holds, checking every millisecond; fails the test with `what`
    /// after `timeout`. For states with no event to wait on (a call parked inside the server).
    package func eventually(_ what: String, timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw HarnessTimeout(what: what) }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    package func tearDown() {
        store.close()
        drop?()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A condition a test waited for did not come in time.
package struct HarnessTimeout: Error, CustomStringConvertible {
    package let what: String
    package var description: String { "timed out waiting: \(what)" }
}

/// The typed error code `work` fails with (`ChatError.code`), the error's description for any
/// other error, or nil when it succeeds: what domain tests compare.
package func code(_ work: () async throws -> Void) async -> String? {
    do {
        try await work()
        return nil
    } catch {
        return (error as? ChatError)?.code ?? "\(error)"
    }
}

extension Chat {
    /// The cursor that has every position up to `position`, in this log's shards: for tests
    /// that write one thing after another and read what came after a point. (Positions of a
    /// log of several shards are taken from one counter, so "after this point" is the same in
    /// every shard; a live device cannot use this, since shards commit independently.)
    package func cursor(through position: Int64) -> LogCursor {
        let shards = Int64(logShards)
        guard shards > 1 else { return LogCursor(position: position) }
        let positions = (0..<shards).map { shard -> Int64 in
            let below = position - ((position - shard) % shards + shards) % shards
            return below > 0 ? below : 0
        }
        return (try? LogCursor(positions: positions)) ?? LogCursor(shards: Int(shards))
    }
}
