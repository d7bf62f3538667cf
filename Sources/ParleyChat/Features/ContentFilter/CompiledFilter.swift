package import ParleyWire

/// An app's blocklists compiled for the send path: each list's words and phrases indexed by
/// their first word, and its regular expressions (``SafeRegex``). Checking a text costs one
/// pass to split it into words, a hash lookup per word, and each regular expression's
/// linear-time run.
package struct CompiledFilter: Sendable {
    struct List: Sendable {
        var name: String
        var mode: BlocklistMode
        var reason: String
        /// First word (folded) → every phrase starting with it, as its remaining words.
        var phrases: [String: [[String]]]
        var regexes: [SafeRegex]
    }

    let lists: [List]

    /// No blocklists: every text is clean.
    package static let empty = CompiledFilter(lists: [])

    /// Whether there is nothing to check.
    package var isEmpty: Bool { lists.isEmpty }

    /// The reason a refused message gets when its list names none.
    package static let defaultReason = "this message contains words this app does not allow"

    /// Compiles `blocklists` (already validated when they were set).
    package init(_ blocklists: [Blocklist]) throws {
        lists = try blocklists.map { list in
            var phrases: [String: [[String]]] = [:]
            for entry in list.words {
                let words = CompiledFilter.words(of: FoldedText(entry)).map(\.text)
                guard let first = words.first else { continue }
                phrases[first, default: []].append(Array(words.dropFirst()))
            }
            return List(name: list.name, mode: list.mode, reason: list.reason ?? Self.defaultReason, phrases: phrases,
                        regexes: try list.regexes.map { try SafeRegex($0) })
        }
    }

    private init(lists: [List]) { self.lists = lists }

    /// What a text comes to: unchanged, masked, or refused with the first refusing list's reason.
    package enum Outcome: Hashable, Sendable {
        case clean
        case masked(String)
        case rejected(reason: String)
    }

    /// Checks one text against every list.
    package func check(_ text: String) -> Outcome {
        guard !lists.isEmpty, !text.isEmpty else { return .clean }
        let folded = FoldedText(text)
        let words = Self.words(of: folded)
        var masks: [Range<Int>] = []
        for list in lists {
            let found = Self.matches(list, folded, words, all: list.mode == .mask)
            guard !found.isEmpty else { continue }
            if list.mode == .reject { return .rejected(reason: list.reason) }
            masks += found
        }
        guard !masks.isEmpty else { return .clean }
        var scalars = String.UnicodeScalarView()
        var masked = [Bool](repeating: false, count: folded.count)
        for range in masks { for index in range { masked[index] = true } }
        for (index, value) in folded.original.enumerated() {
            let scalar = Unicode.Scalar(value) ?? "?"
            scalars.append(masked[index] && !scalar.properties.isWhitespace ? "*" : scalar)
        }
        return .masked(String(scalars))
    }

    /// Applies the lists to every text a message carries (text, Markdown, captions, place and
    /// file names); the app's own `system` notices and custom payloads are not checked.
    ///
    /// - Returns: the content to write (masked where a mask list matched).
    /// - Throws: 422 `content_rejected` with the list's reason.
    package func apply(to content: MessageContent) throws -> MessageContent {
        guard !lists.isEmpty else { return content }
        func filtered(_ text: String?) throws -> String? {
            guard let text else { return nil }
            switch check(text) {
            case .clean: return text
            case .masked(let masked): return masked
            case .rejected(let reason): throw ChatError.contentRejected(reason)
            }
        }
        switch content {
        case .text(let text): return .text(try filtered(text) ?? text)
        case .markdown(let text): return .markdown(try filtered(text) ?? text)
        case .location(var location):
            location.caption = try filtered(location.caption)
            location.name = try filtered(location.name)
            return .location(location)
        case .photo(var media):
            media.caption = try filtered(media.caption)
            media.name = try filtered(media.name)
            return .photo(media)
        case .video(var media):
            media.caption = try filtered(media.caption)
            media.name = try filtered(media.name)
            return .video(media)
        case .audio(var media):
            media.caption = try filtered(media.caption)
            media.name = try filtered(media.name)
            return .audio(media)
        case .file(var media):
            media.caption = try filtered(media.caption)
            media.name = try filtered(media.name)
            return .file(media)
        case .poll(var poll):
            poll.question = try filtered(poll.question) ?? poll.question
            poll.options = try poll.options.map { try filtered($0) ?? $0 }
            return .poll(poll)
        case .custom, .system: return content
        }
    }

    /// Applies the lists to every string in an app-defined JSON value (a Pusher client event's
    /// data), keys left as they are.
    ///
    /// - Returns: the value to send (masked where a mask list matched).
    /// - Throws: 422 `content_rejected` with the list's reason.
    package func apply(toJSON value: JSONValue) throws -> JSONValue {
        guard !lists.isEmpty else { return value }
        switch value {
        case .string(let text):
            switch check(text) {
            case .clean: return value
            case .masked(let masked): return .string(masked)
            case .rejected(let reason): throw ChatError.contentRejected(reason)
            }
        case .array(let items): return .array(try items.map { try apply(toJSON: $0) })
        case .object(let fields): return .object(try fields.mapValues { try apply(toJSON: $0) })
        case .null, .bool, .number: return value
        }
    }

    /// A word of a text: its scalar range and folded spelling.
    struct Word {
        var range: Range<Int>
        var text: String
    }

    /// The text's words: maximal runs of word scalars (``FoldedText/isWord(_:)``).
    static func words(of text: FoldedText) -> [Word] {
        var words: [Word] = []
        var start: Int?
        for index in 0...text.count {
            let inWord = index < text.count && FoldedText.isWord(text.original[index])
            if inWord, start == nil { start = index }
            if !inWord, let begin = start {
                var spelling = String.UnicodeScalarView()
                for value in text.folded[begin..<index] { if let scalar = Unicode.Scalar(value) { spelling.append(scalar) } }
                words.append(Word(range: begin..<index, text: String(spelling)))
                start = nil
            }
        }
        return words
    }

    /// Where `list` matches: the first place only, unless `all`.
    static func matches(_ list: List, _ text: FoldedText, _ words: [Word], all: Bool) -> [Range<Int>] {
        var found: [Range<Int>] = []
        if !list.phrases.isEmpty {
            for (index, word) in words.enumerated() {
                guard let candidates = list.phrases[word.text] else { continue }
                for rest in candidates where index + rest.count < words.count {
                    guard rest.enumerated().allSatisfy({ words[index + 1 + $0.offset].text == $0.element }) else { continue }
                    found.append(word.range.lowerBound..<words[index + rest.count].range.upperBound)
                    if !all { return found }
                }
            }
        }
        for regex in list.regexes {
            var from = 0
            while from <= text.count, let range = regex.firstMatch(in: text, from: from) {
                if range.isEmpty {
                    from = range.upperBound + 1
                    continue
                }
                found.append(range)
                if !all { return found }
                from = range.upperBound
            }
        }
        return found
    }
}
