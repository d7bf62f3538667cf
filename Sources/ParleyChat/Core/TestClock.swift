package import Foundation
import Synchronization

/// The server's clock in test mode (`parley-server --test-mode`, docs/test-mode.md): the wall
/// clock plus what the test moved it by (`POST /v1/test/clock`). Every timed rule reads the
/// chat's clock, so moving this one expires bans and mutes, ends slow mode, sends scheduled
/// messages, lets pushes fall due and ages sessions. Outside test mode the offset is 0 and
/// nothing moves it.
package enum TestClock {
    private static let offsetMilliseconds = Atomic<Int64>(0)

    /// Milliseconds the clock is ahead of the wall clock.
    package static var offset: Int64 { offsetMilliseconds.load(ordering: .relaxed) }

    /// Moves the clock forward by `milliseconds` (never back); returns the new offset.
    @discardableResult
    package static func advance(byMilliseconds milliseconds: Int64) -> Int64 {
        offsetMilliseconds.add(max(0, milliseconds), ordering: .relaxed).newValue
    }

    /// Puts the clock back on the wall clock (test mode's reset).
    package static func reset() { offsetMilliseconds.store(0, ordering: .relaxed) }

    /// Now, by this clock.
    package static func now() -> Date {
        let offset = self.offset
        return offset == 0 ? Date() : Date().addingTimeInterval(Double(offset) / 1000)
    }
}

extension Chat {
    /// Now, by the chat's clock (the test clock in test mode): what timed waits compare with.
    package var now: Date { configuration.now() }
}
