import Foundation
package import ParleyLog
import ParleyOptions
package import ParleyPusher
package import ParleyPush
package import ParleyWebhooks
import ParleyRedis
package import ParleyStoreSQLite
package import ParleyMediaService
package import ParleyLinkPreview

/// `parley-server`'s settings, from command-line options and `PARLEY_*` environment variables
/// (options win). Parsing is a pure function so it is tested without a process.
package struct ServerConfiguration: Sendable, Equatable {
    /// Address to listen on. `--host`, `PARLEY_HOST`. Default: 127.0.0.1.
    package var host = "127.0.0.1"
    /// Port; 0 picks a free one. `--port`, `PARLEY_PORT`. Default: 8080.
    package var port: UInt16 = 8080
    /// Where data lives. `--data-dir`, `PARLEY_DATA_DIR`. Default: ./data.
    package var dataDirectory = "./data"
    /// Event loops (threads). `--threads`, `PARLEY_THREADS`. Default: one per core.
    package var threads: Int? = nil
    /// Largest request body by default. `--max-body-bytes`, `PARLEY_MAX_BODY_BYTES`. Default: 1 MiB.
    package var maxBodyBytes = 1 << 20
    /// Most open connections. `--max-connections`, `PARLEY_MAX_CONNECTIONS`. Default, and the
    /// most it may be: the descriptor limit less 256 (``ConnectionLimits/effectiveTotal``).
    package var maxConnections: Int? = nil
    /// Most open connections from one address (IPv6: one /64). `--max-connections-per-address`,
    /// `PARLEY_MAX_CONNECTIONS_PER_ADDRESS`. Default: 1000 for public addresses, none for
    /// loopback and private ones (a proxy in front); given, it covers every address; 0: none.
    package var maxConnectionsPerAddress: Int? = nil
    /// Slowest average a request body (or a file response) may arrive at after 10 s, in bytes
    /// per second. `--min-body-rate`, `PARLEY_MIN_BODY_RATE`. Default: 500; 0: no floor.
    package var minBodyRate = 500
    /// When set, `/metrics` answers only `Authorization: Bearer <token>`. `--metrics-token`,
    /// `PARLEY_METRICS_TOKEN`. Default: none (open, as a scrape target usually is on a private network).
    package var metricsToken: String? = nil
    /// The key that seals the secrets the server must read back. `--secrets-key-file`,
    /// `PARLEY_SECRETS_KEY_FILE`. Default: `<data-dir>/secrets.key`, made at the first start.
    package var secretsKeyFile: String? = nil
    /// Largest WebSocket message. `--max-message-bytes`, `PARLEY_MAX_MESSAGE_BYTES`. Default: 1 MiB.
    package var maxMessageBytes = 1 << 20
    /// How long to wait for in-flight work on SIGINT/SIGTERM. `--shutdown-timeout`. Default: 10 s.
    package var shutdownTimeout: Duration = .seconds(10)
    /// The interval between WebSocket pings (whole seconds). `--ping-interval`, `PARLEY_PING_INTERVAL`. Default: 30 s.
    package var pingInterval: Duration = .seconds(30)
    /// Serve the conformance and benchmark endpoints (`/echo`, `/echo/ws`, `/echo/broadcast`).
    /// `--enable-echo`, `PARLEY_ENABLE_ECHO=1`. Default: off.
    package var enableEcho = false
    /// SQLite's `synchronous` setting: `full` (survives power loss) or `normal` (survives
    /// kill -9; may lose the last commits on power loss). `--sqlite-synchronous`. Default: full.
    package var sqliteSynchronous: SQLiteStore.Synchronous = .full
    /// PostgreSQL instead of the embedded SQLite file: `postgres://user:password@host:port/db`
    /// (libpq's URL; `?sslmode=…` and the other libpq parameters pass through).
    /// `--database-url`, `PARLEY_DATABASE_URL`. Default: none (SQLite in the data directory).
    package var databaseURL: String? = nil
    /// The bus between nodes that share one PostgreSQL database: `redis://[:password@]host:port`.
    /// `--redis-url`, `PARLEY_REDIS_URL`. Default: none (one node).
    package var redisURL: String? = nil
    /// Shards of the event log when this server creates a PostgreSQL database (docs/decisions/0026,
    /// part 4; docs/operations.md); fixed from then on. `--log-shards`. Default: 1.
    package var logShards: Int? = nil
    /// HTTPS and WSS: the certificate chain (PEM, leaf first). `--tls-cert-file`,
    /// `PARLEY_TLS_CERT_FILE`; with `--tls-key-file`. Reloaded on SIGHUP. Default: none (HTTP).
    package var tlsCertificateFile: String? = nil
    /// The certificate's private key (PEM). `--tls-key-file`, `PARLEY_TLS_KEY_FILE`.
    package var tlsKeyFile: String? = nil
    /// Argon2id passes for password hashes. `--argon2-passes`. Default: 2.
    package var argon2Passes = 2
    /// Argon2id memory in MiB for password hashes. `--argon2-memory-mib`. Default: 64.
    package var argon2MemoryMiB = 64
    /// Password hashes computed at once; their memory at most is this × `argon2MemoryMiB`,
    /// the peak of a burst of sign-ups or sign-ins. `--password-hashes`. Default: 2.
    package var passwordHashes = 2
    /// Accounts one address may create per hour. `--signups-per-hour`. Default: 60.
    package var signUpsPerHour = 60
    /// The realtime WebSocket's limits and timers (docs/protocol.md). `--presence-grace`,
    /// `--max-replay-events`, `--commands-per-second`, `--auth-timeout`, `--max-queued-bytes`.
    package var realtime = RealtimeConfiguration()
    /// Upload limits, quotas, thumbnails, signed URLs and collection (docs/media.md).
    /// `--max-photo-bytes`, `--max-video-bytes`, `--max-audio-bytes`, `--max-file-bytes`,
    /// `--media-quota-bytes`, `--max-image-pixels`, `--thumbnail-size`, `--keep-photo-metadata`,
    /// `--media-url-lifetime`, `--media-orphan-lifetime`, `--media-gc-interval`.
    package var media = MediaConfiguration()
    /// How often an author in a public channel hears how far their messages got
    /// (`delivery.updated`). `--delivery-update-interval`. Default: 1 s.
    package var deliveryUpdateInterval: Duration = .seconds(1)
    /// The Pusher protocol's timers and limits (docs/pusher.md). `--pusher-activity-timeout`,
    /// `--pusher-pong-timeout`, `--pusher-history`, `--pusher-client-events-per-second`,
    /// `--pusher-api-requests-per-second`.
    package var pusher = PusherConfiguration()
    /// Push to APNs and FCM (docs/push.md): off unless a provider's options are given.
    /// `--apns-key-file`, `--apns-key-id`, `--apns-team-id`, `--apns-topic`, `--apns-url`,
    /// `--fcm-credentials-file`, `--fcm-url`, `--outbound-ca-file`, `--push-window`.
    package var push = PushConfiguration()
    /// Webhook deliveries (docs/webhooks.md). `--webhooks-allow-private`,
    /// `--webhook-retry-window`, `--webhook-first-retry`, `--webhook-concurrency`,
    /// `--webhook-timeout`; `--outbound-ca-file` too.
    package var webhooks = WebhookConfiguration()
    /// Link previews (docs/link-previews.md). `--link-previews`, `--link-previews-allow-private`,
    /// `--link-preview-cache`; `--outbound-ca-file` too.
    package var linkPreviews = LinkPreviewOptions()
    /// Server API requests (`/v1/server/…`) per second per app, twice that in a burst, across
    /// nodes. `--server-api-requests-per-second`. Default: 100.
    package var serverAPIRequestsPerSecond = 100
    /// Seconds between retention sweeps (removal of messages older than their policy);
    /// 0: never on this node. `--retention-interval`. Default: 3600.
    package var retentionIntervalSeconds = 3600
    /// Test mode (docs/test-mode.md): a clock tests move, under `/v1/test/`; every response
    /// says so. Refused with TLS on an address other than loopback. `--test-mode`.
    package var testMode = false
    /// Hours each new message's delivery trace is kept (docs/trace.md); 0 records none.
    /// `--trace-retention`. Default: 24.
    package var traceRetentionHours = 24
    /// The name this node's trace steps carry. `--node-name`. Default: `<hostname>:<port>`.
    package var nodeName: String?
    /// How long a rotated-out app secret keeps working (`apps rotate-secret`).
    /// `--secret-grace`. Default: 24 hours.
    package var secretGrace: Duration = .seconds(24 * 3600)
    /// The least level logged: `error`, `warn`, `info` or `debug`. `--log-level`,
    /// `PARLEY_LOG_LEVEL`. Default: info (one line per request and per socket).
    package var logLevel: LogLevel = .info
    /// How log lines are written: `text` for a terminal, `json` (one object per line) for a
    /// collector. `--log-format`, `PARLEY_LOG_FORMAT`. Default: text.
    package var logFormat: LogFormat = .text

    /// The defaults.
    package init() {}

    /// What the command line asked for.
    package enum Command: Equatable, Sendable {
        /// Start the server.
        case run(ServerConfiguration)
        /// `parley-server apps …`: manage apps in the data directory.
        case apps(AppsCommand, ServerConfiguration)
        /// `parley-server backup <file> [--overwrite]`: a consistent online copy of the database;
        /// an existing file is replaced only with `--overwrite`.
        case backup(file: String, overwrite: Bool, ServerConfiguration)
        /// `parley-server restore <file>`: put a backup back (the server stopped).
        case restore(file: String, ServerConfiguration)
        /// `parley-server admin …`: an operator's command through the server API.
        case admin(AdminCommand)
        case help
        case version
    }

    /// A command-line mistake, with text that says how to fix it.
    package struct UsageError: Error, Equatable, CustomStringConvertible {
        /// What was wrong with the command line.
        package var message: String
        package var description: String { "\(message)\nRun 'parley-server --help' for the options." }
    }

    /// Every option, declared once: flag, environment variable, value, help and what it sets.
    /// `--help`, the environment mapping and parsing all come from this list.
    static var parser: OptionParser<ServerConfiguration> {
        typealias O = Option<ServerConfiguration>
        let options: [O] = [
            O.text("--host", "PARLEY_HOST", \.host, value: "<address>", help: "Address to listen on (default 127.0.0.1; 0.0.0.0 for all IPv4)."),
            O("--log-level", value: "<level>", environment: "PARLEY_LOG_LEVEL",
              help: "The least level logged to standard error: error, warn, info (default: a line per request and socket) or debug.") {
                configuration, text, source in
                guard let level = LogLevel(name: text) else { throw OptionError("\(source) must be error, warn, info or debug, not '\(text)'") }
                configuration.logLevel = level
            },
            O.choice("--log-format", "PARLEY_LOG_FORMAT", \.logFormat,
                     help: "text (default: for a terminal) or json (one object per line, for a log collector)."),
            O.integer("--port", "PARLEY_PORT", in: 0...65535, \.port, help: "Port to listen on; 0 picks a free one (default 8080)."),
            O.text("--data-dir", "PARLEY_DATA_DIR", \.dataDirectory, value: "<path>", help: "Directory for data (default ./data); created if missing."),
            O.integer("--threads", "PARLEY_THREADS", in: 1...256, \.threads, help: "Event-loop threads (default: one per core)."),
            O.integer("--max-body-bytes", "PARLEY_MAX_BODY_BYTES", in: 0...(1 << 40), \.maxBodyBytes,
                     help: "Largest request body accepted (default 1048576)."),
            O.integer("--max-connections", "PARLEY_MAX_CONNECTIONS", in: 1...(1 << 24), \.maxConnections,
                     help: "Most open connections; more are closed at once (default and most: the descriptor limit less 256)."),
            O.integer("--max-connections-per-address", "PARLEY_MAX_CONNECTIONS_PER_ADDRESS", in: 0...(1 << 24), \.maxConnectionsPerAddress,
                     help: "Most open connections from one address, IPv6 /64 (default 1000, public addresses only; given, every address; 0: none)."),
            O.integer("--min-body-rate", "PARLEY_MIN_BODY_RATE", in: 0...(1 << 30), \.minBodyRate,
                     help: "Slowest bytes/s a request body or file response may average after 10 s (default 500; 0: no floor)."),
            O.text("--secrets-key-file", "PARLEY_SECRETS_KEY_FILE", \.secretsKeyFile, value: "<path>",
                   help: "Key that seals app and webhook secrets in the database (default <data-dir>/secrets.key, made if missing; every node needs the same)."),
            O.text("--metrics-token", "PARLEY_METRICS_TOKEN", \.metricsToken, value: "<token>",
                   help: "Serve /metrics only with Authorization: Bearer <token> (default: open)."),
            O.integer("--max-message-bytes", "PARLEY_MAX_MESSAGE_BYTES", in: 125...(1 << 30), \.maxMessageBytes,
                     help: "Largest WebSocket message accepted (default 1048576)."),
            O.seconds("--ping-interval", "PARLEY_PING_INTERVAL", in: 1...3600, \.pingInterval,
                     help: "Seconds between pings to quiet WebSockets (default 30)."),
            O.seconds("--shutdown-timeout", "PARLEY_SHUTDOWN_TIMEOUT", in: 0...3600, \.shutdownTimeout,
                     help: "Seconds to finish in-flight work on SIGINT/SIGTERM (default 10)."),
            O.toggle("--enable-echo", "PARLEY_ENABLE_ECHO", \.enableEcho,
                    help: "Serve /echo, /echo/ws and /echo/broadcast for conformance tests and benchmarks."),
            O.choice("--sqlite-synchronous", "PARLEY_SQLITE_SYNCHRONOUS", \.sqliteSynchronous,
                    help: "full (default: survives power loss) or normal (survives crashes only); see docs/storage.md."),
            O("--database-url", value: "<url>", environment: "PARLEY_DATABASE_URL",
              help: "PostgreSQL instead of SQLite: postgres://user:password@host:port/database (docs/operations.md).") {
                configuration, text, source in
                guard text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") else {
                    throw OptionError("\(source) must be a postgres:// URL (postgres://user:password@host:5432/parley)")
                }
                configuration.databaseURL = text
            },
            O("--redis-url", value: "<url>", environment: "PARLEY_REDIS_URL",
              help: "Redis for several nodes on one --database-url: redis://[:password@]host:port (docs/operations.md).") {
                configuration, text, source in
                do {
                    _ = try RedisURL(text)
                } catch {
                    throw OptionError("\(source): \(error)")
                }
                configuration.redisURL = text
            },
            O.integer("--log-shards", "PARLEY_LOG_SHARDS", in: 1...16, \.logShards,
                      help: "Shards of the event log when this server creates its PostgreSQL database (default 1): writes to different shards commit in parallel. Fixed once the database exists (docs/operations.md)."),
            O.text("--tls-cert-file", "PARLEY_TLS_CERT_FILE", \.tlsCertificateFile, value: "<pem>",
                   help: "Serve HTTPS and WSS with this certificate chain (PEM, leaf first); with --tls-key-file. SIGHUP reloads both."),
            O.text("--tls-key-file", "PARLEY_TLS_KEY_FILE", \.tlsKeyFile, value: "<pem>",
                   help: "The private key of --tls-cert-file (PEM, unencrypted)."),
            O.text("--apns-key-file", "PARLEY_APNS_KEY_FILE", \.push.apnsKeyFile, value: "<p8>",
                   help: "Push through APNs with this .p8 token key; with --apns-key-id, --apns-team-id and --apns-topic."),
            O.text("--apns-key-id", "PARLEY_APNS_KEY_ID", \.push.apnsKeyID, value: "<id>", help: "The APNs key's id (10 characters)."),
            O.text("--apns-team-id", "PARLEY_APNS_TEAM_ID", \.push.apnsTeamID, value: "<id>", help: "The Apple developer team id (10 characters)."),
            O.text("--apns-topic", "PARLEY_APNS_TOPIC", \.push.apnsTopic, value: "<bundle-id>", help: "The iOS app's bundle id."),
            O.text("--apns-url", "PARLEY_APNS_URL", \.push.apnsURL, value: "<url>",
                   help: "Send APNs requests here instead of Apple's production and sandbox hosts (tests, gateways)."),
            O.text("--fcm-credentials-file", "PARLEY_FCM_CREDENTIALS_FILE", \.push.fcmCredentialsFile, value: "<json>",
                   help: "Push through FCM with this Google service account file."),
            O.text("--fcm-url", "PARLEY_FCM_URL", \.push.fcmURL, value: "<url>",
                   help: "Send FCM messages here instead of fcm.googleapis.com (tests, gateways)."),
            O("--outbound-ca-file", value: "<pem>", environment: "PARLEY_OUTBOUND_CA_FILE",
              help: "Trust this CA too for outbound TLS (push providers, https webhooks), besides the system's.") { configuration, text, _ in
                configuration.push.outboundCAFile = text
                configuration.webhooks.outboundCAFile = text
            },
            O.choice("--link-previews", "PARLEY_LINK_PREVIEWS", \.linkPreviews.mode,
                     help: "Read the first link of a message and attach its title, description and picture (default on; each app has its own switch too)."),
            O("--link-previews-allow-private", value: "<address:port,…>", environment: "PARLEY_LINK_PREVIEWS_ALLOW_PRIVATE",
              help: "Private addresses link previews may read all the same (an internal site; tests), e.g. 10.0.0.5:443.") { configuration, text, source in
                var allowed = Set<String>()
                for entry in text.split(separator: ",") {
                    guard let normalized = LinkPreviewFetcher.allowedEntry(String(entry)) else {
                        throw OptionError("\(source): '\(entry)' is not an address and port (10.0.0.5:443, [fd00::5]:443)")
                    }
                    allowed.insert(normalized)
                }
                configuration.linkPreviews.allowPrivate = allowed
            },
            O.seconds("--link-preview-cache", "PARLEY_LINK_PREVIEW_CACHE", in: 60...(30 * 86_400), \.linkPreviews.cacheLifetime,
                      help: "Seconds a link's page, once read, serves every message with the same link in the app (default 86400)."),
            O.toggle("--webhooks-allow-private", "PARLEY_WEBHOOKS_ALLOW_PRIVATE", \.webhooks.allowPrivate,
                     help: "Let webhooks reach loopback, private and link-local addresses (tests; backends on the same private network)."),
            O.seconds("--webhook-retry-window", "PARLEY_WEBHOOK_RETRY_WINDOW", in: 1...(30 * 86_400), \.webhooks.retryWindow,
                      help: "Seconds a failing webhook delivery is retried before it is kept as failed and its endpoint paused (default 86400)."),
            O("--webhook-first-retry", value: "<ms>", environment: "PARLEY_WEBHOOK_FIRST_RETRY",
              help: "Milliseconds before a failed webhook delivery's first retry; each next one doubles, up to an hour (default 5000).") {
                configuration, text, source in
                configuration.webhooks.firstRetry = .milliseconds(try O.number(text, in: 1...3_600_000, source: source))
            },
            O.integer("--webhook-concurrency", "PARLEY_WEBHOOK_CONCURRENCY", in: 1...256, \.webhooks.concurrency,
                      help: "Webhook endpoints this node delivers to at once, each in order (default 8)."),
            O.seconds("--webhook-timeout", "PARLEY_WEBHOOK_TIMEOUT", in: 1...300, \.webhooks.timeout,
                      help: "Seconds a webhook receiver has to answer before the attempt fails (default 10)."),
            O.integer("--server-api-requests-per-second", "PARLEY_SERVER_API_REQUESTS_PER_SECOND", in: 1...1_000_000,
                      \.serverAPIRequestsPerSecond, help: "Server API (/v1/server) requests per second per app, twice that in a burst (default 100)."),
            O.seconds("--secret-grace", "PARLEY_SECRET_GRACE", in: 0...(30 * 86_400), \.secretGrace,
                      help: "Seconds the old secret keeps working after 'apps rotate-secret' (default 86400; 0 for a leaked one)."),
            O.integer("--push-concurrency", "PARLEY_PUSH_CONCURRENCY", in: 1...1000, \.push.concurrency,
                      help: "Notices in flight at once per push provider, as HTTP/2 streams on shared connections (default 100)."),
            O.integer("--push-connections", "PARLEY_PUSH_CONNECTIONS", in: 1...32, \.push.connections,
                      help: "HTTP/2 connections per push provider host, each carrying many notices at once (default 4)."),
            O.seconds("--push-window", "PARLEY_PUSH_WINDOW", in: 0...60, \.push.confirmationWindow,
                      help: "Seconds a connected device has to confirm a message before its member is pushed anyway (default 1)."),
            O.integer("--argon2-passes", "PARLEY_ARGON2_PASSES", in: 1...10, \.argon2Passes, help: "Argon2id passes for password hashes (default 2)."),
            O.integer("--argon2-memory-mib", "PARLEY_ARGON2_MEMORY_MIB", in: 1...4096, \.argon2MemoryMiB,
                     help: "Argon2id memory per password hash in MiB (default 64)."),
            O.integer("--password-hashes", "PARLEY_PASSWORD_HASHES", in: 1...64, \.passwordHashes,
                     help: "Password hashes computed at once; their memory is at most this × --argon2-memory-mib, the peak of a burst of sign-ups (default 2)."),
            O.integer("--signups-per-hour", "PARLEY_SIGNUPS_PER_HOUR", in: 1...1_000_000, \.signUpsPerHour,
                     help: "Accounts one client address may create per hour (default 60)."),
            O.seconds("--presence-grace", "PARLEY_PRESENCE_GRACE", in: 0...3600, \.realtime.presenceGrace,
                     help: "Seconds a user stays online after their last device disconnects (default 10)."),
            O.integer("--max-replay-events", "PARLEY_MAX_REPLAY_EVENTS", in: 1...10_000_000, \.realtime.maxReplayEvents,
                     help: "Most events replayed to a reconnecting device before it must resync (default 10000)."),
            O("--commands-per-second", value: "<n>", environment: "PARLEY_COMMANDS_PER_SECOND",
                   help: "Realtime commands per second per connection, sustained; twice that per user and in bursts (default 50).") {
                configuration, text, source in
                let rate = Double(try O.number(text, in: 1...1_000_000, source: source))
                configuration.realtime.commandsPerSecond = rate
                configuration.realtime.commandBurst = 2 * rate
                configuration.realtime.userCommandsPerSecond = 2 * rate
                configuration.realtime.userCommandBurst = 4 * rate
            },
            O.seconds("--auth-timeout", "PARLEY_AUTH_TIMEOUT", in: 1...3600, \.realtime.authTimeout,
                     help: "Seconds a new realtime socket has to authenticate (default 10)."),
            O.integer("--max-queued-bytes", "PARLEY_MAX_QUEUED_BYTES", in: 65_536...(1 << 30), \.realtime.maxQueuedBytes,
                     help: "Bytes queued for a realtime device that is not reading before it is closed with 4000 (default 4194304)."),
            O.integer("--max-photo-bytes", "PARLEY_MAX_PHOTO_BYTES", in: 1...(1 << 40), \.media.maxPhotoBytes, help: "Largest photo upload (default 26214400)."),
            O.integer("--max-video-bytes", "PARLEY_MAX_VIDEO_BYTES", in: 1...(1 << 40), \.media.maxVideoBytes, help: "Largest video upload (default 536870912)."),
            O.integer("--max-audio-bytes", "PARLEY_MAX_AUDIO_BYTES", in: 1...(1 << 40), \.media.maxAudioBytes, help: "Largest audio upload (default 67108864)."),
            O.integer("--max-file-bytes", "PARLEY_MAX_FILE_BYTES", in: 1...(1 << 40), \.media.maxFileBytes, help: "Largest file upload (default 104857600)."),
            O.integer("--media-quota-bytes", "PARLEY_MEDIA_QUOTA_BYTES", in: 0...(1 << 50), \.media.quotaBytes,
                     help: "Bytes of uploads one account may hold (default 1073741824)."),
            O.integer("--max-image-pixels", "PARLEY_MAX_IMAGE_PIXELS", in: 1...1_000_000_000, \.media.maxImagePixels,
                     help: "Largest photo in pixels, width x height (default 64000000)."),
            O.integer("--thumbnail-size", "PARLEY_THUMBNAIL_SIZE", in: 16...4096, \.media.thumbnailSide, value: "<px>",
                     help: "Side of the square photo thumbnails fit (default 512)."),
            O.toggle("--keep-photo-metadata", "PARLEY_KEEP_PHOTO_METADATA", \.media.keepPhotoMetadata,
                    help: "Keep photos' EXIF/XMP/IPTC metadata, location included (default: removed)."),
            O.integer("--media-url-lifetime", "PARLEY_MEDIA_URL_LIFETIME", in: 1...86_400, \.media.urlLifetimeSeconds, value: "<s>",
                     help: "Seconds a signed download URL works (default 600)."),
            O.integer("--media-orphan-lifetime", "PARLEY_MEDIA_ORPHAN_LIFETIME", in: 0...(365 * 86_400), \.media.orphanLifetimeSeconds,
                     value: "<s>", help: "Seconds an upload no message uses is kept (default 86400)."),
            O.integer("--media-gc-interval", "PARLEY_MEDIA_GC_INTERVAL", in: 0...86_400, \.media.collectionIntervalSeconds, value: "<s>",
                     help: "Seconds between removals of unused uploads (default 300); 0: never on this node (several nodes: collect on one)."),
            O.toggle("--test-mode", "PARLEY_TEST_MODE", \.testMode,
                     help: "For an app's CI, never production: a clock tests move (POST /v1/test/clock) under /v1/test/ (docs/test-mode.md)."),
            O.integer("--trace-retention", "PARLEY_TRACE_RETENTION", in: 0...720, \.traceRetentionHours, value: "<hours>",
                      help: "Hours each new message's delivery trace is kept (GET /v1/server/messages/{id}/trace; default 24); 0: record none."),
            O("--node-name", value: "<name>", environment: "PARLEY_NODE_NAME",
              help: "This node's name in delivery traces (default <hostname>:<port>); letters, digits, . _ : -, at most 64.") { configuration, text, source in
                guard (1...64).contains(text.utf8.count),
                      text.utf8.allSatisfy({ $0 < 128 && (isalnum(Int32($0)) != 0 || [46, 95, 58, 45].contains($0)) }) else {
                    throw OptionError("\(source): '\(text)' is not a node name: letters, digits, . _ : - (at most 64)")
                }
                configuration.nodeName = text
            },
            O.integer("--retention-interval", "PARLEY_RETENTION_INTERVAL", in: 0...86_400, \.retentionIntervalSeconds, value: "<s>",
                      help: "Seconds between removals of messages older than their retention policy (default 3600); 0: never on this node."),
            O.seconds("--delivery-update-interval", "PARLEY_DELIVERY_UPDATE_INTERVAL", in: 1...3600, \.deliveryUpdateInterval,
                     help: "Seconds between an author's delivery counts in a public channel (delivery.updated; default 1)."),
            O.seconds("--pusher-activity-timeout", "PARLEY_PUSHER_ACTIVITY_TIMEOUT", in: 1...3600, \.pusher.activityTimeout,
                     help: "Seconds of silence before a Pusher socket is pinged (announced as activity_timeout; default 120)."),
            O.seconds("--pusher-pong-timeout", "PARLEY_PUSHER_PONG_TIMEOUT", in: 1...3600, \.pusher.pongTimeout,
                     help: "Seconds a pinged Pusher socket has to answer before it is closed with 4201 (default 30)."),
            O.integer("--pusher-history", "PARLEY_PUSHER_HISTORY", in: 1...100_000, \.pusher.historyPerChannel,
                     help: "Triggered events kept per Pusher channel for clients that were away (default 100)."),
            O.integer("--pusher-client-events-per-second", "PARLEY_PUSHER_CLIENT_EVENTS_PER_SECOND", in: 1...10_000,
                     \.pusher.clientEventsPerSecond, help: "Client events one Pusher socket may send per second (default 10)."),
            O.integer("--pusher-api-requests-per-second", "PARLEY_PUSHER_API_REQUESTS_PER_SECOND", in: 1...1_000_000,
                     \.pusher.apiRequestsPerSecond, help: "Pusher HTTP API requests per second per app, twice that in a burst (default 1000)."),
        ]
        return OptionParser(options)
    }

    /// The `--help` text.
    package static var helpText: String {
        """
        parley-server \(ParleyVersion.current): the Parley chat server.

        USAGE: parley-server [options]
               parley-server apps list|create <name>|rotate-secret <name-or-key> [--secret-grace <s>]
                                  |push-content <name-or-key> full|id-only   [--data-dir <path> | --database-url <url>]
               parley-server admin <command> [--url <url>] [--secret <sk_…>] [--json]   (docs/admin.md; 'admin help' lists them)
               parley-server backup <file> [--overwrite] [--data-dir <path>]   (while the server runs)
               parley-server restore <file> [--data-dir <path>]    (with the server stopped)

        OPTIONS (each also read from the environment variable shown; an option given wins):
        \(parser.helpLines())
          -h, --help                    Show this help.
          --version                     Print the version.

        APPS: the first start creates an app named "default" and prints its key and secret
        (the secret only then). 'apps create' makes more, 'apps list' shows their keys,
        'apps rotate-secret' replaces a secret (the old one works for --secret-grace more), 'apps push-content' sets whether pushes carry the
        text (full) or only the message's ids (id-only: the app's extension fetches it). A running server sees new apps at once.

        BACKUPS: 'backup' writes a consistent copy of the database while the server runs
        (never over an existing file unless --overwrite is given);
        'restore' puts one back with the server stopped (the replaced database is kept beside
        it) and starts a new epoch, so devices resync. Media files are copied separately:
        see docs/operations.md. On PostgreSQL (--database-url) use pg_dump or point-in-time
        recovery instead (docs/operations.md, "Backups on PostgreSQL").

        ENDPOINTS: the REST API under /v1 (docs/openapi.yaml), the realtime socket at
        /v1/realtime (docs/protocol.md), the Pusher Channels protocol at /app/<key> and
        /apps/<pusher app id>/ (docs/pusher.md), GET /healthz (liveness and version),
        GET /metrics (Prometheus text). Uploads are kept in <data-dir>/media.
        SIGNALS: SIGINT or SIGTERM stop accepting, close WebSockets with 1001, finish
        in-flight requests and exit 0 within the shutdown timeout.
        """
    }

    /// Whether `host` is a loopback address or `localhost` (where test mode may serve TLS).
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    /// Parses arguments (without the program name) over environment defaults.
    ///
    /// - Throws: ``UsageError`` naming the bad option or value.
    package static func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> Command {
        if arguments.first == "admin" { return .admin(try AdminCommand.parse(Array(arguments.dropFirst()), environment: environment)) }
        var configuration = ServerConfiguration()
        let subcommand = ["apps", "backup", "restore"].contains(arguments.first ?? "") ? arguments.first : nil
        let isApps = subcommand == "apps"
        var rest = Array(arguments.dropFirst(subcommand == nil ? 0 : 1))
        // `backup`'s own flag, not a server option.
        let overwrite = subcommand == "backup" && rest.contains("--overwrite")
        if subcommand == "backup" { rest.removeAll { $0 == "--overwrite" } }
        let parsed: (words: [String], stoppedAt: String?)
        do {
            parsed = try parser.parse(rest, environment: environment, into: &configuration,
                                      stopAt: ["-h", "--help", "--version"])
        } catch {
            throw UsageError(message: error.message)
        }
        switch parsed.stoppedAt {
        case "--version": return .version
        case .some: return .help
        case nil: break
        }
        if parsed.words.first == "help" { return .help }
        if let subcommand, !isApps {
            guard parsed.words.count == 1, let file = parsed.words.first else {
                throw UsageError(message: "use 'parley-server \(subcommand) <file> [--data-dir <path>]'")
            }
            return subcommand == "backup" ? .backup(file: file, overwrite: overwrite, configuration) : .restore(file: file, configuration)
        }
        guard isApps else {
            if let word = parsed.words.first { throw UsageError(message: "unknown argument '\(word)'") }
            guard (configuration.tlsCertificateFile == nil) == (configuration.tlsKeyFile == nil) else {
                throw UsageError(message: "--tls-cert-file and --tls-key-file go together: give both, or neither for plain HTTP")
            }
            if let problem = configuration.push.problem { throw UsageError(message: problem) }
            if configuration.testMode, configuration.tlsCertificateFile != nil, !Self.isLoopback(configuration.host) {
                throw UsageError(message: "--test-mode is for tests: it is refused with TLS on \(configuration.host); "
                                 + "serve tests on 127.0.0.1 (or without --tls-cert-file), never a public address with a certificate")
            }
            return .run(configuration)
        }
        let apps = parsed.words
        switch apps.first {
        case "list" where apps.count == 1: return .apps(.list, configuration)
        case "create" where apps.count == 2: return .apps(.create(name: apps[1]), configuration)
        case "rotate-secret" where apps.count == 2: return .apps(.rotateSecret(app: apps[1]), configuration)
        case "push-content" where apps.count == 3 && ["full", "id-only"].contains(apps[2]):
            return .apps(.pushContent(app: apps[1], idOnly: apps[2] == "id-only"), configuration)
        case "link-previews" where apps.count == 3 && ["on", "off"].contains(apps[2]):
            return .apps(.linkPreviews(app: apps[1], enabled: apps[2] == "on"), configuration)
        default:
            throw UsageError(message: "use 'apps list', 'apps create <name>', 'apps rotate-secret <name-or-key>', "
                             + "'apps push-content <name-or-key> full|id-only' or 'apps link-previews <name-or-key> on|off'")
        }
    }
}

/// What `parley-server apps` does.
package enum AppsCommand: Equatable, Sendable {
    /// Lists every app's name and public key.
    case list
    /// Creates an app and prints its key and secret.
    case create(name: String)
    /// Replaces an app's secret (named by its name or public key) and prints the new one.
    case rotateSecret(app: String)
    /// Sets what the app's pushes say: the message (`full`) or only its ids (`id-only`).
    case pushContent(app: String, idOnly: Bool)
    /// Turns an app's link previews on or off.
    case linkPreviews(app: String, enabled: Bool)
}

/// The version reported by `--version`, `/healthz` and `/metrics`.
package enum ParleyVersion: Sendable {
    /// Semantic version of this build.
    package static let current = "0.1.0"
}
