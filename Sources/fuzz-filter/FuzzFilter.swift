import Foundation
import ParleyChat
import ParleyNetTesting
import ParleyWire

/// libFuzzer entry for the content filter's parsers (docs/trust-and-safety.md): the first
/// byte says how many of the next bytes are a pattern, the rest is a text. Promises checked:
/// compiling any pattern never traps and refuses what it cannot run in linear time; a match
/// lies inside the text and is never empty for a pattern that cannot match empty; the same
/// bytes as a blocklist word never trap; masking keeps every scalar that did not match and
/// the text's length in scalars.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFilter(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let split = min(Int(data[0]), size - 1)
    let pattern = String(decoding: UnsafeBufferPointer(start: data + 1, count: split), as: UTF8.self)
    let text = String(decoding: UnsafeBufferPointer(start: data + 1 + split, count: size - 1 - split), as: UTF8.self)
    let folded = FoldedText(text)
    if let regex = try? SafeRegex(pattern) {
        var from = 0
        var found = 0
        while from <= folded.count, found < 64, let range = regex.firstMatch(in: folded, from: from) {
            precondition(range.lowerBound >= from && range.upperBound <= folded.count, "a match outside the text")
            precondition(!range.isEmpty || regex.matchesEmpty, "an empty match from a pattern that cannot match empty")
            from = range.isEmpty ? range.upperBound + 1 : range.upperBound
            found += 1
        }
    }
    let words = pattern.split(separator: "\n").map(String.init).filter { !$0.isEmpty && $0.utf8.count <= 64 }
    guard let filter = try? CompiledFilter([Blocklist(name: "fuzz", words: words, regexes: [], mode: .mask, reason: nil, updatedAt: Date())]) else {
        return 0
    }
    if case .masked(let masked) = filter.check(text) {
        let before = Array(text.unicodeScalars)
        let after = Array(masked.unicodeScalars)
        precondition(before.count == after.count, "masking changed the text's length")
        precondition(zip(before, after).allSatisfy { $0 == $1 || $1 == "*" }, "masking changed a scalar to something other than '*'")
    }
    return 0
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-filter", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzFilter)
    }
}
#endif
