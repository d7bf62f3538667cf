import ParleySync

/// The background workers of a node (webhook senders, push expanders and senders), each
/// beating as it goes round, so that one that stops going round shows in `/metrics` and in the
/// log (issue 31, item 1) instead of leaving deliveries waiting in silence.
package final class Workers: Sendable {
    /// What a worker is doing, as it last said.
    package enum State: String, Sendable, CaseIterable {
        /// Waiting for work; it goes round at least every second or so.
        case idle
        /// Sending or recording: as long as its remote end takes.
        case busy
        /// Its loop ended (the node is stopping, or something went wrong).
        case stopped
    }

    /// One worker's beat.
    package final class Worker: Sendable {
        /// The worker's name, e.g. `webhooks/3` or `push/apns`.
        package let name: String
        private let state = LockedValue((state: State.idle, since: ContinuousClock.now))

        init(name: String) { self.name = name }

        /// Waiting for work (or going round again).
        package func idle() { state.set((.idle, .now)) }
        /// Working on something that may take the remote end's time.
        package func busy() { state.set((.busy, .now)) }
        /// Its loop ended.
        package func stopped() { state.set((.stopped, .now)) }

        /// Its state and how long since it last said so.
        package var status: (state: State, quiet: Duration) {
            let (state, since) = state.get()
            return (state, ContinuousClock.now - since)
        }
    }

    private let workers = LockedValue([Worker]())

    package init() {}

    /// A new worker's beat, listed from now on.
    package func register(_ name: String) -> Worker {
        let worker = Worker(name: name)
        workers.withLock { $0.append(worker) }
        return worker
    }

    /// Every worker, by name.
    package var all: [Worker] { workers.get().sorted { $0.name < $1.name } }

    /// Workers that said they were idle longer ago than `limit`: an idle worker goes round at
    /// least every second or two, so one this quiet is stuck.
    package func stalled(after limit: Duration) -> [(name: String, quiet: Duration)] {
        all.compactMap { worker in
            let status = worker.status
            return status.state == .idle && status.quiet > limit ? (worker.name, status.quiet) : nil
        }
    }
}
