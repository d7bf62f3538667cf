import Foundation
import ParleyNet
import ParleyNetTesting
import ParleyPusher
import ParleyWire

/// libFuzzer entry for what the Pusher endpoints and form bodies parse from the network: the
/// first byte picks the parser, the rest is its input. Promises checked: nothing traps; a form
/// that parses round-trips through percent-encoding to the same fields; a client frame's
/// `data` object is the same read from an object or from a string holding it; a request whose
/// signature was not made with the secret never verifies; name checks accept only the
/// documented alphabet and lengths.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPusher(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 4 {
    case 0: form(input)
    case 1: frame(input)
    case 2: signature(input)
    default: names(input)
    }
    return 0
}

private func form(_ bytes: [UInt8]) {
    guard let parsed = try? FormBody(parsing: bytes) else { return }
    let allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
    let encoded = parsed.fields.map { name, value in
        "\(name.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
    }.joined(separator: "&")
    guard let again = try? FormBody(parsing: Array(encoded.utf8)) else { preconditionFailure("a parsed form does not parse again once encoded") }
    precondition(again.fields == parsed.fields, "a form does not round-trip")
}

private func frame(_ bytes: [UInt8]) {
    guard let frame = try? JSONDecoder().decode(PusherClientFrame.self, from: Data(bytes)) else { return }
    guard let object = frame.dataObject else { return }
    let asString = PusherClientFrame(event: frame.event, channel: frame.channel, data: .string((try? JSONValue.object(object).encoded()) ?? "{}"))
    precondition(asString.dataObject == object, "data read from a string differs from data read as an object")
}

private func signature(_ bytes: [UInt8]) {
    // The query is the input up to the first newline; the body the rest.
    let split = bytes.firstIndex(of: 10) ?? bytes.endIndex
    let query = String(decoding: bytes[..<split], as: UTF8.self)
    let body = split < bytes.endIndex ? Array(bytes[(split + 1)...]) : []
    let verified = (try? PusherSignature.verifyRequest(method: "POST", path: "/apps/1/events", query: Substring(query), body: body,
                                                        key: "pk_fuzz", secret: "sk_never_in_the_input_0123456789", now: 1_000)) != nil
    precondition(!verified, "a request not signed with the secret verified")
    _ = PusherSignature.verifyAuth(query, message: String(decoding: body, as: UTF8.self), key: "pk_fuzz", secret: "sk_never_in_the_input")
}

private func names(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if PusherProtocol.channelNameProblem(text) == nil {
        precondition((1...PusherProtocol.channelNameMax).contains(text.utf8.count), "a channel name of the wrong length passed")
        precondition(text.utf8.allSatisfy { $0 < 128 && $0 != 32 && $0 != 35 }, "a channel name with a character outside the alphabet passed")
    }
    if PusherProtocol.eventNameProblem(text) == nil {
        precondition((1...PusherProtocol.eventNameMax).contains(text.utf8.count), "an event name of the wrong length passed")
    }
    _ = PusherProtocol.triggerChannelProblem(text)
    _ = PusherProtocol.kind(of: text)
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-pusher", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzPusher)
    }
}
#endif
