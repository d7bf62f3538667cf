import Foundation
package import ParleyChat
package import ParleyNet
import ParleyCrypto
package import ParleyLog
import ParleyMedia
import ParleyPusher
import ParleyPush
import ParleyWebhooks
import ParleyStore
import ParleyStoreSQLite
import ParleyStorePostgres
import ParleyRedis
import ParleySync
import ParleyMediaService
import ParleyLinkPreview
import ParleyOutbound

/// A running Parley server: its store, its domain, its loops, its HTTP listener and routes.
///
/// ```swift
/// let server = try await ParleyServer.start(configuration)   // migrates, binds; returns once listening
/// print(server.url)
/// await server.shutdown()
/// ```
package final class ParleyServer: Sendable {
    /// The configuration it runs with.
    package let configuration: ServerConfiguration
    /// The base URL, with the real port.
    package let url: String
    /// The bound address.
    package var localAddress: SocketAddress { http.localAddress }
    /// The app created by this start (first start only), with its secret; nil otherwise.
    package let createdApp: AppCredentials?
    /// Every app's name and public key.
    package let apps: [AppCredentials]
    private let group: EventLoopGroup
    private let http: HTTPServer
    private let store: any GroupCommitStore
    private let collector: Task<Void, Never>
    private let sweeper: Task<Void, Never>
    private let shutDown = LockedValue(false)
    /// Held for the server's life: one server per data directory, and no restore under it.
    private let lock: DataDirectoryLock?
    /// The bus to the other nodes (`--redis-url`), stopped at shutdown.
    private let redisBus: RedisBus?
    /// Who is online across nodes (with `--redis-url`); this node's users leave it at shutdown.
    private let presence: RedisPresence?
    /// The Pusher channels of every node (with `--redis-url`); this node's members leave at shutdown.
    private let channelDirectory: RedisChannelDirectory?
    /// Sends the push outbox (nil: push is off).
    private let push: PushService?
    /// Delivers the webhook outbox.
    private let webhooks: WebhookService
    /// The certificate HTTPS and WSS connections are accepted with (reloaded on SIGHUP).
    private let tls: TLSCertificateStore?
    /// The server's log (`--log-level`, `--log-format`).
    package let logger: Logger

    private init(configuration: ServerConfiguration, group: EventLoopGroup, http: HTTPServer, store: any GroupCommitStore,
                 createdApp: AppCredentials?, apps: [AppCredentials], collector: Task<Void, Never>, sweeper: Task<Void, Never>,
                 lock: DataDirectoryLock?, bus: RedisBus?,
                 presence: RedisPresence?, channelDirectory: RedisChannelDirectory?, tls: TLSCertificateStore?, push: PushService?,
                 webhooks: WebhookService, logger: Logger) {
        self.logger = logger
        self.push = push
        self.webhooks = webhooks
        self.lock = lock
        self.channelDirectory = channelDirectory
        self.tls = tls
        self.redisBus = bus
        self.presence = presence
        self.configuration = configuration
        self.group = group
        self.http = http
        self.store = store
        self.collector = collector
        self.sweeper = sweeper
        self.createdApp = createdApp
        self.apps = apps
        let host = http.localAddress.description.hasPrefix("[") ? "[\(configuration.host)]" : configuration.host
        url = "\(tls == nil ? "http" : "https")://\(host):\(http.localAddress.port)"
    }

    /// Opens the database (creating and migrating it), creates the default app on first
    /// start, starts the loops and binds.
    ///
    /// - Parameter logHandler: where the log goes; by default standard error, at the
    ///   configuration's level and format (tests pass a ``RecordingLogHandler``).
    /// - Throws: ``StartError`` saying what to change (a busy port, an unwritable directory,
    ///   a database written by a newer version).
    package static func start(_ configuration: ServerConfiguration, logHandler: (any LogHandler)? = nil) async throws -> ParleyServer {
        ProcessSetup.prepare()
        let logger = Logger(label: "parley", handler: logHandler ?? StreamLogHandler(minimumLevel: configuration.logLevel,
                                                                                       format: configuration.logFormat))
        Logger.bootstrap(logger)
        logger.info("starting", metadata: ["version": .string(ParleyVersion.current), "data": .string(configuration.dataDirectory),
                                            "engine": configuration.databaseURL == nil ? "sqlite" : "postgresql"])
        do {
            try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw StartError(message: "cannot create the data directory \(configuration.dataDirectory): \(error.localizedDescription); choose another with --data-dir")
        }
        warnIfOthersCanRead(configuration, logger: logger)
        // The lock guards the SQLite file; on PostgreSQL nodes may share one media directory.
        let lock = configuration.databaseURL == nil ? try DataDirectoryLock(directory: configuration.dataDirectory) : nil
        let redisBus = try makeRedisBus(configuration)
        let bus: any Bus = redisBus ?? InProcessBus()
        // With several nodes the sign-in and sign-up budgets are counted once for all of them.
        let counters = redisBus.map { RedisCounters(url: $0.url) }
        // Before-send hooks go through the webhooks' address rules (docs/trust-and-safety.md).
        var hookSettings = configuration.webhooks
        hookSettings.userAgent = "Parley-Hooks/\(ParleyVersion.current)"
        let beforeSend: BeforeSendClient
        do {
            beforeSend = try BeforeSendClient(configuration: hookSettings)
        } catch {
            throw StartError(message: "cannot set up before-send hooks: \(error)")
        }
        let jwks: JWKSClient
        do {
            jwks = try JWKSClient(configuration: hookSettings)
        } catch {
            throw StartError(message: "cannot set up key set fetching: \(error)")
        }
        // Test mode's faults: a store made unavailable, webhooks made to fail (docs/test-mode.md).
        let faults = configuration.testMode ? TestFaults() : nil
        let (store, chat) = try await openChat(configuration, bus: bus, sharedCounters: counters, beforeSend: beforeSend, jwks: jwks,
                                               faults: faults, logger: logger)
        counters?.setNamespace("parley:\(chat.epoch)")
        if let postgres = store as? PostgresStore {
            // Each node fans out only to its own devices: without a bus between nodes, a second
            // node on the same database would leave every device on the other one unaware.
            // Nodes with --redis-url share the database; one without it must be alone.
            let claimed: Bool
            do {
                claimed = try postgres.claimNode(shared: redisBus != nil)
            } catch {
                store.close()
                throw StartError(message: "cannot claim the database \(postgres.redactedURL): \(error)")
            }
            let nodeLog = logger.labelled("parley.node")
            postgres.onClaimLost = { message in
                nodeLog.error("node claim lost: stop one of the servers (docs/operations.md, \"Several nodes\")", metadata: ["reason": .string(message)])
            }
            guard claimed else {
                store.close()
                throw StartError(message: redisBus == nil ? """
                    another parley-server is using the database \(postgres.redactedURL); several nodes on one database need \
                    --redis-url on every node (docs/operations.md, "Several nodes"): stop the other node, or give both --redis-url
                    """ : """
                    another parley-server is using the database \(postgres.redactedURL) without --redis-url, so it cannot share it: \
                    restart that node with --redis-url first (docs/operations.md, "Several nodes")
                    """)
            }
        }
        if lock != nil {
            // A lone node: every claim on an unfinished upload is its earlier run's, long gone.
            do {
                try await chat.attachments.clearUploadClaims()
            } catch {
                logger.warning("could not clear old upload claims", metadata: ["error": .string("\(error)")])
            }
        }
        // The first start's app is made once the server listens (below): a start that fails
        // before (a port in use, a bad push key) makes none, so no secret is made and never shown.
        let existingApps: [AppCredentials]
        do {
            existingApps = try await chat.listApps()
        } catch {
            store.close()
            throw StartError(message: "cannot read the apps: \(error)")
        }
        let push: PushService?
        // Test mode without real providers pushes to its built-in APNs and FCM (docs/test-mode.md).
        let testPushes = configuration.testMode && !configuration.push.isOn ? TestPushes() : nil
        do {
            push = configuration.push.isOn || testPushes != nil
                ? try PushService(chat: chat, configuration: configuration.push, testPushes: testPushes, logger: logger) : nil
        } catch {
            store.close()
            throw StartError(message: "cannot set up push: \(error)")
        }
        let webhooks: WebhookService
        do {
            var settings = configuration.webhooks
            settings.userAgent = "Parley-Webhooks/\(ParleyVersion.current)"
            let signal = chat.webhooks.webhookHook?.signal ?? WebhookSignal()
            webhooks = try WebhookService(chat: chat, configuration: settings, signal: signal, beforeSend: beforeSend,
                                          failing: { faults?.webhookFails($0) ?? false }, logger: logger)
        } catch {
            store.close()
            throw StartError(message: "cannot set up webhooks: \(error)")
        }
        let blobs: FileBlobStore
        let partials: PartialUploadStore
        do {
            let mediaDirectory = (configuration.dataDirectory as NSString).appendingPathComponent("media")
            blobs = try FileBlobStore(root: mediaDirectory)
            partials = try PartialUploadStore(root: mediaDirectory + "/partial")
        } catch {
            store.close()
            throw StartError(message: "cannot create the media directory in \(configuration.dataDirectory): \(error.localizedDescription)")
        }
        let media = MediaService(chat: chat, blobs: blobs, partials: partials, configuration: configuration.media, logger: logger)
        var linkPreviews: LinkPreviewService?
        if let wakeup = chat.configuration.linkPreviewWakeup {
            do {
                let fetcher = LinkPreviewFetcher(allowedPrivate: configuration.linkPreviews.allowPrivate,
                                                 trust: try TrustStore(extraFile: configuration.webhooks.outboundCAFile))
                linkPreviews = LinkPreviewService(chat: chat, media: media, fetcher: fetcher, wakeup: wakeup,
                                                  cacheLifetime: configuration.linkPreviews.cacheLifetime, logger: logger.labelled("parley.link-previews"))
            } catch {
                store.close()
                throw StartError(message: "cannot set up link previews: \(error)")
            }
        }
        let group: EventLoopGroup
        do {
            group = try EventLoopGroup(loopCount: configuration.threads ?? EventLoopGroup.coreCount)
        } catch {
            store.close()
            throw StartError(message: "cannot start event loops: \(error)")
        }
        var tls: TLSCertificateStore?
        if let certificate = configuration.tlsCertificateFile, let key = configuration.tlsKeyFile {
            do {
                tls = try TLSCertificateStore(certificateFile: certificate, keyFile: key)
            } catch {
                group.shutdown()
                redisBus?.stop()
                store.close()
                throw StartError(message: "cannot serve TLS: \(error); check --tls-cert-file and --tls-key-file")
            }
        }
        var httpConfiguration = HTTPServerConfiguration()
        httpConfiguration.tls = tls
        httpConfiguration.host = configuration.host
        httpConfiguration.port = configuration.port
        httpConfiguration.limits.maxBodySize = configuration.maxBodyBytes
        httpConfiguration.timeouts.minimumRate = configuration.minBodyRate
        httpConfiguration.connections.total = configuration.maxConnections
        if let perAddress = configuration.maxConnectionsPerAddress {
            httpConfiguration.connections.perAddress = perAddress
            httpConfiguration.connections.perAddressCoversPrivate = true
        }
        httpConfiguration.logger = logger.labelled("parley.http")
        if configuration.testMode { httpConfiguration.everyResponse = [("Parley-Test-Mode", "on")] }
        let startedAt = ContinuousClock.now
        // With several nodes, who is online is decided across them (in Redis, under the database's epoch).
        let presence = redisBus.map { RedisPresence(url: $0.url, node: $0.node, prefix: "parley:\(chat.epoch)") }
        let fanout = Fanout<EncodedWebSocketFrame>(chat: chat, bus: bus, presenceGrace: configuration.realtime.presenceGrace,
                                                   directory: presence) { bytes in
            EncodedWebSocketFrame(utf8: bytes)
        }
        let channelDirectory = redisBus.map { RedisChannelDirectory(url: $0.url, node: $0.node, prefix: "parley:\(chat.epoch):pusher") }
        let pusher = PusherService(chat: chat, bus: bus, configuration: configuration.pusher, directory: channelDirectory)
        if let redisBus {
            // The receivers (fan-out, Pusher hub) are subscribed: start ordering and receiving,
            // on a channel named after the database's history, which every node of it shares.
            do {
                try await redisBus.start(source: chat, channel: "parley:\(chat.epoch):bus")
            } catch {
                presence?.stop()
                channelDirectory?.stop()
                redisBus.stop()
                store.close()
                throw StartError(message: "cannot start the bus between nodes: \(error)")
            }
        }
        var busStatistics: (@Sendable () -> RedisBus.Statistics)?
        if let redisBus { busStatistics = { redisBus.currentStatistics } }
        var router = Routes.make(configuration: configuration, group: group, startedAt: startedAt, store: store, fanout: fanout, media: media,
                                 pusher: pusher, bus: busStatistics, push: push, webhooks: webhooks, chat: chat, linkPreviews: linkPreviews)
        ChatRoutes.add(to: &router, chat: chat)
        ServerRoutes.add(to: &router, chat: chat, requestsPerSecond: configuration.serverAPIRequestsPerSecond,
                         test: faults.map { TestModeParts(faults: $0, pushes: testPushes, fanout: fanout, hasRedis: configuration.redisURL != nil) })
        MediaRoutes.add(to: &router, media: media, chat: chat)
        let webAppKey = LockedValue((existingApps.first { $0.name == "default" } ?? existingApps.first)?.publicKey)
        WebRoutes.add(to: &router) { webAppKey.withLock { $0 } }
        var webSocket = WebSocketConfiguration()
        webSocket.pingInterval = configuration.pingInterval
        RealtimeRoutes.add(to: &router, context: RealtimeContext(chat: chat, fanout: fanout, configuration: configuration.realtime,
                                                                 heartbeatSeconds: Int(configuration.pingInterval.components.seconds),
                                                                 logger: logger),
                           webSocket: webSocket)
        pusher.addRoutes(to: &router, webSocket: webSocket)
        do {
            let http = try HTTPServer(configuration: httpConfiguration, router: router, group: group)
            let createdApp: AppCredentials?
            let apps: [AppCredentials]
            do {
                createdApp = try await chat.createDefaultAppIfNeeded()
                apps = try await chat.listApps()
            } catch {
                await http.shutdown(timeout: .zero)
                throw StartError(message: "cannot create the default app: \(error)")
            }
            webAppKey.withLock { $0 = (apps.first { $0.name == "default" } ?? apps.first)?.publicKey }
            let interval = configuration.media.collectionIntervalSeconds
            let mediaLog = logger.labelled("parley.media")
            let collector = Task {
                // 0: another node collects (docs/operations.md, "Several nodes").
                while interval > 0 && !Task.isCancelled {
                    do {
                        let removed = try await media.collect()
                        if removed > 0 { mediaLog.info("unused uploads removed", metadata: ["files": .integer(Int64(removed))]) }
                    } catch {
                        mediaLog.warning("media collection failed; retrying next interval", metadata: ["error": .string("\(error)")])
                    }
                    try? await Task.sleep(for: .seconds(interval))
                }
            }
            let retentionInterval = configuration.retentionIntervalSeconds
            let retentionLog = logger.labelled("parley.retention")
            let workerLog = logger.labelled("parley.workers")
            let scheduledLog = logger.labelled("parley.scheduled")
            let sweeper = Task {
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        // Several nodes may all sweep: each conversation is swept by one at a time.
                        while retentionInterval > 0 && !Task.isCancelled {
                            try? await Task.sleep(for: .seconds(retentionInterval))
                            if Task.isCancelled { break }
                            do {
                                let sweep = try await chat.retention.sweep()
                                if sweep.messages > 0 {
                                    retentionLog.info("old messages removed", metadata: ["messages": .integer(Int64(sweep.messages)),
                                                                                         "conversations": .integer(Int64(sweep.conversations))])
                                }
                            } catch {
                                retentionLog.warning("retention sweep failed; retrying next interval", metadata: ["error": .string("\(error)")])
                            }
                        }
                    }
                    group.addTask {
                        // Scheduled messages, sent within a second of their time by whichever
                        // node claims them (docs/api.md, "Scheduled messages").
                        let worker = chat.workers.register("scheduled")
                        defer { worker.stopped() }
                        let holder = "scheduled_" + Crypto.randomToken(bytes: 6)
                        while !Task.isCancelled {
                            worker.idle()
                            // A read first: claiming is a write (on PostgreSQL, on the writer
                            // that takes every shard's lock), made only when something is due.
                            var wait = Duration.seconds(1)
                            do {
                                if let next = try await chat.scheduling.nextDue() {
                                    let milliseconds = Int((next.timeIntervalSince(chat.now) * 1000).rounded(.up))
                                    if milliseconds <= 0 {
                                        // Nothing settled: due ones are claimed by a node sending them, or
                                        // waiting out slow mode; a lease that runs out is seen within a second.
                                        if try await chat.scheduling.sendDue(holder: holder) > 0 { continue }
                                    } else {
                                        wait = min(wait, .milliseconds(max(10, milliseconds)))
                                    }
                                }
                            } catch {
                                scheduledLog.warning("cannot send scheduled messages; retrying", metadata: ["error": .string("\(error)")])
                            }
                            try? await Task.sleep(for: wait)
                        }
                    }
                    if chat.tracing.isOn {
                        // Delivery traces: this node's steps written once a second, old ones
                        // removed once a minute (docs/trace.md).
                        let traceLog = logger.labelled("parley.trace")
                        group.addTask {
                            let worker = chat.workers.register("trace")
                            defer { worker.stopped() }
                            var swept = ContinuousClock.now
                            while true {
                                let stopping = Task.isCancelled
                                worker.idle()
                                if !stopping { try? await Task.sleep(for: .seconds(1)) }
                                do {
                                    try await chat.tracing.flush()
                                    if ContinuousClock.now - swept >= .seconds(60) {
                                        swept = .now
                                        try await chat.tracing.sweep()
                                    }
                                } catch {
                                    traceLog.warning("cannot write delivery traces; retrying", metadata: ["error": .string("\(error)")])
                                }
                                if stopping { break }  // the steps of the last second written, once more
                            }
                        }
                    }
                    if let linkPreviews {
                        // Link previews: jobs sends left, on this node or another (docs/link-previews.md).
                        group.addTask { await linkPreviews.run() }
                    }
                    group.addTask {
                        // The watchdog: an idle worker goes round every second or two; one quiet
                        // for 30 s is stuck, and what it serves waits (issue 31, item 1).
                        while !Task.isCancelled {
                            try? await Task.sleep(for: .seconds(10))
                            for stalled in chat.workers.stalled(after: Self.workerStall) {
                                workerLog.failed("a background worker has stopped going round; what it sends waits (restart the node if this lasts)",
                                                 WorkerStalled(name: stalled.name, seconds: Int(stalled.quiet.components.seconds)), level: .error,
                                                 metadata: ["worker": .string(stalled.name)])
                            }
                        }
                    }
                }
            }
            push?.start()
            webhooks.start()
            let server = ParleyServer(configuration: configuration, group: group, http: http, store: store, createdApp: createdApp, apps: apps,
                                      collector: collector, sweeper: sweeper, lock: lock, bus: redisBus, presence: presence,
                                      channelDirectory: channelDirectory, tls: tls, push: push, webhooks: webhooks, logger: logger)
            logger.info("listening", metadata: ["url": .string(server.url), "threads": .integer(Int64(group.loops.count)),
                                                "push": .string(push?.providerNames.joined(separator: ",") ?? "off"),
                                                "nodes": redisBus == nil ? "one" : "several"])
            if configuration.testMode {
                logger.warning("test mode: tests may move this server's clock; never serve users with it (docs/test-mode.md)")
            }
            return server
        } catch let error as IOError where error.code == EADDRINUSE {
            group.shutdown()
            presence?.stop()
            channelDirectory?.stop()
            redisBus?.stop()
            store.close()
            throw StartError(message: "port \(configuration.port) on \(configuration.host) is already in use; stop the other process or pass --port")
        } catch let error as StartError {
            group.shutdown()
            presence?.stop()
            channelDirectory?.stop()
            redisBus?.stop()
            store.close()
            throw error
        } catch {
            group.shutdown()
            presence?.stop()
            channelDirectory?.stop()
            redisBus?.stop()
            store.close()
            throw StartError(message: "cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
    }

    /// The bus to the other nodes, when `--redis-url` names one.
    static func makeRedisBus(_ configuration: ServerConfiguration) throws -> RedisBus? {
        if (configuration.logShards ?? 1) > 1, configuration.databaseURL == nil {
            throw StartError(message: "--log-shards is for PostgreSQL (--database-url): SQLite has one writer, and one writer is one shard")
        }
        guard let text = configuration.redisURL else { return nil }
        guard configuration.databaseURL != nil else {
            throw StartError(message: "--redis-url joins nodes that share one PostgreSQL database: give --database-url as well")
        }
        do {
            return try RedisBus(url: try RedisURL(text))
        } catch {
            throw StartError(message: "cannot use Redis: \(error); start Redis or fix --redis-url")
        }
    }

    /// Opens the store (PostgreSQL at `--database-url`, else SQLite in the data directory) and
    /// brings its schema up to date.
    /// `<hostname>:<port>` (`<hostname>/<pid>` on an ephemeral port): a node's name in traces.
    static func defaultNodeName(port: UInt16) -> String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count) == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "node"
        return port == 0 ? "\(host)/\(getpid())" : "\(host):\(port)"
    }

    static func openChat(_ configuration: ServerConfiguration, bus: (any Bus)? = nil, sharedCounters: (any SharedCounters)? = nil,
                         beforeSend: (any BeforeSendTransport)? = nil, jwks: (any JWKSFetcher)? = nil, faults: TestFaults? = nil,
                         logger: Logger = .discarding()) async throws -> (any GroupCommitStore, Chat) {
        do {
            try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw StartError(message: "cannot create the data directory \(configuration.dataDirectory): \(error.localizedDescription); choose another with --data-dir")
        }
        var store: any GroupCommitStore
        let path: String
        if let url = configuration.databaseURL {
            do {
                let postgres = try PostgresStore(url: url)
                path = postgres.redactedURL
                store = postgres
            } catch {
                throw StartError(message: "\(error); check that PostgreSQL is running, the URL's user may connect and its database exists (createdb)")
            }
        } else {
            path = (configuration.dataDirectory as NSString).appendingPathComponent("parley.sqlite")
            var storeConfiguration = SQLiteStore.Configuration()
            storeConfiguration.synchronous = configuration.sqliteSynchronous
            do {
                store = try SQLiteStore(path: path, configuration: storeConfiguration)
            } catch {
                throw StartError(message: "\(error); check that \(path) is a Parley database and the directory is writable")
            }
        }
        if let faults { store = TestFaultStore(store, faults: faults) }
        var chatConfiguration = Chat.Configuration()
        chatConfiguration.passwordCost = Crypto.PasswordCost(passes: configuration.argon2Passes, memoryBytes: configuration.argon2MemoryMiB << 20)
        chatConfiguration.concurrentPasswordHashes = configuration.passwordHashes
        chatConfiguration.signUpsPerAddressPerHour = configuration.signUpsPerHour
        chatConfiguration.deliveryUpdateInterval = configuration.deliveryUpdateInterval
        chatConfiguration.sharedCounters = sharedCounters
        chatConfiguration.webhooksAllowPrivate = configuration.webhooks.allowPrivate
        chatConfiguration.linkPreviews = configuration.linkPreviews.mode == .on
        chatConfiguration.linkPreviewWakeup = configuration.linkPreviews.mode == .on ? Wakeup() : nil
        chatConfiguration.beforeSendTransport = beforeSend
        chatConfiguration.jwksFetcher = jwks
        chatConfiguration.logger = logger.labelled("parley.chat")
        if configuration.testMode { chatConfiguration.now = { TestClock.now() } }
        chatConfiguration.traceRetention = configuration.traceRetentionHours > 0 ? .seconds(configuration.traceRetentionHours * 3600) : nil
        chatConfiguration.nodeName = configuration.nodeName ?? Self.defaultNodeName(port: configuration.port)
        chatConfiguration.logShards = configuration.logShards
        do {
            chatConfiguration.sealer = try secretsKey(configuration, logger: logger)
        } catch {
            store.close()
            throw error
        }
        do {
            // Push rows are written in each message's own transaction when push is on; webhook
            // deliveries whenever an endpoint hears the event.
            // The push hook first: its row is queued, and the webhook hook's read carries it, so
            // a write ends on a wait and its savepoint's release need not wait (PostgreSQL).
            var hooks: [any TransactionHook] = []
            if configuration.push.isOn || configuration.testMode {
                hooks.append(PushOutboxHook(confirmationWindow: configuration.push.confirmationWindow))
            }
            hooks.append(WebhookHook())
            let chat = Chat(store: store, configuration: chatConfiguration, bus: bus, hooks: hooks)
            for name in try await chat.migrate() {
                logger.info("migration applied", metadata: ["migration": .string(name)])
            }
            if chat.logShards > 1 {
                logger.info("the event log has shards: a writer for each", metadata: ["shards": .integer(Int64(chat.logShards))])
            }
            let sealed = try await chat.sealSecrets()
            if sealed > 0 { logger.info("secrets stored before sealing are sealed now", metadata: ["secrets": .integer(Int64(sealed))]) }
            return (store, chat)
        } catch {
            store.close()
            throw StartError(message: "cannot prepare the database \(path): \(error)")
        }
    }

    /// The key that seals secrets in the database, from `--secrets-key-file` (default
    /// `<data-dir>/secrets.key`), made on the first start: 32 random bytes as base64, 0600,
    /// written whole before it appears (a temporary file linked into place), so nodes that
    /// start together on one shared directory all read the one that won.
    static func secretsKey(_ configuration: ServerConfiguration, logger: Logger) throws -> SecretSealer {
        let path = configuration.secretsKeyFile ?? (configuration.dataDirectory as NSString).appendingPathComponent("secrets.key")
        if !FileManager.default.fileExists(atPath: path) {
            let temporary = path + ".new-" + Crypto.randomToken(bytes: 6)
            guard writeSecretFile(Data(SecretSealer.newKey()).base64EncodedString(), to: temporary) else {
                throw StartError(message: "cannot write the secrets key \(path): check that its directory exists and is writable, or give --secrets-key-file")
            }
            defer { unlink(temporary) }
            if link(temporary, path) == 0 {
                logger.info("made the secrets key file: back it up apart from the database, and give every node the same",
                            metadata: ["path": .string(path)])
            } else if errno != EEXIST {
                throw StartError(message: "cannot write the secrets key \(path): \(String(cString: strerror(errno)))")
            }
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)),
              let sealer = SecretSealer(key: [UInt8](key)) else {
            throw StartError(message: "\(path) is not a Parley secrets key (32 random bytes, base64): restore it from your backup, or give --secrets-key-file")
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o077 != 0 {
            logger.warning("other users of this machine can read \(path), the key to the stored secrets: chmod 600 \(path)")
        }
        return sealer
    }

    /// Warns when other users of the machine can read the data directory or the database: they
    /// hold every message and the apps' secrets. A directory made by this build is 0700 and its
    /// files 0600 (the binary's umask); one made before, or by hand, is named with the fix.
    static func warnIfOthersCanRead(_ configuration: ServerConfiguration, logger: Logger) {
        let directory = configuration.dataDirectory
        var paths = [(directory, "700")]
        if configuration.databaseURL == nil {
            let database = (directory as NSString).appendingPathComponent("parley.sqlite")
            paths += [database, database + "-wal", database + "-shm"].map { ($0, "600") }
        }
        for (path, wanted) in paths {
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { continue }
            logger.warning("other users of this machine can read \(path), which holds messages and secrets: chmod \(wanted) \(path)",
                           metadata: ["mode": .string(String(info.st_mode & 0o777, radix: 8))])
        }
    }

    /// Runs `parley-server apps …` against the data directory.
    ///
    /// - Returns: the text to print.
    package static func runApps(_ command: AppsCommand, configuration: ServerConfiguration) async throws -> String {
        // Only `create` may make a database: the others would leave an empty one behind a typo.
        let creates = if case .create = command { true } else { false }
        let database = (configuration.dataDirectory as NSString).appendingPathComponent("parley.sqlite")
        if configuration.databaseURL == nil, !creates, !FileManager.default.fileExists(atPath: database) {
            throw StartError(message: "no database at \(database): pass the server's --data-dir (or --database-url); nothing was created")
        }
        let (store, chat) = try await openChat(configuration)
        defer { store.close() }
        switch command {
        case .list:
            let apps = try await chat.listApps()
            if apps.isEmpty { return "No apps yet: start the server once, or run 'parley-server apps create <name>'." }
            return apps.map { "\($0.name)\t\($0.publicKey)\tpusher app id \($0.pusherID)\tcreated \(ISO8601DateFormatter().string(from: $0.createdAt))" }
                .joined(separator: "\n")
        case .create(let name):
            return describe(try await chat.createApp(name: name), verb: "Created")
        case .rotateSecret(let app):
            return describe(try await chat.backend.rotateSecret(app: app, grace: configuration.secretGrace), verb: "New secret for")
        case .pushContent(let app, let idOnly):
            try await chat.notifications.setPushContent(app: app, idOnly: idOnly)
            return idOnly ? "Pushes of app '\(app)' now carry only the message's ids (the app's extension fetches the text)."
                          : "Pushes of app '\(app)' now carry the message's text."
        case .linkPreviews(let app, let enabled):
            try await chat.linkPreviews.setEnabled(appNamed: app, enabled)
            return enabled ? "Messages of app '\(app)' now get link previews (on nodes started with --link-previews on, the default)."
                           : "Messages of app '\(app)' no longer get link previews; the ones they have stay."
        }
    }

    /// How an app's credentials are shown when its secret is new.
    package static func describe(_ app: AppCredentials, verb: String) -> String {
        """
        \(verb) app '\(app.name)'
          app key:    \(app.publicKey)   (clients send it as X-Parley-App-Key)
          app secret: \(app.secret ?? "(unchanged)")   (for your backend only; shown once)
          pusher app id: \(app.pusherID)   (with the key and secret, for the Pusher libraries: docs/pusher.md)
        """
    }

    /// Lines printed at start: the app just created (with its secret), or every app's key.
    /// What the start banner says of push: the providers, or that it is off and how to turn it on.
    package var pushBanner: String {
        guard let push else { return "Push: off (give --apns-key-file … or --fcm-credentials-file; docs/push.md)" }
        if push.isTestMode { return "Push: test mode's built-in APNs and FCM (GET /v1/test/pushes)" }
        return "Push: " + push.providerNames.joined(separator: ", ")
    }

    /// The first start's app: its secret printed only when `toTerminal` (a person reads it);
    /// else written to `<data-dir>/first-app-secret` (0600, never over an existing file) and
    /// only the file named, so that a journal or container log never keeps it.
    package func appsBanner(toTerminal: Bool) -> [String] {
        var lines: [String] = []
        if var createdApp {
            if !toTerminal, let secret = createdApp.secret {
                let path = (configuration.dataDirectory as NSString).appendingPathComponent("first-app-secret")
                createdApp.secret = Self.writeSecretFile(secret, to: path)
                    ? "written to \(path) (not printed: this output may be kept in a log; read it once, then delete the file)"
                    : "(cannot write \(path); rotate it with 'parley-server apps rotate-secret \(createdApp.name)' on a terminal)"
            }
            lines.append(Self.describe(createdApp, verb: "First start: created"))
        }
        for app in apps where app.publicKey != createdApp?.publicKey {
            lines.append("App '\(app.name)' key: \(app.publicKey)   pusher app id: \(app.pusherID)")
        }
        return lines
    }

    /// Writes `secret` to a new file only this user can read; false when it cannot.
    static func writeSecretFile(_ secret: String, to path: String) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let bytes = Array((secret + "\n").utf8)
        return bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) } == bytes.count
    }

    /// Open connections (HTTP and WebSocket).
    package var connectionCount: Int { http.connectionCount }

    /// Graceful stop: see ``HTTPServer/shutdown(timeout:)``; then the loops stop and the
    /// store finishes its queued writes and closes.
    /// Later calls return at once: the loops are gone, and stopping them again would wait for
    /// them for ever.
    /// Loads the TLS certificate and key files again (SIGHUP): connections accepted from now on
    /// use them. Nil when the server does not serve TLS; a failure keeps the current certificate.
    package func reloadTLS() -> Result<Void, TLSError>? {
        guard let tls else { return nil }
        return Result { () throws(TLSError) in try tls.reload() }
    }

    /// How long an idle worker may be quiet before the log calls it stuck.
    static let workerStall = Duration.seconds(30)

    /// What a stuck worker is logged with.
    struct WorkerStalled: Error, CustomStringConvertible {
        var name: String
        var seconds: Int
        var description: String { "\(name) quiet for \(seconds) s" }
    }

    package func shutdown() async {
        guard shutDown.withLock({ done in defer { done = true }; return !done }) else { return }
        logger.info("stopping", metadata: ["open.connections": .integer(Int64(connectionCount))])
        collector.cancel()
        sweeper.cancel()
        push?.stop()
        webhooks.stop()
        await http.shutdown(timeout: configuration.shutdownTimeout)
        group.shutdown()
        presence?.stop()
        channelDirectory?.stop()
        redisBus?.stop()
        store.close()
        logger.info("stopped")
        logger.handler.flush()
    }
}

/// A start-up failure with a message that says what to do.
package struct StartError: Error, CustomStringConvertible {
    /// What went wrong and how to fix it.
    package var message: String
    package var description: String { message }
}
