import Foundation
import ParleyChat
import ParleyNetTesting
import ParleyWebhooks
import ParleyWire
#if canImport(Glibc)
import Glibc
#endif

/// libFuzzer entry for what webhooks parse: the first byte picks a parser, the rest is its
/// input. Promises checked: nothing traps; an address literal parses to the bytes `inet_pton`
/// gives whenever both accept it; a URL accepted without `--webhooks-allow-private` is http(s)
/// and never names a private address literal; a `Parley-Signature` header not made with the
/// secret never verifies, and one made with it always does; a registration body that passes
/// validation round-trips.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebhooks(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: bytes, as: UTF8.self)
    switch selector % 4 {
    case 0: literal(text)
    case 1: url(text)
    case 2: signature(text, bytes)
    default: registration(Data(bytes))
    }
    return 0
}

private func literal(_ text: String) {
    guard let parsed = AddressPolicy.literal(text) else { return }
    precondition(parsed.count == 4 || parsed.count == 16, "an address is 4 or 16 bytes")
    var bare = Substring(text)
    if bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
    var v4 = in_addr()
    var v6 = in6_addr()
    if parsed.count == 4, inet_pton(AF_INET, String(bare), &v4) == 1 {
        precondition(withUnsafeBytes(of: v4) { Array($0) } == parsed, "IPv4 parse differs from inet_pton for \(text.debugDescription)")
    }
    if parsed.count == 16, !bare.contains("%"), inet_pton(AF_INET6, String(bare), &v6) == 1 {
        precondition(withUnsafeBytes(of: v6) { Array($0) } == parsed, "IPv6 parse differs from inet_pton for \(text.debugDescription)")
    }
    _ = parsed.count == 4 ? AddressPolicy.isPrivate(ipv4: parsed) : AddressPolicy.isPrivate(ipv6: parsed)
}

private func url(_ text: String) {
    guard let accepted = try? Chat.validateWebhookURL(text, allowPrivate: false) else { return }
    let components = URLComponents(string: accepted)
    precondition(["http", "https"].contains(components?.scheme?.lowercased() ?? ""), "a non-http URL was accepted")
    if let host = components?.host, let address = AddressPolicy.literal(host) {
        let isPrivate = address.count == 4 ? AddressPolicy.isPrivate(ipv4: address) : AddressPolicy.isPrivate(ipv6: address)
        precondition(!isPrivate, "a private address was accepted: \(text.debugDescription)")
    }
}

private func signature(_ header: String, _ body: [UInt8]) {
    let secret = "whsec_never_in_the_input_0123456789"
    precondition(!WebhookSignature.verify(header: header, body: body, secret: secret, now: 1_000, tolerance: Int64.max / 4),
                 "a header not made with the secret verified")
    let made = WebhookSignature.header(secret: secret, timestamp: 1_000, body: body)
    precondition(WebhookSignature.verify(header: made, body: body, secret: secret, now: 1_000), "a header made with the secret did not verify")
}

private func registration(_ body: Data) {
    let decoder = WireCoding.decoder()
    guard let request = try? decoder.decode(CreateWebhookRequest.self, from: body), (try? Chat.validate(request)) != nil else { return }
    guard let encoded = try? WireCoding.encoder().encode(request) else { preconditionFailure("a valid registration does not encode") }
    precondition((try? decoder.decode(CreateWebhookRequest.self, from: encoded)) == request, "a valid registration does not round-trip")
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-webhooks", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzWebhooks)
    }
}
#endif
