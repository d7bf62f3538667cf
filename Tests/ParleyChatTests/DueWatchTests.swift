import Foundation
@testable import ParleyChat
import ParleySync
import ParleyTesting
import Testing

/// The watch an outbox's workers wait on (push, webhooks): how often it asks the database,
/// and that a write's hint wakes a waiter at once without ever being taken for a due row.
@Suite struct DueWatchTests {
    /// What the database says, and how many times it was asked.
    private final class FakeOutbox: Sendable {
        let due = LockedValue<Date?>(nil)
        let reads = LockedValue(0)

        func read() -> Date? {
            reads.withLock { $0 += 1 }
            return due.get()
        }
    }

    @Test func eightWaitersShareOneRead() async throws {
        // Eight webhook senders on an idle node asked once a second each: now once for all.
        // Each asks once; whoever started after the read trusts it for the rest of its second.
        let watch = DueWatch(poll: .seconds(1))
        let outbox = FakeOutbox()
        try await withTimeout(10) {
            await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 {
                    group.addTask { await watch.waitForDue(now: { Date() }) { outbox.read() } }
                }
                for await due in group { #expect(!due, "nothing is due") }
            }
        }
        #expect(outbox.reads.get() == 1)
    }

    @Test func aHintWakesASleeperAndIsReadNotClaimed() async throws {
        let watch = DueWatch(poll: .seconds(60))
        let outbox = FakeOutbox()
        let waiting = Task { await watch.waitForDue(now: { Date() }) { outbox.read() } }
        while outbox.reads.get() == 0 { await Task.yield() }
        // A write that may have added a row (a push row is written only when someone has a
        // device): the sleeper wakes now, not after its minute …
        watch.noteDue(Date())
        let woke = try await withTimeout(10) { await waiting.value }
        #expect(!woke)
        // … and the database says whether anything is due: here nothing, so no claim.
        let looking = Task { await watch.waitForDue(now: { Date() }) { outbox.read() } }
        while outbox.reads.get() < 2 { await Task.yield() }
        watch.wakeAll()
        #expect(try await withTimeout(10) { await looking.value } == false)
        #expect(outbox.reads.get() == 2)
    }

    @Test func aRowFoundDueIsClaimedAndTheNextLookReadsAgain() async throws {
        let watch = DueWatch(poll: .seconds(60))
        let outbox = FakeOutbox()
        outbox.due.set(Date().addingTimeInterval(-1))
        let due = try await withTimeout(10) { await watch.waitForDue(now: { Date() }) { outbox.read() } }
        #expect(due)
        // The claim changed what is due: the next look does not trust the read before it.
        outbox.due.set(nil)
        let waiting = Task { await watch.waitForDue(now: { Date() }) { outbox.read() } }
        while outbox.reads.get() < 2 { await Task.yield() }
        watch.wakeAll()
        #expect(try await withTimeout(10) { await waiting.value } == false)
    }

    @Test func aHintLaterThanOnePendingChangesNothing() async throws {
        let watch = DueWatch(poll: .seconds(60))
        let start = Date()
        watch.noteDue(start.addingTimeInterval(30))
        // Pushes fall due a second after their message: under load every write hints a later
        // time than the one pending, and none of them wakes anyone or asks for a read.
        for offset in 31...40 { watch.noteDue(start.addingTimeInterval(Double(offset))) }
        #expect(watch.pendingLook == start.addingTimeInterval(30))
        watch.noteDue(start.addingTimeInterval(5))
        #expect(watch.pendingLook == start.addingTimeInterval(5))
    }

    @Test func readAgainMakesTheNextLookRead() async throws {
        let watch = DueWatch(poll: .seconds(60))
        let outbox = FakeOutbox()
        let first = Task { await watch.waitForDue(now: { Date() }) { outbox.read() } }
        while outbox.reads.get() == 0 { await Task.yield() }
        watch.wakeAll()
        _ = try await withTimeout(10) { await first.value }
        // A claim ended with its row rescheduled (a retry): found by the next look, not in a minute.
        outbox.due.set(Date().addingTimeInterval(-1))
        watch.readAgain()
        #expect(try await withTimeout(10) { await watch.waitForDue(now: { Date() }) { outbox.read() } })
        #expect(outbox.reads.get() == 2)
    }

    @Test func aCancelledWaiterReturnsAtOnce() async throws {
        // A worker stopped while it sleeps (the push finisher, a sender waiting for rows)
        // ends now, not when its wait would have: stopping a node waits for its workers.
        let wakeup = Wakeup()
        let waiting = Task { await wakeup.wait(upTo: .seconds(60)) }
        waiting.cancel()
        try await withTimeout(10) { await waiting.value }
        let listening = Task { await wakeup.wait(upTo: .seconds(60)) }
        await Task.yield()
        listening.cancel()
        try await withTimeout(10) { await listening.value }
    }

    @Test func aWaitWhoseConditionAlreadyHoldsDoesNotSleep() async throws {
        // What the push finisher relies on: a row done between its look and its wait is not
        // missed for a minute.
        let wakeup = Wakeup()
        try await withTimeout(10) { await wakeup.wait(upTo: .seconds(60)) { true } }
    }
}
