import ParleyNet
import ParleyNetTesting

#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer entry: feeds the input to the HTTP request parser in pieces whose sizes come from
/// the input's first byte, and checks the parser's promises: it never traps, it never yields
/// more body than the limit, and it terminates.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTP(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let step = Int(bytes[0] % 64) + 1
    var limits = HTTPParserLimits()
    limits.maxRequestLineLength = 256
    limits.maxHeaderBytes = 1024
    limits.maxHeaderCount = 16
    limits.maxBodySize = 4096
    var parser = HTTPRequestParser(limits: limits)
    var body = 0
    do {
        try feed(Array(bytes.dropFirst()), step: step) { buffer throws(HTTPParseError) in
            while let event = try parser.next(&buffer) {
                switch event {
                case .head: body = 0
                case .body(let chunk):
                    precondition(!chunk.isEmpty, "empty body event")
                    body += chunk.count
                    precondition(body <= limits.maxBodySize, "body past the limit")
                case .end: body = 0
                }
            }
        }
    } catch {
        precondition([400, 413, 414, 417, 431, 501, 505].contains(error.status.code), "unexpected status \(error.status)")
    }
    return 0
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-http", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzHTTP)
    }
}
#endif
