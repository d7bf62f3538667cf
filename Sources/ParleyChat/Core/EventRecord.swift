package import ParleyWire
import ParleyStore

/// What an event keeps in its `payload` column beside the columns for its message, the user
/// it is about and their role: every field any kind stores, written one way (canonical JSON,
/// keys sorted, by ``stored``) and read one way (``init(stored:)``). Which fields a kind sets
/// is its ``EventShape``; the stored form is the one every earlier build wrote, so old rows
/// read as they always did.
package struct EventPayload: Sendable, Hashable {
    /// `conversation.updated`: the new title.
    package var title: String?
    /// `conversation.updated`: the new custom data, as canonical JSON.
    package var customDataJSON: String?
    /// `conversation.updated`: slow mode after the change.
    package var slowModeSeconds: Int?
    /// `conversation.updated`: the retention policy after the change.
    package var retentionDays: Int?
    /// `conversation.updated` and `user.updated`: the photo after the change ("" when removed).
    package var photoURL: String?
    /// `user.updated`: the display name after the change.
    package var displayName: String?
    /// `receipt.updated`: the watermarks after the change.
    package var deliveredSeq: Int64?
    /// `receipt.updated`: the read watermark after the change.
    package var readSeq: Int64?
    /// `delivery.updated`: the author's messages, as canonical JSON (a list of ``MessageDelivery``).
    package var deliveriesJSON: String?
    /// Reactions: the emoji.
    package var emoji: String?
    /// A thread reply's `message.created` and `message.deleted`: the thread, as canonical JSON.
    package var threadJSON: String?
    /// Bans and mutes: when they end (milliseconds since 1970).
    package var until: Int64?
    /// Bans: the moderator's reason.
    package var reason: String?
    /// `messages.expired`: through which seq.
    package var throughSeq: Int64?
    /// `messages.expired`: how many messages.
    package var count: Int?
    /// `notifications.updated`: the member's level (`all`, `mentions`).
    package var notifications: String?
    /// A named channel's event: its name, its data (a JSON text) and the socket it skips.
    package var channelName: String?
    /// A named channel's event's data.
    package var channelData: String?
    /// The socket a named channel's event skips.
    package var excludedSocket: String?
    /// `report.created`: the report's id.
    package var reportID: String?
    /// `state.updated`: the pin's rank (nil: not pinned).
    package var pinnedRank: Int?
    /// `state.updated`: archived or not.
    package var archived: Bool?
    /// `state.updated`: marked unread or not.
    package var markedUnread: Bool?
    /// `draft.updated`: the draft, as canonical JSON (a ``Draft``).
    package var draftJSON: String?
    /// `scheduled.updated`: the scheduled message, as canonical JSON (a ``ScheduledMessage``).
    package var scheduledJSON: String?

    /// An empty payload; set the fields the kind carries.
    package init() {}

    /// The payload column's text: nil when no field is set.
    package var stored: String? {
        guard self != EventPayload() else { return nil }
        var writer = JSONWriter(capacity: 128)
        writer.object { json in
            if let archived { json.key("archived"); json.bool(archived) }
            if let count { json.key("count"); json.integer(Int64(count)) }
            if let customDataJSON { json.key("customData"); json.raw(customDataJSON) }
            if let channelData { json.key("data"); json.string(channelData) }
            if let deliveredSeq { json.key("deliveredSeq"); json.integer(deliveredSeq) }
            if let deliveriesJSON { json.key("deliveries"); json.raw(deliveriesJSON) }
            if let displayName { json.key("displayName"); json.string(displayName) }
            if let draftJSON { json.key("draft"); json.raw(draftJSON) }
            if let emoji { json.key("emoji"); json.string(emoji) }
            if let excludedSocket { json.key("excludedSocket"); json.string(excludedSocket) }
            if let markedUnread { json.key("markedUnread"); json.bool(markedUnread) }
            if let channelName { json.key("name"); json.string(channelName) }
            if let notifications { json.key("notifications"); json.string(notifications) }
            if let photoURL { json.key("photoURL"); json.string(photoURL) }
            if let pinnedRank { json.key("pinnedRank"); json.integer(Int64(pinnedRank)) }
            if let readSeq { json.key("readSeq"); json.integer(readSeq) }
            if let reason { json.key("reason"); json.string(reason) }
            if let reportID { json.key("reportId"); json.string(reportID) }
            if let retentionDays { json.key("retentionDays"); json.integer(Int64(retentionDays)) }
            if let scheduledJSON { json.key("scheduled"); json.raw(scheduledJSON) }
            if let slowModeSeconds { json.key("slowModeSeconds"); json.integer(Int64(slowModeSeconds)) }
            if let threadJSON { json.key("thread"); json.raw(threadJSON) }
            if let throughSeq { json.key("throughSeq"); json.integer(throughSeq) }
            if let title { json.key("title"); json.string(title) }
            if let until { json.key("until"); json.integer(until) }
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Reads a payload column (nil or empty: nothing set). A null field is an unset one.
    ///
    /// - Throws: ``StoreError/decoding(_:)`` for text that is not a JSON object.
    package init(stored text: String?) throws {
        guard let text, !text.isEmpty else { return }
        guard case .object(let fields) = try JSONValue.decode(text) else { throw StoreError.decoding("an event's payload is not a JSON object") }
        func string(_ key: String) -> String? { if case .string(let value) = fields[key] { value } else { nil } }
        func number(_ key: String) -> Int64? { if case .number(let value) = fields[key] { Int64(value) } else { nil } }
        func flag(_ key: String) -> Bool? { if case .bool(let value) = fields[key] { value } else { nil } }
        func json(_ key: String) throws -> String? { try fields[key].flatMap { $0 == .null ? nil : try $0.encoded() } }
        title = string("title")
        customDataJSON = try json("customData")
        slowModeSeconds = number("slowModeSeconds").map(Int.init)
        retentionDays = number("retentionDays").map(Int.init)
        photoURL = string("photoURL")
        displayName = string("displayName")
        deliveredSeq = number("deliveredSeq")
        readSeq = number("readSeq")
        deliveriesJSON = try json("deliveries")
        emoji = string("emoji")
        threadJSON = try json("thread")
        until = number("until")
        reason = string("reason")
        throughSeq = number("throughSeq")
        count = number("count").map(Int.init)
        notifications = string("notifications")
        channelName = string("name")
        channelData = string("data")
        excludedSocket = string("excludedSocket")
        reportID = string("reportId")
        pinnedRank = number("pinnedRank").map(Int.init)
        archived = flag("archived")
        markedUnread = flag("markedUnread")
        draftJSON = try json("draft")
        scheduledJSON = try json("scheduled")
    }
}

/// An event as stored, written straight to JSON (``writeJSON(into:)``) exactly as
/// ``WireCoding/encoder()`` writes the ``ConversationEvent`` it stands for. The feed, the
/// WebSocket's replay and its live frames all write events from records, so a device that
/// caught up and one that stayed connected see the same bytes for the same event.
package struct EventRecord: Sendable, Hashable, JSONWritable {
    /// Server-wide, strictly increasing.
    package var position: Int64
    /// The conversation's public id.
    package var conversationID: String
    /// Per conversation, gap-free; nil for annotations.
    package var seq: Int64?
    /// What happened.
    package var type: EventKind
    /// Who caused it (public id).
    package var actorID: String?
    /// Milliseconds since 1970.
    package var createdAt: Int64
    /// The message of a message, reaction or pin event, as it is now.
    package var message: MessageRecord?
    /// The user the event is about (public id).
    package var userID: String?
    /// The member's role after a membership event.
    package var role: MemberRole?
    /// The rest of what the kind carries.
    package var payload = EventPayload()

    /// Creates a record; each argument sets the property of the same name.
    package init(position: Int64, conversationID: String, seq: Int64?, type: EventKind, actorID: String?, createdAt: Int64,
                 message: MessageRecord? = nil, userID: String? = nil, role: MemberRole? = nil, payload: EventPayload = EventPayload()) {
        self.position = position
        self.conversationID = conversationID
        self.seq = seq
        self.type = type
        self.actorID = actorID
        self.createdAt = createdAt
        self.message = message
        self.userID = userID
        self.role = role
        self.payload = payload
    }

    /// The typed event, its body by its kind's shape.
    ///
    /// - Throws: a decoding error if stored JSON is damaged, or the fields its shape needs are missing.
    package func event() throws -> ConversationEvent {
        let user = userID.map(UserID.init(rawValue:))
        func required<T>(_ value: T?, _ field: String) throws -> T {
            guard let value else { throw StoreError.decoding("a \(type.rawValue) event at \(position) has no \(field)") }
            return value
        }
        let body: EventBody
        switch type.rule?.shape {
        case .bare?, .channel?:
            body = .bare
        case .message?:
            body = .message(try required(try message?.message(), "message"),
                            thread: try payload.threadJSON.map { try JSONValue.decode($0).decode(as: ThreadSummary.self) })
        case .membership?:
            body = .membership(user: try required(user, "userId"), role: role)
        case .conversationChange?:
            body = .conversation(ConversationChange(title: payload.title, customData: try payload.customDataJSON.map(JSONValue.decode),
                                                    slowModeSeconds: payload.slowModeSeconds, retentionDays: payload.retentionDays,
                                                    photoURL: payload.photoURL))
        case .receipt?:
            body = .receipt(user: try required(user, "userId"), deliveredSeq: try required(payload.deliveredSeq, "deliveredSeq"),
                            readSeq: try required(payload.readSeq, "readSeq"))
        case .deliveries?:
            body = .deliveries(author: user, try JSONValue.decode(try required(payload.deliveriesJSON, "deliveries")).decode(as: [MessageDelivery].self))
        case .reaction?:
            body = .reaction(user: try required(user, "userId"), emoji: try required(payload.emoji, "emoji"), message: try message?.message())
        case .restriction?:
            body = .restriction(user: try required(user, "userId"), until: payload.until.map(Chat.date), reason: payload.reason)
        case .expiry?:
            body = .expiry(throughSeq: try required(payload.throughSeq, "throughSeq"), count: try required(payload.count, "count"))
        case .profile?:
            body = .profile(user: try required(user, "userId"), photoURL: payload.photoURL, displayName: payload.displayName)
        case .notifications?:
            body = .notifications(user: try required(user, "userId"), level: payload.notifications.flatMap(NotificationLevel.init(rawValue:)),
                                  until: payload.until.map(Chat.date))
        case .state?:
            body = .state(user: try required(user, "userId"), ConversationState(
                pinnedRank: payload.pinnedRank, archived: try required(payload.archived, "archived"),
                markedUnread: try required(payload.markedUnread, "markedUnread")))
        case .draft?:
            body = .draft(user: try required(user, "userId"), try JSONValue.decode(try required(payload.draftJSON, "draft")).decode(as: Draft.self))
        case .scheduled?:
            body = .scheduled(user: try required(user, "userId"),
                              try JSONValue.decode(try required(payload.scheduledJSON, "scheduled")).decode(as: ScheduledMessage.self))
        case .report?:
            body = .report(user: try required(user, "userId"), reportID: try required(payload.reportID, "reportId"),
                           reason: try required(payload.reason, "reason"), message: try message?.message())
        case nil:
            var writer = JSONWriter(capacity: 256)
            writeJSON(into: &writer)
            body = .unknown(try JSONValue.decode(String(decoding: writer.bytes, as: UTF8.self)))
        }
        return ConversationEvent(position: position, conversationID: ConversationID(rawValue: conversationID), seq: seq, type: type,
                                 actorID: actorID.map(UserID.init(rawValue:)), createdAt: Chat.date(createdAt), body: body)
    }

    /// Keys in sorted order, as the encoder writes them.
    package func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            if let actorID { json.key("actorId"); json.string(actorID) }
            if let archived = payload.archived { json.key("archived"); json.bool(archived) }
            json.key("conversationId"); json.string(conversationID)
            if let count = payload.count { json.key("count"); json.integer(Int64(count)) }
            json.key("createdAt"); json.date(milliseconds: createdAt)
            if let customData = payload.customDataJSON { json.key("customData"); json.raw(customData) }
            if let deliveredSeq = payload.deliveredSeq { json.key("deliveredSeq"); json.integer(deliveredSeq) }
            if let displayName = payload.displayName { json.key("displayName"); json.string(displayName) }
            if let deliveries = payload.deliveriesJSON { json.key("deliveries"); json.raw(deliveries) }
            if let draft = payload.draftJSON { json.key("draft"); json.raw(draft) }
            if let emoji = payload.emoji { json.key("emoji"); json.string(emoji) }
            if let markedUnread = payload.markedUnread { json.key("markedUnread"); json.bool(markedUnread) }
            if let message { json.key("message"); message.writeJSON(into: &json) }
            if let notifications = payload.notifications { json.key("notifications"); json.string(notifications) }
            if let photoURL = payload.photoURL { json.key("photoURL"); json.string(photoURL) }
            if let pinnedRank = payload.pinnedRank { json.key("pinnedRank"); json.integer(Int64(pinnedRank)) }
            json.key("position"); json.integer(position)
            if let readSeq = payload.readSeq { json.key("readSeq"); json.integer(readSeq) }
            if let reason = payload.reason { json.key("reason"); json.string(reason) }
            if let reportID = payload.reportID { json.key("reportId"); json.string(reportID) }
            if let retentionDays = payload.retentionDays { json.key("retentionDays"); json.integer(Int64(retentionDays)) }
            if let role { json.key("role"); json.string(role.rawValue) }
            if let scheduled = payload.scheduledJSON { json.key("scheduled"); json.raw(scheduled) }
            if let seq { json.key("seq"); json.integer(seq) }
            if let slowModeSeconds = payload.slowModeSeconds { json.key("slowModeSeconds"); json.integer(Int64(slowModeSeconds)) }
            if let thread = payload.threadJSON { json.key("thread"); json.raw(thread) }
            if let throughSeq = payload.throughSeq { json.key("throughSeq"); json.integer(throughSeq) }
            if let title = payload.title { json.key("title"); json.string(title) }
            json.key("type"); json.string(type.rawValue)
            if let until = payload.until { json.key("until"); json.date(milliseconds: until) }
            if let userID { json.key("userId"); json.string(userID) }
        }
    }

    /// The realtime frame that carries this event: `{"event":{…},"type":"event"}`
    /// (docs/protocol.md).
    package var frame: [UInt8] {
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
package struct EventRecordPage: Sendable, Hashable, JSONWritable {
    /// The events, oldest first.
    package var records: [EventRecord]
    /// More events follow the last one.
    package var hasMore: Bool

    /// The typed page.
    package func page() throws -> EventPage {
        EventPage(events: try records.map { try $0.event() }, hasMore: hasMore)
    }

    package func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            json.key("events")
            json.array { array in
                for record in records { record.writeJSON(into: &array) }
            }
            json.key("hasMore"); json.bool(hasMore)
        }
    }
}
