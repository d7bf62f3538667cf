import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Scheduled messages (issue 33, item 5), on both engines: sent once at their time as their
/// author, listed, edited and cancelled by the author only, refused with the reason when the
/// author can no longer post, and only the author's devices hear of them.
struct ScheduledDomainTests {
    private func later(_ harness: ChatHarness, _ seconds: TimeInterval, _ text: String, clientID: String = UUID().uuidString) -> ScheduleMessageRequest {
        ScheduleMessageRequest(sendAt: harness.clock.now.addingTimeInterval(seconds), message: SendMessageRequest(clientID: clientID, content: .text(text)))
    }

    @Test func aScheduledMessageIsSentOnceAtItsTimeAsANormalSend() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        #expect(try await chat.scheduling.nextDue() == nil, "nothing scheduled: nothing due, and no error")
        let morning = try await chat.scheduling.schedule(ann, conversation: room, later(harness, 3600, "good morning", clientID: "s1"))
        #expect(try await chat.scheduling.nextDue() == morning.sendAt)
        let evening = try await chat.scheduling.schedule(ann, conversation: room, later(harness, 7200, "good evening"))
        #expect(morning.status == .scheduled && morning.id.hasPrefix("sm_"))
        #expect(try await chat.scheduling.scheduled(ann, conversation: nil).scheduled.map(\.id) == [morning.id, evening.id])
        #expect(try await chat.scheduling.scheduled(ben, conversation: nil).scheduled.isEmpty, "ben sees his own only")
        // Not due: nothing goes.
        #expect(try await chat.scheduling.sendDue(holder: "a") == 0)
        harness.clock.advance(by: 3600)
        #expect(try await chat.scheduling.sendDue(holder: "a") == 1)
        #expect(try await chat.scheduling.sendDue(holder: "b") == 0, "sent once")
        let page = try await chat.history(ben, id: room, HistoryQuery()).page().messages
        #expect(page.map(\.content) == [.text("good morning")] && page.first?.sender.id == ann.userID && page.first?.clientID == "s1")
        #expect(try await chat.scheduling.scheduled(ann, conversation: room).scheduled.map(\.id) == [evening.id])
        // The same client id cannot be scheduled again: it was sent.
        await #expect(throws: ChatError.self) { try await chat.scheduling.schedule(ann, conversation: room, later(harness, 60, "again", clientID: "s1")) }
        // A worker that died after sending and before recording: the next one sends nothing twice.
        let retried = try await chat.scheduling.schedule(ann, conversation: room, later(harness, 60, "once", clientID: "s2"))
        harness.clock.advance(by: 60)
        _ = try await chat.send(ann, to: room, SendMessageRequest(clientID: "s2", content: .text("once")))   // as if sent before the crash
        #expect(try await chat.scheduling.sendDue(holder: "c") == 1)
        let all = try await chat.history(ben, id: room, HistoryQuery()).page().messages
        #expect(all.filter { $0.clientID == "s2" }.count == 1)
        _ = retried
    }

    @Test func theAuthorEditsAndCancelsAndNobodyElseCan() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let planned = try await chat.scheduling.schedule(ann, conversation: room, later(harness, 600, "draft words"))
        let edited = try await chat.scheduling.edit(ann, id: planned.id, EditScheduledRequest(sendAt: harness.clock.now.addingTimeInterval(60),
                                                                                               content: .text("final words")))
        #expect(edited.message.content == .text("final words") && edited.sendAt == harness.clock.now.addingTimeInterval(60))
        await #expect(throws: ChatError.self) { try await chat.scheduling.edit(ben, id: planned.id, EditScheduledRequest(content: .text("mine now"))) }
        // An edit that gives nothing, a time gone by, or an attachment is refused, changing nothing.
        await #expect(throws: ChatError.self) { try await chat.scheduling.edit(ann, id: planned.id, EditScheduledRequest()) }
        await #expect(throws: ChatError.self) {
            try await chat.scheduling.edit(ann, id: planned.id, EditScheduledRequest(sendAt: harness.clock.now.addingTimeInterval(-1)))
        }
        await #expect(throws: ChatError.self) {
            try await chat.scheduling.edit(ann, id: planned.id, EditScheduledRequest(content: .location(Location(latitude: 200, longitude: 0))))
        }
        #expect(try await chat.scheduling.scheduled(ann, conversation: room).scheduled.first?.message.content == .text("final words"))
        await #expect(throws: ChatError.self) { try await chat.scheduling.cancel(ben, id: planned.id) }
        try await chat.scheduling.cancel(ann, id: planned.id)
        await #expect(throws: ChatError.self) { try await chat.scheduling.cancel(ann, id: planned.id) }
        harness.clock.advance(by: 120)
        #expect(try await chat.scheduling.sendDue(holder: "a") == 0, "a cancelled one never goes")
        #expect(try await chat.history(ben, id: room, HistoryQuery()).page().messages.isEmpty)
        // Refused up front: the past, more than a year ahead, attachments, someone else's group.
        await #expect(throws: ChatError.self) { try await chat.scheduling.schedule(ann, conversation: room, later(harness, -1, "past")) }
        await #expect(throws: ChatError.self) { try await chat.scheduling.schedule(ann, conversation: room, later(harness, 400 * 86_400, "far")) }
        let photo = try await harness.upload(ann, kind: .photo)
        await #expect(throws: ChatError.self) {
            try await chat.scheduling.schedule(ann, conversation: room, ScheduleMessageRequest(
                sendAt: harness.clock.now.addingTimeInterval(60), message: SendMessageRequest(clientID: "p", content: .photo(Attachment(attachmentID: photo.id)))))
        }
        let carol = try await harness.register("carol").caller
        await #expect(throws: ChatError.self) { try await chat.scheduling.schedule(carol, conversation: room, later(harness, 60, "let me in")) }
    }

    @Test func oneWhoseAuthorCanNoLongerPostFailsWithTheReasonAndOnlyTheAuthorHears() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ann, ben, room) = try await harness.twoInAGroup()
        let benBefore = try await chat.feed(ben, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        let annBefore = try await chat.feed(ann, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        // Muted by a moderator before its time: it fails, and Ben's devices hear why.
        let planned = try await chat.scheduling.schedule(ben, conversation: room, later(harness, 60, "see you"))
        _ = try await chat.moderation.muteMember(ann, conversation: room, user: ben.userID, MuteMemberRequest(until: nil))
        harness.clock.advance(by: 60)
        #expect(try await chat.scheduling.sendDue(holder: "a") == 1)
        let events = try await chat.feed(ben, after: chat.cursor(through: benBefore), limit: 200).records.map { try $0.event() }.filter { $0.type == .scheduledUpdated }
        #expect(events.map { $0.scheduled?.status } == [.scheduled, .failed])
        #expect(events.last?.scheduled?.id == planned.id && events.last?.scheduled?.error?.isEmpty == false)
        let annSaw = try await chat.feed(ann, after: chat.cursor(through: annBefore), limit: 200).records.map(\.type)
        #expect(!annSaw.contains(.scheduledUpdated) && !annSaw.contains(.messageCreated))
        // Removed before its time: it fails too, and stays listed (with why) until dismissed.
        _ = try await chat.moderation.unmuteMember(ann, conversation: room, user: ben.userID)
        let second = try await chat.scheduling.schedule(ben, conversation: room, later(harness, 60, "still there?"))
        try await chat.removeMember(ann, id: room, user: ben.userID)
        harness.clock.advance(by: 60)
        #expect(try await chat.scheduling.sendDue(holder: "a") == 1)
        let listed = try await chat.scheduling.scheduled(ben, conversation: nil).scheduled
        #expect(listed.map(\.id) == [planned.id, second.id] && listed.allSatisfy { $0.status == .failed && $0.error != nil })
        try await chat.scheduling.cancel(ben, id: second.id)
        #expect(try await chat.scheduling.scheduled(ben, conversation: nil).scheduled.map(\.id) == [planned.id])
        #expect(try await chat.history(ann, id: room, HistoryQuery()).page().messages.isEmpty)
    }

    @Test func atMostAHundredWait() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ann = try await harness.register("ann").caller
        let room = try await chat.createConversation(ann, CreateConversationRequest(kind: .group, members: [], title: "notes")).0.id
        for index in 0..<Limits.scheduledPerUser { _ = try await chat.scheduling.schedule(ann, conversation: room, later(harness, 60, "n\(index)")) }
        let refused = await #expect(throws: ChatError.self) { try await chat.scheduling.schedule(ann, conversation: room, later(harness, 60, "one more")) }
        #expect(refused?.code == "conflict")
    }
}
