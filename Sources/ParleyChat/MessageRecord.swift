import Foundation
public import ParleyWire

/// A message as stored: its content and metadata still the JSON text the server wrote when
/// it validated them. History pages are written from records straight into the response
/// (``writeJSON(into:)``), skipping a decode and an encode per message; ``message()`` gives
/// the typed ``Message`` where one is needed.
public struct MessageRecord: Sendable, Hashable {
    public var id: String
    public var conversationID: String
    public var seq: Int64
    public var senderID: String
    public var senderUsername: String
    public var senderDisplayName: String
    public var clientID: String
    /// Milliseconds since 1970.
    public var sentAt: Int64
    public var editedAt: Int64?
    public var deletedAt: Int64?
    /// Canonical JSON (sorted keys) of a ``MessageContent``; nil for a tombstone.
    public var contentJSON: String?
    /// Canonical JSON of the metadata dictionary.
    public var metadataJSON: String?
    public var replyTo: String?
    public var status: DeliveryStatus?

    /// The typed message.
    ///
    /// - Throws: a decoding error if the stored JSON is damaged.
    public func message() throws -> Message {
        let decoder = JSONDecoder()
        return Message(
            id: MessageID(rawValue: id), conversationID: ConversationID(rawValue: conversationID), seq: seq,
            sender: Sender(id: UserID(rawValue: senderID), username: senderUsername, displayName: senderDisplayName),
            clientID: clientID, sentAt: Chat.date(sentAt), editedAt: editedAt.map(Chat.date), deletedAt: deletedAt.map(Chat.date),
            content: try contentJSON.map { try decoder.decode(MessageContent.self, from: Data($0.utf8)) },
            metadata: try metadataJSON.map { try decoder.decode([String: String].self, from: Data($0.utf8)) },
            replyTo: replyTo.map(MessageID.init(rawValue:)), status: status)
    }

    /// Writes the message's JSON exactly as ``WireCoding/encoder()`` writes a ``Message``
    /// (same keys, sorted; same date format).
    public func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            json.key("clientId"); json.string(clientID)
            if let contentJSON { json.key("content"); json.raw(contentJSON) }
            json.key("conversationId"); json.string(conversationID)
            if let deletedAt { json.key("deletedAt"); json.date(milliseconds: deletedAt) }
            if let editedAt { json.key("editedAt"); json.date(milliseconds: editedAt) }
            json.key("id"); json.string(id)
            if let metadataJSON { json.key("metadata"); json.raw(metadataJSON) }
            if let replyTo { json.key("replyTo"); json.string(replyTo) }
            json.key("sender")
            json.object { sender in
                sender.key("displayName"); sender.string(senderDisplayName)
                sender.key("id"); sender.string(senderID)
                sender.key("username"); sender.string(senderUsername)
            }
            json.key("sentAt"); json.date(milliseconds: sentAt)
            json.key("seq"); json.integer(seq)
            if let status { json.key("status"); json.string(status.rawValue) }
        }
    }
}

/// A page of history as records: see ``MessageRecord``.
public struct HistoryPage: Sendable, Hashable {
    public var records: [MessageRecord]
    public var hasOlder: Bool
    public var hasNewer: Bool

    /// The typed page.
    public func page() throws -> MessagePage {
        MessagePage(messages: try records.map { try $0.message() }, hasOlder: hasOlder, hasNewer: hasNewer)
    }

    /// The page's JSON, as ``WireCoding/encoder()`` would write the ``MessagePage``.
    public func json() -> [UInt8] {
        var writer = JSONWriter(capacity: 256 * records.count + 64)
        writer.object { json in
            json.key("hasNewer"); json.bool(hasNewer)
            json.key("hasOlder"); json.bool(hasOlder)
            json.key("messages")
            json.array { array in
                for record in records { record.writeJSON(into: &array) }
            }
        }
        return writer.bytes
    }
}
