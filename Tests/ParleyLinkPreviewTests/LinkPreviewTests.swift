import Foundation
import ParleyLinkPreview
import ParleyWire
import Testing

/// Which link of a message is previewed: the first http(s) one, as a reader would click it.
struct FirstLinkTests {
    @Test(arguments: [
        ("see https://example.com/a.", "https://example.com/a"),
        ("(https://example.com/a_(b))", "https://example.com/a_(b"),
        ("**http://Example.com/x?y=1&z=2**, ok", "http://Example.com/x?y=1&z=2"),
        ("[text](https://example.com/doc) and https://second.example", "https://example.com/doc"),
        ("HTTPS://EXAMPLE.COM", "HTTPS://EXAMPLE.COM"),
        ("<https://example.com/in-brackets>", "https://example.com/in-brackets"),
        ("first ftp://no.example then https://yes.example/p", "https://yes.example/p"),
    ])
    func theFirstLinkIsFound(_ text: String, _ link: String) {
        #expect(LinkPreview.firstLink(in: text) == link)
    }

    @Test(arguments: ["no link here", "xhttps://example.com", "https://", "http:///path", "https://user:pw@example.com/",
                      "javascript:alert(1)", "https://" + String(repeating: "a", count: 2100) + ".com"])
    func nothingElseIs(_ text: String) {
        #expect(LinkPreview.firstLink(in: text) == nil)
    }

    @Test func onlyTextAndMarkdownArePreviewed() {
        #expect(LinkPreview.firstLink(in: .markdown("**https://example.com**")) == "https://example.com")
        #expect(LinkPreview.firstLink(in: .system("https://example.com")) == nil)
        #expect(LinkPreview.firstLink(in: .location(Location(latitude: 1, longitude: 2))) == nil)
    }
}

/// What the page reader keeps of a page's head.
struct PageMetadataTests {
    let base = URL(string: "https://blog.example/posts/1")

    @Test func openGraphComesFirstThenTwitterThenThePlainTags() {
        let page = PageMetadata.parse(Array("""
            <!DOCTYPE html><html><head><!-- <meta property="og:title" content="commented out"> -->
            <title>Plain &amp; simple</title>
            <script>document.write('<meta property="og:title" content="from a script">')</script>
            <style>meta { content: "x" }</style>
            <META PROPERTY='og:title' CONTENT='Open &quot;Graph&quot; &#8211; title'>
            <meta name=twitter:title content=Twitter>
            <meta name="description" content="  many
               spaces\there  ">
            <meta property="og:site_name" content="The blog">
            <meta property="og:image" content="../images/cover.jpg">
            <link rel="alternate stylesheet" type="application/json+oembed" href="/oembed?u=1">
            </head><body><meta property="og:description" content="in the body: not read"></body></html>
            """.utf8), base: base)
        #expect(page.title == "Open \"Graph\" – title")
        #expect(page.description == "many spaces here")
        #expect(page.siteName == "The blog")
        #expect(page.image == "https://blog.example/images/cover.jpg")
        #expect(page.oEmbed == "https://blog.example/oembed?u=1")
    }

    @Test func theTitleTagIsTheLastResortAndValuesAreCut() {
        let long = String(repeating: "word ", count: 200)
        let page = PageMetadata.parse(Array("<head><title>\(long)</title><meta name=description content='\(long)'></head>".utf8), base: base)
        #expect(page.title?.count == PageMetadata.maxTitle && page.title?.hasSuffix("…") == true)
        #expect((page.description?.count ?? 0) <= PageMetadata.maxDescription)
        #expect(page.image == nil && page.siteName == nil)
    }

    @Test func imagesAndOEmbedThatAreNotHTTPAreDropped() {
        let page = PageMetadata.parse(Array("""
            <head><meta property="og:title" content="t"><meta property="og:image" content="javascript:alert(1)">
            <link rel="alternate" type="application/json+oembed" href="file:///etc/passwd"></head>
            """.utf8), base: base)
        #expect(page.title == "t" && page.image == nil && page.oEmbed == nil)
        #expect(PageMetadata.resolve("https://user:pw@example.com/a.png", base: base) == nil)
        #expect(PageMetadata.resolve("//cdn.example/a.png", base: base) == "https://cdn.example/a.png")
    }

    @Test func controlCharactersAndBadReferencesNeverReachAPreview() {
        let page = PageMetadata.parse(Array("<head><title>a&#0;b&#x7;c&#99999999;d\u{0001}e&bogus;f</title></head>".utf8), base: base)
        #expect(page.title == "a\u{FFFD}b\u{FFFD}c\u{FFFD}d e&bogus;f")
    }

    @Test func unfinishedMarkupEndsTheReadQuietly() {
        // A value or a title cut off by the end of what was read is kept as far as it goes.
        #expect(PageMetadata.parse(Array("<head><meta property=\"og:title\" content=\"open".utf8), base: base).title == "open")
        #expect(PageMetadata.parse(Array("<head><title>never closed".utf8), base: base).title == "never closed")
        // What a comment or a script hides stays hidden, however it ends.
        for text in ["<!-- forever <title>hidden</title>", "<script><title>hidden</title>", "<", "<meta", "<meta =x>", "<<<>>>"] {
            #expect(PageMetadata.parse(Array(text.utf8), base: base).isEmpty, "\(text)")
        }
    }

    @Test func pagesInLatin1AndWindows1252AreReadAsWhatTheySay() {
        let latin1: [UInt8] = Array("<head><title>Caf".utf8) + [0xE9] + Array(" du coin</title></head>".utf8)
        #expect(PageMetadata.parse(PageMetadata.utf8(latin1, contentType: "text/html; charset=ISO-8859-1"), base: base).title == "Café du coin")
        let windows: [UInt8] = Array("<head><meta charset=\"windows-1252\"><title>".utf8) + [0x93] + Array("quoted".utf8) + [0x94]
            + Array("</title></head>".utf8)
        #expect(PageMetadata.parse(PageMetadata.utf8(windows, contentType: "text/html"), base: base).title == "“quoted”")
        let utf8 = Array("<head><title>Café</title></head>".utf8)
        #expect(PageMetadata.utf8(utf8, contentType: "text/html; charset=utf-8") == utf8)
        #expect(PageMetadata.utf8(utf8, contentType: nil) == utf8, "no charset: UTF-8")
    }

    @Test func oEmbedFillsOnlyWhatThePageLeftOut() {
        var page = PageMetadata()
        page.title = "From the page"
        page.merge(oEmbedJSON: Array(#"{"title":"From oEmbed","provider_name":"Tube","author_name":"Maria","thumbnail_url":"/t.jpg"}"#.utf8), base: base)
        #expect(page.title == "From the page" && page.siteName == "Tube" && page.description == "by Maria")
        #expect(page.image == "https://blog.example/t.jpg")
        var none = PageMetadata()
        none.merge(oEmbedJSON: Array("[1,2]".utf8), base: base)
        #expect(none == PageMetadata())
    }
}

/// `--link-previews-allow-private` entries, spelled as the address check spells addresses.
struct AllowedEntryTests {
    @Test func addressesAndPortsAreNormalized() {
        #expect(LinkPreviewFetcher.allowedEntry("127.0.0.1:8080") == "127.0.0.1:8080")
        #expect(LinkPreviewFetcher.allowedEntry(" [fd00::1]:443 ") == "[fd00:0:0:0:0:0:0:1]:443")
        #expect(LinkPreviewFetcher.allowedEntry("intranet:80") == nil)
        #expect(LinkPreviewFetcher.allowedEntry("10.0.0.1") == nil)
        #expect(LinkPreviewFetcher.allowedEntry("10.0.0.1:0") == nil)
        #expect(LinkPreviewFetcher.allowedEntry("fd00::1:443") == nil)
    }
}
