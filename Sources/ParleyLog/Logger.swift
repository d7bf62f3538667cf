public import Foundation
import ParleySync

// Logging in swift-log's shape (docs/decisions/0023-a-logger-an-operator-can-use.md): a
// `Logger` value with a label and metadata, four levels, and a handler chosen once at start —
// text for a terminal, JSON lines for a collector, a recording one for tests. What it never
// carries: passwords, tokens, secrets, keys, message bodies. Callers pass identifiers and
// counts, never content.

/// How much a record matters. An operator picks the least one they want (`--log-level`).
public enum LogLevel: Int, Comparable, Sendable, CaseIterable, CustomStringConvertible {
    /// What a developer chasing a problem wants: every session's commands, every retry.
    case debug
    /// What the server is doing: one line per request and per socket, start, stop, migrations.
    case info
    /// Something went wrong and was handled: a retry, a refused connection, a give-up.
    case warning
    /// Something went wrong and an operator should look: storage failing, a worker stopped.
    case error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The name `--log-level` takes and the log shows (`warn`, not `warning`).
    public var description: String {
        switch self {
        case .debug: "debug"
        case .info: "info"
        case .warning: "warn"
        case .error: "error"
        }
    }

    /// The level named `name` (`error`, `warn` or `warning`, `info`, `debug`).
    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warn", "warning": self = .warning
        case "error": self = .error
        default: return nil
        }
    }
}

/// A metadata value: text or a number, written as such in JSON lines.
public enum LogValue: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
                      ExpressibleByFloatLiteral, ExpressibleByStringInterpolation {
    /// Text.
    case string(String)
    /// A whole number.
    case integer(Int64)
    /// A number with a fraction (durations in milliseconds).
    case double(Double)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }

    public var description: String {
        switch self {
        case .string(let text): text
        case .integer(let number): String(number)
        case .double(let number): String(format: "%.1f", number)
        }
    }
}

/// Fields of a record, by dotted lower-case keys (`request.id`, `user.id`, `conversation.id`).
public typealias LogMetadata = [String: LogValue]

/// One log line as a handler receives it.
public struct LogRecord: Sendable {
    /// When it was made.
    public var time: Date
    /// How much it matters.
    public var level: LogLevel
    /// Which part of the server wrote it (`parley.http`, `parley.webhooks`, …).
    public var label: String
    /// What happened, short and fixed ("request", "socket closed"): details go in metadata.
    public var message: String
    /// The logger's metadata with the call's on top.
    public var metadata: LogMetadata

    /// Creates a record; each argument sets the property of the same name.
    public init(time: Date, level: LogLevel, label: String, message: String, metadata: LogMetadata) {
        self.time = time
        self.level = level
        self.label = label
        self.message = message
        self.metadata = metadata
    }
}

/// Where records go. Chosen once at start; shared by every logger made from it.
public protocol LogHandler: Sendable {
    /// Records below this level are never made (their message and metadata are not even evaluated).
    var minimumLevel: LogLevel { get }
    /// Writes one record.
    func write(_ record: LogRecord)
    /// Writes what it holds back before returning (at stop, so the last lines are not lost).
    func flush()
}

extension LogHandler {
    /// Nothing is held back.
    public func flush() {}
}

/// A logger: a label, metadata every record of it carries, and the handler records go to.
///
/// ```swift
/// var log = logger
/// log[metadataKey: "request.id"] = "\(requestID)"
/// log.info("request", metadata: ["method": "POST", "path": "/v1/messages", "status": 201, "ms": 3.2])
/// ```
public struct Logger: Sendable {
    /// Which part of the server this is.
    public var label: String
    /// Fields every record of this logger carries.
    public var metadata: LogMetadata
    /// Where records go.
    public let handler: any LogHandler

    /// A logger writing to `handler`.
    public init(label: String, handler: any LogHandler, metadata: LogMetadata = [:]) {
        self.label = label
        self.handler = handler
        self.metadata = metadata
    }

    /// A logger that writes nothing (tools and tests that do not look).
    public static func discarding(label: String = "parley") -> Logger { Logger(label: label, handler: DiscardingLogHandler()) }

    /// The same handler and metadata under another label.
    public func labelled(_ label: String) -> Logger { Logger(label: label, handler: handler, metadata: metadata) }

    /// One metadata field.
    public subscript(metadataKey key: String) -> LogValue? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Whether a record of `level` would be written.
    public func enabled(_ level: LogLevel) -> Bool { level >= handler.minimumLevel }

    /// Writes a record when `level` is enabled; `message` and `metadata` are evaluated only then.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        guard enabled(level) else { return }
        var fields = metadata()
        for (key, value) in self.metadata where fields[key] == nil { fields[key] = value }
        handler.write(LogRecord(time: Date(), level: level, label: label, message: message(), metadata: fields))
    }

    /// A ``LogLevel/debug`` record.
    public func debug(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.debug, message(), metadata: metadata())
    }
    /// An ``LogLevel/info`` record.
    public func info(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.info, message(), metadata: metadata())
    }
    /// A ``LogLevel/warning`` record.
    public func warning(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.warning, message(), metadata: metadata())
    }
    /// An ``LogLevel/error`` record.
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> LogMetadata = [:]) {
        log(.error, message(), metadata: metadata())
    }
}

/// Writes nothing.
public struct DiscardingLogHandler: LogHandler {
    /// Nothing is enabled.
    public var minimumLevel: LogLevel { .error }
    /// A handler that drops everything.
    public init() {}
    public func write(_ record: LogRecord) {}
}

extension Logger {
    /// Runs `work`, for a background worker that carries on after a failure: the failure is
    /// logged at `level` (the same `what` at most once per ``LogThrottle/interval`` for this
    /// label, with how many were not shown) and answered nil, never swallowed unseen.
    public func attempt<T>(_ what: String, level: LogLevel = .warning, metadata: @autoclosure () -> LogMetadata = [:],
                           _ work: () async throws -> T) async -> T? {
        do {
            return try await work()
        } catch {
            failed(what, error, level: level, metadata: metadata())
            return nil
        }
    }

    /// Logs a failure of `what` at `level`, at most once per ``LogThrottle/interval`` for this
    /// label and `what`; the line says how many like it were held back since the last one.
    public func failed(_ what: String, _ error: any Error, level: LogLevel = .warning, metadata: @autoclosure () -> LogMetadata = [:]) {
        guard enabled(level), let held = LogThrottle.shared.admit(label + "\u{0}" + what) else { return }
        var fields = metadata()
        fields["error"] = .string("\(error)")
        if held > 0 { fields["suppressed"] = .integer(Int64(held)) }
        log(level, what, metadata: fields)
    }
}

/// Keeps a failing loop from filling the log: one line per kind of failure per interval.
public final class LogThrottle: Sendable {
    /// The throttle every logger of the process shares.
    public static let shared = LogThrottle()
    /// How often the same failure is logged at most. Default: 10 s.
    public static let interval: Double = 10

    private let state = LockedValue([String: (last: Double, held: Int)]())

    /// Nil when `key` was logged within the interval (counted as held back); else how many
    /// were held back since it last was.
    func admit(_ key: String) -> Int? {
        let now = Date().timeIntervalSince1970
        return state.withLock { table in
            if let entry = table[key], now - entry.last < Self.interval {
                table[key] = (entry.last, entry.held + 1)
                return nil
            }
            let held = table[key]?.held ?? 0
            table[key] = (now, 0)
            return held
        }
    }
}

extension Logger {
    private static let processLogger = LockedValue(Logger.discarding())

    /// The process's logger, for the parts nothing passes one to (the connections deep inside
    /// the PostgreSQL and Redis engines): the server sets it once at start
    /// (``bootstrap(_:)``); until then it writes nothing.
    public static var process: Logger { processLogger.get() }

    /// Makes `logger` the process's logger.
    public static func bootstrap(_ logger: Logger) { processLogger.set(logger) }
}
