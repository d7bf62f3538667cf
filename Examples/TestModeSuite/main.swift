// What an iOS app's CI runs against `parley-server --test-mode` (docs/test-mode.md), with the
// SDK as the app uses it: each test finishes in seconds because the test moves the server's
// clock, reads the built-in APNs, or makes the store unavailable, instead of waiting or needing
// an Apple account.
//
//   parley-server --test-mode &          # and: parley-server apps push-content default id-only
//   swift run TestModeSuite --server http://127.0.0.1:8080 --app-key pk_… --app-secret sk_…
//
// 1. A phone asleep gets a push whose id-only payload the notification service extension
//    resolves with PushPayload + message(for:).
// 2. A ban of an hour ends after an hour of test time.
// 3. A message scheduled for tomorrow goes out at its time.
// 4. A message sent while the store is unavailable waits in the outbox and goes once it is back.
import ExampleSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Parley
import ParleyWire

/// The app's backend side of test mode: `/v1/test/…` with the app secret.
struct TestServer {
    let server: String
    let secret: String

    func call(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> (Int, Any?) {
        guard let url = URL(string: server + path) else { fail("bad URL \(server + path)") }
        var request = URLRequest(url: url, timeoutInterval: 10)
        request.httpMethod = method
        request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
        if let body {
            request.httpBody = try JSONSerialization.data(withJSONObject: body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        if status == 404, path.hasPrefix("/v1/test/") { fail("this server is not in test mode: start it with parley-server --test-mode") }
        return (status, data.isEmpty ? nil : try JSONSerialization.jsonObject(with: data))
    }

    /// The server's clock now.
    func now() async throws -> Date {
        let (_, body) = try await call("GET", "/v1/test/clock")
        guard let text = (body as? [String: Any])?["now"] as? String, let date = WireCoding.parseDate(text) else { fail("no clock") }
        return date
    }

    func advance(_ seconds: Double) async throws {
        let (status, _) = try await call("POST", "/v1/test/clock", ["advanceSeconds": seconds])
        guard status == 200 else { fail("moving the clock answered \(status)") }
        step("  … the server's clock moved \(Int(seconds)) s")
    }

    /// The payloads the built-in APNs accepted for `token`, waiting up to `seconds` for one.
    func pushes(to token: String, within seconds: Double = 5) async throws -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let (_, body) = try await call("GET", "/v1/test/pushes?token=\(token)")
            let pushes = ((body as? [String: Any])?["pushes"] as? [[String: Any]]) ?? []
            if !pushes.isEmpty { return pushes.compactMap { $0["payload"] as? [String: Any] } }
            try await Task.sleep(for: .milliseconds(50))
        }
        fail("no push to \(token.prefix(8))… within \(seconds) s")
    }
}

let (server, appKey) = try exampleSettings()
guard let secret = exampleAppSecret() else { fail("give --app-secret sk_… (or PARLEY_APP_SECRET): the test clock and pushes are the backend's") }
let test = TestServer(server: server, secret: secret)

func person(_ name: String) async throws -> (ParleyClient, User) {
    let client = ParleyClient(server: server, appKey: appKey)
    let user = try await client.register(username: "\(name)\(UUID().uuidString.prefix(6).lowercased())", password: "correct horse battery")
    return (client, user)
}

func timed(_ name: String, _ body: () async throws -> Void) async throws {
    step(name)
    let started = ContinuousClock.now
    try await body()
    let took = ContinuousClock.now - started
    guard took < .seconds(10) else { fail("\(name) took \(took) of wall time (at most 10 s)") }
    step("  ok in \(took.formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow)))")
}

try await timed("a phone asleep gets a push the notification extension resolves") {
    let (ana, _) = try await person("ana")
    let (bob, bobUser) = try await person("bob")
    let token = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
    _ = try await bob.registerForPush(deviceToken: token)
    let room = try await ana.createConversation(.direct, title: nil, members: [bobUser.username])
    try await connectAll([ana])
    let clientID = try await ana.send(.text("the secret plan"), to: room.id)
    step("  ana sends while bob's phone is asleep (\(clientID.prefix(8))…)")
    let hex = token.map { String(format: "%02x", $0) }.joined()
    guard let payload = try await test.pushes(to: hex).first else { fail("no payload") }
    let raw = try JSONSerialization.data(withJSONObject: payload)
    guard !String(decoding: raw, as: UTF8.self).contains("secret plan") else { fail("the push carried the text: the app is not id-only") }
    // What UNNotificationServiceExtension.didReceive does with request.content.userInfo.
    guard let push = PushPayload(userInfo: payload) else { fail("the payload is not Parley's") }
    let message = try await bob.message(for: push)
    guard case .text("the secret plan") = message.content else { fail("the extension fetched \(String(describing: message.content))") }
    step("  the extension shows \"the secret plan\", which never went through Apple")
    await ana.disconnect()
}

try await timed("a ban of an hour ends after an hour") {
    let (owner, _) = try await person("mod")
    let (bob, bobUser) = try await person("bob")
    let channel = try await owner.createConversation(.public, title: "town-\(UUID().uuidString.prefix(6))")
    _ = try await bob.join(channel.id)
    _ = try await owner.ban(bobUser.id, from: channel.id, until: try await test.now().addingTimeInterval(3600))
    do {
        _ = try await bob.join(channel.id)
        fail("bob joined while banned")
    } catch ParleyError.server(let error) where error.code == "user_banned" {
        step("  bob cannot join: user_banned")
    }
    try await test.advance(3601)
    _ = try await bob.join(channel.id)
    step("  an hour later bob joins again")
}

try await timed("a message scheduled for tomorrow goes out at its time") {
    let (ana, _) = try await person("ana")
    let (bob, bobUser) = try await person("bob")
    let room = try await ana.createConversation(.group, title: "mornings", members: [bobUser.username])
    _ = try await ana.schedule(.text("good morning"), to: room.id, at: try await test.now().addingTimeInterval(86_400))
    let events = await bob.events()
    try await connectAll([bob])
    try await test.advance(86_401)
    let arrived = try await firstEvent(events, within: 5) { $0.message.map { $0.content == .text("good morning") } ?? false }
    step("  bob's phone shows \"good morning\" (seq \(arrived.seq ?? 0))")
    await bob.disconnect()
}

try await timed("a message sent while the store is down waits in the outbox and goes once it is back") {
    let (ana, _) = try await person("ana")
    let (_, bobUser) = try await person("bob")
    let room = try await ana.createConversation(.group, title: "outage", members: [bobUser.username])
    let updates = await ana.outgoingUpdates()
    try await connectAll([ana])
    let (status, _) = try await test.call("POST", "/v1/test/faults/store", ["unavailableSeconds": 2])
    guard status == 204 else { fail("the store fault answered \(status)") }
    step("  the store is unavailable for 2 s")
    let clientID = try await ana.send(.text("are you there?"), to: room.id)
    guard case .sent(let message) = try await firstUpdate(updates, for: clientID, within: 8, where: { if case .sent = $0 { true } else { false } }) else {
        fail("never sent")
    }
    let history = try await ana.history(of: room.id)
    guard history.messages.filter({ $0.clientID == clientID }).count == 1 else { fail("the outbox stored it more than once") }
    step("  the outbox sent it once the store was back: \(message.id.rawValue), once")
    await ana.disconnect()
}

print("TestModeSuite: ok")
