import Foundation
package import ParleyOutbound
package import ParleyWire

/// What a link preview may fetch, and how much (docs/link-previews.md).
package struct LinkPreviewLimits: Sendable {
    /// Each request's time, connecting included.
    package var timeout: Duration = .seconds(5)
    /// Redirects followed from the link (each one's address checked again).
    package var maxRedirects = 5
    /// Bytes of a page read (its head is what counts; the rest is not fetched).
    package var maxPageBytes = PageMetadata.maxScanned
    /// Bytes of a page's image; a larger one is not fetched to the end, and the preview has no picture.
    package var maxImageBytes = 5 << 20
    /// Bytes of an oEmbed document.
    package var maxOEmbedBytes = 64 << 10

    /// The defaults above.
    package init() {}
}

/// What reading a link found.
package enum LinkPreviewFetch: Sendable, Hashable {
    /// Something to show, and the page's image when it had one that could be fetched.
    case found(PageMetadata, image: FetchedImage?)
    /// Nothing to show, and why, in words for the log (never the URL's query).
    case nothing(String)
}

/// An image a page named, as fetched: a format this server makes thumbnails of.
package struct FetchedImage: Sendable, Hashable {
    /// Its bytes.
    package var bytes: [UInt8]
    /// What the bytes are (sniffed, not what the server said).
    package var format: MediaFormat
}

/// Reads a link's page, its oEmbed description and its image through the outbound address
/// check (``OutboundPolicy/linkPreviews(allowedPrivate:)``). Redirects are followed here, one
/// request each, so every hop's address is checked when it is connected to, as the first
/// one's is; only http and https are followed. Blocking: call it off the event loops.
package struct LinkPreviewFetcher: Sendable {
    package let limits: LinkPreviewLimits
    let policy: OutboundPolicy
    let trust: TrustStore
    /// How this server introduces itself to the sites it reads.
    static let userAgent = "User-Agent: Parley link preview (+https://github.com/parley-chat/parley; like Slackbot-LinkExpanding)"

    /// A fetcher that may reach public addresses and the `address:port` pairs of `allowedPrivate`.
    package init(limits: LinkPreviewLimits = LinkPreviewLimits(), allowedPrivate: Set<String> = [], trust: TrustStore) {
        self.limits = limits
        self.policy = .linkPreviews(allowedPrivate: allowedPrivate)
        self.trust = trust
    }

    /// Reads the page at `url` (and what it names).
    package func fetch(_ url: String) -> LinkPreviewFetch {
        let page: (url: String, response: OutboundResponse)
        do {
            page = try get(url, accept: "text/html,application/xhtml+xml;q=0.9,image/*;q=0.8", maxBody: limits.maxPageBytes)
        } catch {
            return .nothing(error.description)
        }
        guard (200..<300).contains(page.response.status) else { return .nothing("the page answered \(page.response.status)") }
        let type = Self.mediaType(page.response.headers["content-type"])
        let base = URL(string: page.url)
        if type.hasPrefix("image/") {
            // The link is a picture: a preview of the picture alone, named by its site.
            guard !page.response.truncated, let format = Self.imageFormat(page.response.body) else { return .nothing("an image this server cannot read") }
            var metadata = PageMetadata()
            metadata.siteName = base?.host
            metadata.image = page.url
            return .found(metadata, image: FetchedImage(bytes: page.response.body, format: format))
        }
        guard type == "text/html" || type == "application/xhtml+xml" else { return .nothing("the page is \(type.isEmpty ? "of no type" : type), not HTML") }
        var metadata = PageMetadata.parse(PageMetadata.utf8(page.response.body, contentType: page.response.headers["content-type"]), base: base)
        if let oEmbed = metadata.oEmbed, metadata.title == nil || metadata.image == nil,
           let document = try? get(oEmbed, accept: "application/json", maxBody: limits.maxOEmbedBytes + 1),
           (200..<300).contains(document.response.status), !document.response.truncated {
            metadata.merge(oEmbedJSON: document.response.body, base: URL(string: document.url))
        }
        guard !metadata.isEmpty else { return .nothing("the page has no title, description or image") }
        return .found(metadata, image: metadata.image.flatMap(image))
    }

    /// The image at `url`, when it is one this server reads and within the limit.
    func image(_ url: String) -> FetchedImage? {
        guard let fetched = try? get(url, accept: "image/avif;q=0.1,image/webp,image/png,image/jpeg,image/gif;q=0.9", maxBody: limits.maxImageBytes + 1),
              (200..<300).contains(fetched.response.status), !fetched.response.truncated,
              Self.mediaType(fetched.response.headers["content-type"]).hasPrefix("image/"),
              let format = Self.imageFormat(fetched.response.body) else { return nil }
        return FetchedImage(bytes: fetched.response.body, format: format)
    }

    /// Why a fetch got no answer to read.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// GETs `url`, following up to ``LinkPreviewLimits/maxRedirects`` redirects, each a new
    /// request whose address is checked when connected; the URL answered and the answer.
    func get(_ start: String, accept: String, maxBody: Int) throws(Failure) -> (url: String, response: OutboundResponse) {
        var url = start
        for _ in 0...limits.maxRedirects {
            let response: OutboundResponse
            do {
                let http = try OutboundHTTP(trust: trust, timeout: limits.timeout, policy: policy)
                response = try http.get(url, headers: [Self.userAgent, "Accept: " + accept, "Accept-Language: en;q=0.9, *;q=0.5"], maxBody: maxBody)
            } catch let error as OutboundError {
                throw Failure(description: Self.host(url) + ": " + error.description)
            } catch {
                throw Failure(description: Self.host(url) + ": \(error)")
            }
            guard [301, 302, 303, 307, 308].contains(response.status) else { return (url, response) }
            guard let location = response.headers["location"], let next = PageMetadata.resolve(location, base: URL(string: url)) else {
                throw Failure(description: Self.host(url) + " redirected to something that is not an http or https URL")
            }
            url = next
        }
        throw Failure(description: Self.host(start) + " redirected more than \(limits.maxRedirects) times")
    }

    /// A URL's host, for a log line (never its path or query: they may hold someone's token).
    static func host(_ url: String) -> String {
        URLComponents(string: url)?.host ?? "a URL"
    }

    static func mediaType(_ header: String?) -> String {
        (header ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    }

    static func imageFormat(_ bytes: [UInt8]) -> MediaFormat? {
        guard let format = MediaFormat.sniff(bytes), [.jpeg, .png, .gif, .webp].contains(format) else { return nil }
        return format
    }

    /// An `--link-previews-allow-private` entry as the address check spells it (`a.b.c.d:port`,
    /// `[x:x:…]:port`); nil when it is not an address literal and a port.
    package static func allowedEntry(_ entry: String) -> String? {
        let trimmed = entry.trimmingCharacters(in: .whitespaces)
        guard let colon = trimmed.lastIndex(of: ":"), let port = UInt16(trimmed[trimmed.index(after: colon)...]), port > 0 else { return nil }
        let host = String(trimmed[..<colon])
        guard let bytes = AddressPolicy.literal(host) else { return nil }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") + ":\(port)" }
        guard host.hasPrefix("[") else { return nil }
        let groups = stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return "[" + groups.joined(separator: ":") + "]:\(port)"
    }
}

/// The operator's link-preview settings (`--link-previews`, `--link-previews-allow-private`,
/// `--link-preview-cache`).
package struct LinkPreviewOptions: Sendable, Equatable {
    /// On or off for this node.
    package enum Mode: String, Sendable, CaseIterable {
        case on, off
    }

    /// Whether sends on this node leave preview jobs and this node works on them. Default: on.
    package var mode = Mode.on
    /// Private `address:port` pairs previews may read (normalized, ``LinkPreviewFetcher/allowedEntry(_:)``).
    package var allowPrivate: Set<String> = []
    /// How long a page read serves the same link. Default: a day.
    package var cacheLifetime: Duration = .seconds(86_400)

    /// The defaults above.
    package init() {}
}
