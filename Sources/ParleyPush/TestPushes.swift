import Foundation
package import ParleyOutbound
import ParleyCrypto
import ParleySync
package import ParleyWire

/// Where a provider's requests go: libcurl's HTTP/2 connections to APNs and FCM, or, in test
/// mode, the built-in fakes.
package protocol PushTransport: Sendable {
    /// Sends `body` to `url` with `headers` (`Name: value`); the answer whatever its status.
    func post(_ url: String, headers: [String], body: [UInt8]) async throws -> OutboundResponse
    /// Stops; requests in flight end.
    func stop()
}

extension OutboundMultiplexer: PushTransport {}

/// Test mode's built-in APNs and FCM (docs/test-mode.md): they take the requests the real
/// providers would get — the same URLs' paths, headers and JSON — answer as Apple and Google
/// answer (200 with an `apns-id` or a message name; 410 `Unregistered` or 404 `UNREGISTERED`
/// for a token a test declared dead, or one not shaped as the platform's tokens are), and keep
/// what they accepted for `GET /v1/test/pushes`. No Apple or Google account is needed; the
/// provider token and OAuth assertion are not checked (`Tests/Interop/fakepush.py` checks those).
package final class TestPushes: PushTransport, Sendable {
    /// Base URLs the test providers send to; never reached over a network.
    static let apnsURL = "https://apns.test-mode.invalid"
    static let fcmBaseURL = "https://fcm.test-mode.invalid"
    static let fcmTokenURL = "https://oauth2.test-mode.invalid/token"

    /// The most pushes kept (the oldest go first).
    package static let capacity = 10_000

    private let state = LockedValue<(pushes: [TestPush], dead: Set<String>, sent: Int)>(([], [], 0))

    /// Empty, every token alive.
    package init() {}

    /// The pushes accepted, oldest first; those to `token` only when given.
    package func pushes(token: String? = nil) -> [TestPush] {
        state.withLock { state in token.map { token in state.pushes.filter { $0.token == token } } ?? state.pushes }
    }

    /// Forgets the pushes accepted so far (dead tokens stay dead).
    package func clear() { state.withLock { $0.pushes.removeAll() } }

    /// Every token alive again (test mode's reset).
    package func reviveAll() { state.withLock { $0.dead.removeAll() } }

    /// Makes `token` answer as a dead one (or alive again): APNs 410 `Unregistered`, FCM 404 `UNREGISTERED`.
    package func setDead(_ token: String, _ dead: Bool) {
        state.withLock { state in
            if dead { state.dead.insert(token) } else { state.dead.remove(token) }
        }
    }

    package func post(_ url: String, headers: [String], body: [UInt8]) async throws -> OutboundResponse {
        if url == Self.fcmTokenURL {
            return OutboundResponse(status: 200, headers: [:], body: Array(#"{"access_token":"test-mode","expires_in":3599,"token_type":"Bearer"}"#.utf8))
        }
        if url.hasPrefix(Self.apnsURL + "/3/device/") {
            let token = String(url.dropFirst((Self.apnsURL + "/3/device/").count))
            let apnsID = Self.uuid()
            guard token.utf8.count == 64, token.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
                return Self.answer(400, #"{"reason":"BadDeviceToken"}"#, ["apns-id": apnsID])
            }
            if isDead(token) { return Self.answer(410, #"{"reason":"Unregistered","timestamp":\#(Int(Date().timeIntervalSince1970 * 1000))}"#, ["apns-id": apnsID]) }
            record("apns", token: token, headers: headers, body: body, providerID: apnsID)
            return Self.answer(200, "", ["apns-id": apnsID])
        }
        if url.hasPrefix(Self.fcmBaseURL), url.hasSuffix("/messages:send") {
            guard let message = (try? JSONValue.decode(String(decoding: body, as: UTF8.self)))?["message"],
                  let token = message["token"]?.stringValue else {
                return Self.answer(400, #"{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"no message.token"}}"#)
            }
            if isDead(token) {
                return Self.answer(404, #"{"error":{"code":404,"status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#)
            }
            let name = "projects/parley-test/messages/\(state.withLock { state -> Int in state.sent += 1; return state.sent })"
            record("fcm", token: token, headers: headers, body: body, providerID: name)
            return Self.answer(200, #"{"name":"\#(name)"}"#)
        }
        return Self.answer(404, #"{"reason":"NotFound"}"#)
    }

    package func stop() {}

    private func isDead(_ token: String) -> Bool { state.withLock { $0.dead.contains(token) } }

    private func record(_ platform: String, token: String, headers: [String], body: [UInt8], providerID: String) {
        var kept: [String: String] = [:]
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else { continue }
            let name = header[..<colon].lowercased()
            guard name != "authorization" else { continue }  // credentials are never shown
            kept[name] = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let payload = (try? JSONValue.decode(String(decoding: body, as: UTF8.self))) ?? .null
        let push = TestPush(platform: platform, token: token, headers: kept, payload: payload, providerId: providerID, at: Date())
        state.withLock { state in
            state.pushes.append(push)
            if state.pushes.count > Self.capacity { state.pushes.removeFirst(state.pushes.count - Self.capacity) }
        }
    }

    /// An `apns-id` as APNs makes them: a random UUID in upper case (from libsodium's random
    /// bytes: Foundation's `UUID()` repeats itself when no descriptor is left).
    static func uuid() -> String {
        var bytes = Crypto.randomBytes(16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String(format: "%02X", $0) }.joined()
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }

    private static func answer(_ status: Int, _ body: String, _ headers: [String: String] = [:]) -> OutboundResponse {
        OutboundResponse(status: status, headers: headers, body: Array(body.utf8))
    }
}
