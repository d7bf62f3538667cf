import ParleySync

/// Whether the store takes writes, as the last write found it (issue 31, item 3): `/healthz`
/// says so, and `/metrics` counts what each failure was answered with.
package final class StorageHealth: Sendable {
    /// What the last write that failed for the store's sake met, until a write commits again.
    package enum Problem: String, Sendable {
        /// The disk (or quota) is full: writes are answered 507 `storage_full`.
        case full
        /// Another storage failure: writes are answered 500 `internal_error` or 503.
        case failing
    }

    private let problem = LockedValue<Problem?>(nil)

    package init() {}

    /// Nil while writes commit.
    package var current: Problem? { problem.get() }

    /// A write failed for the store's sake.
    func failed(_ kind: Problem) { problem.set(kind) }

    /// A write committed: whatever was wrong has passed.
    func committed() {
        problem.withLock { if $0 != nil { $0 = nil } }
    }
}
