#if canImport(Glibc)
import Glibc
#endif
import CParleyLinux
import Synchronization
import ParleySync

/// Something registered with an event loop for readiness events on one file descriptor.
///
/// Called only on the owning loop's thread.
protocol Selectable: AnyObject {
    /// `events` is the `epoll_event.events` mask (EPOLLIN, EPOLLOUT, EPOLLHUP, ...).
    func handleEvent(_ events: UInt32)
}

/// A cancellable timer scheduled on an ``EventLoop``.
public struct ScheduledTimer: Hashable, Sendable {
    let id: UInt64
}

/// One epoll loop, owned by exactly one thread.
///
/// ```
///  other threads ──execute()──▶ inbox ──eventfd──┐
///                                                ▼
///  sockets ──readiness──▶ epoll_wait ──▶ handlers ──▶ timers ──▶ inbox jobs ──▶ (repeat)
/// ```
///
/// State that belongs to the loop (registered descriptors, timers) is never locked: it is
/// touched only on the loop thread, which ``preconditionInEventLoop(file:line:)`` asserts.
/// Other threads hand work in through ``execute(_:)``, which wakes `epoll_wait` through an
/// eventfd once per batch. The loop is also a `SerialExecutor` (actors may pin themselves to
/// it) and offers a `TaskExecutor` so async handlers run on the loop thread without hops.
public final class EventLoop: @unchecked Sendable {
    // @unchecked: `handlers`, `timerHeap`, `timerActions` and `nextTimerID` are touched only on
    // the loop thread (asserted in debug); `inbox` is guarded by its lock; `thread` and
    // `stopping` are atomics; `epollFD`/`wakeFD` are immutable after init.
    private enum Work: Sendable {
        case closure(@Sendable () -> Void)
        case serialJob(UnownedJob)
        case taskJob(UnownedJob)
    }

    /// The loop's index within its group; useful in logs and metrics labels.
    public let index: Int
    private let epollFD: CInt
    private let wakeFD: CInt
    private let inbox = LockedValue<[Work]>([])
    private let thread = Atomic<UInt>(0)
    private let stopping = Atomic<Bool>(false)
    private var handlers: [CInt: any Selectable] = [:]
    private var timerHeap = TimerHeap()
    private var timerActions: [UInt64: () -> Void] = [:]
    private var nextTimerID: UInt64 = 1
    /// Connections with queued bytes to write before the loop next sleeps (coalesced writes).
    private var pendingFlushes: [Connection] = []
    /// Latest measured scheduling delay of a 100 ms heartbeat timer, in nanoseconds.
    private let lagNanos = Atomic<UInt64>(0)
    /// One reusable read buffer per loop: every connection on this loop reads into it.
    let readScratch: UnsafeMutableRawBufferPointer
    private var taskExecutorStorage: EventLoopTaskExecutor?

    /// Creates a loop; call ``run()`` on the thread that will own it (or use ``EventLoopGroup``).
    public init(index: Int = 0) throws {
        self.index = index
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw IOError.current("epoll_create1") }
        let wake = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard wake >= 0 else {
            close(epoll)
            throw IOError.current("eventfd")
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wake
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &event) == 0 else {
            close(epoll)
            close(wake)
            throw IOError.current("epoll_ctl")
        }
        epollFD = epoll
        wakeFD = wake
        readScratch = .allocate(byteCount: 64 * 1024, alignment: 16)
        taskExecutorStorage = EventLoopTaskExecutor(loop: self)
    }

    deinit {
        close(wakeFD)
        close(epollFD)
        readScratch.deallocate()
    }

    /// True when called on this loop's thread.
    public var inEventLoop: Bool { thread.load(ordering: .acquiring) == UInt(bitPattern: Int(bitPattern: pthread_self())) }

    /// True once ``run()`` has recorded its thread.
    var threadRecorded: Bool { thread.load(ordering: .acquiring) != 0 }

    /// Traps unless called on this loop's thread.
    @inline(__always)
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "not on event loop \(index)'s thread", file: file, line: line)
    }

    /// The loop's current monotonic time in nanoseconds.
    public var now: UInt64 { monotonicNanoseconds() }

    /// The latest measured event-loop lag: how late a 100 ms heartbeat timer fired.
    public var lag: Duration { .nanoseconds(Int64(lagNanos.load(ordering: .relaxed))) }

    /// A `TaskExecutor` that runs tasks on this loop's thread.
    public var taskExecutor: EventLoopTaskExecutor {
        // Always set in init; the optional exists only because `self` is not available earlier.
        taskExecutorStorage ?? EventLoopTaskExecutor(loop: self)
    }

    // MARK: - Descriptors (loop thread only)

    func register(_ fd: CInt, interest: UInt32, handler: any Selectable) throws(IOError) {
        preconditionInEventLoop()
        var event = epoll_event()
        event.events = interest
        event.data.fd = fd
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0 else { throw IOError.current("epoll_ctl(ADD)") }
        handlers[fd] = handler
    }

    func reregister(_ fd: CInt, interest: UInt32) {
        preconditionInEventLoop()
        var event = epoll_event()
        event.events = interest
        event.data.fd = fd
        _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    func deregister(_ fd: CInt) {
        preconditionInEventLoop()
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
        handlers[fd] = nil
    }

    // MARK: - Timers (loop thread only)

    /// Runs `action` on the loop after `delay`. Loop thread only.
    @discardableResult
    public func schedule(after delay: Duration, _ action: @escaping () -> Void) -> ScheduledTimer {
        preconditionInEventLoop()
        let (seconds, attos) = delay.components
        let nanos = max(0, seconds) * 1_000_000_000 + max(0, attos / 1_000_000_000)
        let id = nextTimerID
        nextTimerID += 1
        timerActions[id] = action
        timerHeap.push(deadline: now &+ UInt64(nanos), id: id)
        return ScheduledTimer(id: id)
    }

    /// Cancels a timer; harmless if it already fired. Loop thread only.
    public func cancel(_ timer: ScheduledTimer) {
        preconditionInEventLoop()
        timerActions[timer.id] = nil
    }

    // MARK: - Coalesced writes (loop thread only)

    /// Flushes `connection` once before the loop next waits, however many writes it gets
    /// meanwhile: a broadcast of 32 messages becomes one `writev` per socket, not 32.
    func flushBeforeSleeping(_ connection: Connection) {
        preconditionInEventLoop()
        pendingFlushes.append(connection)
    }

    private func runPendingFlushes() {
        while !pendingFlushes.isEmpty {
            let connections = pendingFlushes
            pendingFlushes.removeAll(keepingCapacity: true)
            for connection in connections { connection.flushPending() }
        }
    }

    // MARK: - Cross-thread entry

    /// Runs `work` on the loop thread, soon. Safe from any thread.
    public func execute(_ work: @escaping @Sendable () -> Void) { push(.closure(work)) }

    private func push(_ work: Work) {
        let wasEmpty = inbox.withLock { queue in
            queue.append(work)
            return queue.count == 1
        }
        if wasEmpty, !inEventLoop { _ = eventfd_write(wakeFD, 1) }
    }

    /// Asks the loop to return from ``run()`` after its current iteration. Safe from any thread.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        _ = eventfd_write(wakeFD, 1)
    }

    // MARK: - Running

    /// Runs the loop on the calling thread until ``stop()``.
    public func run() {
        thread.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .releasing)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        scheduleLagProbe()
        while !stopping.load(ordering: .acquiring) {
            let timeout = nextTimeoutMilliseconds()
            let count = events.withUnsafeMutableBufferPointer { buffer in
                epoll_wait(epollFD, buffer.baseAddress, CInt(buffer.count), timeout)
            }
            if count < 0 {
                if errno == EINTR { continue }
                fatalError("epoll_wait failed: \(IOError.current("epoll_wait"))")
            }
            for i in 0..<Int(count) {
                let fd = events[i].data.fd
                if fd == wakeFD {
                    var value: eventfd_t = 0
                    _ = eventfd_read(wakeFD, &value)
                } else if let handler = handlers[fd] {
                    handler.handleEvent(events[i].events)
                }
            }
            runDueTimers()
            runInbox()
            runPendingFlushes()
        }
        runInbox()
        runPendingFlushes()
    }

    private func nextTimeoutMilliseconds() -> CInt {
        if inbox.withLock({ !$0.isEmpty }) { return 0 }
        guard let deadline = timerHeap.peekDeadline() else { return -1 }
        let current = now
        if deadline <= current { return 0 }
        // Round up so a timer never fires early.
        return CInt(min(60_000, (deadline - current + 999_999) / 1_000_000))
    }

    private func runDueTimers() {
        let current = now
        while let deadline = timerHeap.peekDeadline(), deadline <= current {
            let id = timerHeap.pop()
            if let action = timerActions.removeValue(forKey: id) { action() }
        }
    }

    private func runInbox() {
        // Bounded passes so a task that re-enqueues itself cannot starve I/O.
        for _ in 0..<4 {
            let work = inbox.withLock { queue -> [Work] in
                defer { queue.removeAll(keepingCapacity: true) }
                return queue
            }
            if work.isEmpty { return }
            for item in work {
                switch item {
                case .closure(let closure): closure()
                case .serialJob(let job):
                    job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
                case .taskJob(let job):
                    job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }
        }
    }

    private func scheduleLagProbe() {
        let interval: UInt64 = 100_000_000
        let expected = now &+ interval
        schedule(after: .nanoseconds(Int64(interval))) { [unowned self] in
            let late = now > expected ? now - expected : 0
            lagNanos.store(late, ordering: .relaxed)
            scheduleLagProbe()
        }
    }

    fileprivate func pushTaskJob(_ job: UnownedJob) { push(.taskJob(job)) }
}

// MARK: - Swift concurrency

extension EventLoop: SerialExecutor {
    public func enqueue(_ job: consuming ExecutorJob) { push(.serialJob(UnownedJob(job))) }
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
    public func checkIsolated() { precondition(inEventLoop, "not on event loop \(index)'s thread") }

    /// The loop's task executor, unowned.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor { taskExecutor.asUnownedTaskExecutor() }
}

/// Runs tasks on an ``EventLoop``'s thread: `Task(executorPreference: loop.taskExecutor) { … }`.
///
/// A separate object from the loop so that the loop can tell task jobs from actor jobs: both
/// protocols name their entry point `enqueue(_:)`.
public final class EventLoopTaskExecutor: TaskExecutor {
    /// The loop owns its task executor; `unowned` avoids a cycle.
    public unowned let loop: EventLoop

    init(loop: EventLoop) { self.loop = loop }

    public func enqueue(_ job: consuming ExecutorJob) { loop.pushTaskJob(UnownedJob(job)) }
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor { UnownedTaskExecutor(ordinary: self) }
}

// MARK: - Timer heap

/// A binary min-heap of (deadline, id). Cancelled timers stay in the heap and are skipped
/// when popped (their action is gone), which keeps cancel O(1).
struct TimerHeap {
    private var items: [(deadline: UInt64, id: UInt64)] = []

    var isEmpty: Bool { items.isEmpty }

    func peekDeadline() -> UInt64? { items.first?.deadline }

    mutating func push(deadline: UInt64, id: UInt64) {
        items.append((deadline, id))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].deadline < items[parent].deadline else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the id with the earliest deadline. The heap must not be empty.
    mutating func pop() -> UInt64 {
        let top = items[0].id
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < items.count, items[left].deadline < items[smallest].deadline { smallest = left }
                if right < items.count, items[right].deadline < items[smallest].deadline { smallest = right }
                if smallest == parent { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}
