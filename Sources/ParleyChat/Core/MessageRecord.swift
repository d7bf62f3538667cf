import Foundation
package import ParleyWire

/// A message as stored: its content and metadata still the JSON text the server wrote when
/// it validated them. History pages are written from records straight into the response
/// (``writeJSON(into:)``), skipping a decode and an encode per message; ``message()`` gives
/// the typed ``Message`` where one is needed.
package struct MessageRecord: Sendable, Hashable, JSONWritable {
    /// The message's public id (`m_…`).
    package var id: String
    /// The conversation's public id (`c_…`).
    package var conversationID: String
    /// The seq of the event that created it.
    package var seq: Int64
    /// The author's public id.
    package var senderID: String
    /// The author's username.
    package var senderUsername: String
    /// The author's display name, as it is now.
    package var senderDisplayName: String
    /// The id the sending client chose.
    package var clientID: String
    /// Milliseconds since 1970.
    package var sentAt: Int64
    /// Milliseconds since 1970 of the last edit.
    package var editedAt: Int64?
    /// Milliseconds since 1970 of the deletion (a tombstone).
    package var deletedAt: Int64?
    /// Canonical JSON (sorted keys) of a ``MessageContent``; nil for a tombstone.
    package var contentJSON: String?
    /// Canonical JSON of the metadata dictionary.
    package var metadataJSON: String?
    /// The public id of the message this one answers.
    package var replyTo: String?
    /// Sent, delivered or read, for the caller's own messages only.
    package var status: DeliveryStatus?
    /// Canonical JSON of the reaction counts (a list of ``ReactionCount``); nil for none.
    package var reactionsJSON: String? = nil
    /// The caller's own reactions (REST answers).
    package var myReactions: [String]? = nil
    /// Canonical JSON of the mentions (a list of ``Mention``); nil for none.
    package var mentionsJSON: String? = nil
    /// Milliseconds since 1970 of the pin.
    package var pinnedAt: Int64? = nil
    /// Who pinned it (public id).
    package var pinnedBy: String? = nil
    /// A reply's thread root (public id).
    package var threadRoot: String? = nil
    /// A reply shown in the conversation too.
    package var alsoInConversation: Bool = false
    /// A root's replies.
    package var replyCount: Int = 0
    /// Milliseconds since 1970 of a root's latest reply.
    package var lastReplyAt: Int64? = nil
    /// The sender's profile photo path.
    package var senderPhotoURL: String? = nil
    /// Left out for this reader (``Message/hidden``).
    package var hidden: HiddenReason? = nil
    /// Canonical JSON of a poll's results (``PollResults``); nil for every other message.
    package var pollJSON: String? = nil
    /// The options the caller voted for (REST answers, polls only).
    package var myVotes: [Int]? = nil
    /// Canonical JSON of the link preview (``LinkPreview``); nil when there is none.
    package var linkPreviewJSON: String? = nil

    /// The message as a reader who blocked its sender receives it: its place, nothing it says.
    package func hiddenStub(_ reason: HiddenReason) -> MessageRecord {
        var stub = self
        stub.contentJSON = nil
        stub.metadataJSON = nil
        stub.reactionsJSON = nil
        stub.myReactions = nil
        stub.mentionsJSON = nil
        stub.pollJSON = nil
        stub.myVotes = nil
        stub.linkPreviewJSON = nil
        stub.hidden = reason
        return stub
    }

    /// The typed message.
    ///
    /// - Throws: a decoding error if the stored JSON is damaged.
    package func message() throws -> Message {
        let decoder = JSONDecoder()
        var message = Message(
            id: MessageID(rawValue: id), conversationID: ConversationID(rawValue: conversationID), seq: seq,
            sender: Chat.sender(senderID, senderUsername, senderDisplayName, senderPhotoURL),
            clientID: clientID, sentAt: Chat.date(sentAt), editedAt: editedAt.map(Chat.date), deletedAt: deletedAt.map(Chat.date),
            content: try contentJSON.map { try decoder.decode(MessageContent.self, from: Data($0.utf8)) },
            metadata: try metadataJSON.map { try decoder.decode([String: String].self, from: Data($0.utf8)) },
            replyTo: replyTo.map(MessageID.init(rawValue:)), status: status)
        message.reactions = try reactionsJSON.map { try decoder.decode([ReactionCount].self, from: Data($0.utf8)) }
        message.myReactions = myReactions
        message.mentions = try mentionsJSON.map { try decoder.decode([Mention].self, from: Data($0.utf8)) }
        message.pinnedAt = pinnedAt.map(Chat.date)
        message.pinnedBy = pinnedBy.map(UserID.init(rawValue:))
        message.threadID = threadRoot.map(MessageID.init(rawValue:))
        message.alsoInConversation = threadRoot != nil && alsoInConversation ? true : nil
        message.replyCount = replyCount > 0 ? replyCount : nil
        message.lastReplyAt = replyCount > 0 ? lastReplyAt.map(Chat.date) : nil
        message.hidden = hidden
        message.poll = try pollJSON.map { try decoder.decode(PollResults.self, from: Data($0.utf8)) }
        message.myVotes = myVotes
        message.linkPreview = try linkPreviewJSON.map { try decoder.decode(LinkPreview.self, from: Data($0.utf8)) }
        return message
    }

    /// Writes the message's JSON exactly as ``WireCoding/encoder()`` writes a ``Message``
    /// (same keys, sorted; same date format).
    package func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            if threadRoot != nil && alsoInConversation { json.key("alsoInConversation"); json.bool(true) }
            json.key("clientId"); json.string(clientID)
            if let contentJSON { json.key("content"); json.raw(contentJSON) }
            json.key("conversationId"); json.string(conversationID)
            if let deletedAt { json.key("deletedAt"); json.date(milliseconds: deletedAt) }
            if let editedAt { json.key("editedAt"); json.date(milliseconds: editedAt) }
            if let hidden { json.key("hidden"); json.string(hidden.rawValue) }
            json.key("id"); json.string(id)
            if replyCount > 0, let lastReplyAt { json.key("lastReplyAt"); json.date(milliseconds: lastReplyAt) }
            if let linkPreviewJSON { json.key("linkPreview"); json.raw(linkPreviewJSON) }
            if let mentionsJSON { json.key("mentions"); json.raw(mentionsJSON) }
            if let metadataJSON { json.key("metadata"); json.raw(metadataJSON) }
            if let myReactions {
                json.key("myReactions")
                json.array { array in for emoji in myReactions { array.string(emoji) } }
            }
            if let myVotes {
                json.key("myVotes")
                json.array { array in for option in myVotes { array.integer(Int64(option)) } }
            }
            if let pinnedAt { json.key("pinnedAt"); json.date(milliseconds: pinnedAt) }
            if let pinnedBy { json.key("pinnedBy"); json.string(pinnedBy) }
            if let pollJSON { json.key("poll"); json.raw(pollJSON) }
            if let reactionsJSON { json.key("reactions"); json.raw(reactionsJSON) }
            if replyCount > 0 { json.key("replyCount"); json.integer(Int64(replyCount)) }
            if let replyTo { json.key("replyTo"); json.string(replyTo) }
            json.key("sender")
            json.object { sender in
                sender.key("displayName"); sender.string(senderDisplayName)
                sender.key("id"); sender.string(senderID)
                if let senderPhotoURL { sender.key("photoURL"); sender.string(senderPhotoURL) }
                sender.key("username"); sender.string(senderUsername)
            }
            json.key("sentAt"); json.date(milliseconds: sentAt)
            json.key("seq"); json.integer(seq)
            if let status { json.key("status"); json.string(status.rawValue) }
            if let threadRoot { json.key("threadId"); json.string(threadRoot) }
        }
    }
}

/// A page of history as records: see ``MessageRecord``.
package struct HistoryPage: Sendable, Hashable, JSONWritable {
    /// The messages, in the order asked for.
    package var records: [MessageRecord]
    /// More messages exist before the oldest in this page.
    package var hasOlder: Bool
    /// More messages exist after the newest in this page.
    package var hasNewer: Bool

    /// The typed page.
    package func page() throws -> MessagePage {
        MessagePage(messages: try records.map { try $0.message() }, hasOlder: hasOlder, hasNewer: hasNewer)
    }

    /// Writes the page's JSON, as ``WireCoding/encoder()`` would write the ``MessagePage``.
    package func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            json.key("hasNewer"); json.bool(hasNewer)
            json.key("hasOlder"); json.bool(hasOlder)
            json.key("messages")
            json.array { array in
                for record in records { record.writeJSON(into: &array) }
            }
        }
    }
}
