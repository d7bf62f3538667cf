import Testing
@testable import ParleyNet

/// A burst pushed from other threads costs one scheduled drain and arrives whole, in order.
@Suite struct LoopInboxTests {
    @Test func oneScheduleABurstInOrderThenScheduleAgain() {
        let inbox = LoopInbox<Int>()
        #expect(inbox.push(1))
        #expect(!inbox.push(2))
        #expect(!inbox.push(3))
        #expect(inbox.take() == [1, 2, 3])
        #expect(inbox.take().isEmpty)
        #expect(inbox.push(4), "after a take, the next push schedules a drain again")
        #expect(inbox.take() == [4])
    }

    @Test func concurrentPushesAreNeitherLostNorScheduledTwiceUntilTaken() async {
        let inbox = LoopInbox<Int>()
        let schedules = await withTaskGroup(of: Int.self) { group in
            for writer in 0..<8 {
                group.addTask { (0..<1_000).reduce(0) { count, index in count + (inbox.push(writer * 1_000 + index) ? 1 : 0) } }
            }
            return await group.reduce(0, +)
        }
        #expect(schedules == 1)
        let items = inbox.take()
        #expect(items.count == 8_000 && Set(items).count == 8_000)
    }
}
