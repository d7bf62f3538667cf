import Foundation
import Parley
import ParleyWire
import Testing

/// A link preview as the SDK shows it: MessageKit's `.linkPreview`, and a chat screen's
/// message replaced in place by `message.previewed`.
struct LinkPreviewClientTests {
    @Test func aPreviewedTextIsMessageKitsLinkPreviewAndEverythingElseIsAsBefore() throws {
        let previewed = try EventKindCompletenessTests.golden(.messagePreviewed)
        let message = try #require(previewed.message)
        guard case .linkPreview(let item) = message.messageKind else {
            Issue.record("expected .linkPreview, got \(message.messageKind)")
            return
        }
        #expect(item.text == "see https://example.com/post" && item.markdown == nil)
        #expect(item.url == URL(string: "https://example.com/post") && item.title == "A post" && item.teaser == "About chat")
        #expect(item.thumbnailPath?.hasPrefix("/v1/previews/lp_") == true)
        // Markdown keeps its Markdown; without a preview a text is a text.
        var markdown = message
        markdown.content = .markdown("**see** https://example.com/post")
        guard case .linkPreview(let styled) = markdown.messageKind else {
            Issue.record("expected .linkPreview for Markdown")
            return
        }
        #expect(styled.markdown == "**see** https://example.com/post" && styled.text == nil)
        var plain = message
        plain.linkPreview = nil
        #expect(plain.messageKind == .text("see https://example.com/post"))
    }

    @Test func aChatScreenShowsThePreviewWhenItArrivesInPlace() throws {
        let previewed = try EventKindCompletenessTests.golden(.messagePreviewed)
        var shown = try #require(previewed.message)
        shown.linkPreview = nil
        let after = [shown].applying(previewed, me: UserID(rawValue: "u_9"))
        #expect(after.count == 1 && after[0].linkPreview?.title == "A post" && after[0].seq == shown.seq && after[0].content == shown.content)
    }

    @Test func anOptOutTravelsInTheOutboxAndTheFrame() throws {
        var item = try JSONDecoder().decode(OutboxItem.self, from: Data(#"{"clientID":"c1","conversationID":"c_1","content":{"type":"text","text":"https://example.com"}}"#.utf8))
        item.previewLinks = false
        let saved = try JSONDecoder().decode(OutboxItem.self, from: try JSONEncoder().encode(item))
        #expect(saved.previewLinks == false)
        // An outbox written before previews existed still reads.
        let old = try JSONDecoder().decode(OutboxItem.self, from: Data(#"{"clientID":"c2","conversationID":"c_1","content":{"type":"text","text":"hi"}}"#.utf8))
        #expect(old.previewLinks == nil)
        let frame = ClientFrame.send(id: "s1", conversationID: item.conversationID,
                                     message: SendMessageRequest(clientID: "c1", content: item.content, previewLinks: false))
        let json = String(decoding: try WireCoding.encoder().encode(frame), as: UTF8.self)
        #expect(json.contains(#""previewLinks":false"#))
    }
}
