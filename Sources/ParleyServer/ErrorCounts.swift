import ParleyStore
import ParleySync
import ParleyWire

/// Every error the server answered, by its code and by the way it went out (`/metrics`:
/// `parley_errors_total{code, via}`), so an operator sees a full disk or a wave of refusals
/// as it happens, not in the clients' complaints.
final class ErrorCounts: Sendable {
    /// The process's counts (like `NetMetrics.shared`: one per process, every server in it).
    static let shared = ErrorCounts()

    /// The way an error answer went out.
    enum Via: String, Sendable, CaseIterable {
        /// An HTTP response.
        case rest
        /// A realtime `error` frame.
        case realtime
    }

    private struct Key: Hashable {
        var code: String
        var via: Via
    }

    private let counts = LockedValue([Key: Int]())

    /// Counts one answer of `error`.
    func count(_ error: ChatError, via: Via) {
        counts.withLock { $0[Key(code: error.code, via: via), default: 0] += 1 }
    }

    /// Every count so far, by code then way.
    var snapshot: [(code: String, via: Via, count: Int)] {
        counts.get().map { ($0.key.code, $0.key.via, $0.value) }.sorted { ($0.code, $0.via.rawValue) < ($1.code, $1.via.rawValue) }
    }
}

extension ChatError {
    /// What a failure is answered with: a domain error as it is, a full disk as
    /// `storage_full`, anything else as `internal_error` (nothing of its cause goes out).
    static func answering(_ error: any Error) -> ChatError {
        switch error {
        case let error as ChatError: error
        case StoreError.full: .storageFull
        default: .internalError
        }
    }
}
