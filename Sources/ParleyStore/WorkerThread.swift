import Foundation
import ParleySync

/// Threads that take jobs from one queue, each with its own context (a connection).
/// A thread takes up to `maxBatch` queued jobs at once and hands them to `work` together.
package final class WorkerThread<Job: AnyObject & Sendable>: @unchecked Sendable {
    // @unchecked: `queue`, `head`, `riders`, `stopped` and `running` are read and written only while `condition` is locked; `maxBatch` is constant.
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var head = 0
    /// Jobs that go with the next batch taken for another job, or alone at their deadline.
    private var riders: [(job: Job, deadline: Date)] = []
    private var stopped = false
    private var running = 0
    private let maxBatch: Int

    package init<Context>(name: String, contexts: [Context], maxBatch: Int, work: @escaping @Sendable (Context, [Job]) -> Void) {
        self.maxBatch = maxBatch
        running = contexts.count
        for (index, context) in contexts.enumerated() {
            let unchecked = UncheckedBox(context)
            let thread = Thread { [self] in
                while let jobs = take() { work(unchecked.value, jobs) }
                condition.withLock {
                    running -= 1
                    condition.broadcast()
                }
            }
            thread.name = contexts.count == 1 ? name : "\(name)-\(index)"
            thread.start()
        }
    }

    /// Queues a job; false once stopped.
    package func enqueue(_ job: Job) -> Bool {
        condition.withLock {
            guard !stopped else { return false }
            queue.append(job)
            condition.signal()
            return true
        }
    }

    /// Queues a job that need not make a batch of its own: it goes with the next batch a thread
    /// takes for another job, or alone once `within` has passed (so a write that can wait a
    /// little shares another's transaction and commit). False once stopped.
    package func enqueue(_ job: Job, ridingWithin within: Duration) -> Bool {
        let deadline = Date(timeIntervalSinceNow: max(0, within.inSeconds))
        return condition.withLock {
            guard !stopped else { return false }
            riders.append((job, deadline))
            // A thread waiting for work must learn the new deadline.
            condition.signal()
            return true
        }
    }

    /// How many jobs wait in the queue (not riders), for tests that must know a batch is formed.
    package var queuedCount: Int { condition.withLock { queue.count - head } }

    /// Finishes the queued jobs, then stops every thread and waits for them.
    package func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
            while running > 0 { condition.wait() }
        }
    }

    /// The next batch: up to `maxBatch` queued jobs and every rider after them; or the riders
    /// alone once the first of their deadlines has passed (or the threads are stopping).
    private func take() -> [Job]? {
        condition.withLock {
            while head == queue.count {
                if let first = riders.lazy.map({ $0.deadline }).min() {
                    if stopped || first.timeIntervalSinceNow <= 0 { return takeRiders() }
                    _ = condition.wait(until: first)
                } else {
                    if stopped { return nil }
                    condition.wait()
                }
            }
            let end = min(queue.count, head + maxBatch)
            let jobs = Array(queue[head..<end])
            head = end
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            return riders.isEmpty ? jobs : jobs + takeRiders()
        }
    }

    /// Every rider, oldest first; called with `condition` locked.
    private func takeRiders() -> [Job] {
        guard !riders.isEmpty else { return [] }
        defer { riders.removeAll(keepingCapacity: true) }
        return riders.map { $0.job }
    }
}

private struct UncheckedBox<T>: @unchecked Sendable {
    // @unchecked: carries one thread's context (a connection) to that thread at its start; no other thread uses it afterwards.
    let value: T
    init(_ value: T) { self.value = value }
}
