// A regular expression an app's blocklist may hold (docs/trust-and-safety.md): RE2's subset
// and RE2's promise. It is compiled to a Thompson automaton and run as a Pike VM, so matching
// takes time proportional to the text's length times the program's size, whatever the
// pattern: no backtracking, so no pattern can make a send slow. Constructs that need
// backtracking (back-references, look-around) are refused with a message that names them.
//
// Matching ignores case (each Unicode scalar is compared with its simple lowercase form);
// positions are Unicode scalar offsets, so a match can be masked in the original text.

/// Why a pattern was refused, for the server API's 400.
package struct SafeRegexError: Error, Hashable, Sendable, CustomStringConvertible {
    package var description: String
}

/// A compiled pattern; see the file's comment.
package struct SafeRegex: Sendable, Hashable {
    /// The longest pattern accepted, in bytes.
    package static let maxPatternBytes = 256
    /// The most instructions a compiled pattern may have (counted repetition multiplies).
    package static let maxProgram = 2_000
    /// The largest bound of a counted repetition (`{n,m}`).
    package static let maxRepeat = 100

    enum Instruction: Hashable, Sendable {
        case scalar(UInt32)
        case any
        case set(ScalarSet)
        case split(Int, Int)
        case jump(Int)
        case start
        case end
        case boundary(Bool)
        case match
    }

    let program: [Instruction]
    /// The pattern as given.
    package let pattern: String
    /// Whether it can match without consuming anything (`a*`, `\b`, `x|`): such a pattern
    /// matches every text, so a blocklist refuses it.
    package let matchesEmpty: Bool

    /// Compiles `pattern`.
    ///
    /// - Throws: ``SafeRegexError`` naming what is not accepted and where.
    package init(_ pattern: String) throws(SafeRegexError) {
        guard !pattern.isEmpty else { throw SafeRegexError(description: "the pattern is empty") }
        guard pattern.utf8.count <= Self.maxPatternBytes else {
            throw SafeRegexError(description: "the pattern is longer than \(Self.maxPatternBytes) bytes")
        }
        var parser = Parser(Array(pattern.unicodeScalars))
        let tree = try parser.parse()
        var compiler = Compiler()
        try compiler.emit(tree)
        compiler.program.append(.match)
        guard compiler.program.count <= Self.maxProgram else {
            throw SafeRegexError(description: "the pattern compiles to more than \(Self.maxProgram) steps; use smaller counted repetitions")
        }
        program = compiler.program
        self.pattern = pattern
        matchesEmpty = tree.isNullable
    }

    /// The leftmost match at or after `from` (the first alternative's, as Perl and RE2 choose),
    /// as scalar offsets; nil when there is none.
    package func firstMatch(in text: FoldedText, from: Int = 0) -> Range<Int>? {
        var machine = Machine(program: program, text: text)
        return machine.search(from: from)
    }

    package static func == (a: SafeRegex, b: SafeRegex) -> Bool { a.pattern == b.pattern }
    package func hash(into hasher: inout Hasher) { hasher.combine(pattern) }
}

/// A text as the matchers read it: its scalars, and each one's simple lowercase form.
package struct FoldedText: Sendable {
    /// The scalars, as written.
    package let original: [UInt32]
    /// The same scalars, each lowercased when its lowercase is one scalar.
    package let folded: [UInt32]

    /// Reads `text`.
    package init(_ text: String) {
        var original: [UInt32] = []
        var folded: [UInt32] = []
        original.reserveCapacity(text.utf8.count)
        folded.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            original.append(scalar.value)
            folded.append(FoldedText.fold(scalar.value))
        }
        self.original = original
        self.folded = folded
    }

    /// `value`'s simple lowercase form (itself when it has none, or more than one scalar).
    package static func fold(_ value: UInt32) -> UInt32 {
        if value < 0x80 { return (0x41...0x5A).contains(value) ? value + 0x20 : value }
        guard let scalar = Unicode.Scalar(value) else { return value }
        let lower = scalar.properties.lowercaseMapping.unicodeScalars
        return lower.count == 1 ? lower.first?.value ?? value : value
    }

    /// Whether `value` is part of a word: a letter, a digit, a combining mark or `_`.
    package static func isWord(_ value: UInt32) -> Bool {
        if value < 0x80 {
            return (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value) || value == 0x5F
        }
        guard let scalar = Unicode.Scalar(value) else { return false }
        let properties = scalar.properties
        return properties.isAlphabetic || properties.numericType != nil || properties.generalCategory == .nonspacingMark
    }

    /// The number of scalars.
    package var count: Int { original.count }
}

/// A character class: ranges of scalars, possibly negated.
struct ScalarSet: Hashable, Sendable {
    var ranges: [ClosedRange<UInt32>] = []
    var negated = false

    func contains(original: UInt32, folded: UInt32) -> Bool {
        let found = ranges.contains { $0.contains(original) || $0.contains(folded) }
        return found != negated
    }

    static let digits = ScalarSet(ranges: [0x30...0x39])
    static let word = ScalarSet(ranges: [0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x5F...0x5F])
    static let space = ScalarSet(ranges: [0x09...0x0D, 0x20...0x20, 0xA0...0xA0, 0x2000...0x200A, 0x2028...0x2029, 0x3000...0x3000])
}

indirect enum RegexNode: Sendable {
    case empty
    case scalar(UInt32)
    case any
    case set(ScalarSet)
    case start
    case end
    case boundary(Bool)
    case concat([RegexNode])
    case alternation([RegexNode])
    case repetition(RegexNode, min: Int, max: Int?, greedy: Bool)
}

extension RegexNode {
    /// Whether it matches an empty stretch of text (anchors and boundaries consume nothing).
    var isNullable: Bool {
        switch self {
        case .empty, .start, .end, .boundary: true
        case .scalar, .any, .set: false
        case .concat(let items): items.allSatisfy(\.isNullable)
        case .alternation(let branches): branches.contains(where: \.isNullable)
        case .repetition(let inner, let minimum, _, _): minimum == 0 || inner.isNullable
        }
    }
}

private struct Parser {
    let scalars: [Unicode.Scalar]
    var index = 0
    var depth = 0

    init(_ scalars: [Unicode.Scalar]) { self.scalars = scalars }

    var peek: Unicode.Scalar? { index < scalars.count ? scalars[index] : nil }

    func error(_ what: String) -> SafeRegexError { SafeRegexError(description: "\(what) at offset \(index)") }

    mutating func parse() throws(SafeRegexError) -> RegexNode {
        let node = try alternation()
        if index < scalars.count { throw error("unexpected ')'") }
        return node
    }

    mutating func alternation() throws(SafeRegexError) -> RegexNode {
        var branches = [try concatenation()]
        while peek == "|" {
            index += 1
            branches.append(try concatenation())
        }
        return branches.count == 1 ? branches[0] : .alternation(branches)
    }

    mutating func concatenation() throws(SafeRegexError) -> RegexNode {
        var items: [RegexNode] = []
        while let next = peek, next != "|", next != ")" {
            var atom = try self.atom()
            if let quantified = try quantifier(atom) { atom = quantified }
            if let next = peek, "*+?{".unicodeScalars.contains(next), !isLiteralBrace() {
                throw error("a repetition of a repetition is not accepted (write it as one)")
            }
            items.append(atom)
        }
        return items.isEmpty ? .empty : items.count == 1 ? items[0] : .concat(items)
    }

    /// A `{` that does not start `{n}`, `{n,}` or `{n,m}` is a literal brace.
    func isLiteralBrace() -> Bool {
        guard peek == "{" else { return false }
        var cursor = index + 1
        var digits = 0
        while cursor < scalars.count, ("0"..."9").contains(scalars[cursor]) { cursor += 1; digits += 1 }
        return digits == 0
    }

    mutating func quantifier(_ atom: RegexNode) throws(SafeRegexError) -> RegexNode? {
        guard let next = peek else { return nil }
        var minimum = 0
        var maximum: Int?
        switch next {
        case "*": index += 1
        case "+": index += 1; minimum = 1
        case "?": index += 1; maximum = 1
        case "{":
            guard !isLiteralBrace() else { return nil }
            index += 1
            minimum = try number()
            maximum = minimum
            if peek == "," {
                index += 1
                maximum = peek == "}" ? nil : try number()
            }
            guard peek == "}" else { throw error("a counted repetition needs '}'") }
            index += 1
            if let maximum, maximum < minimum { throw error("in {n,m}, m is smaller than n") }
        default: return nil
        }
        switch atom {
        case .start, .end, .boundary, .empty: throw error("nothing to repeat")
        default: break
        }
        var greedy = true
        if peek == "?" { index += 1; greedy = false }
        if peek == "+" { throw error("possessive repetition is not accepted") }
        return .repetition(atom, min: minimum, max: maximum, greedy: greedy)
    }

    mutating func number() throws(SafeRegexError) -> Int {
        var value = 0
        var digits = 0
        while let next = peek, ("0"..."9").contains(next) {
            value = value * 10 + Int(next.value - 0x30)
            digits += 1
            index += 1
            if value > SafeRegex.maxRepeat { throw error("a counted repetition may be at most \(SafeRegex.maxRepeat)") }
        }
        guard digits > 0 else { throw error("a counted repetition needs a number") }
        return value
    }

    mutating func atom() throws(SafeRegexError) -> RegexNode {
        guard let next = peek else { throw error("the pattern ends early") }
        index += 1
        switch next {
        case "(":
            if peek == "?" {
                guard index + 1 < scalars.count, scalars[index + 1] == ":" else {
                    throw error("look-around, named groups and flags are not accepted (only '(?:…)'; matching always ignores case)")
                }
                index += 2
            }
            depth += 1
            guard depth <= 20 else { throw error("groups nest more than 20 deep") }
            let inner = try alternation()
            guard peek == ")" else { throw error("a group needs ')'") }
            index += 1
            depth -= 1
            return inner
        case ")": throw error("unexpected ')'")
        case "[": return .set(try characterClass())
        case ".": return .any
        case "^": return .start
        case "$": return .end
        case "*", "+", "?": throw error("nothing to repeat")
        case "\\": return try escape(inClass: false)
        default: return .scalar(FoldedText.fold(next.value))
        }
    }

    mutating func escape(inClass: Bool) throws(SafeRegexError) -> RegexNode {
        guard let next = peek else { throw error("the pattern ends with '\\'") }
        index += 1
        switch next {
        case "d": return .set(.digits)
        case "D": return .set(ScalarSet(ranges: ScalarSet.digits.ranges, negated: true))
        case "w": return .set(.word)
        case "W": return .set(ScalarSet(ranges: ScalarSet.word.ranges, negated: true))
        case "s": return .set(.space)
        case "S": return .set(ScalarSet(ranges: ScalarSet.space.ranges, negated: true))
        case "b" where !inClass: return .boundary(true)
        case "B" where !inClass: return .boundary(false)
        case "n": return .scalar(0x0A)
        case "t": return .scalar(0x09)
        case "r": return .scalar(0x0D)
        case "1"..."9": throw error("back-references are not accepted")
        default:
            guard !next.properties.isAlphabetic, !("0"..."9").contains(next) else { throw error("unknown escape '\\\(next)'") }
            return .scalar(FoldedText.fold(next.value))
        }
    }

    mutating func characterClass() throws(SafeRegexError) -> ScalarSet {
        var set = ScalarSet()
        if peek == "^" { set.negated = true; index += 1 }
        var first = true
        while true {
            guard let next = peek else { throw error("a class needs ']'") }
            if next == "]" && !first { index += 1; break }
            first = false
            index += 1
            var low: UInt32
            if next == "\\" {
                switch try escape(inClass: true) {
                case .scalar(let value): low = value
                case .set(let inner) where !inner.negated: set.ranges += inner.ranges; continue
                default: throw error("a negated class escape inside a class is not accepted")
                }
            } else if next == "[" && peek == ":" {
                throw error("POSIX classes ('[:alpha:]') are not accepted; use \\w, \\d, \\s or ranges")
            } else {
                low = next.value
            }
            if peek == "-", index + 1 < scalars.count, scalars[index + 1] != "]" {
                index += 1
                guard let end = peek else { throw error("a class needs ']'") }
                index += 1
                var high = end.value
                if end == "\\" {
                    guard case .scalar(let value) = try escape(inClass: true) else { throw error("a range cannot end in a class escape") }
                    high = value
                }
                guard low <= high else { throw error("a range runs backwards") }
                set.ranges.append(low...high)
            } else {
                set.ranges.append(low...low)
            }
            guard set.ranges.count <= 64 else { throw error("a class may hold at most 64 ranges") }
        }
        return set
    }
}

private struct Compiler {
    var program: [SafeRegex.Instruction] = []

    mutating func check() throws(SafeRegexError) {
        guard program.count <= SafeRegex.maxProgram else {
            throw SafeRegexError(description: "the pattern compiles to more than \(SafeRegex.maxProgram) steps; use smaller counted repetitions")
        }
    }

    mutating func emit(_ node: RegexNode) throws(SafeRegexError) {
        try check()
        switch node {
        case .empty: break
        case .scalar(let value): program.append(.scalar(value))
        case .any: program.append(.any)
        case .set(let set): program.append(.set(set))
        case .start: program.append(.start)
        case .end: program.append(.end)
        case .boundary(let at): program.append(.boundary(at))
        case .concat(let items): for item in items { try emit(item) }
        case .alternation(let branches):
            var jumps: [Int] = []
            for (offset, branch) in branches.enumerated() {
                if offset < branches.count - 1 {
                    let split = program.count
                    program.append(.split(split + 1, -1))
                    try emit(branch)
                    jumps.append(program.count)
                    program.append(.jump(-1))
                    program[split] = .split(split + 1, program.count)
                } else {
                    try emit(branch)
                }
            }
            for jump in jumps { program[jump] = .jump(program.count) }
        case .repetition(let inner, let minimum, let maximum, let greedy):
            for _ in 0..<minimum { try emit(inner) }
            if let maximum {
                // x{0,k} as nested optionals: every exit jumps to the same end.
                var exits: [Int] = []
                for _ in minimum..<maximum {
                    exits.append(program.count)
                    program.append(.split(-1, -1))
                    try emit(inner)
                }
                for exit in exits { program[exit] = greedy ? .split(exit + 1, program.count) : .split(program.count, exit + 1) }
            } else {
                let loop = program.count
                program.append(.split(-1, -1))
                try emit(inner)
                program.append(.jump(loop))
                program[loop] = greedy ? .split(loop + 1, program.count) : .split(program.count, loop + 1)
            }
        }
        try check()
    }
}

/// The Pike VM: every thread advances one scalar at a time, in priority order; a program
/// position is held by one thread per step, so the work per scalar is bounded by the program.
/// The two thread lists and the walk's stack are allocated once per search, never per scalar.
private struct Machine {
    let program: [SafeRegex.Instruction]
    let text: FoldedText
    /// The position each program position was last added at (one thread per position per step).
    var marks: [Int]
    var current: ThreadList
    var next: ThreadList
    var stack: [Int] = []

    struct ThreadList {
        var pcs: [Int]
        var starts: [Int]
        var count = 0
        init(capacity: Int) {
            pcs = Array(repeating: 0, count: capacity)
            starts = Array(repeating: 0, count: capacity)
        }
        mutating func append(_ pc: Int, _ start: Int) {
            pcs[count] = pc
            starts[count] = start
            count += 1
        }
    }

    init(program: [SafeRegex.Instruction], text: FoldedText) {
        self.program = program
        self.text = text
        marks = Array(repeating: -1, count: program.count)
        current = ThreadList(capacity: program.count)
        next = ThreadList(capacity: program.count)
        stack.reserveCapacity(program.count)
    }

    func isWordAt(_ position: Int) -> Bool {
        position >= 0 && position < text.count && FoldedText.isWord(text.original[position])
    }

    /// Follows jumps, splits and assertions from `pc` and adds the threads that wait for a
    /// scalar (or match) to `list`, in priority order.
    mutating func add(toNext: Bool, pc: Int, start: Int, at position: Int) {
        stack.removeAll(keepingCapacity: true)
        stack.append(pc)
        while let pc = stack.popLast() {
            guard marks[pc] != position else { continue }
            marks[pc] = position
            switch program[pc] {
            case .jump(let target): stack.append(target)
            case .split(let first, let second):
                stack.append(second)
                stack.append(first)
            case .start: if position == 0 { stack.append(pc + 1) }
            case .end: if position == text.count { stack.append(pc + 1) }
            case .boundary(let wanted):
                if (isWordAt(position - 1) != isWordAt(position)) == wanted { stack.append(pc + 1) }
            default:
                if toNext { next.append(pc, start) } else { current.append(pc, start) }
            }
        }
    }

    mutating func search(from: Int) -> Range<Int>? {
        var matched: Range<Int>?
        var position = max(0, from)
        while position <= text.count {
            if matched == nil { add(toNext: false, pc: 0, start: position, at: position) }
            if current.count == 0 {
                if matched != nil { break }
                position += 1
                continue
            }
            next.count = 0
            var index = 0
            while index < current.count {
                let pc = current.pcs[index]
                let start = current.starts[index]
                index += 1
                switch program[pc] {
                case .match:
                    matched = start..<position
                    index = current.count  // a match cuts off every thread of lower priority
                case .scalar(let value):
                    if position < text.count, text.folded[position] == value { add(toNext: true, pc: pc + 1, start: start, at: position + 1) }
                case .any:
                    if position < text.count { add(toNext: true, pc: pc + 1, start: start, at: position + 1) }
                case .set(let set):
                    if position < text.count, set.contains(original: text.original[position], folded: text.folded[position]) {
                        add(toNext: true, pc: pc + 1, start: start, at: position + 1)
                    }
                default: break
                }
            }
            swap(&current, &next)
            position += 1
        }
        return matched
    }
}
