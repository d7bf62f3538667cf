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
        #expect(tracker.receipt(ana, delivered: 1, read: 0, in: room).isEmpty, "bob has not got it")
        #expect(tracker.receipt(bob, delivered: 1, read: 0, in: room).map(\.status) == [.delivered])
        #expect(tracker.receipt(bob, delivered: 1, read: 0, in: room).isEmpty, "told once")
        #expect(tracker.receipt(ana, delivered: 1, read: 1, in: room).isEmpty, "bob has not read it")
        #expect(tracker.left(bob, in: room).map(\.status) == [.read], "read by everyone who is still there")
        #expect(tracker.receipt(ana, delivered: 2, read: 2, in: room).isEmpty, "a read message is forgotten")
    }
}
