import Foundation
import ParleyStore
import ParleySync
import Testing

/// The writer's queue and its riders (decision 0026, part 3): a job that may wait goes with the
/// next batch taken for another job, alone at its deadline, and never outlives the threads.
struct WorkerThreadTests {
    final class Job: Sendable {
        let name: String
        init(_ name: String) { self.name = name }
    }

    /// A thread whose batches are recorded by name; `batch(_:)` waits for the next one.
    final class Recorder: Sendable {
        private let batches = LockedValue<[[String]]>([])
        private let arrived = DispatchSemaphore(value: 0)
        let thread: WorkerThread<Job>

        init() {
            let batches = batches, arrived = arrived
            thread = WorkerThread(name: "test-writer", contexts: [()], maxBatch: 8) { _, jobs in
                batches.withLock { $0.append(jobs.map(\.name)) }
                arrived.signal()
            }
        }

        /// The next batch the thread took, or nil if none came within `timeout`.
        func batch(within timeout: Duration = .seconds(10)) -> [String]? {
            let seconds = Double(timeout.components.seconds)
            guard arrived.wait(timeout: .now() + seconds) == .success else { return nil }
            return batches.withLock { $0.removeFirst() }
        }
    }

    @Test func aRiderGoesWithTheNextJobInOneBatch() {
        let recorder = Recorder()
        defer { recorder.thread.stop() }
        #expect(recorder.thread.enqueue(Job("rider"), ridingWithin: .seconds(60)))
        #expect(recorder.thread.enqueue(Job("send")))
        #expect(recorder.batch() == ["send", "rider"], "the rider went with the send, after it")
    }

    @Test func aRiderAloneGoesAtItsDeadline() {
        let recorder = Recorder()
        defer { recorder.thread.stop() }
        let started = ContinuousClock.now
        #expect(recorder.thread.enqueue(Job("rider"), ridingWithin: .milliseconds(30)))
        #expect(recorder.batch() == ["rider"])
        #expect(ContinuousClock.now - started >= .milliseconds(30), "it waited for a batch to ride first")
    }

    @Test func stoppingRunsAWaitingRiderAtOnceThenRefusesNewJobs() {
        let recorder = Recorder()
        let started = ContinuousClock.now
        #expect(recorder.thread.enqueue(Job("rider"), ridingWithin: .seconds(60)))
        recorder.thread.stop()
        #expect(ContinuousClock.now - started < .seconds(30), "stop did not wait out the rider's minute")
        #expect(recorder.batch(within: .zero) == ["rider"], "the rider ran before the thread stopped")
        #expect(!recorder.thread.enqueue(Job("late")))
        #expect(!recorder.thread.enqueue(Job("late rider"), ridingWithin: .seconds(1)))
    }
}
