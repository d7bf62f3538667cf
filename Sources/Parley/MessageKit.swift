public import Foundation
public import ParleyWire

// MessageKit's `MessageType` asks for `sender` (a `SenderType`: `senderId`, `displayName`),
// `messageId`, `sentDate` and `kind`. `Message` and `Sender` carry the first three under those
// names; `kind` cannot be MessageKit's own `MessageKind` without depending on MessageKit, so
// `messageKind` mirrors it case for case and an app maps it in one `switch` (the README shows
// the whole extension).

extension Message {
    /// MessageKit's `messageId`.
    public var messageId: String { id.rawValue }
    /// MessageKit's `sentDate`.
    public var sentDate: Date { sentAt }
    /// MessageKit's `kind`, case for case (a tombstone is `.text("")` with `deletedAt` set).
    public var messageKind: MessageKindMirror {
        switch content {
        case .text(let text)?: .text(text)
        case .markdown(let markdown)?: .attributedText(markdown: markdown)
        case .location(let location)?: .location(latitude: location.latitude, longitude: location.longitude)
        case .photo(let media)?: .photo(media)
        case .video(let media)?: .video(media)
        case .audio(let media)?: .audio(media)
        case .file(let media)?: .file(media)
        case .custom(let type, let payload)?: .custom(type: type, payload: payload)
        case .system(let text)?: .custom(type: "system", payload: .object(["text": .string(text)]))
        case nil: .text("")
        }
    }
}

extension Sender {
    /// MessageKit's `SenderType.senderId`.
    public var senderId: String { id.rawValue }
}

/// MessageKit's `MessageKind`, with Parley's payloads.
public enum MessageKindMirror: Sendable, Hashable {
    /// `.text(String)`.
    case text(String)
    /// `.attributedText(NSAttributedString)`: render the Markdown (`AttributedString(markdown:)`).
    case attributedText(markdown: String)
    /// `.photo(MediaItem)`.
    case photo(Attachment)
    /// `.video(MediaItem)`: `thumbnailID` is the poster image.
    case video(Attachment)
    /// `.location(LocationItem)`.
    case location(latitude: Double, longitude: Double)
    /// `.audio(AudioItem)`.
    case audio(Attachment)
    /// A file: MessageKit shows it as `.custom`.
    case file(Attachment)
    /// `.custom(Any?)`.
    case custom(type: String, payload: JSONValue)
}

extension Message {
    /// This message after `event` (an edit, deletion, reaction or pin of it), keeping what a
    /// socket event cannot carry because one frame goes to every member: the user's own
    /// ``status`` and ``myReactions`` (brought up to date when the event is the user's own
    /// reaction). A reply's event in this message's thread updates ``replyCount`` and
    /// ``lastReplyAt``. Returns `self` for an event about another message.
    ///
    /// ```swift
    /// if let index = messages.firstIndex(where: { $0.id == event.message?.id }) {
    ///     messages[index] = messages[index].updated(by: event, me: me)
    /// }
    /// ```
    public func updated(by event: ConversationEvent, me: UserID) -> Message {
        if let thread = event.thread, thread.rootID == id, event.message?.id != id {
            var root = self
            root.replyCount = thread.replyCount > 0 ? thread.replyCount : nil
            root.lastReplyAt = thread.replyCount > 0 ? (thread.lastReplyAt ?? lastReplyAt) : nil
            return root
        }
        guard var updated = event.message, updated.id == id else { return self }
        if updated.status == nil { updated.status = status }
        var mine = myReactions ?? []
        if event.userID == me, let emoji = event.emoji {
            if event.type == .reactionAdded, !mine.contains(emoji) { mine.append(emoji) }
            if event.type == .reactionRemoved { mine.removeAll { $0 == emoji } }
        }
        let present = Set((updated.reactions ?? []).map(\.emoji))
        mine.removeAll { !present.contains($0) }
        updated.myReactions = updated.myReactions ?? (updated.reactions == nil && myReactions == nil ? nil : mine)
        return updated
    }
}
