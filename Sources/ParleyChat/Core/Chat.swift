package import Foundation
package import ParleyCrypto
package import ParleyLog
package import ParleyStore
package import ParleyWire
package import ParleySync

/// The chat domain: apps, accounts, the directory, conversations, messages and receipts.
/// Pure logic over a ``Store``; it never sees a socket or an HTTP request (the server maps
/// requests onto these methods and ``ChatError``s onto responses).
///
/// Every method that changes something runs in one `store.write` transaction and appends
/// the conversation's events in that same transaction, so a change and its event are stored
/// together or not at all (DESIGN.md guarantees 1–3).
package final class Chat: Sendable {
    /// Domain settings.
    package struct Configuration: Sendable {
        /// Argon2id cost for passwords. Default: libsodium's interactive limits (2 passes, 64 MiB).
        package var passwordCost: Crypto.PasswordCost = .interactive
        /// How long a session token is valid. Default: 30 days.
        package var sessionLifetime: TimeInterval = 30 * 86_400
        /// Failed sign-ins allowed per account per window. Default: 10 per 15 minutes.
        package var failedSignInsPerAccount = 10
        /// Failed sign-ins allowed per client address per window. Default: 50 per 15 minutes.
        package var failedSignInsPerAddress = 50
        /// The window for failed sign-ins. Default: 15 minutes.
        package var failedSignInWindow: TimeInterval = 900
        /// Accounts (registered or guest) one address may create per hour. Default: 60.
        package var signUpsPerAddressPerHour = 60
        /// Password hashes computed at once (each takes `passwordCost.memoryBytes`). Default: 2.
        package var concurrentPasswordHashes = 2
        /// How often authors in public channels hear how far their messages got (one
        /// `delivery.updated` per author per channel at most this often). Default: 1 s.
        package var deliveryUpdateInterval: Duration = .seconds(1)
        /// How long the first receipt waiting for the writer holds the door for others (every
        /// member's, in every conversation), so that the receipts a burst of messages draws
        /// from a room are one write, one commit and one move per member, not one each
        /// (decision 0026, part 3). Zero: to the writer at once (receipts still gather while it
        /// is busy). Default: 25 ms.
        package var receiptGathering: Duration = .milliseconds(25)
        /// How long gathered receipts then wait for the writer to begin a write for something
        /// else (a send), to commit in it: one transaction and one flush to disk for both,
        /// instead of one each (decision 0026, part 3). Past it they are written alone. Zero:
        /// at once. Default: 25 ms.
        package var receiptRiding: Duration = .milliseconds(25)
        /// The time. Tests pass a clock they control.
        package var now: @Sendable () -> Date = { Date() }
        /// Where the sign-in and sign-up budgets are counted when several nodes share them
        /// (Redis); nil: on this node. Default: nil.
        package var sharedCounters: (any SharedCounters)? = nil
        /// Whether webhook URLs may name loopback, link-local and private addresses
        /// (`--webhooks-allow-private`: tests, and backends on the same private network).
        /// Default: false.
        package var webhooksAllowPrivate = false
        /// Whether this node leaves link-preview jobs for sends with a link (`--link-previews`;
        /// each app has its own switch too). Default: true.
        package var linkPreviews = true
        /// Wakes this node's preview worker when a send left a job (nil: no worker here).
        package var linkPreviewWakeup: Wakeup? = nil
        /// Seals the secrets the server must read back (apps', webhook endpoints') with a key
        /// kept outside the database (docs/operations.md, "Sealed secrets"). Nil: stored as given.
        package var sealer: SecretSealer? = nil
        /// Webhook endpoints an app may have. Default: 20.
        package var webhooksPerApp = 20
        /// What posts a message to an app's before-send hook (docs/trust-and-safety.md); nil:
        /// hooks cannot be set (the `apps` command, tests without one). Default: nil.
        package var beforeSendTransport: (any BeforeSendTransport)? = nil
        /// What fetches an app's JSON Web Key Set from its URL (docs/trust-and-safety.md); nil:
        /// key sets can only be given inline. Default: nil.
        package var jwksFetcher: (any JWKSFetcher)? = nil
        /// Where the domain logs what an operator needs: storage failures it retried or gave
        /// up on. Default: nowhere.
        package var logger: Logger = .discarding(label: "parley.chat")
        /// The shards of the event log when ``Chat/migrate()`` creates the database's log
        /// (PostgreSQL; docs/decisions/0026, part 4); nil or 1: one. A log's shards are fixed
        /// when it is created: for an existing database this is only compared and reported.
        package var logShards: Int? = nil
        /// How long delivery traces are kept (docs/trace.md); nil records none. Default: a day.
        package var traceRetention: Duration? = .seconds(86_400)
        /// The name this node's trace steps carry (`--node-name`). Default: `local`.
        package var nodeName = "local"
        /// The defaults.
        package init() {}
    }

    let store: any Store
    package let configuration: Configuration
    /// The counters every node shares (``Configuration/sharedCounters``), for the rate limits
    /// kept outside this type.
    package var sharedCounters: (any SharedCounters)? { configuration.sharedCounters }
    /// Where committed changes are published (nil: nobody listens, e.g. the `apps` command).
    package let bus: (any Bus)?
    /// Features that add rows to every write that appends events, in its transaction.
    let hooks: [any TransactionHook]
    let failedSignInsByAccount: RateLimiter
    let failedSignInsByAddress: RateLimiter
    let signUpsByAddress: RateLimiter
    let passwordLanes: [DispatchQueue]
    let laneCounter = Counter()
    let sessions = SessionCache()
    let apps = AppCache()
    let deliveries = DeliveryCoalescer()
    /// Receipts waiting for the writer, joined per member and conversation (decision 0026).
    let receipts = ReceiptCoalescers()
    /// How long reports waited for a moderator, as this node resolved them (`/metrics`).
    package let reportResolution = LatencyHistogram(bounds: [60, 300, 900, 3600, 4 * 3600, 12 * 3600, 24 * 3600, 48 * 3600, 7 * 86_400])
    /// How long new messages took to reach devices, by socket and by push (`/metrics`).
    package let sendToDelivered = SendToDelivered()
    /// Delivery steps waiting to be written to the trace (docs/trace.md).
    package let traceRecorder: TraceRecorder
    /// Whether writes commit, as the last one found (`/healthz`'s `storage`).
    package let storage = StorageHealth()
    /// The node's background workers and their beats (`/metrics`, the log's stall warnings).
    package let workers = Workers()
    /// Each app's system account as a caller (the server API's), once looked up.
    let systemCallers = LockedValue([Int64: Caller]())
    /// Whether each app has a Pusher-format webhook endpoint, and when that was read.
    let pusherEndpoints = LockedValue([Int64: (exists: Bool, checkedAt: Int64)]())
    /// Each app's blocklists and before-send hook, compiled, and when they were read.
    let contentSettings = LockedValue([Int64: ContentSettings]())
    /// How many times each app's settings changed on this node (a read that overlapped a change is not trusted).
    let contentChanges = LockedValue([Int64: Int]())
    /// Apps whose settings are being read in the background.
    let contentRefreshes = LockedValue(Set<Int64>())
    /// Before-send hook requests in flight per app (bounded: a hook that hangs holds no more).
    let hookRequests = LockedValue([Int64: Int]())
    /// Each app's keys for its users' JWTs, as this node holds them.
    let jwtStates = LockedValue([Int64: JWTState]())
    /// Senders as before-send hooks are told of them, by user key, and when each was read.
    let hookSenders = LockedValue([Int64: (sender: Sender, readAt: ContinuousClock.Instant)]())
    private let loadedEpoch = LockedValue<String?>(nil)
    private let loadedShards = LockedValue(1)
    private let loadedSequences = LockedValue<Transaction.Sequences?>(nil)
    /// Whether the store's engine answers declared reads ahead of a batch (PostgreSQL: a read
    /// there is a wait), so a write's declaration is worth building (``WriteDeclaration``).
    private let readsAhead = LockedValue(false)
    /// A hash to verify against when the username does not exist, so a sign-in takes as long
    /// for an unknown name as for a wrong password (usernames cannot be probed by timing).
    let decoyPasswordHash: DecoyHash

    /// Creates the domain over a store. Call ``migrate()`` once before serving.
    ///
    /// Start-up does no password work: the timing decoy is hashed on a password lane in the
    /// background, where a sign-in that needs it first waits for it.
    ///
    /// - Parameter hooks: features that write rows in the same transaction as each write's
    ///   events (push and webhook outboxes); see ``TransactionHook``.
    package init(store: any Store, configuration: Configuration = Configuration(), bus: (any Bus)? = nil,
                hooks: [any TransactionHook] = []) {
        self.store = store
        self.configuration = configuration
        self.bus = bus
        self.hooks = hooks
        traceRecorder = TraceRecorder(isOn: configuration.traceRetention != nil, node: configuration.nodeName, clock: configuration.now)
        let shared = configuration.sharedCounters
        failedSignInsByAccount = RateLimiter(rule: .init(limit: configuration.failedSignInsPerAccount, window: configuration.failedSignInWindow),
                                             name: "signin-account", shared: shared)
        failedSignInsByAddress = RateLimiter(rule: .init(limit: configuration.failedSignInsPerAddress, window: configuration.failedSignInWindow),
                                             name: "signin-address", shared: shared)
        signUpsByAddress = RateLimiter(rule: .init(limit: configuration.signUpsPerAddressPerHour, window: 3600), name: "signup-address", shared: shared)
        passwordLanes = (0..<max(1, configuration.concurrentPasswordHashes)).map {
            DispatchQueue(label: "parley.password-hash.\($0)")
        }
        let decoy = DecoyHash(cost: configuration.passwordCost)
        decoyPasswordHash = decoy
        passwordLanes[0].async { _ = decoy.value }
        // A session signed out on another node must stop working here at once, not when its
        // cache entry goes stale.
        let sessions = sessions
        bus?.subscribe { publications in
            for case .signedOut(let user, let only, _) in publications {
                if let only { sessions.remove(session: only) } else { sessions.remove(user: user) }
            }
        }
    }

    /// Brings the schema up to date.
    ///
    /// - Returns: the migrations this call applied, in order.
    /// - Throws: ``StoreError/unknownMigrations(_:)`` for a database written by a newer version.
    @discardableResult
    package func migrate() async throws -> [String] {
        let dialect = try await store.read { db in db.dialect }
        let applied = try await Schema.migrator(for: dialect).migrate(store)
        let epoch = try await store.read { db in
            try db.fetchValue([UInt8].self, "SELECT value FROM setting WHERE name = \(EventLog.epochSetting)").map { String(decoding: $0, as: UTF8.self) }
        }
        guard let epoch else { throw StoreError.decoding("the database has no event-log epoch (setting \(EventLog.epochSetting))") }
        loadedEpoch.withLock { $0 = epoch }
        let shards = try await settleLogShards(dialect: dialect)
        loadedShards.withLock { $0 = shards }
        await store.useLogShards(shards)
        readsAhead.withLock { $0 = dialect == .postgres }
        if dialect == .postgres {
            let sequences = try await store.read { db -> Transaction.Sequences in
                let row = try db.fetchOne("SELECT pg_get_serial_sequence('message', 'id') AS message, pg_get_serial_sequence('event', 'position') AS event")
                guard let message = try row?.get("message", as: String?.self), let event = try row?.get("event", as: String?.self) else {
                    throw StoreError.decoding("the database has no sequence for message.id or event.position: it was not made by Parley's migrations; restore it from a backup")
                }
                return Transaction.Sequences(message: message, event: event)
            }
            loadedSequences.withLock { $0 = sequences }
        }
        return applied
    }

    /// Reads how many shards the log has, deciding it when the log is new: the configured
    /// number for a PostgreSQL database whose log is empty and has none recorded, else one.
    /// Recorded in the same write that decides it (nodes starting together agree: the write
    /// takes the log's lock), with the index that answers each shard's newest position.
    private func settleLogShards(dialect: SQLDialect) async throws -> Int {
        let wanted = max(1, min(configuration.logShards ?? 1, LogCursor.maximumShards))
        let logger = configuration.logger
        let shards = try await store.write { db -> Int in
            if let recorded = try db.fetchValue([UInt8].self, "SELECT value FROM setting WHERE name = \(EventLog.shardsSetting)") {
                guard let shards = Int(String(decoding: recorded, as: UTF8.self)), (1...LogCursor.maximumShards).contains(shards) else {
                    throw StoreError.decoding("the setting \(EventLog.shardsSetting) is not a number of shards from 1 to \(LogCursor.maximumShards)")
                }
                return shards
            }
            let empty = try db.fetchValue(Int64.self, "SELECT count(*) FROM (SELECT 1 FROM event LIMIT 1) AS any_event") == 0
            let shards = dialect == .postgres && empty ? wanted : 1
            try db.execute("INSERT INTO setting (name, value) VALUES (\(EventLog.shardsSetting), \(Array(String(shards).utf8)))")
            if shards > 1 { try db.execute(EventLog.shardIndexStatement(shards: shards)) }
            return shards
        }
        if wanted != shards, configuration.logShards != nil {
            logger.warning("the event log's shards are fixed when its database is created; this one has \(shards), so the option's \(wanted) is not used",
                           metadata: ["shards": .integer(Int64(shards)), "asked": .integer(Int64(wanted))])
        }
        return shards
    }

    /// Names a new history of positions (after a restore from a backup): every device that
    /// resumes with the old epoch is told to resync instead of resuming into a different history.
    ///
    /// - Returns: the new epoch.
    package func renewEpoch() async throws -> String {
        let epoch = Crypto.randomID(prefix: "e_", length: 16)
        try await run {
            try await store.write { db in
                try db.execute("UPDATE setting SET value = \(Array(epoch.utf8)) WHERE name = \(EventLog.epochSetting)")
            }
        }
        loadedEpoch.withLock { $0 = epoch }
        return epoch
    }

    /// The name of this database's history of positions: the same for as long as positions
    /// mean what they meant, a new one after a restore from backup. `ready` and `resync`
    /// carry it; a device that resumes with another epoch is told to resync
    /// (docs/protocol.md, "Epochs"). Empty before ``migrate()``.
    package var epoch: String { loadedEpoch.withLock { $0 } ?? "" }

    /// How many shards the event log has (docs/decisions/0026, part 4), fixed when the
    /// database was created: a position belongs to shard `position % logShards`, a
    /// conversation to ``shard(of:)``, and a device's resume point is a ``LogCursor`` of that
    /// many positions. SQLite's log, and every log made before shards, has one. 1 before
    /// ``migrate()``.
    package var logShards: Int { loadedShards.withLock { $0 } }

    /// The sequences a send draws its message's key and event's position from (PostgreSQL;
    /// nil on SQLite and before ``migrate()``).
    var logSequences: Transaction.Sequences? { loadedSequences.withLock { $0 } }

    /// Whether writes should declare their first reads: the engine reads them ahead.
    var declaresReads: Bool { readsAhead.withLock { $0 } }

    /// The shard of the log a conversation's events go to: a hash of its public id (so it is
    /// known before a write begins), 0 in a log of one shard. The same as the conversation
    /// row's `shard`, written when it was made.
    package func shard(of conversation: ConversationID) -> Int {
        Self.shard(of: conversation.rawValue, shards: logShards)
    }

    /// 64-bit FNV-1a of the id's bytes, modulo the shards: stable across processes, versions
    /// and machines (a conversation's shard never changes).
    static func shard(of publicID: String, shards: Int) -> Int {
        guard shards > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in publicID.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return Int(hash % UInt64(shards))
    }

    // MARK: - Shared helpers

    var nowMilliseconds: Int64 { Self.milliseconds(configuration.now()) }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// Runs blocking password work on one of a few dedicated queues, never on the caller's
    /// thread (an event loop) and never more than `concurrentPasswordHashes` at once.
    func onPasswordLane<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let lane = passwordLanes[laneCounter.next() % passwordLanes.count]
        return try await withCheckedThrowingContinuation { continuation in
            lane.async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// The one write path of every change that appends events (docs/decisions/0013-one-write-path.md):
    ///
    /// ```
    ///  store.write ─ body(tx) ─ tx.appendedEvents() ─ hooks.didAppend ─ COMMIT ─ bus.publish
    ///                appends       what *this* write     outbox rows        in position
    ///                events        appended              in the same txn    (commit) order
    /// ```
    ///
    /// The events published are the ones the write itself appended (never "everything after
    /// the largest position before it"), read back once at the end when the body did not
    /// hand them over already; every ``TransactionHook`` adds its rows in the same
    /// transaction; the store's after-commit hook publishes in commit order. A write that
    /// fails rolls back its change, its events and every hook's rows together.
    ///
    /// `in`: the conversation every event of the write belongs to, when there is one. In a log
    /// of several shards the write then commits on that shard's writer, beside other shards'
    /// writes (docs/decisions/0026, part 4); an event in another conversation's shard fails it.
    /// Without it the write may append anywhere and holds every shard's lock.
    func write<T: Sendable>(in conversation: ConversationID? = nil, declaring declaration: WriteDeclaration? = nil,
                            _ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await write(inShard: conversation.map { shard(of: $0) }, declaring: declaration, body)
    }

    /// ``write(in:_:)`` for a write whose events all go to one shard of the log (nil: any).
    /// `ridingWithin`: the write may wait that long for a write begun for something else and
    /// commit in it (``Store/write(shard:ridingWithin:_:afterCommit:)``); nil begins one at once.
    /// `declaring`: what the write reads first (``Store/write(shard:declaring:_:afterCommit:)``).
    func write<T: Sendable>(inShard target: Int?, ridingWithin riding: Duration? = nil, declaring declaration: WriteDeclaration? = nil,
                            _ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        let bus = bus
        let hooks = hooks
        let needsEvents = bus != nil || !hooks.isEmpty
        let links = bus?.linksEvents ?? false
        let recorder = traceRecorder
        let shards = logShards
        let sequences = loadedSequences.withLock { $0 }
        let body: @Sendable (any Database) throws -> Committed<T> = { db in
            let transaction = Transaction(db, links: links, shards: shards, shard: target, sequences: sequences)
            let value = try body(transaction)
            guard needsEvents, transaction.hasEvents else {
                return Committed(value: value, publications: [], afterCommit: transaction.committedCallbacks)
            }
            var events = try transaction.appendedEvents()
            if !hooks.isEmpty {
                // Written once for the hooks (a webhook's data) and the frame alike.
                for index in events.indices where events[index].channelEvent == nil { events[index].json = events[index].eventJSON }
            }
            for hook in hooks { try hook.didAppend(events, in: transaction) }
            // The trace's first step: which node stored each new message (docs/trace.md).
            if recorder.isOn, events.contains(where: { $0.record.type == .messageCreated }) {
                let at = recorder.now()
                let rows = events.filter { $0.record.type == .messageCreated }
                    .map { TraceRecorder.Row(position: $0.record.position, step: "committed", at: at) }
                transaction.onCommit { recorder.record(rows) }
            }
            return Committed(value: value, publications: events.map(\.publication), links: transaction.links,
                             afterCommit: transaction.committedCallbacks)
        }
        let afterCommit: @Sendable (Committed<T>) -> Void = { [storage] committed in
            storage.committed()
            for callback in committed.afterCommit { callback() }
            guard !committed.publications.isEmpty else { return }
            bus?.publish(committed.publications, links: committed.links)
        }
        let shard = shards > 1 ? target : nil
        if let riding, riding > .zero {
            return try await store.write(shard: shard, ridingWithin: riding, body, afterCommit: afterCommit).value
        }
        if let declaration {
            return try await store.write(shard: shard, declaring: declaration, body, afterCommit: afterCommit).value
        }
        return try await store.write(shard: shard, body, afterCommit: afterCommit).value
    }

    /// Runs a domain operation: storage failures that may pass (busy, serialization, a lost
    /// connection; ``StoreError/isRetryable``) are retried a few times with a short backoff,
    /// then answered 503 `store_unavailable`; any other storage failure is a 500 that says
    /// nothing was changed; domain errors pass through. `work` must be safe to run again:
    /// each attempt is its own transaction, and a failed one changed nothing.
    @discardableResult
    func run<T: Sendable>(_ work: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await work()
            } catch let error as ChatError {
                throw error
            } catch StoreError.full(let detail) {
                // Nothing was written; a retry helps only once space is freed (docs/operations.md).
                storage.failed(.full)
                configuration.logger.failed("the disk is full; answered 507 storage_full and stored nothing", StoreError.full(detail), level: .error)
                throw ChatError.storageFull
            } catch let error as StoreError where error.isRetryable {
                attempt += 1
                guard attempt < Self.storeAttempts else {
                    storage.failed(.failing)
                    configuration.logger.warning("storage unavailable; answered 503", metadata: ["error": .string(error.description),
                                                                                               "attempts": .integer(Int64(attempt))])
                    throw ChatError.storeUnavailable
                }
                configuration.logger.debug("storage busy; retrying", metadata: ["error": .string(error.description), "attempt": .integer(Int64(attempt))])
                try? await Task.sleep(for: .milliseconds(5 << (2 * attempt)))  // 20 ms, 80 ms
            } catch {
                // Statements never carry bound values into their errors (StoreError), so the
                // cause can be logged whole: nothing of a message, token or password is in it.
                storage.failed(.failing)
                configuration.logger.failed("storage failed; answered 500 and changed nothing", error, level: .error)
                throw ChatError.internalError
            }
        }
    }

    /// How many times ``run(_:)`` tries an operation whose storage failure may pass.
    static let storeAttempts = 3
}

/// A write's result and what it publishes.
struct Committed<Value: Sendable>: Sendable {
    var value: Value
    var publications: [Publication]
    var links: [EventLink] = []
    /// What hooks asked to run once the write committed (``Transaction/onCommit(_:)``).
    var afterCommit: [@Sendable () -> Void] = []
}

/// A password hash of a random secret, made once, on first use.
final class DecoyHash: Sendable {
    private let cost: Crypto.PasswordCost
    private let hash = LockedValue<String?>(nil)

    init(cost: Crypto.PasswordCost) { self.cost = cost }

    /// The hash; the first caller computes it (tens of milliseconds), later ones wait or reuse it.
    var value: String {
        hash.withLock { hash in
            if let hash { return hash }
            // Only an allocation failure stops the hash; a malformed one still fails to verify.
            let made = (try? Crypto.hashPassword(Crypto.randomToken(), cost: cost)) ?? "$argon2id$unavailable"
            hash = made
            return made
        }
    }
}

/// The signed-in user a request acts for.
package struct Caller: Sendable, Hashable {
    /// The app the session belongs to.
    package var appID: Int64
    /// The user's internal key.
    package var userKey: Int64
    /// The user's public id.
    package var userID: UserID
    /// The session's internal key (signing out "this device" deletes it); 0 for the app's
    /// backend.
    package var sessionKey: Int64
    /// The app's backend acting through the server API (`/v1/server/…`) as the app's system
    /// account: it may manage and read any conversation of its app, and edit or delete any
    /// message, without being a member.
    package var actsAsApp: Bool = false
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let value = LockedValue(0)
    func next() -> Int {
        value.withLock { value in
            value &+= 1
            return value
        }
    }
}

/// Sessions by token hash, so authenticating a request is a dictionary lookup, not a query.
/// Signing out removes entries on this node at once. Entries also expire after a minute, which
/// bounds how long another node's sign-out takes to be seen here once several nodes share a
/// database.
final class SessionCache: Sendable {
    struct Entry {
        var caller: Caller
        var expiresAt: Int64
        var cachedAt: Int64
    }

    /// The entries and the indexes into them, changed together under one lock.
    private struct Table {
        var entries: [[UInt8]: Entry] = [:]
        /// Token hashes by session and by user, so signing out touches only that user's entries.
        var bySession: [Int64: [UInt8]] = [:]
        var byUser: [Int64: Set<[UInt8]>] = [:]

        /// Drops one entry from every index.
        mutating func forget(_ hash: [UInt8]) {
            guard let entry = entries.removeValue(forKey: hash) else { return }
            bySession.removeValue(forKey: entry.caller.sessionKey)
            byUser[entry.caller.userKey]?.remove(hash)
            if byUser[entry.caller.userKey]?.isEmpty == true { byUser.removeValue(forKey: entry.caller.userKey) }
        }
    }

    static let freshness: Int64 = 60_000
    private let table = LockedValue(Table())
    private let capacity = 200_000

    func get(_ hash: [UInt8], now: Int64) -> Caller? {
        table.withLock { table in
            guard let entry = table.entries[hash] else { return nil }
            guard entry.expiresAt > now, now - entry.cachedAt < Self.freshness else {
                table.forget(hash)
                return nil
            }
            return entry.caller
        }
    }

    func put(_ hash: [UInt8], _ entry: Entry) {
        table.withLock { table in
            if table.entries.count >= capacity { table = Table() }
            table.entries[hash] = entry
            table.bySession[entry.caller.sessionKey] = hash
            table.byUser[entry.caller.userKey, default: []].insert(hash)
        }
    }

    func remove(session: Int64) {
        table.withLock { table in
            if let hash = table.bySession[session] { table.forget(hash) }
        }
    }

    /// Forgets every session (test mode's reset removed them all).
    func removeAll() { table.withLock { $0 = Table() } }

    func remove(user: Int64) {
        table.withLock { table in
            for hash in table.byUser[user] ?? [] { table.forget(hash) }
        }
    }
}

/// Apps by public key. Apps change rarely (the CLI), so a miss falls through to the store.
final class AppCache: Sendable {
    private let byKey = LockedValue([String: Int64]())
    func get(_ key: String) -> Int64? { byKey.withLock { $0[key] } }
    func put(_ key: String, _ id: Int64) { byKey.withLock { $0[key] = id } }
}
