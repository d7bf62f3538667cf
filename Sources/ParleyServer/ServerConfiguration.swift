import Foundation

/// `parley-server`'s settings, from command-line options and `PARLEY_*` environment variables
/// (options win). Parsing is a pure function so it is tested without a process.
public struct ServerConfiguration: Sendable, Equatable {
    /// Address to listen on. `--host`, `PARLEY_HOST`. Default: 127.0.0.1.
    public var host = "127.0.0.1"
    /// Port; 0 picks a free one. `--port`, `PARLEY_PORT`. Default: 8080.
    public var port: UInt16 = 8080
    /// Where data lives. `--data-dir`, `PARLEY_DATA_DIR`. Default: ./data.
    public var dataDirectory = "./data"
    /// Event loops (threads). `--threads`, `PARLEY_THREADS`. Default: one per core.
    public var threads: Int? = nil
    /// Largest request body by default. `--max-body-bytes`, `PARLEY_MAX_BODY_BYTES`. Default: 1 MiB.
    public var maxBodyBytes = 1 << 20
    /// Largest WebSocket message. `--max-message-bytes`, `PARLEY_MAX_MESSAGE_BYTES`. Default: 1 MiB.
    public var maxMessageBytes = 1 << 20
    /// Seconds to wait for in-flight work on SIGINT/SIGTERM. `--shutdown-timeout`. Default: 10.
    public var shutdownTimeoutSeconds = 10
    /// Seconds between WebSocket pings. `--ping-interval`, `PARLEY_PING_INTERVAL`. Default: 30.
    public var pingIntervalSeconds = 30
    /// Serve the conformance and benchmark endpoints (`/echo`, `/echo/ws`, `/echo/broadcast`).
    /// `--enable-echo`, `PARLEY_ENABLE_ECHO=1`. Default: off.
    public var enableEcho = false
    /// SQLite's `synchronous` setting: `full` (survives power loss) or `normal` (survives
    /// kill -9; may lose the last commits on power loss). `--sqlite-synchronous`. Default: full.
    public var sqliteSynchronous = "full"
    /// Argon2id passes for password hashes. `--argon2-passes`. Default: 2.
    public var argon2Passes = 2
    /// Argon2id memory in MiB for password hashes. `--argon2-memory-mib`. Default: 64.
    public var argon2MemoryMiB = 64
    /// Accounts one address may create per hour. `--signups-per-hour`. Default: 60.
    public var signUpsPerHour = 60
    /// The realtime WebSocket's limits and timers (docs/protocol.md). `--presence-grace`,
    /// `--max-replay-events`, `--commands-per-second`, `--auth-timeout`, `--max-queued-bytes`.
    public var realtime = RealtimeConfiguration()
    /// Upload limits, quotas, thumbnails, signed URLs and collection (docs/media.md).
    /// `--max-photo-bytes`, `--max-video-bytes`, `--max-audio-bytes`, `--max-file-bytes`,
    /// `--media-quota-bytes`, `--max-image-pixels`, `--thumbnail-size`, `--keep-photo-metadata`,
    /// `--media-url-lifetime`, `--media-orphan-lifetime`, `--media-gc-interval`.
    public var media = MediaConfiguration()

    /// The defaults.
    public init() {}

    /// What the command line asked for.
    public enum Command: Equatable, Sendable {
        /// Start the server.
        case run(ServerConfiguration)
        /// `parley-server apps …`: manage apps in the data directory.
        case apps(AppsCommand, ServerConfiguration)
        case help
        case version
    }

    /// A command-line mistake, with text that says how to fix it.
    public struct UsageError: Error, Equatable, CustomStringConvertible {
        /// What was wrong with the command line.
        public var message: String
        public var description: String { "\(message)\nRun 'parley-server --help' for the options." }
    }

    static let options: [(flag: String, env: String?, help: String)] = [
        ("--host <address>", "PARLEY_HOST", "Address to listen on (default 127.0.0.1; 0.0.0.0 for all IPv4)."),
        ("--port <n>", "PARLEY_PORT", "Port to listen on; 0 picks a free one (default 8080)."),
        ("--data-dir <path>", "PARLEY_DATA_DIR", "Directory for data (default ./data); created if missing."),
        ("--threads <n>", "PARLEY_THREADS", "Event-loop threads (default: one per core)."),
        ("--max-body-bytes <n>", "PARLEY_MAX_BODY_BYTES", "Largest request body accepted (default 1048576)."),
        ("--max-message-bytes <n>", "PARLEY_MAX_MESSAGE_BYTES", "Largest WebSocket message accepted (default 1048576)."),
        ("--ping-interval <s>", "PARLEY_PING_INTERVAL", "Seconds between pings to quiet WebSockets (default 30)."),
        ("--shutdown-timeout <s>", "PARLEY_SHUTDOWN_TIMEOUT", "Seconds to finish in-flight work on SIGINT/SIGTERM (default 10)."),
        ("--enable-echo", "PARLEY_ENABLE_ECHO", "Serve /echo, /echo/ws and /echo/broadcast for conformance tests and benchmarks."),
        ("--sqlite-synchronous <m>", "PARLEY_SQLITE_SYNCHRONOUS", "full (default: survives power loss) or normal (survives crashes only); see docs/storage.md."),
        ("--argon2-passes <n>", "PARLEY_ARGON2_PASSES", "Argon2id passes for password hashes (default 2)."),
        ("--argon2-memory-mib <n>", "PARLEY_ARGON2_MEMORY_MIB", "Argon2id memory per password hash in MiB (default 64)."),
        ("--signups-per-hour <n>", "PARLEY_SIGNUPS_PER_HOUR", "Accounts one client address may create per hour (default 60)."),
        ("--presence-grace <s>", "PARLEY_PRESENCE_GRACE", "Seconds a user stays online after their last device disconnects (default 10)."),
        ("--max-replay-events <n>", "PARLEY_MAX_REPLAY_EVENTS", "Most events replayed to a reconnecting device before it must resync (default 10000)."),
        ("--commands-per-second <n>", "PARLEY_COMMANDS_PER_SECOND", "Realtime commands per second per connection, sustained; twice that per user and in bursts (default 50)."),
        ("--auth-timeout <s>", "PARLEY_AUTH_TIMEOUT", "Seconds a new realtime socket has to authenticate (default 10)."),
        ("--max-queued-bytes <n>", "PARLEY_MAX_QUEUED_BYTES", "Bytes queued for a realtime device that is not reading before it is closed with 4000 (default 4194304)."),
        ("--max-photo-bytes <n>", "PARLEY_MAX_PHOTO_BYTES", "Largest photo upload (default 26214400)."),
        ("--max-video-bytes <n>", "PARLEY_MAX_VIDEO_BYTES", "Largest video upload (default 536870912)."),
        ("--max-audio-bytes <n>", "PARLEY_MAX_AUDIO_BYTES", "Largest audio upload (default 67108864)."),
        ("--max-file-bytes <n>", "PARLEY_MAX_FILE_BYTES", "Largest file upload (default 104857600)."),
        ("--media-quota-bytes <n>", "PARLEY_MEDIA_QUOTA_BYTES", "Bytes of uploads one account may hold (default 1073741824)."),
        ("--max-image-pixels <n>", "PARLEY_MAX_IMAGE_PIXELS", "Largest photo in pixels, width x height (default 64000000)."),
        ("--thumbnail-size <px>", "PARLEY_THUMBNAIL_SIZE", "Side of the square photo thumbnails fit (default 512)."),
        ("--keep-photo-metadata", "PARLEY_KEEP_PHOTO_METADATA", "Keep photos' EXIF/XMP/IPTC metadata, location included (default: removed)."),
        ("--media-url-lifetime <s>", "PARLEY_MEDIA_URL_LIFETIME", "Seconds a signed download URL works (default 600)."),
        ("--media-orphan-lifetime <s>", "PARLEY_MEDIA_ORPHAN_LIFETIME", "Seconds an upload no message uses is kept (default 86400)."),
        ("--media-gc-interval <s>", "PARLEY_MEDIA_GC_INTERVAL", "Seconds between removals of unused uploads (default 300)."),
        ("-h, --help", nil, "Show this help."),
        ("--version", nil, "Print the version."),
    ]

    /// The `--help` text.
    public static var helpText: String {
        var text = """
            parley-server \(ParleyVersion.current): the Parley chat server.

            USAGE: parley-server [options]
                   parley-server apps list|create <name>|rotate-secret <name-or-key> [--data-dir <path>]

            OPTIONS (each also read from the environment variable shown):

            """
        for option in options {
            let env = option.env.map { "  [\($0)]" } ?? ""
            text += "  \(option.flag.padding(toLength: 26, withPad: " ", startingAt: 0))\(option.help)\(env)\n"
        }
        text += """

            APPS: the first start creates an app named "default" and prints its key and secret
            (the secret only then). 'apps create' makes more, 'apps list' shows their keys,
            'apps rotate-secret' replaces a secret. A running server sees new apps at once.

            ENDPOINTS: the REST API under /v1 (docs/openapi.yaml), GET /healthz (liveness and
            version), GET /metrics (Prometheus text). Uploads are kept in <data-dir>/media.
            SIGNALS: SIGINT or SIGTERM stop accepting, close WebSockets with 1001, finish
            in-flight requests and exit 0 within the shutdown timeout.
            """
        return text
    }

    /// Parses arguments (without the program name) over environment defaults.
    ///
    /// - Throws: ``UsageError`` naming the bad option or value.
    public static func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> Command {
        var configuration = ServerConfiguration()
        // Environment first, then options override it.
        var pairs: [(String, String, Bool)] = []  // (name, value, fromEnvironment)
        let environmentNames = [
            "PARLEY_HOST": "--host", "PARLEY_PORT": "--port", "PARLEY_DATA_DIR": "--data-dir",
            "PARLEY_THREADS": "--threads", "PARLEY_MAX_BODY_BYTES": "--max-body-bytes",
            "PARLEY_MAX_MESSAGE_BYTES": "--max-message-bytes", "PARLEY_PING_INTERVAL": "--ping-interval",
            "PARLEY_SHUTDOWN_TIMEOUT": "--shutdown-timeout", "PARLEY_ENABLE_ECHO": "--enable-echo",
            "PARLEY_SQLITE_SYNCHRONOUS": "--sqlite-synchronous", "PARLEY_ARGON2_PASSES": "--argon2-passes",
            "PARLEY_ARGON2_MEMORY_MIB": "--argon2-memory-mib", "PARLEY_SIGNUPS_PER_HOUR": "--signups-per-hour",
            "PARLEY_MAX_PHOTO_BYTES": "--max-photo-bytes", "PARLEY_MAX_VIDEO_BYTES": "--max-video-bytes",
            "PARLEY_MAX_AUDIO_BYTES": "--max-audio-bytes", "PARLEY_MAX_FILE_BYTES": "--max-file-bytes",
            "PARLEY_MEDIA_QUOTA_BYTES": "--media-quota-bytes", "PARLEY_MAX_IMAGE_PIXELS": "--max-image-pixels",
            "PARLEY_THUMBNAIL_SIZE": "--thumbnail-size", "PARLEY_KEEP_PHOTO_METADATA": "--keep-photo-metadata",
            "PARLEY_MEDIA_URL_LIFETIME": "--media-url-lifetime", "PARLEY_MEDIA_ORPHAN_LIFETIME": "--media-orphan-lifetime",
            "PARLEY_MEDIA_GC_INTERVAL": "--media-gc-interval",
        ]
        for (variable, flag) in environmentNames.sorted(by: { $0.key < $1.key }) {
            if let value = environment[variable] { pairs.append((flag, value, true)) }
        }
        var index = 0
        var apps: [String]?
        if arguments.first == "apps" {
            apps = []
            index = 1
        }
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            switch argument {
            case "-h", "--help", "help": return .help
            case "--version": return .version
            case "--enable-echo", "--keep-photo-metadata": pairs.append((argument, "1", false))
            case _ where apps != nil && !argument.hasPrefix("-"): apps?.append(argument)
            default:
                var name = argument
                var value: String?
                if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                    name = String(argument[..<equals])
                    value = String(argument[argument.index(after: equals)...])
                }
                guard options.contains(where: { $0.flag.hasPrefix(name + " ") }) else {
                    throw UsageError(message: "unknown option '\(argument)'")
                }
                if value == nil {
                    guard index < arguments.count else { throw UsageError(message: "\(name) needs a value") }
                    value = arguments[index]
                    index += 1
                }
                pairs.append((name, value ?? "", false))
            }
        }
        for (name, value, fromEnvironment) in pairs {
            let source = fromEnvironment ? "environment value for \(name)" : name
            func integer(_ range: ClosedRange<Int>) throws(UsageError) -> Int {
                guard let number = Int(value), range.contains(number) else {
                    throw UsageError(message: "\(source) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(value)'")
                }
                return number
            }
            switch name {
            case "--host":
                guard !value.isEmpty else { throw UsageError(message: "\(source) must not be empty") }
                configuration.host = value
            case "--port": configuration.port = UInt16(try integer(0...65535))
            case "--data-dir":
                guard !value.isEmpty else { throw UsageError(message: "\(source) must not be empty") }
                configuration.dataDirectory = value
            case "--threads": configuration.threads = try integer(1...256)
            case "--max-body-bytes": configuration.maxBodyBytes = try integer(0...(1 << 40))
            case "--max-message-bytes": configuration.maxMessageBytes = try integer(125...(1 << 30))
            case "--ping-interval": configuration.pingIntervalSeconds = try integer(1...3600)
            case "--shutdown-timeout": configuration.shutdownTimeoutSeconds = try integer(0...3600)
            case "--enable-echo":
                guard ["1", "true", "yes", "0", "false", "no"].contains(value.lowercased()) else {
                    throw UsageError(message: "\(source) must be 1/true/yes or 0/false/no")
                }
                configuration.enableEcho = ["1", "true", "yes"].contains(value.lowercased())
            case "--keep-photo-metadata":
                guard ["1", "true", "yes", "0", "false", "no"].contains(value.lowercased()) else {
                    throw UsageError(message: "\(source) must be 1/true/yes or 0/false/no")
                }
                configuration.media.keepPhotoMetadata = ["1", "true", "yes"].contains(value.lowercased())
            case "--max-photo-bytes": configuration.media.maxPhotoBytes = Int64(try integer(1...(1 << 40)))
            case "--max-video-bytes": configuration.media.maxVideoBytes = Int64(try integer(1...(1 << 40)))
            case "--max-audio-bytes": configuration.media.maxAudioBytes = Int64(try integer(1...(1 << 40)))
            case "--max-file-bytes": configuration.media.maxFileBytes = Int64(try integer(1...(1 << 40)))
            case "--media-quota-bytes": configuration.media.quotaBytes = Int64(try integer(0...(1 << 50)))
            case "--max-image-pixels": configuration.media.maxImagePixels = try integer(1...1_000_000_000)
            case "--thumbnail-size": configuration.media.thumbnailSide = try integer(16...4096)
            case "--media-url-lifetime": configuration.media.urlLifetimeSeconds = try integer(1...86_400)
            case "--media-orphan-lifetime": configuration.media.orphanLifetimeSeconds = try integer(0...(365 * 86_400))
            case "--media-gc-interval": configuration.media.collectionIntervalSeconds = try integer(1...86_400)
            case "--sqlite-synchronous":
                guard ["full", "normal"].contains(value.lowercased()) else { throw UsageError(message: "\(source) must be full or normal") }
                configuration.sqliteSynchronous = value.lowercased()
            case "--argon2-passes": configuration.argon2Passes = try integer(1...10)
            case "--argon2-memory-mib": configuration.argon2MemoryMiB = try integer(1...4096)
            case "--signups-per-hour": configuration.signUpsPerHour = try integer(1...1_000_000)
            case "--presence-grace": configuration.realtime.presenceGrace = .seconds(try integer(0...3600))
            case "--max-replay-events": configuration.realtime.maxReplayEvents = try integer(1...10_000_000)
            case "--commands-per-second":
                let rate = Double(try integer(1...1_000_000))
                configuration.realtime.commandsPerSecond = rate
                configuration.realtime.commandBurst = 2 * rate
                configuration.realtime.userCommandsPerSecond = 2 * rate
                configuration.realtime.userCommandBurst = 4 * rate
            case "--auth-timeout": configuration.realtime.authTimeout = .seconds(try integer(1...3600))
            case "--max-queued-bytes": configuration.realtime.maxQueuedBytes = try integer(65_536...(1 << 30))
            default:
                throw UsageError(message: "unknown option '\(name)'")
            }
        }
        if let apps {
            switch apps.first {
            case "list" where apps.count == 1: return .apps(.list, configuration)
            case "create" where apps.count == 2: return .apps(.create(name: apps[1]), configuration)
            case "rotate-secret" where apps.count == 2: return .apps(.rotateSecret(app: apps[1]), configuration)
            default: throw UsageError(message: "use 'apps list', 'apps create <name>' or 'apps rotate-secret <name-or-key>'")
            }
        }
        return .run(configuration)
    }
}

/// What `parley-server apps` does.
public enum AppsCommand: Equatable, Sendable {
    /// Lists every app's name and public key.
    case list
    /// Creates an app and prints its key and secret.
    case create(name: String)
    /// Replaces an app's secret (named by its name or public key) and prints the new one.
    case rotateSecret(app: String)
}

/// The version reported by `--version`, `/healthz` and `/metrics`.
public enum ParleyVersion: Sendable {
    /// Semantic version of this build.
    public static let current = "0.1.0"
}
