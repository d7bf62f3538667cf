import Foundation
/// The chat screen as data: what `parley chat` draws, computed apart from drawing so that it
/// is tested line by line. Everything here is pure: same input, same lines.
package struct ChatLayout: Sendable {
    /// One message as the screen shows it.
    package struct Bubble: Sendable, Hashable {
        /// The number commands use (`/edit 3 …`, `/react 2 👍`), shown under every message: its
        /// seq, the number `parley history` and every command that takes a message (`#3`) use
        /// too; nil while it is being sent (shown as `#…`).
        package var number: Int?
        /// Written by the user at this terminal (drawn on the right).
        package var mine: Bool
        /// The sender's display name.
        package var sender: String
        /// `HH:mm`.
        package var time: String
        /// The text (or a description of a location, photo, …).
        package var text: String
        /// Edited since sent.
        package var edited: Bool
        /// Deleted (a tombstone).
        package var deleted: Bool
        /// For one's own messages: the mark after the time.
        package var status: Status?
        /// The reactions line (`👍 2  🎉 1`), nil for none.
        package var reactions: String?
        /// Pinned in the conversation.
        package var pinned: Bool

        /// Creates a bubble; each argument sets the property of the same name.
        package init(number: Int?, mine: Bool, sender: String, time: String, text: String, edited: Bool = false, deleted: Bool = false,
                    status: Status? = nil, reactions: String? = nil, pinned: Bool = false) {
            self.reactions = reactions
            self.pinned = pinned
            self.number = number
            self.mine = mine
            self.sender = sender
            self.time = time
            self.text = text
            self.edited = edited
            self.deleted = deleted
            self.status = status
        }
    }

    /// Where one's own message is.
    package enum Status: String, Sendable, Hashable {
        case sending = "…"
        case sent = "✓"
        case delivered = "✓✓"
        case read = "✓✓ read"
        case failed = "! not sent"
    }

    /// Columns and rows of the terminal.
    package var width: Int
    package var height: Int

    /// A layout for a terminal of `width` × `height` (at least 20 × 6).
    package init(width: Int, height: Int) {
        self.width = max(20, width)
        self.height = max(6, height)
    }

    /// The lines of all bubbles, oldest first, each at most `width` columns.
    package func lines(for bubbles: [Bubble]) -> [String] {
        let bubbleWidth = max(10, width * 7 / 10)
        var lines: [String] = []
        var previousSender: String?
        for bubble in bubbles {
            let body = bubble.deleted ? "(deleted)" : bubble.text + (bubble.edited ? " (edited)" : "")
            let wrapped = Self.wrap((bubble.pinned ? "📌 " : "") + body, width: bubbleWidth - 2)
            let reactions = bubble.deleted ? nil : bubble.reactions
            if bubble.mine {
                for line in wrapped { lines.append(Self.right("\(line) ▕", width: width)) }
                if let reactions { lines.append(Self.right("\(reactions)  ", width: width)) }
                let mark = bubble.status.map { " \($0.rawValue)" } ?? ""
                lines.append(Self.right("#\(bubble.number.map(String.init) ?? "…") \(bubble.time)\(mark)  ", width: width))
            } else {
                if bubble.sender != previousSender { lines.append(Self.fit("\(bubble.sender)", width: width)) }
                for line in wrapped { lines.append(Self.fit("▏ \(line)", width: width)) }
                if let reactions { lines.append(Self.fit("  \(reactions)", width: width)) }
                lines.append(Self.fit("  #\(bubble.number.map(String.init) ?? "…") \(bubble.time)", width: width))
            }
            previousSender = bubble.mine ? nil : bubble.sender
        }
        return lines
    }

    /// Markdown as a terminal line shows it: the markers of bold, italic, strike-through and
    /// code gone (the words stay), a link as its text and its URL in parentheses, fences dropped.
    package static func plainMarkdown(_ markdown: String) -> String {
        var text = markdown
        let rules: [(String, String)] = [
            (#"```[a-zA-Z0-9]*\n?"#, ""),                          // code fences
            (#"\[([^\]\n]+)\]\((https?://[^)\s]+)\)"#, "$1 ($2)"),   // [text](url)
            (#"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"#, "$2"),               // **bold**, __bold__
            (#"~~(?=\S)(.+?)(?<=\S)~~"#, "$1"),                      // ~~strike~~
            (#"`([^`\n]+)`"#, "$1"),                                 // `code`
            (#"(?<![\w*])([*_])(?=\S)([^*_\n]+?)(?<=\S)\1(?![\w*])"#, "$2"), // *italic*, _italic_
        ]
        for (pattern, template) in rules {
            text = text.replacingOccurrences(of: pattern, with: template, options: .regularExpression)
        }
        return text
    }

    /// The whole screen: a title line, the messages scrolled `scroll` lines up from the
    /// newest, the typing line (who is typing, then any notice), a rule, and the input line.
    /// Exactly `height` lines.
    package func screen(title: String, bubbles: [Bubble], scroll: Int, typing: String?, input: String, notice: String? = nil) -> [String] {
        let messageRows = height - 4
        let all = lines(for: bubbles)
        let maxScroll = max(0, all.count - messageRows)
        let offset = min(max(0, scroll), maxScroll)
        let end = all.count - offset
        let visible = Array(all[max(0, end - messageRows)..<end])
        var screen = [Self.fit(title + (offset > 0 ? "  (↑ \(offset) lines; PgDn for newer)" : ""), width: width)]
        screen += Array(repeating: "", count: messageRows - visible.count) + visible
        // Typing first, a notice after it: a notice never hides who is typing.
        screen.append(Self.fit([typing, notice].compactMap { $0 }.joined(separator: "  ·  "), width: width))
        screen.append(String(repeating: "─", count: width))
        let prompt = "> " + input
        screen.append(prompt.count > width ? String(prompt.suffix(width)) : prompt)
        return screen
    }

    /// How many lines scrolling up may go before the top (then the client loads earlier history).
    package func maxScroll(for bubbles: [Bubble]) -> Int { max(0, lines(for: bubbles).count - (height - 4)) }

    /// Splits `text` into lines of at most `width` characters, at spaces where possible.
    package static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            for word in paragraph.split(separator: " ", omittingEmptySubsequences: false) {
                var word = String(word)
                while word.count > width {  // a word longer than a line is cut
                    if !line.isEmpty { lines.append(line); line = "" }
                    lines.append(String(word.prefix(width)))
                    word = String(word.dropFirst(width))
                }
                if line.isEmpty {
                    line = word
                } else if line.count + 1 + word.count <= width {
                    line += " " + word
                } else {
                    lines.append(line)
                    line = word
                }
            }
            lines.append(line)
        }
        return lines
    }

    static func fit(_ text: String, width: Int) -> String { text.count > width ? String(text.prefix(width - 1)) + "…" : text }

    static func right(_ text: String, width: Int) -> String {
        let fitted = fit(text, width: width)
        return String(repeating: " ", count: max(0, width - fitted.count)) + fitted
    }
}
