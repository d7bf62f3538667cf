public import ParleyWire

/// An event as stored, written straight to JSON (``writeJSON(into:)``) exactly as
/// ``WireCoding/encoder()`` writes the ``ConversationEvent`` it stands for. The feed, the
/// WebSocket's replay and its live frames all write events from records, so a device that
/// caught up and one that stayed connected see the same bytes for the same event.
public struct EventRecord: Sendable, Hashable, JSONWritable {
    /// Server-wide, strictly increasing.
    public var position: Int64
    /// The conversation's public id.
    public var conversationID: String
    /// Per conversation, gap-free; nil for `receipt.updated`.
    public var seq: Int64?
    /// What happened.
    public var type: ConversationEvent.Kind
    /// Who caused it (public id).
    public var actorID: String?
    /// Milliseconds since 1970.
    public var createdAt: Int64
    /// The message of a message event.
    public var message: MessageRecord?
    /// The user a membership or receipt event is about (public id).
    public var userID: String?
    /// The member's role after a membership event.
    public var role: MemberRole?
    /// The title after `conversation.updated`.
    public var title: String?
    /// The custom data after `conversation.updated`, as canonical JSON.
    public var customDataJSON: String?
    /// The watermarks after `receipt.updated`.
    public var deliveredSeq: Int64?
    /// The read watermark after `receipt.updated`.
    public var readSeq: Int64?
    /// The author's messages after `delivery.updated`, as canonical JSON (a list of ``MessageDelivery``).
    public var deliveriesJSON: String?
    /// The emoji of a reaction event.
    public var emoji: String?
    /// A thread reply's thread summary, as canonical JSON (a ``ThreadSummary``).
    public var threadJSON: String?
    /// A ban's or mute's end (milliseconds since 1970).
    public var until: Int64?
    /// A ban's reason.
    public var reason: String?
    /// Slow mode after a conversation update that changed it.
    public var slowModeSeconds: Int?
    /// `messages.expired`: through which seq, and how many.
    public var throughSeq: Int64?
    /// `messages.expired`: how many messages.
    public var count: Int?
    /// The retention policy after a conversation update that changed it.
    public var retentionDays: Int?
    /// The conversation's photo after an update that changed it ("" when removed), or the user's.
    public var photoURL: String?
    /// A user's display name after `user.updated`.
    public var displayName: String?
    /// `notifications.updated`: the member's level (`all`, `mentions`).
    public var notifications: String?

    /// The typed event.
    ///
    /// - Throws: a decoding error if stored JSON is damaged.
    public func event() throws -> ConversationEvent {
        var event = ConversationEvent(position: position, conversationID: ConversationID(rawValue: conversationID), seq: seq, type: type,
                          actorID: actorID.map(UserID.init(rawValue:)), createdAt: Chat.date(createdAt), message: try message?.message(),
                          userID: userID.map(UserID.init(rawValue:)), role: role, title: title,
                          customData: try customDataJSON.map(JSONValue.decode), deliveredSeq: deliveredSeq, readSeq: readSeq)
        event.deliveries = try deliveriesJSON.map { try JSONValue.decode($0).decode(as: [MessageDelivery].self) }
        event.emoji = emoji
        event.thread = try threadJSON.map { try JSONValue.decode($0).decode(as: ThreadSummary.self) }
        event.until = until.map(Chat.date)
        event.reason = reason
        event.slowModeSeconds = slowModeSeconds
        event.throughSeq = throughSeq
        event.count = count
        event.retentionDays = retentionDays
        event.photoURL = photoURL
        event.displayName = displayName
        event.notifications = notifications.flatMap(NotificationLevel.init(rawValue:))
        return event
    }

    /// Keys in sorted order, as the encoder writes them.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            if let actorID { json.key("actorId"); json.string(actorID) }
            json.key("conversationId"); json.string(conversationID)
            if let count { json.key("count"); json.integer(Int64(count)) }
            json.key("createdAt"); json.date(milliseconds: createdAt)
            if let customDataJSON { json.key("customData"); json.raw(customDataJSON) }
            if let deliveredSeq { json.key("deliveredSeq"); json.integer(deliveredSeq) }
            if let displayName { json.key("displayName"); json.string(displayName) }
            if let deliveriesJSON { json.key("deliveries"); json.raw(deliveriesJSON) }
            if let emoji { json.key("emoji"); json.string(emoji) }
            if let message { json.key("message"); message.writeJSON(into: &json) }
            if let notifications { json.key("notifications"); json.string(notifications) }
            if let photoURL { json.key("photoURL"); json.string(photoURL) }
            json.key("position"); json.integer(position)
            if let readSeq { json.key("readSeq"); json.integer(readSeq) }
            if let reason { json.key("reason"); json.string(reason) }
            if let retentionDays { json.key("retentionDays"); json.integer(Int64(retentionDays)) }
            if let role { json.key("role"); json.string(role.rawValue) }
            if let seq { json.key("seq"); json.integer(seq) }
            if let slowModeSeconds { json.key("slowModeSeconds"); json.integer(Int64(slowModeSeconds)) }
            if let threadJSON { json.key("thread"); json.raw(threadJSON) }
            if let throughSeq { json.key("throughSeq"); json.integer(throughSeq) }
            if let title { json.key("title"); json.string(title) }
            json.key("type"); json.string(type.rawValue)
            if let until { json.key("until"); json.date(milliseconds: until) }
            if let userID { json.key("userId"); json.string(userID) }
        }
    }

    /// The realtime frame that carries this event: `{"event":{…},"type":"event"}`
    /// (docs/protocol.md).
    public var frame: [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.object { json in
            json.key("event"); writeJSON(into: &json)
            json.key("type"); json.string("event")
        }
        return writer.bytes
    }

    /// The frame around an event's JSON already written: the same bytes as ``frame``.
    static func frame(wrapping json: [UInt8]) -> [UInt8] {
        var bytes = Array(#"{"event":"#.utf8)
        bytes.reserveCapacity(json.count + 26)
        bytes += json
        bytes += Array(#","type":"event"}"#.utf8)
        return bytes
    }
}

/// A page of events as records: see ``EventRecord``. Encodes as ``EventPage``.
public struct EventRecordPage: Sendable, Hashable, JSONWritable {
    /// The events, oldest first.
    public var records: [EventRecord]
    /// More events follow the last one.
    public var hasMore: Bool

    /// The typed page.
    public func page() throws -> EventPage {
        EventPage(events: try records.map { try $0.event() }, hasMore: hasMore)
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            json.key("events")
            json.array { array in
                for record in records { record.writeJSON(into: &array) }
            }
            json.key("hasMore"); json.bool(hasMore)
        }
    }
}
