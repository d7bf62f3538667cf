import ParleyChat
import ParleyNetTesting
import ParleyRedis

/// libFuzzer entry for what a node reads from Redis: the first byte picks the parser, the rest
/// is its input. Promises checked: nothing traps; RESP parsed from bytes split anywhere gives
/// the same values as from the whole; a bus message that decodes encodes back to exactly its
/// bytes (the format has one spelling of each message).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzBus(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 2, count: size - 2))
    switch data[0] % 2 {
    case 0: resp(input, split: Int(data[1]))
    default: message(input)
    }
    return 0
}

private func values(_ chunks: [ArraySlice<UInt8>]) -> Result<[RESPValue], RESPError> {
    var parser = RESPParser()
    parser.maxBulk = 1 << 16
    var values: [RESPValue] = []
    do {
        for chunk in chunks {
            parser.append(chunk)
            while let value = try parser.next() { values.append(value) }
        }
        return .success(values)
    } catch {
        return .failure(error)
    }
}

private func resp(_ bytes: [UInt8], split: Int) {
    let whole = values([bytes[...]])
    let cut = bytes.isEmpty ? 0 : split % bytes.count
    let pieces = values([bytes[..<cut], bytes[cut...]])
    switch (whole, pieces) {
    case (.success(let a), .success(let b)): precondition(a == b, "RESP values depend on how the bytes were split")
    case (.failure, .failure): break
    default: preconditionFailure("the whole input and the split one disagree on whether it is RESP")
    }
}

private func message(_ bytes: [UInt8]) {
    guard let decoded = try? BusCodec.decode(bytes) else { return }
    precondition(BusCodec.encode(decoded) == bytes, "a decoded bus message does not encode back to its bytes")
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-bus", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzBus)
    }
}
#endif
