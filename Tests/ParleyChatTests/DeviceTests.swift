import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Devices registered for push: one per session and platform, a token on one account at a
/// time, gone with their session. Both engines.
struct DeviceTests {
    private let apnsToken = String(repeating: "ab", count: 32)
    private let fcmToken = "fcm:" + String(repeating: "x", count: 40)

    private func secondSession(_ harness: ChatHarness, _ username: String) async throws -> Caller {
        let signedIn = try await harness.chat.signIn(SignInRequest(username: username, password: "correct horse battery", device: "tablet"),
                                                     app: harness.app, address: "127.0.0.1")
        return try await harness.chat.authenticate(token: signedIn.session.token ?? "", app: harness.app)
    }

    @Test func aDeviceIsRegisteredListedUpdatedAndRemoved() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let phone = try await chat.notifications.register(alice, RegisterDeviceRequest(platform: .apns, token: apnsToken.uppercased()))
        #expect(phone.id.hasPrefix("d_") && phone.token == apnsToken && phone.environment == .production, "hex is stored lowercased")
        let again = try await chat.notifications.register(alice, RegisterDeviceRequest(platform: .apns, token: apnsToken, environment: .sandbox))
        #expect(again.id == phone.id && again.environment == .sandbox, "the same token again is the same device, updated")
        let android = try await chat.notifications.register(alice, RegisterDeviceRequest(platform: .fcm, token: fcmToken))
        #expect(try await chat.notifications.devices(alice).devices.map(\.id).sorted() == [phone.id, android.id].sorted())
        // The session's new APNs token replaces its old one (the token rotated).
        let rotated = try await chat.notifications.register(alice, RegisterDeviceRequest(platform: .apns, token: String(repeating: "cd", count: 32)))
        #expect(Set(try await chat.notifications.devices(alice).devices.map(\.id)) == [rotated.id, android.id])
        try await chat.notifications.removeDevice(alice, id: android.id)
        await #expect(throws: ChatError.deviceNotFound) { try await chat.notifications.removeDevice(alice, id: android.id) }
        #expect(try await chat.notifications.devices(alice).devices.map(\.id) == [rotated.id])
    }

    @Test func aTokenMovesToTheAccountThatRegisteredItLast() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let first = try await chat.notifications.register(alice, RegisterDeviceRequest(platform: .apns, token: apnsToken))
        let moved = try await chat.notifications.register(bob, RegisterDeviceRequest(platform: .apns, token: apnsToken))
        #expect(moved.id == first.id)
        #expect(try await chat.notifications.devices(alice).devices.isEmpty, "alice's pushes no longer reach the phone bob signed in on")
        #expect(try await chat.notifications.devices(bob).devices.map(\.id) == [first.id])
        await #expect(throws: ChatError.deviceNotFound) { try await chat.notifications.removeDevice(alice, id: first.id) }
    }

    @Test func signingOutOrChangingThePasswordRemovesTheSessionsDevices() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let tablet = try await secondSession(harness, "alice")
        let third = try await secondSession(harness, "alice")
        _ = try await chat.notifications.register(alice, RegisterDeviceRequest(platform: .apns, token: apnsToken))
        let tabletDevice = try await chat.notifications.register(tablet, RegisterDeviceRequest(platform: .fcm, token: fcmToken))
        _ = try await chat.notifications.register(third, RegisterDeviceRequest(platform: .fcm, token: fcmToken + "3"))
        try await chat.signOut(third, everywhere: false)
        #expect(try await chat.notifications.devices(alice).devices.count == 2)
        try await chat.changePassword(alice, ChangePasswordRequest(currentPassword: "correct horse battery", newPassword: "battery staple horse"),
                                      address: "127.0.0.1")
        #expect(try await chat.notifications.devices(alice).devices.map(\.token) == [apnsToken], "the tablet's session ended, and its device with it")
        _ = tabletDevice
        try await chat.notifications.removeSessionDevices(alice)
        #expect(try await chat.notifications.devices(alice).devices.isEmpty)
    }

    @Test func badTokensAndTooManyDevicesAreRefusedWithNothingStored() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let bad: [RegisterDeviceRequest] = [
            RegisterDeviceRequest(platform: .apns, token: "xyz"),
            RegisterDeviceRequest(platform: .apns, token: String(repeating: "g", count: 64)),
            RegisterDeviceRequest(platform: .apns, token: String(repeating: "a", count: 65)),
            RegisterDeviceRequest(platform: .apns, token: String(repeating: "a", count: 202)),
            RegisterDeviceRequest(platform: .fcm, token: "short"),
            RegisterDeviceRequest(platform: .fcm, token: String(repeating: "a", count: 40) + " space"),
            RegisterDeviceRequest(platform: .fcm, token: fcmToken, environment: .sandbox),
        ]
        for request in bad {
            await #expect(throws: ChatError.self) { _ = try await chat.notifications.register(alice, request) }
        }
        #expect(try await chat.notifications.devices(alice).devices.isEmpty)
        // Sessions are capped too (the oldest signed out, its devices with it), so the limit is
        // met by sessions with a device on each platform: 25 × 2, then one more is refused.
        for index in 0..<(Limits.pushDevicesPerUser / 2) {
            let session = try await secondSession(harness, "alice")
            _ = try await chat.notifications.register(session, RegisterDeviceRequest(platform: .fcm, token: fcmToken + "-\(index)"))
            _ = try await chat.notifications.register(session, RegisterDeviceRequest(platform: .apns, token: String(format: "%064x", index)))
        }
        let oneTooMany = try await secondSession(harness, "alice")
        await #expect(throws: ChatError.tooManyDevices(limit: Limits.pushDevicesPerUser)) {
            _ = try await chat.notifications.register(oneTooMany, RegisterDeviceRequest(platform: .fcm, token: fcmToken + "-last"))
        }
        #expect(try await chat.notifications.devices(alice).devices.count == Limits.pushDevicesPerUser)
    }
}

/// Mutes: per member, with an end or until unmuted, shown on the conversation.
struct MuteTests {
    @Test func aMemberMutesUntilATimeOrUntilUnmuted() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (carol, _) = try await harness.register("carol")
        let (room, _) = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "room"))
        let hour = harness.clock.now.addingTimeInterval(3600)
        let muted = try await chat.notifications.mute(alice, conversation: room.id, MuteRequest(until: hour))
        #expect(muted.mutedUntil.map { abs($0.timeIntervalSince(hour)) < 0.001 } == true)
        #expect(try await chat.conversation(bob, id: room.id).mutedUntil == nil, "a mute is one member's")
        let forever = try await chat.notifications.mute(alice, conversation: room.id, MuteRequest())
        #expect(forever.mutedUntil == Date(timeIntervalSince1970: 253_402_300_799))
        try await chat.notifications.unmute(alice, conversation: room.id)
        #expect(try await chat.conversation(alice, id: room.id).mutedUntil == nil)
        await #expect(throws: ChatError.self) { _ = try await chat.notifications.mute(alice, conversation: room.id, MuteRequest(until: harness.clock.now)) }
        await #expect(throws: ChatError.conversationNotFound) { _ = try await chat.notifications.mute(carol, conversation: room.id, MuteRequest()) }
    }

    @Test func aMuteReachesOnlyTheMembersOwnDevicesAndNeverMakesAnythingUnread() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "room"))
        let start = try await chat.feed(alice, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        let before = try await chat.conversation(alice, id: room.id)
        let hour = harness.clock.now.addingTimeInterval(3600)
        _ = try await chat.notifications.mute(alice, conversation: room.id, MuteRequest(until: hour))
        _ = try await chat.notifications.mute(alice, conversation: room.id, MuteRequest(until: hour))
        try await chat.notifications.unmute(alice, conversation: room.id)
        try await chat.notifications.unmute(alice, conversation: room.id)

        let mine = try await chat.feed(alice, after: chat.cursor(through: start), limit: 200).page().events
        #expect(mine.map(\.type) == [.notificationsUpdated, .notificationsUpdated], "a repeat changes nothing and says nothing")
        #expect(mine.allSatisfy { $0.seq == nil && $0.userID == alice.userID && $0.notifications == .all })
        #expect(mine.first?.until.map { abs($0.timeIntervalSince(hour)) < 0.001 } == true && mine.last?.until == nil)
        #expect(try await chat.feed(bob, after: chat.cursor(through: start), limit: 200).records.isEmpty, "bob never learns alice muted the room")
        let after = try await chat.conversation(alice, id: room.id)
        #expect(after.lastPosition == before.lastPosition && after.lastSeq == before.lastSeq && after.unreadCount == 0)
    }

    @Test func aMemberChoosesEveryMessageOrMentionsOnlyAndPublicChannelsDefaultToMentions() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (room, _) = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "room"))
        let (channel, _) = try await chat.createConversation(alice, CreateConversationRequest(kind: .public, members: [], title: "town"))
        #expect(room.notifications == .all && channel.notifications == .mentions, "the defaults: all, and mentions in public channels")
        let start = try await chat.feed(alice, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0

        let chosen = try await chat.notifications.setLevel(bob, conversation: room.id, NotificationsRequest(level: .mentions))
        #expect(chosen.notifications == .mentions)
        _ = try await chat.notifications.setLevel(bob, conversation: room.id, NotificationsRequest(level: .mentions))
        #expect(try await chat.conversation(alice, id: room.id).notifications == .all, "a level is one member's")
        let back = try await chat.notifications.setLevel(bob, conversation: room.id, NotificationsRequest(level: nil))
        #expect(back.notifications == .all)
        let events = try await chat.feed(bob, after: chat.cursor(through: start), limit: 200).page().events
        #expect(events.map(\.notifications) == [.mentions, .all], "one event per change, none for a repeat")
        #expect(try await chat.feed(alice, after: chat.cursor(through: start), limit: 200).records.isEmpty)
        await #expect(throws: ChatError.self) {
            _ = try await chat.notifications.setLevel(bob, conversation: channel.id, NotificationsRequest(level: .all))
        }
        #expect(try await chat.conversation(bob, id: channel.id).notifications == nil, "not a member: nothing to choose")
    }
}
