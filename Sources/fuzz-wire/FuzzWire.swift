import Foundation
import ParleyChat
import ParleyNetTesting
import ParleyWire

/// libFuzzer entry for the API's request bodies: the first byte picks a request type, the rest
/// is decoded as JSON the way the server decodes it. Promises checked: decoding and validation
/// never trap; the realtime fast reader never reads a frame otherwise than JSONDecoder; a body
/// that passes validation round-trips through encode/decode unchanged; and its content stays
/// within the limits once encoded.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let body = Data(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let decoder = WireCoding.decoder()
    // Whatever the selector: when the realtime fast reader reads a frame (decision 0026),
    // JSONDecoder reads the same one.
    if let frame = body.withUnsafeBytes({ ClientFrame.fastDecoding($0.bindMemory(to: UInt8.self)) }) {
        precondition((try? JSONDecoder().decode(ClientFrame.self, from: body)) == frame, "the fast reader read a frame JSONDecoder reads otherwise")
    }
    switch selector % 9 {
    case 5:
        // Emoji: never traps; what passes is one grapheme of at most 64 bytes, and stored as is
        // when given again (the normalisation is stable).
        let text = String(decoding: body, as: UTF8.self)
        if let emoji = try? Chat.validateEmoji(text) {
            precondition(emoji.count == 1 && emoji.utf8.count <= Limits.emojiBytes, "a refused emoji passed")
            precondition((try? Chat.validateEmoji(emoji)) == emoji, "normalising an emoji twice changed it")
        }
    case 6:
        // Mentions: never traps; at most 50 names, each ASCII name characters after an `@` of the text.
        let text = String(decoding: body, as: UTF8.self)
        let names = Chat.mentions(in: text)
        precondition(names.count <= Limits.mentionsPerMessage, "too many mentions")
        let scalars = Array(text.unicodeScalars)
        for name in names {
            precondition(!name.isEmpty && name.unicodeScalars.allSatisfy { $0.isASCII }, "a mention is not a name")
            let wanted = Array(("@" + name).unicodeScalars)
            let held = scalars.count >= wanted.count && (0...(scalars.count - wanted.count)).contains { Array(scalars[$0..<($0 + wanted.count)]) == wanted }
            precondition(held, "a mention the text does not hold")
        }
    case 7: check(BanRequest.self, body, decoder) { try Chat.validate($0) }
    case 8: check(ReportRequest.self, body, decoder) { try Chat.validate($0) }
    case 0: check(SendMessageRequest.self, body, decoder) { try Chat.validate($0) }
    case 1: check(SendToUsersRequest.self, body, decoder) { try Chat.validate(SendMessageRequest(clientID: $0.clientID, content: $0.content, metadata: $0.metadata)) }
    case 2: check(EditMessageRequest.self, body, decoder) { try Chat.validate(SendMessageRequest(clientID: "edit", content: $0.content, metadata: $0.metadata)) }
    case 3: check(CreateConversationRequest.self, body, decoder) { try Chat.validate($0) }
    default:
        check(UpdateProfileRequest.self, body, decoder) { try Chat.validate($0) }
        // A notification level: the same body (selectors keep their meaning for saved inputs).
        check(NotificationsRequest.self, body, decoder) { _ in }
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
