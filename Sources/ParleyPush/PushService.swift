import Foundation
package import ParleyChat
import ParleyCrypto
package import ParleyLog
import ParleyOutbound
import ParleyWire
import ParleySync

/// Push settings (`--apns-*`, `--fcm-*`, `--outbound-ca-file`, `--push-*`): docs/push.md.
package struct PushConfiguration: Sendable, Equatable {
    /// The `.p8` key, its id and the team id; with ``apnsTopic``, APNs is on.
    package var apnsKeyFile: String?
    /// The key's id (10 characters, from the developer account).
    package var apnsKeyID: String?
    /// The team id (10 characters).
    package var apnsTeamID: String?
    /// The app's bundle id (`apns-topic`).
    package var apnsTopic: String?
    /// Replaces both APNs hosts (tests, gateways): `https://host:port`.
    package var apnsURL: String?
    /// A Google service account JSON file; FCM is on with it.
    package var fcmCredentialsFile: String?
    /// Replaces FCM's send endpoint (tests, gateways).
    package var fcmURL: String?
    /// An extra CA to trust for outbound TLS, besides the system's.
    package var outboundCAFile: String?
    /// How long a connected device has to confirm delivery before its member is pushed anyway.
    package var confirmationWindow: Duration = .seconds(1)
    /// Notices in flight at once per provider, multiplexed as HTTP/2 streams on at most
    /// ``connections`` connections.
    package var concurrency = 100
    /// Connections per provider host (each carries up to 100 streams, or what the provider allows).
    package var connections = 4
    /// Attempts before a notice is given up (429, 5xx, no answer), with backoff and jitter.
    package var maxAttempts = 6
    /// A request with no answer after this is abandoned (and retried).
    package var requestTimeout: Duration = .seconds(10)

    /// The defaults: push off.
    package init() {}

    /// Whether any provider is set.
    package var isOn: Bool { apnsKeyFile != nil || fcmCredentialsFile != nil }

    /// The problem with a half-given APNs or FCM setting, as a message that says what to add.
    package var problem: String? {
        let apns = [apnsKeyFile, apnsKeyID, apnsTeamID, apnsTopic]
        if apns.contains(where: { $0 != nil }) && apns.contains(where: { $0 == nil }) {
            return "APNs needs --apns-key-file, --apns-key-id, --apns-team-id and --apns-topic together"
        }
        if apnsURL != nil && apnsKeyFile == nil { return "--apns-url needs the APNs key options" }
        if fcmURL != nil && fcmCredentialsFile == nil { return "--fcm-url needs --fcm-credentials-file" }
        for url in [apnsURL, fcmURL].compactMap({ $0 }) where !url.hasPrefix("https://") {
            return "\(url) is not an https:// URL (push goes over TLS only)"
        }
        return nil
    }
}

/// Counts per provider for `/metrics`.
package struct PushStatistics: Sendable {
    /// Notices the provider accepted.
    package var sent = 0
    /// Attempts that will be tried again (429, 5xx, no answer).
    package var retried = 0
    /// Notices given up on (refused for good, or out of attempts).
    package var failed = 0
    /// Devices removed because the provider said their token is dead.
    package var devicesRemoved = 0

    /// Zero counts.
    package init() {}
}

/// Sends the push outbox: turns each new message's row into one row per device to push
/// (``Chat/expandPush(_:holder:)``), then sends those through APNs and FCM, each provider with
/// up to ``PushConfiguration/concurrency`` notices in flight as HTTP/2 streams on a few shared
/// connections (``OutboundMultiplexer``). Each notice is settled on its own as its answer
/// comes, so a slow answer holds up nothing but itself. Every node runs one; rows are claimed
/// (decision 0018), so a row is sent by one node, and a node that dies mid-send leaves its
/// rows to be claimed again when their lease ends. A slow or dead provider only fills its own
/// outbox: sending messages never waits for it.
package final class PushService: Sendable {
    private let chat: Chat
    private let configuration: PushConfiguration
    private let providers: [any PushProvider]
    private let trust: TrustStore
    private let node = Crypto.randomID(prefix: "push_", length: 10)
    private let statistics = LockedValue([String: PushStatistics]())
    private let tasks = LockedValue([Task<Void, Never>]())
    private let multiplexers: [any PushTransport]
    /// When the per-message rows fall due: told by the chat's ``PushOutboxHook`` as each
    /// message commits, read once a second besides (decision 0026: an idle node sleeps).
    private let messagesDue: DueWatch
    /// When each provider's rows fall due (by outbox kind): told by the expander as it writes them.
    private let noticesDue: [String: DueWatch]
    /// Wakes a finisher when its first row is done.
    private let finished = Wakeup()
    private let log: Logger

    /// Reads the keys and credentials; nothing is sent until ``start()``.
    ///
    /// - Parameter logger: where retries, give-ups, removed devices and the workers' own
    ///   failures are logged (never a key or a device token).
    /// - Throws: a message naming the file or option to fix.
    package init(chat: Chat, configuration: PushConfiguration, testPushes: TestPushes? = nil, logger: Logger = .discarding()) throws {
        if let problem = configuration.problem { throw OutboundError(description: problem) }
        self.chat = chat
        log = logger.labelled("parley.push")
        self.configuration = configuration
        messagesDue = chat.pushRowsDue ?? DueWatch()
        trust = try TrustStore(extraFile: configuration.outboundCAFile)
        var providers: [any PushProvider] = []
        if let keyFile = configuration.apnsKeyFile, let keyID = configuration.apnsKeyID, let team = configuration.apnsTeamID,
           let topic = configuration.apnsTopic {
            providers.append(try APNsProvider(keyFile: keyFile, keyID: keyID, teamID: team, topic: topic, url: configuration.apnsURL))
        }
        if let file = configuration.fcmCredentialsFile {
            providers.append(try FCMProvider(credentialsFile: file, url: configuration.fcmURL))
        }
        if let testPushes, providers.isEmpty {
            // Test mode with no real provider: the built-in fakes answer (docs/test-mode.md).
            self.providers = [APNsProvider(testTopic: configuration.apnsTopic ?? "com.example.app"), FCMProvider(testProject: "parley-test")]
            multiplexers = [testPushes, testPushes]
            noticesDue = Self.watches(for: self.providers)
            return
        }
        self.providers = providers
        noticesDue = Self.watches(for: providers)
        let trust = trust
        multiplexers = try providers.map { _ in
            try OutboundMultiplexer(trust: trust, timeout: configuration.requestTimeout, policy: .push, connections: configuration.connections)
        }
    }

    /// A watch per provider's outbox kind.
    private static func watches(for providers: [any PushProvider]) -> [String: DueWatch] {
        Dictionary(uniqueKeysWithValues: providers.map { ("push-" + $0.name, DueWatch()) })
    }

    /// Pushing to test mode's built-in fakes, not to Apple and Google.
    package var isTestMode: Bool { multiplexers.first is TestPushes }

    /// The providers this node pushes through (`apns`, `fcm`).
    package var providerNames: [String] { providers.map(\.name) }

    /// Counts per provider so far.
    package var currentStatistics: [String: PushStatistics] { statistics.withLock { $0 } }

    /// Starts expanding and sending.
    package func start() {
        var started = [Task { await self.expandLoop() }]
        for (provider, http) in zip(providers, multiplexers) {
            started.append(Task { await self.sendLoop(provider, over: http) })
        }
        tasks.withLock { $0 = started }
    }

    /// Stops (rows being sent are left to their lease).
    package func stop() {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        messagesDue.wakeAll()
        for watch in noticesDue.values { watch.wakeAll() }
        finished.signal()
        for http in multiplexers { http.stop() }
    }

    // MARK: - Expanding

    private func expandLoop() async {
        let holder = node + "/expand"
        let worker = chat.workers.register("push/expand")
        defer { worker.stopped() }
        while !Task.isCancelled {
            worker.idle()
            guard await waitForDueRows(PushOutboxHook.kind, messagesDue) else { continue }
            worker.busy()
            let rows = await log.attempt("cannot claim messages to push") {
                try await chat.claimOutbox(kind: PushOutboxHook.kind, holder: holder, limit: 100, lease: .seconds(60))
            } ?? []
            let made = rows.isEmpty ? 0 : await log.attempt("cannot expand messages into pushes") { try await chat.notifications.expand(rows, holder: holder) } ?? 0
            if made > 0 {
                let now = chat.now
                for watch in noticesDue.values { watch.noteDue(now) }
            }
            // Seen due but taken by another node first: wait for more rather than ask again at once.
            if rows.isEmpty { try? await Task.sleep(for: .milliseconds(50)) }
        }
    }

    /// Returns once a row of `kind` is due (true), or after its next due time, a hint that
    /// rows were written (``DueWatch/noteDue(_:)``) or a second, whichever is sooner (false).
    /// One read at most each time, never a claim, so idle workers never take the write lock.
    private func waitForDueRows(_ kind: String, _ watch: DueWatch) async -> Bool {
        await watch.waitForDue(now: { chat.now }) { [chat, log] in
            await log.attempt("cannot read when the next push is due") { try await chat.nextOutboxDue(kind: kind) } ?? nil
        }
    }

    // MARK: - Sending

    /// What a sender's task group hears: a notice settled, or whether rows fell due.
    private enum Step: Sendable {
        case settled
        case due(Bool)
    }

    /// Keeps up to ``PushConfiguration/concurrency`` notices of one provider in flight: claims
    /// due rows while there is room, sends each on its own stream and settles it when its
    /// answer comes. Rows done are removed in batches by a finisher (one write for many).
    private func sendLoop(_ provider: any PushProvider, over http: any PushTransport) async {
        let kind = "push-" + provider.name
        let holder = "\(node)/\(provider.name)"
        let watch = noticesDue[kind] ?? DueWatch()
        let window = max(1, configuration.concurrency)
        let done = LockedValue([Int64]())
        let finisher = Task { await self.finishLoop(done, holder: holder) }
        let worker = chat.workers.register("push/\(provider.name)")
        defer { worker.stopped() }
        await withTaskGroup(of: Step.self) { group in
            var inFlight = 0
            var looking = false
            var claimedNothing = false
            while !Task.isCancelled {
                // Idle while only waiting for rows; busy while notices are in flight.
                if inFlight == 0 { worker.idle() } else { worker.busy() }
                if inFlight < window && !looking {
                    looking = true
                    let pause = claimedNothing
                    group.addTask {
                        // Rows seen due but taken by another node first: wait for more rather than ask again at once.
                        if pause { try? await Task.sleep(for: .milliseconds(50)) }
                        return .due(await self.waitForDueRows(kind, watch))
                    }
                }
                guard let step = await group.next() else { continue }
                switch step {
                case .settled:
                    inFlight -= 1
                case .due(let due):
                    looking = false
                    guard due else { continue }
                    let rows = await log.attempt("cannot claim pushes to send", metadata: ["provider": .string(provider.name)]) {
                        try await chat.claimOutbox(kind: kind, holder: holder, limit: min(window - inFlight, 100),
                                                   lease: configuration.requestTimeout * 20)
                    } ?? []
                    claimedNothing = rows.isEmpty
                    for row in rows {
                        inFlight += 1
                        group.addTask {
                            await self.deliver(row, provider, over: http, holder: holder, done: done, watch: watch)
                            return .settled
                        }
                    }
                }
            }
            group.cancelAll()
        }
        finisher.cancel()
        await finisher.value
    }

    /// Sends one notice and settles it; a row done goes to `done` for the finisher.
    private func deliver(_ row: OutboxItem, _ provider: any PushProvider, over http: any PushTransport, holder: String,
                         done: LockedValue<[Int64]>, watch: DueWatch) async {
        let notice: PushNotice
        do {
            notice = try JSONDecoder().decode(PushNotice.self, from: Data(row.payload))
        } catch {
            log.failed("a stored push cannot be read; dropped", error, level: .error, metadata: ["outbox.id": .integer(row.id)])
            finish(row.id, in: done)
            return
        }
        let started = Date()
        var attempt = await provider.send(notice, over: http)
        if case .renewCredentials = attempt.outcome {
            // Credentials made since this request started are already new: renewed once, not per stream.
            provider.renewCredentials(madeBefore: started)
            attempt = await provider.send(notice, over: http)
            if case .renewCredentials(let why) = attempt.outcome { attempt.outcome = .failed("credentials refused after renewing: \(why)") }
        }
        trace(attempt, notice, row: row, provider: provider.name)
        if await settle(row, notice, attempt.outcome, provider: provider.name, holder: holder) {
            finish(row.id, in: done)
        } else {
            watch.readAgain()  // tried again later: when is for the next read to find
        }
    }

    /// A row done, for the finisher; the first wakes it.
    private func finish(_ id: Int64, in done: LockedValue<[Int64]>) {
        let first = done.withLock { rows in
            rows.append(id)
            return rows.count == 1
        }
        if first { finished.signal() }
    }

    /// Removes the rows done (sent, given up, device removed) in one write 50 ms after the
    /// first of them, and once more when stopped; asleep while none is done.
    private func finishLoop(_ done: LockedValue<[Int64]>, holder: String) async {
        while true {
            if !Task.isCancelled {
                await finished.wait(upTo: .seconds(10)) { done.withLock { !$0.isEmpty } }
            }
            let stopping = Task.isCancelled
            if !stopping { try? await Task.sleep(for: .milliseconds(50)) }
            let ids = done.withLock { rows in
                defer { rows.removeAll() }
                return rows
            }
            if !ids.isEmpty { await log.attempt("cannot remove pushes sent; they may be sent again") { try await chat.finishOutbox(ids, holder: holder) } }
            if stopping { return }
        }
    }

    /// The trace's `push.attempt` step (and `push.removed` when the token was dead): what the
    /// provider answered, for `GET /v1/server/messages/{id}/trace` (docs/trace.md).
    private func trace(_ attempt: PushAttempt, _ notice: PushNotice, row: OutboxItem, provider: String) {
        let recorder = chat.traceRecorder
        guard recorder.isOn else { return }
        let (outcome, reason): (String?, String?) = switch attempt.outcome {
        case .sent: ("sent", nil)
        case .removeDevice(let why): ("removed", why)
        case .retry(let why): (row.attempts + 1 < configuration.maxAttempts ? "retry" : "failed", why)
        case .failed(let why), .renewCredentials(let why): ("failed", why)
        case .postpone: (nil, nil)  // not attempted: nothing to trace
        }
        guard let outcome else { return }
        let at = recorder.now()
        var rows = [TraceRecorder.Row(position: notice.position, step: "push.attempt", user: nil, device: notice.deviceID, at: at,
                                      detail: TraceRecorder.detail(platform: provider, status: attempt.status, reason: reason,
                                                                   providerID: attempt.providerID, outcome: outcome))]
        if outcome == "removed" {
            rows.append(TraceRecorder.Row(position: notice.position, step: "push.removed", device: notice.deviceID, at: at,
                                          detail: TraceRecorder.detail(platform: provider, reason: reason)))
        }
        recorder.record(rows)
    }

    /// Counts the outcome and deals with the device; true when the row is done (to remove),
    /// false when it was put back to try again.
    private func settle(_ row: OutboxItem, _ notice: PushNotice, _ outcome: PushOutcome, provider: String, holder: String) async -> Bool {
        switch outcome {
        case .sent:
            count(provider) { $0.sent += 1 }
            chat.sendToDelivered.observe(provider, sentAt: notice.sentAt)
        case .removeDevice:
            await log.attempt("cannot remove a dead device") { try await chat.notifications.removeDeadDevice(id: notice.deviceID) }
            log.info("device removed: the provider said its token is dead", metadata: ["provider": .string(provider), "device.id": .string(notice.deviceID)])
            count(provider) { $0.devicesRemoved += 1 }
        case .postpone(let why):
            log.warning("push postponed: it could not be attempted", metadata: ["provider": .string(provider), "reason": .string(why)])
            await log.attempt("cannot put a push back to retry") { try await chat.postponeOutbox(row.id, holder: holder, after: .seconds(1)) }
            return false
        case .retry(let why) where row.attempts + 1 < configuration.maxAttempts:
            count(provider) { $0.retried += 1 }
            log.info("push failed; retrying later", metadata: ["provider": .string(provider), "attempt": .integer(Int64(row.attempts + 1)),
                                                                "reason": .string(why)])
            await log.attempt("cannot put a push back to retry") {
                try await chat.retryOutbox(row.id, holder: holder, after: Self.backoff(attempt: row.attempts))
            }
            return false
        case .retry(let why), .failed(let why), .renewCredentials(let why):
            count(provider) { $0.failed += 1 }
            log.warning("push given up", metadata: ["provider": .string(provider), "attempt": .integer(Int64(row.attempts + 1)),
                                                    "reason": .string(why)])
        }
        return true
    }

    /// 1 s, 2 s, 4 s, … up to 5 minutes, each between half and one and a half times that.
    static func backoff(attempt: Int) -> Duration {
        let base = min(300.0, pow(2.0, Double(attempt)))
        return .milliseconds(Int(base * Double.random(in: 0.5...1.5) * 1000))
    }

    private func count(_ provider: String, _ change: (inout PushStatistics) -> Void) {
        statistics.withLock { change(&$0[provider, default: PushStatistics()]) }
    }

}
