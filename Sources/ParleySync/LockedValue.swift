#if canImport(Glibc)
public import Glibc
#endif

/// A value guarded by a lock: the one lock type of the package (docs/decisions/0024), as NIO
/// keeps `NIOLockedValueBox` in one place.
///
/// A pthread mutex rather than `Synchronization.Mutex`, whose futex-based locking is invisible
/// to ThreadSanitizer on Linux and produces false race reports (PLATFORM.md §4), and rather
/// than `NSLock`, so the lowest modules need no Foundation.
public final class LockedValue<Value>: @unchecked Sendable {
    // @unchecked: `value` is only read or written between pthread_mutex_lock and _unlock, and
    // the mutex itself is allocated once and never moves.
    //
    // @usableFromInline and @inlinable: every module locks through this type, and a generic
    // method another module cannot see is called unspecialized, looking up metadata and
    // boxing the closure on each call (the event loop's inbox takes this lock per task).
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    /// Wraps `value`.
    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    @inlinable
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

extension LockedValue where Value: Sendable {
    /// The value now.
    @inlinable
    public func get() -> Value { withLock { $0 } }

    /// Replaces the value.
    @inlinable
    public func set(_ new: Value) { withLock { $0 = new } }
}
