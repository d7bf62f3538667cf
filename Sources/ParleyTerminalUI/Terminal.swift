import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A key the chat screen understands.
package enum Key: Sendable, Hashable {
    case character(Character)
    case enter, backspace, pageUp, pageDown, up, down, interrupt, endOfInput
}

/// Decodes keys from terminal input bytes (UTF-8 text, control keys, the VT escape sequences
/// for page and arrow keys). Pure, so it is tested with bytes.
package struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    /// An empty decoder.
    package init() {}

    /// The keys completed by `bytes`; an unfinished sequence waits for more.
    package mutating func feed(_ bytes: [UInt8]) -> [Key] {
        pending += bytes
        var keys: [Key] = []
        while !pending.isEmpty {
            let byte = pending[0]
            switch byte {
            case 0x0D, 0x0A: keys.append(.enter); pending.removeFirst()
            case 0x7F, 0x08: keys.append(.backspace); pending.removeFirst()
            case 0x03: keys.append(.interrupt); pending.removeFirst()
            case 0x04: keys.append(.endOfInput); pending.removeFirst()
            case 0x1B:
                guard pending.count >= 3 else { return keys }
                if pending[1] == UInt8(ascii: "["), pending[2] == UInt8(ascii: "A") { keys.append(.up); pending.removeFirst(3); continue }
                if pending[1] == UInt8(ascii: "["), pending[2] == UInt8(ascii: "B") { keys.append(.down); pending.removeFirst(3); continue }
                guard pending.count >= 4 else { return keys }
                if pending[1] == UInt8(ascii: "["), pending[3] == UInt8(ascii: "~") {
                    if pending[2] == UInt8(ascii: "5") { keys.append(.pageUp) }
                    if pending[2] == UInt8(ascii: "6") { keys.append(.pageDown) }
                    pending.removeFirst(4)
                } else {
                    pending.removeFirst()  // an escape sequence the screen does not use
                }
            case ..<0x20:
                pending.removeFirst()  // other control characters are ignored
            default:
                let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
                guard pending.count >= length else { return keys }
                let scalarBytes = Array(pending.prefix(length))
                pending.removeFirst(length)
                if let text = String(validating: scalarBytes, as: UTF8.self), let character = text.first { keys.append(.character(character)) }
            }
        }
        return keys
    }
}

/// The controlling terminal: raw mode, size, reading keys, drawing whole screens.
package final class Terminal: @unchecked Sendable {
    // @unchecked: `original` and `raw` are set by `enterRawMode()` and read by `restore()`, which the one process that owns the terminal calls from its main task; the value is shared only so a signal handler's task can restore the terminal.
    private var original = termios()
    private var raw = false

    /// The terminal on standard input and output.
    package init() {}

    /// Columns and rows (80 × 24 when unknown).
    package var size: (width: Int, height: Int) {
        var window = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0, window.ws_row > 0 else { return (80, 24) }
        return (Int(window.ws_col), Int(window.ws_row))
    }

    /// Keys without echo or line buffering, on the alternate screen.
    package func enterRawMode() {
        guard tcgetattr(STDIN_FILENO, &original) == 0 else { return }
        var settings = original
        settings.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG | IEXTEN)
        settings.c_iflag &= ~tcflag_t(IXON | ICRNL)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &settings)
        raw = true
        write("\u{1B}[?1049h\u{1B}[?25l")
    }

    /// Restores the terminal as it was.
    package func leaveRawMode() {
        write("\u{1B}[?25h\u{1B}[?1049l")
        if raw { tcsetattr(STDIN_FILENO, TCSAFLUSH, &original) }
        raw = false
    }

    /// Keys as they are typed, read on a thread of their own; ends at end of input.
    package func keys() -> AsyncStream<Key> {
        AsyncStream { continuation in
            let thread = Thread {
                var decoder = KeyDecoder()
                var buffer = [UInt8](repeating: 0, count: 256)
                while true {
                    let count = read(STDIN_FILENO, &buffer, buffer.count)
                    if count <= 0 { continuation.yield(.endOfInput); continuation.finish(); return }
                    for key in decoder.feed(Array(buffer[0..<count])) { continuation.yield(key) }
                }
            }
            thread.start()
        }
    }

    /// Draws `lines` as the whole screen.
    package func draw(_ lines: [String]) {
        var out = "\u{1B}[H"
        for (index, line) in lines.enumerated() {
            out += "\u{1B}[\(index + 1);1H\u{1B}[2K" + line
        }
        write(out)
    }

    private func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Foundation.write(STDOUT_FILENO, $0.baseAddress, $0.count) }
            if written <= 0 { return }
            offset += written
        }
    }
}
