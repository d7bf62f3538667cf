import Foundation

/// What a message carries; one case for each of MessageKit's `MessageKind`s that a server
/// stores. On the wire a flat object with a `type` field:
///
/// ```json
/// {"type":"text","text":"hello"}
/// {"type":"markdown","markdown":"**hello**"}
/// {"type":"location","latitude":52.52,"longitude":13.40,"name":"Berlin","caption":"here now"}
/// {"type":"photo","attachmentId":"a_…","width":800,"height":600}
/// {"type":"video","attachmentId":"a_…","thumbnailId":"a_…","durationSeconds":12.5}
/// {"type":"poll","question":"Lunch?","options":["Pizza","Sushi"],"multipleChoice":false,"anonymous":false}
/// {"type":"custom","customType":"sticker","payload":{"pack":"cats","id":7}}
/// {"type":"system","text":"Alice joined the team"}
/// ```
public enum MessageContent: Hashable, Sendable, Codable {
    /// Plain text (MessageKit `.text`).
    case text(String)
    /// Markdown the client renders (MessageKit `.attributedText`).
    case markdown(String)
    /// A place (MessageKit `.location`).
    case location(Location)
    /// An image (MessageKit `.photo`).
    case photo(Attachment)
    /// A video and its thumbnail (MessageKit `.video`).
    case video(Attachment)
    /// A voice message or sound (MessageKit `.audio`).
    case audio(Attachment)
    /// Any other file.
    case file(Attachment)
    /// A poll the server counts (``PollContent``; its results are ``Message/poll``).
    case poll(PollContent)
    /// App-defined: a type name and a JSON payload (MessageKit `.custom`).
    case custom(type: String, payload: JSONValue)
    /// A notice from the app itself (sent by its backend through the server API, never by a
    /// user): clients show it apart from people's messages, centred and without a bubble.
    case system(String)

    /// The `type` field's value.
    public var typeName: String {
        switch self {
        case .text: "text"
        case .markdown: "markdown"
        case .location: "location"
        case .photo: "photo"
        case .video: "video"
        case .audio: "audio"
        case .file: "file"
        case .poll: "poll"
        case .custom: "custom"
        case .system: "system"
        }
    }

    /// The text that full-text search indexes (text, Markdown, captions, file and place names).
    public var searchableText: String {
        switch self {
        case .text(let text), .markdown(let text), .system(let text): text
        case .location(let location): [location.caption, location.name].compactMap { $0 }.joined(separator: " ")
        case .photo(let media), .video(let media), .audio(let media), .file(let media):
            [media.caption, media.name].compactMap { $0 }.joined(separator: " ")
        case .poll(let poll): ([poll.question] + poll.options).joined(separator: " ")
        case .custom: ""
        }
    }

    enum CodingKeys: String, CodingKey {
        case type, text, markdown, customType, payload
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "text": self = .text(try container.decode(String.self, forKey: .text))
        case "markdown": self = .markdown(try container.decode(String.self, forKey: .markdown))
        case "location": self = .location(try Location(from: decoder))
        case "photo": self = .photo(try Attachment(from: decoder))
        case "video": self = .video(try Attachment(from: decoder))
        case "audio": self = .audio(try Attachment(from: decoder))
        case "file": self = .file(try Attachment(from: decoder))
        case "poll": self = .poll(try PollContent(from: decoder))
        case "custom":
            self = .custom(type: try container.decode(String.self, forKey: .customType),
                           payload: try container.decodeIfPresent(JSONValue.self, forKey: .payload) ?? .null)
        case "system": self = .system(try container.decode(String.self, forKey: .text))
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container,
                debugDescription: "unknown content type '\(other.prefix(64))'; one of text, markdown, location, photo, video, audio, file, poll, custom or system")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(typeName, forKey: .type)
        switch self {
        case .text(let text), .system(let text): try container.encode(text, forKey: .text)
        case .markdown(let markdown): try container.encode(markdown, forKey: .markdown)
        case .location(let location): try location.encode(to: encoder)
        case .photo(let media), .video(let media), .audio(let media), .file(let media): try media.encode(to: encoder)
        case .poll(let poll): try poll.encode(to: encoder)
        case .custom(let type, let payload):
            try container.encode(type, forKey: .customType)
            try container.encode(payload, forKey: .payload)
        }
    }
}
