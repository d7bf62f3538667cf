import Foundation

/// Threads that take jobs from one queue, each with its own context (a connection).
/// A thread takes up to `maxBatch` queued jobs at once and hands them to `work` together.
package final class WorkerThread<Job: AnyObject & Sendable>: @unchecked Sendable {
    // @unchecked: `queue`, `head`, `stopped` and `running` are read and written only while `condition` is locked; `maxBatch` is constant.
    private let condition = NSCondition()
    private var queue: [Job] = []
    private var head = 0
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

    /// Finishes the queued jobs, then stops every thread and waits for them.
    package func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
            while running > 0 { condition.wait() }
        }
    }

    private func take() -> [Job]? {
        condition.withLock {
            while head == queue.count {
                if stopped { return nil }
                condition.wait()
            }
            let end = min(queue.count, head + maxBatch)
            let jobs = Array(queue[head..<end])
            head = end
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            return jobs
        }
    }
}

private struct UncheckedBox<T>: @unchecked Sendable {
    // @unchecked: carries one thread's context (a connection) to that thread at its start; no other thread uses it afterwards.
    let value: T
    init(_ value: T) { self.value = value }
}
