import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Retention (issue 19), on both engines: messages older than the policy are gone with
/// everything attached to them, one event says so, newer ones and other conversations stay.
struct RetentionDomainTests {
    @Test func aSweepRemovesOldMessagesAndWhatHangsOnThemAndSaysSo() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let server = try await chat.backend.authenticateApp(secret: try #require(try await chat.backend.rotateSecret(app: "test", grace: .zero).secret))
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "kept 1 day")).0.id
        let keeper = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "forever")).0.id
        _ = try await chat.updateConversation(alice, id: keeper, UpdateConversationRequest(retentionDays: 0))
        #expect(try await chat.retention.setPolicy(server, RetentionPolicy(days: 1)).days == 1)
        #expect(try await chat.conversation(bob, id: room).retentionDays == 1)
        #expect(try await chat.conversation(bob, id: keeper).retentionDays == nil)

        let photo = try await harness.upload(alice, kind: .photo)
        var old: [Message] = []
        for index in 0..<(Chat.retentionBatch + 3) {
            old.append(try await chat.send(alice, to: room, SendMessageRequest(clientID: "o\(index)", content: .text("xylophone \(index) @bob"))).0)
        }
        let withPhoto = try await chat.send(alice, to: room, SendMessageRequest(clientID: "p", content: .photo(Attachment(attachmentID: photo.id)))).0
        _ = try await chat.annotations.react(bob, conversation: room, message: old[0].id, emoji: "👍")
        _ = try await chat.annotations.pin(bob, conversation: room, message: old[1].id)
        _ = try await chat.send(alice, to: keeper, SendMessageRequest(clientID: "k", content: .text("xylophone kept")))
        harness.clock.advance(by: 2 * 86_400)
        let fresh = try await chat.send(bob, to: room, SendMessageRequest(clientID: "f", content: .text("xylophone fresh"))).0
        let before = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0

        let sweep = try await chat.retention.sweep()
        #expect(sweep.messages == old.count + 1 && sweep.conversations == 1)
        let page = try await chat.history(bob, id: room, HistoryQuery()).page()
        #expect(page.messages.map(\.id) == [fresh.id] && !page.hasOlder)
        #expect(try await chat.history(bob, id: keeper, HistoryQuery()).page().messages.count == 1, "kept forever")
        #expect(try await chat.search(bob, query: "xylophone", conversation: nil, limit: nil).messages.map(\.id).sorted { $0.rawValue < $1.rawValue }
                .contains(old[0].id) == false)
        #expect(try await chat.annotations.mentions(bob, before: nil, limit: nil).messages.isEmpty)
        #expect(try await chat.annotations.pins(bob, conversation: room).messages.isEmpty)
        #expect(await (try? chat.message(bob, conversation: room, message: withPhoto.id)) == nil)
        let refs = try await harness.store.read { db in try db.fetchValue(Int64.self, "SELECT refs FROM attachment WHERE public_id = \(photo.id)") }
        #expect(refs == 0, "the photo's file is now unused and collectable")
        // Devices are told, in two batches, through which seq.
        let expired = try await chat.feed(bob, after: chat.cursor(through: before), limit: 100).page().events.filter { $0.type == .messagesExpired }
        #expect(expired.map(\.count) == [Chat.retentionBatch, 4] && expired.last?.throughSeq == withPhoto.seq)
        #expect(expired.allSatisfy { $0.seq != nil })
        // A second sweep finds nothing.
        #expect(try await chat.retention.sweep().messages == 0)
    }
}
