import Foundation
import Parley
import ParleyNetTesting
import ParleyWire
import Testing

/// Push through the SDK against the real binary (without a provider: registration, mutes and
/// the extension's fetch need none), and the payload reader on both providers' shapes.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct PushClientTests {
    @Test func aDeviceTokenIsRegisteredAsHexListedAndUnregistered() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await bob.register(username: "bob", password: "correct horse battery")
        let token = Data((0..<32).map { UInt8($0 * 7 & 0xff) })
        let device = try await bob.registerForPush(deviceToken: token, environment: .sandbox)
        #expect(device.token == token.map { String(format: "%02x", $0) }.joined() && device.environment == .sandbox && device.platform == .apns)
        _ = try await bob.registerForPush(fcmToken: "fcm:" + String(repeating: "z", count: 40))
        #expect(try await bob.pushDevices().count == 2)
        try await bob.unregisterForPush()
        #expect(try await bob.pushDevices().isEmpty)
    }

    @Test func aMuteOnOneDeviceShowsOnTheUsersOtherDeviceAtOnce() async throws {
        let people = try await People.start()
        defer { withExtendedLifetime(people.server) {} }
        let (alice, phone, laptop) = (people.alice, people.phone, people.laptop)
        let chat = try await alice.directConversation(with: "bob")
        var shown = try await laptop.conversation(chat.id)
        let events = await laptop.events(in: chat.id)
        let aliceEvents = await alice.events(in: chat.id)
        await laptop.connect()
        await alice.connect()
        let muted = try await phone.mute(chat.id, until: Date().addingTimeInterval(3600))
        try await phone.unmute(chat.id)
        var seen: [Date?] = []
        for await event in events where event.type == .notificationsUpdated {
            shown = shown.updated(by: event)
            seen.append(shown.mutedUntil)
            if seen.count == 2 { break }
        }
        #expect(seen.first == muted.mutedUntil && seen.last == .some(nil), "the laptop follows the phone's mute and unmute")
        // Alice hears none of it, up to the message bob sends after.
        let clientID = try await phone.send(.text("after the mute"), to: chat.id)
        await phone.connect()
        var aliceSaw: [ConversationEvent.Kind] = []
        for await event in aliceEvents {
            aliceSaw.append(event.type)
            if event.message?.clientID == clientID { break }
        }
        #expect(aliceSaw.last == .messageCreated && !aliceSaw.contains(.notificationsUpdated))
    }

    @Test func muteUnmuteAndTheExtensionsFetchOfThePushedMessage() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await alice.directConversation(with: "bob")
        let muted = try await bob.mute(chat.id, until: Date().addingTimeInterval(3600))
        #expect(muted.mutedUntil.map { $0 > Date() } == true)
        try await bob.unmute(chat.id)
        #expect(try await bob.conversation(chat.id).mutedUntil == nil)
        let clientID = try await alice.send(.text("fetched by the extension"), to: chat.id)
        await alice.connect()
        let message = try await alice.waitUntilSent(clientID)
        // What APNs delivers under "parley" (numbers), and FCM in "data" (strings).
        let apns: [AnyHashable: Any] = ["aps": ["alert": ["body": "New message"]],
                                        "parley": ["conversationId": chat.id.rawValue, "messageId": message.id.rawValue,
                                                   "seq": NSNumber(value: message.seq), "position": NSNumber(value: 9)]]
        let fcm: [AnyHashable: Any] = ["conversationId": chat.id.rawValue, "messageId": message.id.rawValue, "seq": "\(message.seq)", "position": "9"]
        let fromAPNs = try #require(PushPayload(userInfo: apns))
        #expect(fromAPNs == PushPayload(userInfo: fcm))
        #expect(PushPayload(userInfo: ["aps": ["alert": "not ours"]]) == nil)
        let fetched = try await bob.message(for: fromAPNs)
        #expect(fetched.content == .text("fetched by the extension") && fetched.id == message.id)
    }
}
