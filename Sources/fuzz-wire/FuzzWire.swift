import Foundation
import ParleyChat
import ParleyNetTesting
import ParleyWire

/// libFuzzer entry for the API's request bodies: the first byte picks a request type, the rest
/// is decoded as JSON the way the server decodes it. Promises checked: decoding and validation
/// never trap; a body that passes validation round-trips through encode/decode unchanged; and
/// its content stays within the limits once encoded.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let body = Data(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let decoder = WireCoding.decoder()
    switch selector % 5 {
    case 0: check(SendMessageRequest.self, body, decoder) { try Chat.validate($0) }
    case 1: check(SendToUsersRequest.self, body, decoder) { try Chat.validate(SendMessageRequest(clientID: $0.clientID, content: $0.content, metadata: $0.metadata)) }
    case 2: check(EditMessageRequest.self, body, decoder) { try Chat.validate(SendMessageRequest(clientID: "edit", content: $0.content, metadata: $0.metadata)) }
    case 3: check(CreateConversationRequest.self, body, decoder) { try Chat.validate($0) }
    default: check(UpdateProfileRequest.self, body, decoder) { try Chat.validate($0) }
    }
    return 0
}

private func check<T: Codable & Equatable>(_ type: T.Type, _ body: Data, _ decoder: JSONDecoder, validate: (T) throws -> Void) {
    guard let value = try? decoder.decode(T.self, from: body) else { return }
    guard (try? validate(value)) != nil else { return }
    guard let encoded = try? WireCoding.encoder().encode(value) else {
        preconditionFailure("a valid \(T.self) does not encode")
    }
    precondition(encoded.count <= 4 * (body.count + 64), "encoding grew out of proportion")
    let again = try? decoder.decode(T.self, from: encoded)
    precondition(again == value, "a valid \(T.self) does not round-trip")
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-wire", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzWire)
    }
}
#endif
