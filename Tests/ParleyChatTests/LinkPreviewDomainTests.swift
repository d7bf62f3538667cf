import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Link previews on both engines (issue 33, item 1): the job a send leaves in its own write,
/// the one write that puts a preview on its message (announced without a seq), the app's cache
/// serving the same link again, and every way a message gets no preview — opted out, the app
/// switched off, deleted, edited to another link, or finished by a node whose claim ran out.
struct LinkPreviewDomainTests {
    private func found(_ url: String, title: String = "A page") -> CachedLinkPreview {
        CachedLinkPreview(preview: LinkPreview(url: url, title: title, description: "About it", siteName: "Site"),
                          thumbnail: (String(repeating: "cd", count: 32), 512, 300), fetchedAt: 1_000)
    }

    @Test func aSendLeavesAJobAndItsPreviewIsOneWriteAnnouncedWithoutASeq() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: "l1", content: .text("look: https://example.com/a."))).0
        #expect(sent.linkPreview == nil)
        let jobs = try await chat.linkPreviews.claim(holder: "n1")
        #expect(jobs.map(\.url) == ["https://example.com/a"])
        #expect(try await chat.linkPreviews.claim(holder: "n2").isEmpty, "a claimed job is no other node's")
        let last = try await chat.feed(ben, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        #expect(try await chat.linkPreviews.finish(try #require(jobs.first), holder: "n1", fetched: found("https://example.com/a")))
        let seen = try await chat.message(ben, conversation: room, message: sent.id)
        #expect(seen.linkPreview?.title == "A page" && seen.linkPreview?.image?.url.hasPrefix("/v1/previews/lp_") == true)
        #expect(seen.linkPreview?.image?.width == 512 && seen.linkPreview?.url == "https://example.com/a")
        let events = try await chat.feed(ben, after: chat.cursor(through: last), limit: 10).records
        #expect(events.map(\.type) == [.messagePreviewed] && events.first?.seq == nil)
        let conversation = try await chat.conversation(ben, id: room)
        #expect(conversation.lastSeq == sent.seq, "the preview is not part of the history")
        // The thumbnail is served by its public id.
        let path = try #require(seen.linkPreview?.image?.url)
        #expect(try await chat.linkPreviews.thumbnail(publicID: String(path.dropFirst("/v1/previews/".count))) == String(repeating: "cd", count: 32))

        // The same link again: the cache's copy, no fetch, the same picture.
        let again = try await chat.send(ben, to: room, SendMessageRequest(clientID: "l2", content: .markdown("**again** https://example.com/a"))).0
        let second = try #require(try await chat.linkPreviews.claim(holder: "n1").first)
        #expect(try await chat.linkPreviews.cached(app: second.app, url: second.url, freshAfter: 0) != nil)
        #expect(try await chat.linkPreviews.finish(second, holder: "n1", fetched: nil))
        #expect(try await chat.message(ann, conversation: room, message: again.id).linkPreview?.image?.url == path)
    }

    @Test func noPreviewWhenTheSenderTheAppOrTheMessageSaysNo() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, _, room) = try await harness.twoInAGroup()
        // Opted out: no job, and an edit to another link adds none.
        let quiet = try await chat.send(ann, to: room, SendMessageRequest(clientID: "q1", content: .text("https://example.com/q"), previewLinks: false)).0
        #expect(try await chat.linkPreviews.claim(holder: "n1").isEmpty)
        _ = try await chat.edit(ann, conversation: room, message: quiet.id, EditMessageRequest(content: .text("https://example.com/q2")))
        #expect(try await chat.linkPreviews.claim(holder: "n1").isEmpty, "the opt-out outlives an edit")
        // Not text: nothing to preview.
        _ = try await chat.send(ann, to: room, SendMessageRequest(clientID: "q2", content: .location(Location(latitude: 1, longitude: 2))))
        #expect(try await chat.linkPreviews.claim(holder: "n1").isEmpty)
        // Deleted before its preview: the job goes with the content.
        let gone = try await chat.send(ann, to: room, SendMessageRequest(clientID: "q3", content: .text("https://example.com/gone"))).0
        _ = try await chat.delete(ann, conversation: room, messages: [gone.id])
        #expect(try await chat.linkPreviews.claim(holder: "n1").isEmpty)
        // The app switched off: no job; back on, the next send has one.
        let server = try await chat.backend.authenticateApp(secret: try #require(try await chat.backend.rotateSecret(app: "test", grace: .zero).secret))
        #expect(try await chat.linkPreviews.setSettings(server, LinkPreviewSettings(enabled: false)).enabled == false)
        #expect(try await chat.linkPreviews.settings(server).enabled == false)
        _ = try await chat.send(ann, to: room, SendMessageRequest(clientID: "q4", content: .text("https://example.com/off")))
        #expect(try await chat.linkPreviews.claim(holder: "n1").isEmpty)
        _ = try await chat.linkPreviews.setSettings(server, LinkPreviewSettings(enabled: true))
        _ = try await chat.send(ann, to: room, SendMessageRequest(clientID: "q5", content: .text("https://example.com/on")))
        #expect(try await chat.linkPreviews.claim(holder: "n1").map(\.url) == ["https://example.com/on"])
    }

    @Test func anEditToAnotherLinkDropsThePreviewAndALateFinishChangesNothing() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: "e1", content: .text("https://example.com/one"))).0
        let first = try #require(try await chat.linkPreviews.claim(holder: "n1").first)
        #expect(try await chat.linkPreviews.finish(first, holder: "n1", fetched: found("https://example.com/one", title: "One")))
        // Edited to another link: the preview goes at once, and a new job previews the new link.
        let edited = try await chat.edit(ann, conversation: room, message: sent.id, EditMessageRequest(content: .text("now https://example.com/two")))
        #expect(edited.linkPreview == nil)
        let second = try #require(try await chat.linkPreviews.claim(holder: "n1", lease: .zero).first)
        #expect(second.url == "https://example.com/two")
        // The lease ran out and another node took the job: the first holder's finish does nothing.
        harness.clock.advance(by: 1)
        let taken = try #require(try await chat.linkPreviews.claim(holder: "n2").first)
        #expect(try await chat.linkPreviews.finish(second, holder: "n1", fetched: found(second.url, title: "Stale")) == false)
        // A page that gave nothing: no preview, no event.
        let last = try await chat.feed(ben, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        #expect(try await chat.linkPreviews.finish(taken, holder: "n2", fetched: CachedLinkPreview(preview: nil, fetchedAt: 1_000)) == false)
        #expect(try await chat.message(ben, conversation: room, message: sent.id).linkPreview == nil)
        #expect(try await chat.feed(ben, after: chat.cursor(through: last), limit: 10).records.isEmpty)
        // An edit that keeps the link keeps the preview.
        let kept = try await chat.send(ann, to: room, SendMessageRequest(clientID: "e2", content: .text("https://example.com/three"))).0
        let third = try #require(try await chat.linkPreviews.claim(holder: "n1").first)
        #expect(try await chat.linkPreviews.finish(third, holder: "n1", fetched: found(third.url, title: "Three")))
        let retouched = try await chat.edit(ann, conversation: room, message: kept.id, EditMessageRequest(content: .text("https://example.com/three (fixed)")))
        #expect(retouched.linkPreview?.title == "Three")
    }

    @Test func aCachedPageNoMessageShowsIsCollectedWithItsThumbnailAndOneShownIsKept() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        func preview(_ clientID: String, _ url: String, blob: String) async throws -> Message {
            let sent = try await chat.send(ann, to: room, SendMessageRequest(clientID: clientID, content: .text(url))).0
            let job = try #require(try await chat.linkPreviews.claim(holder: "n1").first)
            var page = found(url)
            page.thumbnail = (blob, 512, 300)
            #expect(try await chat.linkPreviews.finish(job, holder: "n1", fetched: page))
            return try await chat.message(ben, conversation: room, message: sent.id)
        }
        let kept = try await preview("c1", "https://example.com/kept", blob: String(repeating: "1a", count: 32))
        let dropped = try await preview("c2", "https://example.com/dropped", blob: String(repeating: "2b", count: 32))
        _ = try await chat.delete(ann, conversation: room, messages: [dropped.id])
        #expect(try await chat.attachments.collect(policy: Chat.MediaPolicy()).isEmpty, "used today: kept")
        harness.clock.advance(by: 2 * 86_400)
        let garbage = try await chat.attachments.collect(policy: Chat.MediaPolicy())
        #expect(garbage == [String(repeating: "2b", count: 32)])
        func id(_ message: Message) throws -> String { String(try #require(message.linkPreview?.image?.url).dropFirst("/v1/previews/".count)) }
        #expect(try await chat.linkPreviews.thumbnail(publicID: try id(dropped)) == nil)
        #expect(try await chat.linkPreviews.thumbnail(publicID: try id(kept)) == String(repeating: "1a", count: 32), "a message still shows it")
    }

    @Test(.enabled(if: TestEngine.isPostgres, "two nodes need PostgreSQL (SQLite has one)"))
    func twoNodesOnOneDatabaseTakeDifferentJobsAndOnlyTheHolderFinishes() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (other, otherStore) = try #require(try await harness.anotherNode())
        defer { otherStore.close() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        var sent: [MessageID] = []
        for n in 0..<6 {
            sent.append(try await chat.send(ann, to: room, SendMessageRequest(clientID: "n\(n)", content: .text("https://example.com/\(n)"))).0.id)
        }
        async let mine = chat.linkPreviews.claim(holder: "node-a", limit: 6)
        async let theirs = other.linkPreviews.claim(holder: "node-b", limit: 6)
        let (a, b) = try await (mine, theirs)
        #expect(Set(a.map(\.message)).isDisjoint(with: Set(b.map(\.message))) && a.count + b.count == 6, "each job is one node's")
        for job in b { #expect(try await chat.linkPreviews.finish(job, holder: "node-a", fetched: found(job.url)) == false, "not node a's to finish") }
        for job in b { #expect(try await other.linkPreviews.finish(job, holder: "node-b", fetched: found(job.url))) }
        for job in a { #expect(try await chat.linkPreviews.finish(job, holder: "node-a", fetched: found(job.url))) }
        for id in sent { #expect(try await chat.message(ben, conversation: room, message: id).linkPreview != nil) }
    }
}
