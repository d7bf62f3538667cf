public import Foundation
public import ParleyWire

extension ParleyClient {
    // MARK: - Push

    /// Registers this device for push notifications with the token iOS gave the app
    /// (`application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`). Call it at every
    /// launch: the same token again only updates it, and a new one replaces the old. Use
    /// `.sandbox` for builds signed for development.
    ///
    /// ```swift
    /// func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken token: Data) {
    ///     Task { try? await client.registerForPush(deviceToken: token, environment: .production) }
    /// }
    /// ```
    @discardableResult
    public func registerForPush(deviceToken: Data, environment: PushEnvironment = .production) async throws -> PushDevice {
        let hex = deviceToken.map { String(format: "%02x", $0) }.joined()
        return try await registerDevice(RegisterDeviceRequest(platform: .apns, token: hex, environment: environment))
    }

    /// Registers this device for push through Firebase Cloud Messaging with its registration token.
    @discardableResult
    public func registerForPush(fcmToken: String) async throws -> PushDevice {
        try await registerDevice(RegisterDeviceRequest(platform: .fcm, token: fcmToken))
    }

    private func registerDevice(_ request: RegisterDeviceRequest) async throws -> PushDevice {
        try await http.call("POST", "/v1/devices", body: request, token: try requireToken())
    }

    /// Stops push notifications to this device (every token this session registered). Signing
    /// out does this too.
    public func unregisterForPush() async throws {
        let _: Empty = try await http.call("DELETE", "/v1/devices/current", token: try requireToken())
    }

    /// The account's devices registered for push, newest first.
    public func pushDevices() async throws -> [PushDevice] {
        let list: PushDeviceList = try await http.call("GET", "/v1/devices", token: try requireToken())
        return list.devices
    }

    /// Mutes a conversation for this account: nothing in it is pushed until `until` (nil:
    /// until ``unmute(_:)``), except mentions.
    @discardableResult
    public func mute(_ conversation: ConversationID, until: Date? = nil) async throws -> Conversation {
        try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/mute", body: MuteRequest(until: until), token: try requireToken())
    }

    /// Ends a mute.
    public func unmute(_ conversation: ConversationID) async throws {
        let _: Empty = try await http.call("DELETE", "/v1/conversations/\(conversation.rawValue)/mute", token: try requireToken())
    }

    /// Chooses what pushes this user in a conversation: every new message (`.all`), only
    /// mentions of them (`.mentions`), or nil for the conversation's default (all in direct
    /// chats, groups and private channels; mentions in public channels). The user's other
    /// devices hear of it at once (`notifications.updated`).
    ///
    /// ```swift
    /// try await client.setNotifications(.all, for: channel.id)   // every message of this channel
    /// ```
    public func setNotifications(_ level: NotificationLevel?, for conversation: ConversationID) async throws -> Conversation {
        try await http.call("PUT", "/v1/conversations/\(conversation.rawValue)/notifications", body: NotificationsRequest(level: level),
                            token: try requireToken())
    }

    /// The message a push announced, fetched with the stored session: what an app's
    /// Notification Service Extension calls (with a client on the app group's state store) to
    /// show the real text when the app chose id-only pushes, or to show a photo.
    ///
    /// ```swift
    /// // In UNNotificationServiceExtension.didReceive(_:withContentHandler:)
    /// if let push = PushPayload(userInfo: request.content.userInfo) {
    ///     let message = try await client.message(for: push)
    ///     content.body = message.content?.searchableText ?? content.body
    /// }
    /// ```
    public func message(for push: PushPayload) async throws -> Message {
        try await http.call("GET", "/v1/conversations/\(push.conversationID.rawValue)/messages/\(push.messageID.rawValue)",
                            token: try requireToken())
    }
}

/// Parley's keys in a push notification: which message it announces. APNs carries them under
/// `parley` (numbers), FCM in `data` (strings); both are read.
public struct PushPayload: Sendable, Hashable {
    /// The conversation (also the notification's `thread-id`).
    public var conversationID: ConversationID
    /// The message.
    public var messageID: MessageID
    /// Its seq in the conversation.
    public var seq: Int64
    /// Its position in the event log.
    public var position: Int64

    /// Reads a notification's `userInfo` (APNs) or data (FCM); nil when it is not Parley's.
    public init?(userInfo: [AnyHashable: Any]) {
        let keys = (userInfo["parley"] as? [AnyHashable: Any]) ?? userInfo
        func number(_ key: String) -> Int64? {
            if let value = keys[key] as? Int64 { return value }
            if let value = keys[key] as? Int { return Int64(value) }
            if let value = keys[key] as? NSNumber { return value.int64Value }
            if let value = keys[key] as? String { return Int64(value) }
            return nil
        }
        guard let conversation = keys["conversationId"] as? String, let message = keys["messageId"] as? String,
              let seq = number("seq"), let position = number("position") else { return nil }
        conversationID = ConversationID(rawValue: conversation)
        messageID = MessageID(rawValue: message)
        self.seq = seq
        self.position = position
    }
}
