import Foundation
package import ParleyChat
import ParleyCrypto
package import ParleyLog
import ParleyOutbound
import ParleyWire
import ParleySync

/// Webhook settings (`--webhook-*`, `--webhooks-allow-private`, `--outbound-ca-file`):
/// docs/webhooks.md.
package struct WebhookConfiguration: Sendable, Equatable {
    /// Whether receivers on loopback, private and link-local addresses may be reached.
    package var allowPrivate = false
    /// How long a delivery is retried before it is kept as failed (and its endpoint paused).
    package var retryWindow: Duration = .seconds(24 * 3600)
    /// The first retry's delay; each next one doubles, up to an hour.
    package var firstRetry: Duration = .seconds(5)
    /// Endpoints delivered to at once by this node (each one delivery at a time, in order).
    package var concurrency = 8
    /// A receiver that has not answered after this has failed the attempt.
    package var timeout: Duration = .seconds(10)
    /// An extra CA to trust for https receivers, besides the system's.
    package var outboundCAFile: String?
    /// The `User-Agent` deliveries carry.
    package var userAgent = "Parley-Webhooks"

    /// The defaults.
    package init() {}

    /// Attempts before a delivery is given up: as many as the backoff schedule fits into the
    /// retry window, plus the first.
    package var maxAttempts: Int {
        let window = retryWindow.inSeconds
        var delay = max(0.001, firstRetry.inSeconds)
        var total = 0.0
        var attempts = 1
        while total < window {
            total += min(delay, 3600)
            delay *= 2
            attempts += 1
        }
        return attempts
    }

    /// The delay before attempt `attempt + 1`: `firstRetry` doubled `attempt` times, at most an
    /// hour, between 0.8 and 1.2 times that.
    package func backoff(attempt: Int) -> Duration {
        let base = min(3600, firstRetry.inSeconds * pow(2, Double(min(attempt, 40))))
        return .milliseconds(Int(base * Double.random(in: 0.8...1.2) * 1000))
    }
}

/// Counts for `/metrics`.
package struct WebhookStatistics: Sendable {
    /// Deliveries a receiver took (2xx).
    package var delivered = 0
    /// Attempts that failed and will be tried again.
    package var retried = 0
    /// Deliveries given up on (their endpoint paused).
    package var failed = 0
    /// Zero counts.
    package init() {}
}

/// Delivers the webhook outbox: each of ``WebhookConfiguration/concurrency`` senders claims
/// one endpoint's lane at a time and posts its deliveries in order, on a connection of its
/// own, stopping at the first failure (which is retried with backoff while the rest wait).
/// Every node runs one; lanes are claimed (decision 0020), so an endpoint is delivered to by
/// one sender at a time across nodes. A slow or dead receiver holds up only its own lane.
package final class WebhookService: Sendable {
    private let chat: Chat
    private let configuration: WebhookConfiguration
    private let trust: TrustStore
    private let node = Crypto.randomID(prefix: "webhook_", length: 10)
    private let statistics = LockedValue(WebhookStatistics())
    private let tasks = LockedValue([Task<Void, Never>]())
    private let due: DueWatch
    private let log: Logger
    private let beforeSend: BeforeSendClient?

    /// Reads the extra CA; nothing is sent until ``start()``.
    ///
    /// - Throws: a message naming the file to fix.
    /// - Parameters:
    ///   - signal: the one the chat's ``WebhookHook`` signals after a write that added
    ///     deliveries commits (other nodes' deliveries are found within a second).
    ///   - logger: where retries, give-ups and the workers' own failures are logged.
    ///   - beforeSend: the before-send hooks' client, stopped with this service.
    /// Test mode: whether deliveries to an endpoint are made to fail (docs/test-mode.md).
    private let failing: @Sendable (String) -> Bool

    package init(chat: Chat, configuration: WebhookConfiguration, signal: WebhookSignal, beforeSend: BeforeSendClient? = nil,
                 failing: @escaping @Sendable (String) -> Bool = { _ in false }, logger: Logger = .discarding()) throws {
        self.chat = chat
        self.failing = failing
        self.beforeSend = beforeSend
        log = logger.labelled("parley.webhooks")
        self.configuration = configuration
        due = signal.watch
        do {
            trust = try TrustStore(extraFile: configuration.outboundCAFile)
        } catch let error as OutboundError {
            throw WebhookSetupError(description: error.description)
        }
    }

    /// Counts so far.
    package var currentStatistics: WebhookStatistics { statistics.withLock { $0 } }

    /// Starts delivering.
    package func start() {
        let started = (0..<max(1, configuration.concurrency)).map { index in Task { await self.sendLoop(index: index) } }
        tasks.withLock { $0 = started }
    }

    /// Stops (deliveries being sent are left to their lease).
    package func stop() {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        due.wakeAll()
        beforeSend?.stop()
    }

    private func sendLoop(index: Int) async {
        let holder = "\(node)/\(index)"
        let worker = chat.workers.register("webhooks/\(index)")
        defer { worker.stopped() }
        let queue = DispatchQueue(label: "parley.webhooks.\(index)")
        // A connection of its own: when one cannot be made (no file descriptors left), the
        // worker says so and tries again every second rather than stopping for good.
        var connection: OutboundHTTP?
        while connection == nil, !Task.isCancelled {
            connection = await log.attempt("webhook worker cannot open a connection; retrying", level: .error, metadata: ["worker": .integer(Int64(index))]) {
                try OutboundHTTP(trust: trust, timeout: configuration.timeout, policy: .webhooks(allowPrivate: configuration.allowPrivate))
            }
            if connection == nil { try? await Task.sleep(for: .seconds(1)) }
        }
        guard let http = connection else { return }
        let perLane = 100
        let lease = configuration.timeout + .seconds(5)
        while !Task.isCancelled {
            worker.idle()
            guard await waitForDue() else { continue }
            // The lease covers one attempt and is renewed at least every second: a node that dies
            // mid-lane holds its endpoint up for one timeout and five seconds at most.
            let batches = await log.attempt("cannot claim webhook deliveries") {
                try await chat.webhooks.claim(holder: holder, lanes: 1, perLane: perLane, lease: lease)
            } ?? []
            if batches.isEmpty {
                try? await Task.sleep(for: .milliseconds(50))
                continue
            }
            worker.busy()
            for batch in batches { await deliver(batch, holder: holder, http: http, queue: queue) }
            // The lane is free again: its rest, or its retry, is for the next read to find.
            due.readAgain()
        }
    }

    /// Posts a lane's deliveries in order until one fails. What was delivered is recorded in
    /// one write every second (or at the end): a write per delivery would make an endpoint's
    /// rate the database's commit rate. A worker that dies in between delivers those again
    /// (at least once).
    private func deliver(_ batch: WebhookBatch, holder: String, http: OutboundHTTP, queue: DispatchQueue) async {
        let lease = configuration.timeout + .seconds(5)
        var delivered: [WebhookMessage] = []
        var recorded = ContinuousClock.now
        func record() async {
            await log.attempt("cannot record webhook deliveries; they will be sent again") {
                try await chat.webhooks.delivered(delivered, lane: batch.lane, holder: holder, lease: lease)
            }
            delivered.removeAll()
            recorded = .now
        }
        for delivery in batch.deliveries {
            let request = Self.request(for: delivery, in: batch, userAgent: configuration.userAgent)
            // Test mode's fault: this endpoint's deliveries fail as a receiver answering 503 would.
            let result: Result<OutboundResponse, OutboundError> = failing(batch.endpointID)
                ? .success(OutboundResponse(status: 503, headers: [:], body: Array("test mode: made to fail".utf8)))
                : await queue.run {
                do { return .success(try http.post(batch.url, headers: request.headers, body: request.body)) } catch let error as OutboundError {
                    return .failure(error)
                } catch {
                    return .failure(OutboundError(description: "\(error)"))
                }
            }
            if case .failure(let error) = result, error.local {
                // Not the receiver's failure: no attempt is counted and no backoff grows, so the
                // delivery goes within a second of descriptors coming back.
                await record()
                log.warning("webhook delivery postponed: it could not be attempted", metadata: [
                    "webhook.id": .string(batch.endpointID), "delivery.id": .string(delivery.id), "reason": .string(error.description)])
                await log.attempt("cannot postpone a webhook delivery") {
                    try await chat.webhooks.postpone(delivery, lane: batch.lane, holder: holder, after: .seconds(1))
                }
                return
            }
            let problem: String? = switch result {
            case .success(let response) where (200...299).contains(response.status): nil
            case .success(let response): "HTTP \(response.status)"
            case .failure(let error): error.description
            }
            trace(delivery, endpoint: batch.endpointID, result: result, problem: problem)
            guard let problem else {
                statistics.withLock { $0.delivered += 1 }
                delivered.append(delivery)
                if ContinuousClock.now - recorded >= .seconds(1) { await record() }
                continue
            }
            await record()
            let retry = delivery.item.attempts + 1 < configuration.maxAttempts
            statistics.withLock { if retry { $0.retried += 1 } else { $0.failed += 1 } }
            let fields: LogMetadata = ["webhook.id": .string(batch.endpointID), "delivery.id": .string(delivery.id),
                                       "attempt": .integer(Int64(delivery.item.attempts + 1)), "reason": .string(problem)]
            if retry {
                log.info("webhook delivery failed; retrying later", metadata: fields)
            } else {
                log.warning("webhook delivery given up; endpoint paused until replayed", metadata: fields)
            }
            await log.attempt("cannot record a failed webhook delivery") {
                try await chat.webhooks.failed(delivery, lane: batch.lane, holder: holder, error: problem,
                                             after: retry ? configuration.backoff(attempt: delivery.item.attempts) : nil)
            }
            return
        }
        await record()
    }

    /// The trace's `webhook.attempt` step for a delivery of a logged event (docs/trace.md):
    /// a message's trace shows those of its own events (created, edited, reacted to …).
    private func trace(_ delivery: WebhookMessage, endpoint: String, result: Result<OutboundResponse, OutboundError>, problem: String?) {
        let recorder = chat.traceRecorder
        guard recorder.isOn, let position = delivery.eventPosition else { return }
        let status: Int? = if case .success(let response) = result { response.status } else { nil }
        let outcome = problem == nil ? "sent" : (delivery.item.attempts + 1 < configuration.maxAttempts ? "retry" : "failed")
        recorder.record(TraceRecorder.Row(position: position, step: "webhook.attempt", at: recorder.now(),
                                          detail: TraceRecorder.detail(status: status, reason: problem, outcome: outcome, endpoint: endpoint,
                                                                       event: delivery.type)))
    }

    /// The body and headers of one attempt: Parley's signed envelope, or Pusher's.
    static func request(for delivery: WebhookMessage, in batch: WebhookBatch, userAgent: String,
                        now: Date = Date()) -> (headers: [String], body: [UInt8]) {
        var headers = ["Content-Type: application/json", "User-Agent: \(userAgent)", "Expect:"]
        switch batch.format {
        case .parley:
            let body = delivery.body
            let timestamp = Int64(now.timeIntervalSince1970)
            headers += ["Parley-Webhook-Id: \(delivery.id)", "Parley-Webhook-Attempt: \(delivery.item.attempts + 1)",
                        "Parley-Signature: " + WebhookSignature.header(secret: batch.secret, timestamp: timestamp, body: body)]
            if let key = StandardWebhooks.key(secret: batch.secret) {
                headers += ["webhook-id: \(delivery.id)", "webhook-timestamp: \(timestamp)",
                            "webhook-signature: " + StandardWebhooks.signature(key: key, id: delivery.id, timestamp: timestamp, body: body)]
            }
            return (headers, body)
        case .pusher:
            let body = delivery.pusherBody(now: Int64(now.timeIntervalSince1970 * 1000))
            let signature = Crypto.hmacSHA256(key: Array((batch.appSecret ?? "").utf8), message: body).hexString
            headers += ["X-Pusher-Key: \(batch.appKey)", "X-Pusher-Signature: \(signature)", "Parley-Webhook-Id: \(delivery.id)"]
            return (headers, body)
        }
    }

    /// Returns once a lane's head is due, or after the next due time or 1 s, whichever is
    /// sooner (a write that adds deliveries wakes it sooner): true when one was due. The
    /// database is read once a second for all of this node's senders (``DueWatch``).
    private func waitForDue() async -> Bool {
        await due.waitForDue(now: { chat.now }) { [chat, log] in
            await log.attempt("cannot read when the next webhook delivery is due") { try await chat.webhooks.nextDue() } ?? nil
        }
    }

}

/// A webhook setting that cannot work (an unreadable CA file).
package struct WebhookSetupError: Error, Sendable, CustomStringConvertible {
    /// What to fix.
    package var description: String
}

/// `Parley-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`, and its
/// check as a receiver does it (docs/webhooks.md, "Verifying a delivery").
package enum WebhookSignature: Sendable {
    /// The header's value.
    package static func header(secret: String, timestamp: Int64, body: [UInt8]) -> String {
        "t=\(timestamp),v1=" + Crypto.hmacSHA256(key: Array(secret.utf8), message: Array("\(timestamp).".utf8) + body).hexString
    }

    /// Whether `header` signs `body` with `secret` within `tolerance` seconds of `now`.
    package static func verify(header: String, body: [UInt8], secret: String, now: Int64, tolerance: Int64 = 300) -> Bool {
        var timestamp: Int64?
        var signatures: [String] = []
        for part in header.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            if pair[0] == "t" { timestamp = Int64(pair[1]) } else if pair[0] == "v1" { signatures.append(String(pair[1])) }
        }
        guard let timestamp, abs(now - timestamp) <= tolerance else { return false }
        let expected = Array(Crypto.hmacSHA256(key: Array(secret.utf8), message: Array("\(timestamp).".utf8) + body).hexString.utf8)
        return signatures.contains { Crypto.constantTimeEqual(Array($0.utf8), expected) }
    }
}
