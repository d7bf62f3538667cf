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
    /// A poll as MessageKit's `.custom` payload: the question, the options each with its count
    /// (and whether the user chose it, from a REST answer), how it is answered, and whether
    /// it is closed.
    private func pollPayload(_ poll: PollContent) -> JSONValue {
        let options: [JSONValue] = poll.options.enumerated().map { index, text in
            var option: [String: JSONValue] = ["text": .string(text), "votes": .number(Double(self.poll?.options[safe: index]?.votes ?? 0))]
            if let myVotes { option["chosen"] = .bool(myVotes.contains(index)) }
            return .object(option)
        }
        var payload: [String: JSONValue] = [
            "question": .string(poll.question), "options": .array(options), "multipleChoice": .bool(poll.multipleChoice),
            "anonymous": .bool(poll.anonymous), "voterCount": .number(Double(self.poll?.voterCount ?? 0)),
            "closed": .bool(self.poll?.isClosed(poll) ?? false),
        ]
        if let closesAt = poll.closesAt { payload["closesAt"] = .string(WireCoding.formatDate(closesAt)) }
        return .object(payload)
    }

    /// MessageKit's `kind`, case for case (a tombstone is `.text("")` with `deletedAt` set; a
    /// message from someone the user blocked is `.custom(type: "hidden", payload: {"reason":
    /// "blocked"})`, for the app's "message from a blocked user" cell).
    ///
    /// A text or Markdown message with a ``linkPreview`` is `.linkPreview` (MessageKit's
    /// `LinkItem`: the text, the link, its title and teaser, and the thumbnail to load).
    public var messageKind: MessageKindMirror {
        if let hidden, deletedAt == nil { return .custom(type: "hidden", payload: .object(["reason": .string(hidden.rawValue)])) }
        if let linkPreview, let url = URL(string: linkPreview.url) {
            switch content {
            case .text(let text)?: return .linkPreview(LinkItemMirror(text: text, markdown: nil, url: url, preview: linkPreview))
            case .markdown(let markdown)?: return .linkPreview(LinkItemMirror(text: nil, markdown: markdown, url: url, preview: linkPreview))
            default: break
            }
        }
        return switch content {
        case .text(let text)?: .text(text)
        case .markdown(let markdown)?: .attributedText(markdown: markdown)
        case .location(let location)?: .location(latitude: location.latitude, longitude: location.longitude)
        case .photo(let media)?: .photo(media)
        case .video(let media)?: .video(media)
        case .audio(let media)?: .audio(media)
        case .file(let media)?: .file(media)
        case .poll(let poll)?: .custom(type: "poll", payload: pollPayload(poll))
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
    /// `.linkPreview(LinkItem)`: a text with the preview of its first link.
    case linkPreview(LinkItemMirror)
}

/// MessageKit's `LinkItem`, with the preview's thumbnail as the server's path (the app loads
/// it, relative to the server's URL, into `thumbnailImage`).
public struct LinkItemMirror: Sendable, Hashable {
    /// `text`: the message's text (nil for Markdown).
    public var text: String?
    /// `attributedText`: the message's Markdown, to render (nil for plain text).
    public var markdown: String?
    /// `url`: the link.
    public var url: URL
    /// `title`: the page's title.
    public var title: String?
    /// `teaser`: the page's description, or its site's name.
    public var teaser: String
    /// The thumbnail's path on the server (`/v1/previews/…`), nil when the page had no picture.
    public var thumbnailPath: String?

    /// The item for a message's `text` or `markdown` and its `preview`.
    public init(text: String?, markdown: String?, url: URL, preview: LinkPreview) {
        self.text = text
        self.markdown = markdown
        self.url = url
        self.title = preview.title
        self.teaser = preview.description ?? preview.siteName ?? ""
        self.thumbnailPath = preview.image?.url
    }
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
        // A poll's counts come in the event; the user's own votes from the answers they got,
        // or, when they voted and the poll names its voters, from those lists.
        updated.myVotes = updated.myVotes ?? myVotes
        if event.type == .pollVoted, event.actorID == me, let options = updated.poll?.options,
           options.allSatisfy({ $0.voterIDs != nil }) {
            let listed = options.enumerated().compactMap { $0.element.voterIDs?.contains(me) == true ? $0.offset : nil }
            if !listed.isEmpty || options.allSatisfy({ ($0.voterIDs?.count ?? 0) < Limits.pollVotersListed }) { updated.myVotes = listed }
        }
        return updated
    }
}

extension Array where Element == Message {
    /// A conversation's messages (oldest first, by seq) after `event`, for a chat screen kept
    /// up to date from the live stream without a request: a new message is inserted in seq
    /// order (a reply that is only in its thread is not the conversation's), an edit,
    /// deletion, reaction or pin replaces the message (``Message/updated(by:me:)``), a
    /// reply's event updates its root's count, `messages.expired` removes every message up to
    /// the seq it names, and `user.updated` shows the sender's new face and name. Every other kind leaves the messages as they are (a
    /// conversation's settings: ``Conversation/updated(by:)``; receipts and delivery counts:
    /// ``ParleyClient/receiptUpdates``), as do events of another conversation.
    ///
    /// Written as one `switch` over ``EventBody``, so a new shape of event cannot be missed.
    ///
    /// ```swift
    /// for await event in await client.events(in: chat.id) {
    ///     messages = messages.applying(event, me: me)
    /// }
    /// ```
    public func applying(_ event: ConversationEvent, me: UserID) -> [Message] {
        guard first.map({ $0.conversationID == event.conversationID }) ?? true else { return self }
        switch event.body {
        case .message(let message, _) where event.type == .messageCreated:
            var list = map { $0.updated(by: event, me: me) }
            let shown = message.threadID == nil || message.alsoInConversation == true
            guard shown, message.conversationID == event.conversationID else { return list }
            if let index = list.firstIndex(where: { $0.id == message.id }) {
                list[index] = list[index].updated(by: event, me: me)
            } else {
                list.insert(message, at: list.firstIndex { $0.seq > message.seq } ?? list.endIndex)
            }
            return list
        case .message, .reaction:
            return map { $0.updated(by: event, me: me) }
        case .expiry(let throughSeq, _):
            return filter { $0.seq > throughSeq }
        case .profile(let user, let photoURL, let displayName):
            // A new face or name shows on every message of theirs.
            return map { message in
                guard message.sender.id == user else { return message }
                var changed = message
                changed.sender.photoURL = photoURL.flatMap { $0.isEmpty ? nil : $0 }
                if let displayName { changed.sender.displayName = displayName }
                return changed
            }
        case .bare, .membership, .conversation, .receipt, .deliveries, .restriction, .notifications, .state, .draft, .scheduled, .report, .unknown:
            // A report reaches a moderator's devices; the conversation's messages stay as they are.
            return self
        }
    }
}

extension Array {
    /// The element at `index`, or nil past the end.
    subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
