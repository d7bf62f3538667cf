import Foundation
import ParleyChat
package import ParleyWire

/// The Pusher Channels protocol's names, limits and codes (docs/pusher.md), in one place.
package enum PusherProtocol: Sendable {
    /// The protocol versions accepted (`?protocol=`); the current one is 7, the Python client sends 6.
    package static let versions = 5...7
    /// Longest channel name (Pusher's limit).
    package static let channelNameMax = 164
    /// Longest event name.
    package static let eventNameMax = 200
    /// Largest event data, in bytes (Pusher's 10 KB).
    package static let dataBytesMax = 10_240
    /// Most channels one trigger may name.
    package static let channelsPerTrigger = 100
    /// Most events in one `batch_events`.
    package static let eventsPerBatch = 10
    /// Most members of a presence channel (Pusher's limit).
    package static let presenceMembersMax = 100
    /// Largest WebSocket message from a client (an event with 10 KB of data and its envelope).
    package static let frameBytesMax = 32_768
    /// How far `auth_timestamp` may be from the server's clock, in seconds.
    package static let timestampWindow: Int64 = 600

    /// Pusher's error and close codes.
    package enum Code: Sendable {
        /// The app key names no app.
        package static let unknownApp = 4001
        /// The protocol version is missing or not supported.
        package static let noProtocol = 4008
        /// The protocol version is not supported.
        package static let unsupportedProtocol = 4007
        /// A subscription or sign-in whose signature does not check out.
        package static let unauthorized = 4009
        /// Over a limit (presence members, connections).
        package static let overQuota = 4100
        /// Closed: generic, reconnect at once.
        package static let reconnect = 4200
        /// Closed: the client did not answer a ping in time.
        package static let pongTimeout = 4201
        /// A client event was refused (rate, size, channel kind, not subscribed).
        package static let clientEventRejected = 4301
    }

    /// What kind of channel a name is, by its prefix.
    package enum ChannelKind: Sendable, Hashable {
        /// Anyone may subscribe.
        case `public`
        /// `private-…` (and `private-encrypted-…`): a signature from the app's backend.
        case `private`
        /// `presence-…`: a signature over the member's data; members are announced.
        case presence
    }

    /// The kind of a channel, by its name.
    package static func kind(of channel: String) -> ChannelKind {
        if channel.hasPrefix("presence-") { return .presence }
        if channel.hasPrefix("private-") { return .private }
        return .public
    }

    /// Checks a channel name: 1–164 of `A-Z a-z 0-9 _ - = @ , . ;`.
    ///
    /// - Returns: nil when it is valid, else what is wrong.
    package static func channelNameProblem(_ name: String) -> String? {
        let bytes = name.utf8
        guard (1...channelNameMax).contains(bytes.count) else { return "a channel name is 1–\(channelNameMax) characters" }
        guard bytes.allSatisfy(isChannelCharacter) else {
            return "a channel name may use only letters, digits and _ - = @ , . ; ('\(name.prefix(40))' does not)"
        }
        return nil
    }

    private static func isChannelCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: Array("_-=@,.;".utf8).contains(byte)
        }
    }

    /// The channel a server reaches one signed-in user on (`pusher:signin`): every socket
    /// signed in as the user is subscribed to it, and only the app's backend triggers on it.
    package static func userChannel(_ userID: String) -> String { "#server-to-user-\(userID)" }

    /// Checks a channel name the app's backend may trigger on: a client's channel, or a user's
    /// server-to-user channel.
    package static func triggerChannelProblem(_ name: String) -> String? {
        let prefix = "#server-to-user-"
        guard name.hasPrefix(prefix) else { return channelNameProblem(name) }
        let user = name.dropFirst(prefix.count)
        guard (1...128).contains(user.utf8.count), !user.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return "a server-to-user channel names a user id of 1–128 bytes"
        }
        return nil
    }

    /// Checks an event name: 1–200 bytes, no control characters.
    package static func eventNameProblem(_ name: String) -> String? {
        guard (1...eventNameMax).contains(name.utf8.count) else { return "an event name is 1–\(eventNameMax) bytes" }
        guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return "an event name has no control characters"
        }
        return nil
    }
}

/// Server-to-client frames, written once and sent as they are.
enum PusherFrames {
    static func connectionEstablished(socketID: String, activityTimeout: Int) -> [UInt8] {
        envelope(event: "pusher:connection_established", channel: nil,
                 dataString: #"{"socket_id":"\#(socketID)","activity_timeout":\#(activityTimeout)}"#)
    }

    static func error(code: Int?, message: String) -> [UInt8] {
        var writer = JSONWriter(capacity: 128 + message.utf8.count)
        writer.object { json in
            json.key("data")
            json.object { data in
                data.key("code")
                if let code { data.integer(Int64(code)) } else { data.raw("null") }
                data.key("message"); data.string(message)
            }
            json.key("event"); json.string("pusher:error")
        }
        return writer.bytes
    }

    static func subscriptionError(channel: String, type: String, message: String, status: Int) -> [UInt8] {
        var writer = JSONWriter(capacity: 128 + message.utf8.count)
        writer.object { json in
            json.key("channel"); json.string(channel)
            json.key("data")
            json.object { data in
                data.key("error"); data.string(message)
                data.key("status"); data.integer(Int64(status))
                data.key("type"); data.string(type)
            }
            json.key("event"); json.string("pusher:subscription_error")
        }
        return writer.bytes
    }

    static func subscriptionSucceeded(channel: String, presence: PresenceSnapshot?) -> [UInt8] {
        guard let presence else { return envelope(event: "pusher_internal:subscription_succeeded", channel: channel, dataString: "{}") }
        let data = JSONValue.object(["presence": .object([
            "ids": .array(presence.ids.map { .string($0) }),
            "hash": .object(Dictionary(uniqueKeysWithValues: presence.members.map { ($0.id, $0.info ?? .object([:])) })),
            "count": .number(Double(presence.ids.count)),
        ])])
        return envelope(event: "pusher_internal:subscription_succeeded", channel: channel, dataString: (try? data.encoded()) ?? "{}")
    }

    static func memberAdded(channel: String, userID: String, info: JSONValue?) -> [UInt8] {
        let data = JSONValue.object(["user_id": .string(userID), "user_info": info ?? .object([:])])
        return envelope(event: "pusher_internal:member_added", channel: channel, dataString: (try? data.encoded()) ?? "{}")
    }

    static func memberRemoved(channel: String, userID: String) -> [UInt8] {
        let data = JSONValue.object(["user_id": .string(userID)])
        return envelope(event: "pusher_internal:member_removed", channel: channel, dataString: (try? data.encoded()) ?? "{}")
    }

    static let pong = envelope(event: "pusher:pong", channel: nil, dataString: "{}")
    static let ping = envelope(event: "pusher:ping", channel: nil, dataString: "{}")

    static func signinSuccess(userData: String) -> [UInt8] {
        let data = JSONValue.object(["user_data": .string(userData)])
        return envelope(event: "pusher:signin_success", channel: nil, dataString: (try? data.encoded()) ?? "{}")
    }

    /// Tells a client that resumed from `position` that the channel no longer keeps every
    /// event after it (Parley's own event; stock clients ignore names they do not bind).
    static func historyTruncated(channel: String, requested: Int64, oldestKept: Int64) -> [UInt8] {
        envelope(event: "parley_internal:history_truncated", channel: channel,
                 dataString: #"{"position":\#(requested),"oldest_position":\#(oldestKept)}"#)
    }

    /// An event on a channel: `data` as stored (a JSON string for triggered events, the
    /// client's JSON for client events), `user_id` for a presence member's client event, and
    /// Parley's `position` for stored events.
    static func event(_ event: ChannelEvent) -> [UInt8] {
        var writer = JSONWriter(capacity: 96 + event.dataJSON.utf8.count + event.name.utf8.count + event.channel.utf8.count)
        writer.object { json in
            json.key("channel"); json.string(event.channel)
            json.key("data"); json.raw(event.dataJSON)
            json.key("event"); json.string(event.name)
            if let position = event.position { json.key("position"); json.integer(position) }
            if let userID = event.userID { json.key("user_id"); json.string(userID) }
        }
        return writer.bytes
    }

    private static func envelope(event: String, channel: String?, dataString: String) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 + dataString.utf8.count)
        writer.object { json in
            if let channel { json.key("channel"); json.string(channel) }
            json.key("data"); json.string(dataString)
            json.key("event"); json.string(event)
        }
        return writer.bytes
    }
}

/// Who is in a presence channel, as `subscription_succeeded` reports it.
struct PresenceSnapshot: Sendable {
    struct Member: Sendable {
        var id: String
        var info: JSONValue?
    }
    var members: [Member]
    var ids: [String] { members.map(\.id) }
}

/// A frame from a client: `{"event": …, "channel": …, "data": …}`.
package struct PusherClientFrame: Decodable {
    package var event: String
    package var channel: String?
    package var data: JSONValue?

    /// `data` as an object: clients send it as one, or as a string holding one.
    /// A frame with these fields.
    package init(event: String, channel: String?, data: JSONValue?) {
        self.event = event
        self.channel = channel
        self.data = data
    }

    package var dataObject: [String: JSONValue]? {
        switch data {
        case .object(let object)?: object
        case .string(let text)?:
            if case .object(let object)? = try? JSONValue.decode(text) { object } else { nil }
        default: nil
        }
    }
}
