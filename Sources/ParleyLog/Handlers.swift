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

/// Writes records as lines to a file descriptor (standard error by default).
///
/// The caller renders its line and appends it to a buffer; a writer thread of the handler's
/// own drains the buffer with `write(2)`, many lines per call. So an event loop never waits on
/// a slow terminal, pipe or journald, and lines from many threads never interleave. When the
/// descriptor cannot keep up and ``bufferLimit`` bytes are waiting, new lines are dropped and
/// counted, and the next line written says how many (`log lines dropped`): the server is never
/// slowed or stopped by its log. ``flush()`` writes what waits before it returns (at stop).
public final class StreamLogHandler: LogHandler, @unchecked Sendable {
    // @unchecked: `format`, `descriptor` and `minimumLevel` are constants; the buffer is a
    // LockedValue, and `writing` serializes the writes to the descriptor in buffer order.
    public let minimumLevel: LogLevel
    private let format: LogFormat
    private let descriptor: Int32
    private let pending = LockedValue(Pending())
    private let writing = LockedValue(())
    private let wake = DispatchSemaphore(value: 0)

    /// The most bytes waiting to be written before new lines are dropped: 1 MiB.
    public static let bufferLimit = 1 << 20
    /// How long an `info` or `debug` line waits at most before it is written: 0.1 s. Lines
    /// are written sooner when 32 KiB wait or a warning or error comes; so under load the
    /// writer wakes once per many lines, not once per line.
    public static let interval: Double = 0.1
    private static let batch = 32 << 10

    private struct Pending {
        var bytes: [UInt8] = []
        var dropped = 0
    }

    /// A handler writing records at `minimumLevel` and above in `format` to `descriptor`.
    public init(minimumLevel: LogLevel = .info, format: LogFormat = .text, descriptor: Int32 = 2) {
        self.minimumLevel = minimumLevel
        self.format = format
        self.descriptor = descriptor
        let thread = Thread { [weak self, wake] in
            while true {
                _ = wake.wait(timeout: .now() + StreamLogHandler.interval)
                guard let handler = self else { return }
                handler.flush()
            }
        }
        thread.name = "parley-log"
        thread.start()
    }

    public func write(_ record: LogRecord) {
        guard record.level >= minimumLevel else { return }
        let line = LogLine.bytes(record, format: format)
        let urgent = record.level >= .warning
        let wakeWriter = pending.withLock { pending -> Bool in
            guard pending.bytes.count + line.count <= Self.bufferLimit else {
                pending.dropped += 1
                return false
            }
            let crossed = pending.bytes.count < Self.batch && pending.bytes.count + line.count >= Self.batch
            pending.bytes += line
            return crossed || urgent
        }
        if wakeWriter { wake.signal() }
    }

    /// Writes every line waiting, then returns.
    public func flush() {
        writing.withLock { _ in
            while true {
                let (bytes, dropped) = pending.withLock { pending in
                    defer { pending = Pending() }
                    return (pending.bytes, pending.dropped)
                }
                if bytes.isEmpty && dropped == 0 { return }
                if dropped > 0 {
                    let notice = LogRecord(time: Date(), level: .warning, label: "parley.log", message: "log lines dropped",
                                           metadata: ["count": .integer(Int64(dropped))])
                    put(LogLine.bytes(notice, format: format))
                }
                put(bytes)
            }
        }
    }

    /// Writes all of `bytes`; an error other than an interruption drops the rest (there is
    /// nowhere to say so, and a log must never block the server).
    private func put(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
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

/// The two line formats, kept apart from where lines go so they are tested as text. Lines
/// are built as bytes with no Foundation formatter: the request line is written once per
/// request, and `String(format:)` cost more than the rest of the line together.
public enum LogLine: Sendable {
    /// One line (with its newline) for `record`: metadata keys in sorted order.
    public static func render(_ record: LogRecord, format: LogFormat) -> String {
        String(decoding: bytes(record, format: format), as: UTF8.self)
    }

    /// ``render(_:format:)`` as UTF-8 bytes.
    public static func bytes(_ record: LogRecord, format: LogFormat) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        let keys = record.metadata.keys.sorted()
        switch format {
        case .text:
            timestamp(record.time, into: &line)
            line.append(0x20)
            line += record.level.description.utf8
            line.append(0x20)
            line += record.label.utf8
            line += ": ".utf8
            line += record.message.utf8
            for key in keys {
                guard let value = record.metadata[key] else { continue }
                line.append(0x20)
                line += key.utf8
                line.append(UInt8(ascii: "="))
                switch value {
                case .string(let text): if isBare(text) { line += text.utf8 } else { quoted(text, into: &line) }
                case .integer(let number): line += String(number).utf8
                case .double(let number): fixed(number, decimals: 1, into: &line)
                }
            }
            line.append(0x0A)
        case .json:
            line += #"{"time":""#.utf8
            timestamp(record.time, into: &line)
            line += #"","level":"#.utf8
            quoted(record.level.description, into: &line)
            line += #","label":"#.utf8
            quoted(record.label, into: &line)
            line += #","message":"#.utf8
            quoted(record.message, into: &line)
            for key in keys where !["time", "level", "label", "message"].contains(key) {
                guard let value = record.metadata[key] else { continue }
                line.append(UInt8(ascii: ","))
                quoted(key, into: &line)
                line.append(UInt8(ascii: ":"))
                switch value {
                case .string(let text): quoted(text, into: &line)
                case .integer(let number): line += String(number).utf8
                case .double(let number): fixed(number, decimals: 3, into: &line)
                }
            }
            line += "}\n".utf8
        }
        return line
    }

    /// `2026-12-03T10:00:00.123Z`, UTC.
    static func timestamp(_ date: Date, into line: inout [UInt8]) {
        let seconds = date.timeIntervalSince1970
        var whole = time_t(seconds.rounded(.down))
        let millis = min(max(Int(((seconds - Double(whole)) * 1000).rounded(.down)), 0), 999)
        var parts = tm()
        gmtime_r(&whole, &parts)
        digits(Int(parts.tm_year) + 1900, 4, into: &line)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2, into: &line)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2, into: &line)
        line.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2, into: &line)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2, into: &line)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2, into: &line)
        line.append(UInt8(ascii: "."))
        digits(millis, 3, into: &line)
        line.append(UInt8(ascii: "Z"))
    }

    /// `value` in decimal, zero-padded to `width` digits.
    private static func digits(_ value: Int, _ width: Int, into line: inout [UInt8]) {
        let start = line.count
        for _ in 0..<width { line.append(UInt8(ascii: "0")) }
        var rest = value
        var index = start + width - 1
        while index >= start && rest > 0 {
            line[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            index -= 1
        }
    }

    /// `value` with `decimals` places, rounded half to even (as `%.Nf` does); `null` for a
    /// value that is not finite, exponent notation past 10^15.
    static func fixed(_ value: Double, decimals: Int, into line: inout [UInt8]) {
        guard value.isFinite else { line += "null".utf8; return }
        guard abs(value) < 1e15 else { line += String(value).utf8; return }
        var scale = 1
        for _ in 0..<decimals { scale *= 10 }
        let scaled = Int((abs(value) * Double(scale)).rounded(.toNearestOrEven))
        if value < 0 && scaled != 0 { line.append(UInt8(ascii: "-")) }
        line += String(scaled / scale).utf8
        if decimals > 0 {
            line.append(UInt8(ascii: "."))
            digits(scaled % scale, decimals, into: &line)
        }
    }

    /// Whether a text value can stand bare: one word of printable ASCII with no quote,
    /// backslash or equals sign.
    static func isBare(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { byte in
            byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "=")
        }
    }

    /// A JSON string literal: quotes, backslashes, control characters and the line and
    /// paragraph separators escaped.
    static func quoted(_ text: String, into line: inout [UInt8]) {
        line.append(UInt8(ascii: "\""))
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line += #"\""#.utf8
            case "\\": line += #"\\"#.utf8
            case "\n": line += #"\n"#.utf8
            case "\r": line += #"\r"#.utf8
            case "\t": line += #"\t"#.utf8
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029 {
                    line += #"\u"#.utf8
                    let hex = Array("0123456789abcdef".utf8)
                    for shift in stride(from: 12, through: 0, by: -4) { line.append(hex[Int((scalar.value >> UInt32(shift)) & 0xF)]) }
                } else if scalar.isASCII {
                    line.append(UInt8(scalar.value))
                } else {
                    line += String(scalar).utf8
                }
            }
        }
        line.append(UInt8(ascii: "\""))
    }
}
