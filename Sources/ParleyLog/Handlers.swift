import Foundation
import ParleySync
#if canImport(Glibc)
import Glibc
#endif

/// How a record is written: text for a person at a terminal, JSON lines for a collector.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-12-03T10:00:00.123Z info parley.http: request method=GET status=200 ms=1.2`
    case text
    /// `{"time":"2026-12-03T10:00:00.123Z","level":"info","label":"parley.http","message":"request",…}`
    case json
}

/// Writes records as lines to a file descriptor (standard error by default), one `write(2)`
/// per line under a lock, so lines from many threads never interleave.
public final class StreamLogHandler: LogHandler, @unchecked Sendable {
    // @unchecked: `descriptor`, `format` and `minimumLevel` are constants; writes are
    // serialized by `lock`.
    public let minimumLevel: LogLevel
    private let format: LogFormat
    private let descriptor: Int32
    private let lock = LockedValue(())

    /// A handler writing records at `minimumLevel` and above in `format` to `descriptor`.
    public init(minimumLevel: LogLevel = .info, format: LogFormat = .text, descriptor: Int32 = 2) {
        self.minimumLevel = minimumLevel
        self.format = format
        self.descriptor = descriptor
    }

    public func write(_ record: LogRecord) {
        guard record.level >= minimumLevel else { return }
        let line = Array(LogLine.render(record, format: format).utf8)
        lock.withLock { _ in
            var offset = 0
            while offset < line.count {
                let written = line[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // nowhere to say so: a log that cannot be written is dropped, never blocks the server
                }
                offset += written
            }
        }
    }
}

/// Keeps every record, for tests that assert on what was logged (never on stderr text).
public final class RecordingLogHandler: LogHandler {
    public let minimumLevel: LogLevel
    private let kept = LockedValue([LogRecord]())

    /// A handler keeping records at `minimumLevel` and above.
    public init(minimumLevel: LogLevel = .debug) { self.minimumLevel = minimumLevel }

    public func write(_ record: LogRecord) { kept.withLock { $0.append(record) } }

    /// What was written so far, in order.
    public var records: [LogRecord] { kept.get() }
}

/// The two line formats, kept apart from where lines go so they are tested as text.
public enum LogLine: Sendable {
    /// One line (with its newline) for `record`: metadata keys in sorted order.
    public static func render(_ record: LogRecord, format: LogFormat) -> String {
        let keys = record.metadata.keys.sorted()
        switch format {
        case .text:
            var line = "\(timestamp(record.time)) \(record.level) \(record.label): \(record.message)"
            for key in keys {
                guard let value = record.metadata[key] else { continue }
                line += " \(key)=\(textValue(value))"
            }
            return line + "\n"
        case .json:
            var line = "{\"time\":\(quoted(timestamp(record.time))),\"level\":\(quoted(record.level.description)),"
                + "\"label\":\(quoted(record.label)),\"message\":\(quoted(record.message))"
            for key in keys where !["time", "level", "label", "message"].contains(key) {
                guard let value = record.metadata[key] else { continue }
                line += ",\(quoted(key)):"
                switch value {
                case .string(let text): line += quoted(text)
                case .integer(let number): line += String(number)
                case .double(let number): line += number.isFinite ? String(format: "%.3f", number) : "null"
                }
            }
            return line + "}\n"
        }
    }

    /// `2026-12-03T10:00:00.123Z`, UTC, without Foundation's formatters on the hot path.
    static func timestamp(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        var whole = time_t(seconds.rounded(.down))
        let millis = Int(((seconds - Double(whole)) * 1000).rounded(.down))
        var parts = tm()
        gmtime_r(&whole, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(max(millis, 0), 999))
    }

    /// A value as text: bare when it is one word of safe characters, else quoted.
    static func textValue(_ value: LogValue) -> String {
        guard case .string(let text) = value else { return value.description }
        let safe = !text.isEmpty && text.unicodeScalars.allSatisfy { scalar in
            scalar.value > 0x20 && scalar.value < 0x7F && scalar != "\"" && scalar != "\\" && scalar != "="
        }
        return safe ? text : quoted(text)
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x2028...0x2029).contains(scalar.value) {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
