import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyTesting
import ParleyWire
import Testing

/// Delivery status in public channels (issue 15, part 2; decision 0017): members' receipts stay
/// with their own devices, and each author hears, coalesced, how many of how many have their
/// messages.
struct DeliveryTests {
    /// A bus that keeps every event publication with its audience.
    final class Recorder: Bus, @unchecked Sendable {
        private let lock = NSLock()
        private var kept: [(type: String, audience: Audience, frame: String)] = []
        var deliveries: [(audience: Audience, frame: String)] {
            lock.withLock { kept.filter { $0.type == "delivery.updated" }.map { ($0.audience, $0.frame) } }
        }
        func publish(_ publications: [Publication]) {
            lock.withLock {
                for case .event(_, _, let audience, _, _, let frame) in publications {
                    let text = String(decoding: frame, as: UTF8.self)
                    let type = text.contains(#""type":"delivery.updated""#) ? "delivery.updated" : "other"
                    kept.append((type, audience, text))
                }
            }
        }
        func subscribe(_ receiver: @escaping @Sendable ([Publication]) -> Void) {}
    }

    @Test func authorsHearCountsOncePerFlushAndNobodyElseDoes() async throws {
        let bus = Recorder()
        let harness = try await ChatHarness.make(bus: bus) { $0.deliveryUpdateInterval = .seconds(3600) }  // flushed by hand
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ana, _) = try await harness.register("ana")
        let (bob, _) = try await harness.register("bob")
        let (channel, _) = try await chat.createConversation(ana, CreateConversationRequest(kind: .public, title: "lobby"))
        _ = try await chat.join(bob, id: channel.id)
        var readers: [Caller] = []
        for index in 0..<40 {
            let (reader, _) = try await harness.register("reader\(index)")
            _ = try await chat.join(reader, id: channel.id)
            readers.append(reader)
        }
        let (first, _) = try await chat.send(ana, to: channel.id, SendMessageRequest(clientID: "a1", content: .text("hello all")))
        let (second, _) = try await chat.send(bob, to: channel.id, SendMessageRequest(clientID: "b1", content: .text("hi ana")))
        let (third, _) = try await chat.send(ana, to: channel.id, SendMessageRequest(clientID: "a2", content: .text("welcome")))
        let newest = third.seq

        // 40 readers each get all three; 10 of them read them; bob reads to his own message only.
        for (index, reader) in readers.enumerated() {
            _ = try await chat.updateReceipt(reader, conversation: channel.id,
                                             ReceiptUpdate(deliveredSeq: newest, readSeq: index < 10 ? newest : nil))
        }
        _ = try await chat.updateReceipt(bob, conversation: channel.id, ReceiptUpdate(deliveredSeq: newest, readSeq: second.seq))
        #expect(bus.deliveries.isEmpty, "nothing is sent until the flush")
        #expect(try await chat.flushDeliveries() == 2, "one event per author, however many members moved")
        #expect(try await chat.flushDeliveries() == 0, "nothing moved since")

        let sent = bus.deliveries
        #expect(Set(sent.map(\.audience)) == [.users([ana.userKey]), .users([bob.userKey])], "each author's devices only")
        // Ana's: 41 recipients (bob and the readers); all 41 have both; 10 read the first, 10 the third… and bob read up to his own.
        let anaEvent = try #require(try await feed(chat, ana).first { $0.type == .deliveryUpdated })
        #expect(anaEvent.userID == ana.userID && anaEvent.seq == nil)
        let counts = try #require(anaEvent.deliveries)
        #expect(counts.map(\.messageID) == [first.id, third.id])
        #expect(counts.map(\.deliveredCount) == [41, 41] && counts.map(\.recipientCount) == [41, 41])
        #expect(counts.map(\.readCount) == [11, 10], "bob read up to his own message, past ana's first")
        #expect(counts.map(\.status) == [.delivered, .delivered])
        // The REST answers say the same (issue 33, item 9): history, one message, the list, the feed.
        func restStatus(_ id: MessageID) async throws -> DeliveryStatus? {
            try await chat.message(ana, conversation: channel.id, message: id).status
        }
        #expect(try await restStatus(first.id) == .delivered)
        #expect(try await restStatus(third.id) == .delivered)
        let page = try await chat.history(ana, id: channel.id, HistoryQuery()).page().messages
        #expect(page.filter { $0.sender.id == ana.userID }.map(\.status) == [.delivered, .delivered])
        #expect(page.first { $0.id == second.id }?.status == nil, "only one's own messages carry a status")
        #expect(try await chat.conversation(ana, id: channel.id).lastMessage?.status == .delivered)
        let created = try await feed(chat, ana).filter { $0.type == .messageCreated && $0.message?.sender.id == ana.userID }
        #expect(created.map(\.message?.status) == [.delivered, .delivered])
        let bobEvent = try #require(try await feed(chat, bob).first { $0.type == .deliveryUpdated })
        #expect(bobEvent.deliveries?.map(\.messageID) == [second.id])
        // Ana sent after it, which moved her own watermarks past it; bob's own marks do not count.
        #expect(bobEvent.deliveries?.first?.readCount == 11 && bobEvent.deliveries?.first?.deliveredCount == 41)
        #expect(bobEvent.deliveries?.first?.recipientCount == 41)
        // A reader's feed holds no one's delivery counts (nor others' receipts: decision 0009).
        #expect(try await feed(chat, readers[0]).allSatisfy { $0.type != .deliveryUpdated && $0.type != .receiptUpdated || $0.userID == readers[0].userID })

        // Everyone reads everything: the next flush says read.
        for reader in readers[10...] {
            _ = try await chat.updateReceipt(reader, conversation: channel.id, ReceiptUpdate(readSeq: newest))
        }
        _ = try await chat.updateReceipt(bob, conversation: channel.id, ReceiptUpdate(readSeq: newest))
        #expect(try await chat.flushDeliveries() == 2)
        let latest = try #require(try await feed(chat, ana).last { $0.type == .deliveryUpdated })
        #expect(latest.deliveries?.map(\.messageID) == [first.id, third.id] && latest.deliveries?.map(\.status) == [.read, .read])
        #expect(latest.deliveries?.map(\.readCount) == [41, 41])
        #expect(try await restStatus(first.id) == .read)
        #expect(try await restStatus(third.id) == .read)
    }

    @Test func groupsAndDirectChatsKeepTheirReceiptsAndGetNoCounts() async throws {
        let harness = try await ChatHarness.make { $0.deliveryUpdateInterval = .seconds(3600) }
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ana, _) = try await harness.register("ana")
        let (bob, _) = try await harness.register("bob")
        let (group, _) = try await chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob"]))
        let (message, _) = try await chat.send(ana, to: group.id, SendMessageRequest(clientID: "g1", content: .text("hi")))
        _ = try await chat.updateReceipt(bob, conversation: group.id, ReceiptUpdate(deliveredSeq: message.seq, readSeq: message.seq))
        #expect(try await chat.flushDeliveries() == 0, "a group's members hear each other's receipts: no counts needed")
        let anaFeed = try await feed(chat, ana)
        #expect(anaFeed.contains { $0.type == .receiptUpdated && $0.userID == bob.userID })
    }

    @Test func theCountRuleMatchesTheWatermarkRule() {
        // Every member has it: delivered; every member read it: read; else sent. No recipients: sent.
        #expect(DeliveryStatus.of(deliveredCount: 3, readCount: 2, recipients: 3) == .delivered)
        #expect(DeliveryStatus.of(deliveredCount: 3, readCount: 3, recipients: 3) == .read)
        #expect(DeliveryStatus.of(deliveredCount: 2, readCount: 2, recipients: 3) == .sent)
        #expect(DeliveryStatus.of(deliveredCount: 0, readCount: 0, recipients: 0) == .sent)
    }

    @Test func theCounterCountsWatermarksAtOrPastASeqAndCanLeaveOneOut() {
        let counter = DeliveryStatus.Counter([(delivered: 5, read: 3), (delivered: 9, read: 9), (delivered: 2, read: 0), (delivered: 5, read: 5)])
        #expect(counter.members == 4)
        #expect(counter.counts(at: 1) == (delivered: 4, read: 3))
        #expect(counter.counts(at: 5) == (delivered: 3, read: 2))
        #expect(counter.counts(at: 6) == (delivered: 1, read: 1))
        #expect(counter.counts(at: 10) == (delivered: 0, read: 0))
        // Leaving out one member's marks (an author's own) takes off only what they counted for.
        #expect(counter.counts(at: 5, excluding: (delivered: 9, read: 9)) == (delivered: 2, read: 1))
        #expect(counter.counts(at: 5, excluding: (delivered: 2, read: 0)) == (delivered: 3, read: 2))
        #expect(DeliveryStatus.Counter([(delivered: Int64, read: Int64)]()).counts(at: 1) == (delivered: 0, read: 0))
    }

    private func feed(_ chat: Chat, _ caller: Caller) async throws -> [ConversationEvent] {
        try await chat.feed(caller, after: chat.cursor(through: 0), limit: 200).records.map { try $0.event() }
    }
}
