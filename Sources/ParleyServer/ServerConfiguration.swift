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

    /// The defaults.
    public init() {}

    /// What the command line asked for.
    public enum Command: Equatable, Sendable {
        case run(ServerConfiguration)
        case help
        case version
    }

    /// A command-line mistake, with text that says how to fix it.
    public struct UsageError: Error, Equatable, CustomStringConvertible {
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
        ("-h, --help", nil, "Show this help."),
        ("--version", nil, "Print the version."),
    ]

    /// The `--help` text.
    public static var helpText: String {
        var text = """
            parley-server \(ParleyVersion.current): the Parley chat server.

            USAGE: parley-server [options]

            OPTIONS (each also read from the environment variable shown):

            """
        for option in options {
            let env = option.env.map { "  [\($0)]" } ?? ""
            text += "  \(option.flag.padding(toLength: 26, withPad: " ", startingAt: 0))\(option.help)\(env)\n"
        }
        text += """

            ENDPOINTS: GET /healthz (liveness and version), GET /metrics (Prometheus text).
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
        ]
        for (variable, flag) in environmentNames.sorted(by: { $0.key < $1.key }) {
            if let value = environment[variable] { pairs.append((flag, value, true)) }
        }
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            switch argument {
            case "-h", "--help", "help": return .help
            case "--version": return .version
            case "--enable-echo": pairs.append((argument, "1", false))
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
            default:
                throw UsageError(message: "unknown option '\(name)'")
            }
        }
        return .run(configuration)
    }
}

/// The version reported by `--version`, `/healthz` and `/metrics`.
public enum ParleyVersion: Sendable {
    /// Semantic version of this build.
    public static let current = "0.1.0"
}
