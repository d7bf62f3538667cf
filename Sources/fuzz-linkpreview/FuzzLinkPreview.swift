import Foundation
import ParleyLinkPreview
import ParleyNetTesting
import ParleyWire

/// libFuzzer entry for what link previews read from strangers: the first byte picks a
/// reader, the rest is its input (a page is read as UTF-8 and as Windows-1252). Promises checked: nothing traps or hangs; a page's title,
/// description and site name are within their limits and hold no control characters; an
/// image or oEmbed URL it keeps is absolute http(s) with a host and no user name; the link
/// found in a message's text is a prefix-free piece of that text that parses as such a URL.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLinkPreview(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch selector % 3 {
    case 0: page(bytes)
    case 1: oEmbed(bytes)
    default: link(String(decoding: bytes, as: UTF8.self))
    }
    return 0
}

private let base = URL(string: "https://example.com/a/b?c=d")

private func page(_ bytes: [UInt8]) {
    check(PageMetadata.parse(bytes, base: base))
    // As a page that says it is Windows-1252: converted first, then read.
    check(PageMetadata.parse(PageMetadata.utf8(bytes, contentType: "text/html; charset=windows-1252"), base: base))
}

private func oEmbed(_ bytes: [UInt8]) {
    var page = PageMetadata()
    page.merge(oEmbedJSON: bytes, base: base)
    check(page)
}

private func check(_ page: PageMetadata) {
    for (value, limit) in [(page.title, PageMetadata.maxTitle), (page.description, PageMetadata.maxDescription),
                           (page.siteName, PageMetadata.maxSiteName)] {
        guard let value else { continue }
        precondition(!value.isEmpty && value.count <= limit, "a kept value is empty or over its limit: \(value.debugDescription)")
        precondition(!value.unicodeScalars.contains { $0.value < 0x20 || (0x7f...0x9f).contains($0.value) },
                     "a kept value holds a control character: \(value.debugDescription)")
    }
    for url in [page.image, page.oEmbed].compactMap({ $0 }) {
        let components = URLComponents(string: url)
        precondition(["http", "https"].contains(components?.scheme?.lowercased() ?? ""), "a kept URL is not http(s): \(url.debugDescription)")
        precondition(!(components?.host ?? "").isEmpty, "a kept URL has no host: \(url.debugDescription)")
        precondition(components?.user == nil, "a kept URL names a user: \(url.debugDescription)")
    }
}

private func link(_ text: String) {
    guard let found = LinkPreview.firstLink(in: text) else { return }
    precondition(text.contains(found), "the link is not part of the text")
    precondition(found.utf8.count <= LinkPreview.maxURLBytes, "the link is longer than the limit")
    let components = URLComponents(string: found)
    precondition(["http", "https"].contains(components?.scheme?.lowercased() ?? ""), "the link is not http(s): \(found.debugDescription)")
    precondition(!(components?.host ?? "").isEmpty, "the link has no host: \(found.debugDescription)")
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-linkpreview", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzLinkPreview)
    }
}
#endif
