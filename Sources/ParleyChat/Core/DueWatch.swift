package import Foundation
import ParleySync

/// When the next row of an outbox falls due, for the workers that claim its rows (the push
/// expander and senders, the webhook senders). An idle node used to ask the database several
/// times a second, once per worker (issue 29: an idle server's wake-ups are paid by every
/// message it later carries); now the database is asked at most once per ``poll`` for every
/// worker of the watch together, and the writes that add rows tell the watch when they fall
/// due (``noteDue(_:)``), so a worker neither polls nor sleeps past a row's time.
///
/// The read every ``poll`` is still needed: other nodes' rows, retries rescheduled by a
/// claim, leases run out. Times are the chat's clock (test mode moves it).
package final class DueWatch: Sendable {
    private struct State {
        /// The earliest due time the last read found; nil: none.
        var next: Date?
        /// When that read was made; nil: read again before trusting `next`.
        var readAt: ContinuousClock.Instant?
        /// The earliest time a committed write said a row may fall due, since the last read
        /// began: the database is read again then (the write may have added nothing: a push
        /// row is written only when someone has a device, so a hint is never a claim).
        var lookAt: Date?
        /// One waiter is reading; the others wait for its answer.
        var reading = false
        /// Counts the changes a waiter wakes for (a sooner hint, a read done): one made
        /// between a waiter's look and its wait ends the wait at once.
        var changes: UInt64 = 0
    }

    private let state = LockedValue(State())
    private let wakeup = Wakeup()
    /// How long a read is trusted, and so the longest a waiter sleeps.
    package let poll: Duration

    /// A watch that reads at most once per `poll`, besides the reads its hints ask for.
    package init(poll: Duration = .seconds(1)) {
        self.poll = poll
    }

    /// A write committed rows that may fall due at `due`: the watch reads the database then,
    /// and a waiter that would sleep past it wakes now to wait for it instead. Costs a lock
    /// when an earlier hint is pending.
    package func noteDue(_ due: Date) {
        let sooner = state.withLock { state -> Bool in
            if let lookAt = state.lookAt, lookAt <= due { return false }
            state.lookAt = due
            state.changes &+= 1
            return true
        }
        if sooner { wakeup.signal() }
    }

    /// The earliest hint not read yet (for tests).
    var pendingLook: Date? { state.withLock { $0.lookAt } }

    /// Wakes every waiter now, and any about to wait (the workers are stopping).
    package func wakeAll() {
        state.withLock { $0.changes &+= 1 }
        wakeup.signal()
    }

    /// The next waiter reads the database: a claim ended, and what it held (the rest of a
    /// lane, a retry) may be due now though the last read found nothing.
    package func readAgain() {
        state.withLock { $0.readAt = nil }
    }

    /// Returns true when a row is due (the caller claims; the watch reads again next time),
    /// or false after waiting for the next row's time, a hint's, or ``poll`` at most (the
    /// caller asks again). `read` is the database's answer (nil: none, or it could not be
    /// read: asked again after ``poll``); one waiter reads for all.
    package func waitForDue(now: () -> Date, read: @Sendable () async -> Date?) async -> Bool {
        enum Step { case known(Date?, fresh: Duration), read, waitForReader }
        let current = now()
        let (step, seen) = state.withLock { state -> (Step, UInt64) in
            if let at = state.readAt, state.lookAt.map({ $0 > current }) ?? true {
                let age = ContinuousClock.now - at
                if age < poll { return (.known(state.next, fresh: poll - age), state.changes) }
            }
            if state.reading { return (.waitForReader, state.changes) }
            state.reading = true
            // Hints from here on are writes this read may not see: they stay.
            state.lookAt = nil
            return (.read, state.changes)
        }
        var last = seen
        let next: Date?
        var wait = poll
        switch step {
        case .known(let known, let fresh):
            (next, wait) = (known, fresh)
        case .waitForReader:
            await wakeup.wait(upTo: poll) { self.state.withLock { $0.changes != seen } }
            return false
        case .read:
            let found = await read()
            (next, last) = state.withLock { state in
                state.reading = false
                state.readAt = .now
                state.next = found
                state.changes &+= 1
                return (found, state.changes)
            }
            wakeup.signal()  // those waiting for this read
        }
        let later = now()
        if let next, next <= later {
            // Claimed from here: what is due next is for the database to say.
            state.withLock { $0.readAt = nil }
            return true
        }
        let lookAt = state.withLock { $0.lookAt }
        for time in [next, lookAt].compactMap({ $0 }) {
            wait = min(wait, .milliseconds(Int64((time.timeIntervalSince(later) * 1000).rounded(.up))))
        }
        if wait <= .zero { return false }
        await wakeup.wait(upTo: wait) { self.state.withLock { $0.changes != last } }
        return false
    }
}
