#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import ParleySync

/// A fixed set of ``EventLoop``s, one thread each.
public final class EventLoopGroup: Sendable {
    /// The loops, in index order.
    public let loops: [EventLoop]
    private let threads: LockedValue<[pthread_t]>
    private let cursor = Atomic<Int>(0)

    /// Starts `count` loops on their own threads. Default: one per core.
    public init(loopCount count: Int = EventLoopGroup.coreCount) throws {
        precondition(count > 0, "an event loop group needs at least one loop")
        var loops: [EventLoop] = []
        for index in 0..<count { loops.append(try EventLoop(index: index)) }
        self.loops = loops
        var threads: [pthread_t] = []
        for loop in loops { threads.append(try Self.startThread(for: loop)) }
        self.threads = LockedValue(threads)
    }

    /// Number of online processors.
    public static var coreCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The next loop in round-robin order: how new connections are spread.
    public func next() -> EventLoop {
        loops[cursor.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Stops every loop and waits for its thread to finish.
    public func shutdown() {
        for loop in loops { loop.stop() }
        let threads = self.threads.withLock { threads in
            defer { threads.removeAll() }
            return threads
        }
        for thread in threads { pthread_join(thread, nil) }
    }

    private final class ThreadStart {
        let loop: EventLoop
        init(loop: EventLoop) { self.loop = loop }
    }

    private static func startThread(for loop: EventLoop) throws -> pthread_t {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(ThreadStart(loop: loop)).toOpaque()
        let rc = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            let start = Unmanaged<ThreadStart>.fromOpaque(raw).takeRetainedValue()
            start.loop.run()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<ThreadStart>.fromOpaque(context).release()
            throw IOError(code: rc, call: "pthread_create")
        }
        while !loop.threadRecorded { sched_yield() }
        return thread
    }
}
