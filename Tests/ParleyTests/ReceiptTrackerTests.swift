import Foundation
@testable import Parley
import ParleyWire
import ParleyTesting
import Testing

/// The SDK's outgoing statuses follow the same rule as the server and the web client.
struct ReceiptTrackerTests {
    @Test func theTrackerReachesTheSharedCasesStatus() throws {
        let room = ConversationID(rawValue: "c_1")
        for item in try DeliveryStatusCase.load() {
            var tracker = ReceiptTracker()
            // As the client knows them: every member first (track, member.added), then receipts.
            for index in item.others.indices { tracker.joined(UserID(rawValue: "u_\(index)"), in: room) }
            var last = tracker.sent("mine", seq: item.seq, in: room).last?.status
            for (index, marks) in item.others.enumerated() {
                let updates = tracker.receipt(UserID(rawValue: "u_\(index)"), delivered: marks.delivered, read: marks.read, in: room)
                last = updates.last?.status ?? last
            }
            // "Delivered to some" is the shared rule's "sent" with counts: not everyone has it.
            if last == .deliveredToSome { last = nil }
            let expected: ParleyClient.OutgoingStatus? = switch item.status {
            case "delivered": .delivered
            case "read": .read
            default: nil
            }
            #expect(last == expected, "seq \(item.seq) with \(item.others.map { ($0.delivered, $0.read) })")
        }
    }

    @Test func eachStepIsToldOnceAndALeaverNoLongerHoldsItBack() {
        var tracker = ReceiptTracker()
        let room = ConversationID(rawValue: "c_1")
        let ana = UserID(rawValue: "u_ana"), bob = UserID(rawValue: "u_bob")
        tracker.joined(ana, in: room)
        tracker.joined(bob, in: room)
        #expect(tracker.sent("m1", seq: 1, in: room).isEmpty)
        let some = tracker.receipt(ana, delivered: 1, read: 0, in: room)
        #expect(some.map(\.status) == [.deliveredToSome], "bob has not got it")
        #expect(some.first?.progress == ParleyClient.DeliveryProgress(delivered: 1, read: 0, recipients: 2))
        #expect(tracker.receipt(bob, delivered: 1, read: 0, in: room).map(\.status) == [.delivered])
        #expect(tracker.receipt(bob, delivered: 1, read: 0, in: room).isEmpty, "told once")
        let readByOne = tracker.receipt(ana, delivered: 1, read: 1, in: room)
        #expect(readByOne.map(\.status) == [.delivered], "bob has not read it")
        #expect(readByOne.first?.progress == ParleyClient.DeliveryProgress(delivered: 2, read: 1, recipients: 2))
        #expect(tracker.left(bob, in: room).map(\.status) == [.read], "read by everyone who is still there")
        #expect(tracker.receipt(ana, delivered: 2, read: 2, in: room).isEmpty, "a read message is forgotten")
    }

    @Test func aDirectChatHasNoCountsAndNoSome() {
        var tracker = ReceiptTracker()
        let room = ConversationID(rawValue: "c_2")
        let bob = UserID(rawValue: "u_bob")
        tracker.joined(bob, in: room)
        _ = tracker.sent("m1", seq: 1, in: room)
        let delivered = tracker.receipt(bob, delivered: 1, read: 0, in: room)
        #expect(delivered.map(\.status) == [.delivered] && delivered.first?.progress == nil)
    }

    @Test func channelCountsFromTheServerMoveTheStatus() {
        var tracker = ReceiptTracker()
        let room = ConversationID(rawValue: "c_3")
        _ = tracker.sent("m1", seq: 4, in: room)
        _ = tracker.sent("m2", seq: 5, in: room)
        func delivery(_ seq: Int64, _ delivered: Int, _ read: Int, of recipients: Int) -> MessageDelivery {
            MessageDelivery(messageID: MessageID(rawValue: "m_\(seq)"), seq: seq, deliveredCount: delivered, readCount: read,
                            recipientCount: recipients, status: .of(deliveredCount: delivered, readCount: read, recipients: recipients))
        }
        #expect(tracker.deliveries([delivery(4, 0, 0, of: 3)], in: room).isEmpty, "nobody has it yet: still sent")
        let first = tracker.deliveries([delivery(4, 2, 1, of: 3), delivery(5, 1, 0, of: 3)], in: room)
        #expect(first.map(\.clientID) == ["m1", "m2"] && first.map(\.status) == [.deliveredToSome, .deliveredToSome])
        #expect(first.first?.progress == ParleyClient.DeliveryProgress(delivered: 2, read: 1, recipients: 3))
        #expect(tracker.deliveries([delivery(4, 2, 1, of: 3)], in: room).isEmpty, "the same counts: nothing new")
        #expect(tracker.deliveries([delivery(4, 3, 3, of: 3)], in: room).map(\.status) == [.read])
        #expect(tracker.deliveries([delivery(4, 3, 3, of: 3)], in: room).isEmpty, "a read message is forgotten")
        #expect(tracker.deliveries([delivery(99, 3, 3, of: 3)], in: room).isEmpty, "not one of this client's")
    }

    @Test func aReplyCountsAsItsSenderHavingReadEverythingBeforeIt() {
        var tracker = ReceiptTracker()
        let room = ConversationID(rawValue: "c_1")
        let ben = UserID(rawValue: "u_ben"), chloe = UserID(rawValue: "u_chloe"), stranger = UserID(rawValue: "u_x")
        tracker.joined(ben, in: room)
        tracker.joined(chloe, in: room)
        #expect(tracker.sent("m1", seq: 4, in: room).isEmpty)
        #expect(tracker.posted(ben, seq: 5, in: room).map(\.status) == [.deliveredToSome], "ben answered: he has it; chloe has not")
        #expect(tracker.posted(stranger, seq: 6, in: room).isEmpty, "someone the tracker does not know counts for nothing")
        #expect(tracker.posted(chloe, seq: 6, in: room).map(\.status) == [.read])
        #expect(tracker.posted(chloe, seq: 7, in: room).isEmpty, "told once")
    }
}
