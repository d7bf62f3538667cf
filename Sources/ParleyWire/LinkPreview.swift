import Foundation

/// What a link in a message shows (``Message/linkPreview``): the page's OpenGraph or oEmbed
/// title, description and site name, and a thumbnail of its image made by this server (the
/// page's own image is never linked, so a reader's device never contacts the site).
/// MessageKit's `.linkPreview` kind is drawn from it.
public struct LinkPreview: Hashable, Codable, Sendable {
    /// The link as the message wrote it.
    public var url: String
    /// The page's title (`og:title`, oEmbed `title`, or `<title>`).
    public var title: String?
    /// A sentence or two about it (`og:description` or `<meta name="description">`).
    public var description: String?
    /// Whose site it is (`og:site_name`, oEmbed `provider_name`).
    public var siteName: String?
    /// The thumbnail of the page's image, when it had one that could be read.
    public var image: LinkPreviewImage?

    /// Creates the value; each argument sets the property of the same name.
    public init(url: String, title: String? = nil, description: String? = nil, siteName: String? = nil, image: LinkPreviewImage? = nil) {
        self.url = url
        self.title = title
        self.description = description
        self.siteName = siteName
        self.image = image
    }
}

/// A link preview's thumbnail, served by this server (`GET /v1/previews/{id}`, no token: an
/// unguessable path to a picture of a public page, as avatars are).
public struct LinkPreviewImage: Hashable, Codable, Sendable {
    /// The path to fetch it from, relative to the server (`/v1/previews/lp_…`).
    public var url: String
    /// Its width in pixels.
    public var width: Int
    /// Its height in pixels.
    public var height: Int

    /// Creates the value; each argument sets the property of the same name.
    public init(url: String, width: Int, height: Int) {
        self.url = url
        self.width = width
        self.height = height
    }
}

/// Whether an app's messages get link previews (`GET` and `PUT /v1/server/link-previews`).
public struct LinkPreviewSettings: Hashable, Codable, Sendable {
    /// Previews on (the default) or off for every conversation of the app.
    public var enabled: Bool

    /// Creates the value.
    public init(enabled: Bool) { self.enabled = enabled }
}

extension LinkPreview {
    /// The longest link previewed, in bytes; longer ones are left as text.
    public static let maxURLBytes = 2048

    /// The first `http` or `https` link in `content`'s text (text and Markdown messages
    /// only), as a reader would click it: from the scheme to the first space or bracket,
    /// without trailing punctuation; nil when there is none that parses as a URL with a host.
    public static func firstLink(in content: MessageContent) -> String? {
        switch content {
        case .text(let text), .markdown(let text): firstLink(in: text)
        default: nil
        }
    }

    /// The first link in `text` (see ``firstLink(in:)-(MessageContent)``).
    public static func firstLink(in text: String) -> String? {
        let bytes = Array(text.utf8)
        var index = 0
        while index + 8 <= bytes.count {
            defer { index += 1 }
            guard bytes[index] | 0x20 == UInt8(ascii: "h") else { continue }
            if index > 0, isWordByte(bytes[index - 1]) { continue }
            let length: Int
            if hasPrefix(bytes, at: index, "https://") { length = 8 } else if hasPrefix(bytes, at: index, "http://") { length = 7 } else { continue }
            var end = index + length
            while end < bytes.count, !ends(bytes[end]) { end += 1 }
            // Punctuation that ends a sentence or closes a bracket is not part of the link.
            while end > index + length, [UInt8(ascii: "."), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: ":"), UInt8(ascii: "!"),
                                         UInt8(ascii: "?"), UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "'"), UInt8(ascii: "*"),
                                         UInt8(ascii: "_")].contains(bytes[end - 1]) {
                end -= 1
            }
            guard end - index <= maxURLBytes else { continue }
            let candidate = String(decoding: bytes[index..<end], as: UTF8.self)
            guard let components = URLComponents(string: candidate), let scheme = components.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
                  components.user == nil, components.password == nil else { continue }
            return candidate
        }
        return nil
    }

    private static func hasPrefix(_ bytes: [UInt8], at index: Int, _ prefix: String) -> Bool {
        let expected = Array(prefix.utf8)
        guard index + expected.count <= bytes.count else { return false }
        for offset in expected.indices where bytes[index + offset] | 0x20 != expected[offset] | 0x20 { return false }
        return true
    }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7a) || byte >= 0x80
    }

    private static func ends(_ byte: UInt8) -> Bool {
        byte <= 0x20 || byte == 0x7f || [UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\""), UInt8(ascii: "`"),
                                         UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "|"), UInt8(ascii: "\\"), UInt8(ascii: "^")].contains(byte)
    }
}
