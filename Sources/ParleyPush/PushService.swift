import Foundation
public import ParleyChat
import ParleyCrypto
import ParleyOutbound
import ParleyWire

/// Push settings (`--apns-*`, `--fcm-*`, `--outbound-ca-file`, `--push-*`): docs/push.md.
public struct PushConfiguration: Sendable, Equatable {
    /// The `.p8` key, its id and the team id; with ``apnsTopic``, APNs is on.
    public var apnsKeyFile: String?
    /// The key's id (10 characters, from the developer account).
    public var apnsKeyID: String?
    /// The team id (10 characters).
    public var apnsTeamID: String?
    /// The app's bundle id (`apns-topic`).
    public var apnsTopic: String?
    /// Replaces both APNs hosts (tests, gateways): `https://host:port`.
    public var apnsURL: String?
    /// A Google service account JSON file; FCM is on with it.
    public var fcmCredentialsFile: String?
    /// Replaces FCM's send endpoint (tests, gateways).
    public var fcmURL: String?
    /// An extra CA to trust for outbound TLS, besides the system's.
    public var outboundCAFile: String?
    /// How long a connected device has to confirm delivery before its member is pushed anyway.
    public var confirmationWindow: Duration = .seconds(1)
    /// Requests in flight at once per provider (each on its own HTTP/2 connection).
    public var concurrency = 8
    /// Attempts before a notice is given up (429, 5xx, no answer), with backoff and jitter.
    public var maxAttempts = 6
    /// A request with no answer after this is abandoned (and retried).
    public var requestTimeout: Duration = .seconds(10)

    /// The defaults: push off.
    public init() {}

    /// Whether any provider is set.
    public var isOn: Bool { apnsKeyFile != nil || fcmCredentialsFile != nil }

    /// The problem with a half-given APNs or FCM setting, as a message that says what to add.
    public var problem: String? {
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
public struct PushStatistics: Sendable {
    /// Notices the provider accepted.
    public var sent = 0
    /// Attempts that will be tried again (429, 5xx, no answer).
    public var retried = 0
    /// Notices given up on (refused for good, or out of attempts).
    public var failed = 0
    /// Devices removed because the provider said their token is dead.
    public var devicesRemoved = 0

    /// Zero counts.
    public init() {}
}

/// Sends the push outbox: turns each new message's row into one row per device to push
/// (``Chat/expandPush(_:holder:)``), then sends those through APNs and FCM, each provider with
/// ``PushConfiguration/concurrency`` senders on their own HTTP/2 connections. Every node runs
/// one; rows are claimed (decision 0018), so a row is sent by one node, and a node that dies
/// mid-send leaves its rows to be claimed again when their lease ends. A slow or dead provider
/// only fills its own outbox: sending messages never waits for it.
public final class PushService: Sendable {
    private let chat: Chat
    private let configuration: PushConfiguration
    private let providers: [any PushProvider]
    private let trust: TrustStore
    private let node = Crypto.randomID(prefix: "push_", length: 10)
    private let statistics = LockedValue([String: PushStatistics]())
    private let tasks = LockedValue([Task<Void, Never>]())
    private let wake = Wakeup()

    /// Reads the keys and credentials; nothing is sent until ``start()``.
    ///
    /// - Throws: a message naming the file or option to fix.
    public init(chat: Chat, configuration: PushConfiguration) throws {
        if let problem = configuration.problem { throw OutboundError(description: problem) }
        self.chat = chat
        self.configuration = configuration
        trust = try TrustStore(extraFile: configuration.outboundCAFile)
        var providers: [any PushProvider] = []
        if let keyFile = configuration.apnsKeyFile, let keyID = configuration.apnsKeyID, let team = configuration.apnsTeamID,
           let topic = configuration.apnsTopic {
            providers.append(try APNsProvider(keyFile: keyFile, keyID: keyID, teamID: team, topic: topic, url: configuration.apnsURL))
        }
        if let file = configuration.fcmCredentialsFile {
            providers.append(try FCMProvider(credentialsFile: file, url: configuration.fcmURL))
        }
        self.providers = providers
    }

    /// The providers this node pushes through (`apns`, `fcm`).
    public var providerNames: [String] { providers.map(\.name) }

    /// Counts per provider so far.
    public var currentStatistics: [String: PushStatistics] { statistics.withLock { $0 } }

    /// Starts expanding and sending.
    public func start() {
        var started = [Task { await self.expandLoop() }]
        for provider in providers {
            for index in 0..<max(1, configuration.concurrency) {
                started.append(Task { await self.sendLoop(provider, index: index) })
            }
        }
        tasks.withLock { $0 = started }
    }

    /// Stops (rows being sent are left to their lease).
    public func stop() {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        wake.signal()
    }

    // MARK: - Expanding

    private func expandLoop() async {
        let holder = node + "/expand"
        while !Task.isCancelled {
            guard await waitForDueRows(PushOutboxHook.kind) else { continue }
            let rows = (try? await chat.claimOutbox(kind: PushOutboxHook.kind, holder: holder, limit: 100, lease: .seconds(60))) ?? []
            let made = rows.isEmpty ? 0 : ((try? await chat.expandPush(rows, holder: holder)) ?? 0)
            if made > 0 { wake.signal() }
            if rows.isEmpty { await wake.wait(upTo: .milliseconds(50)) }
        }
    }

    /// Returns once a row of `kind` is due, or after its next due time or 200 ms, whichever is
    /// sooner (a row another node's message wrote is found within that): true when one was due.
    /// One read each time, never a claim, so idle workers never take the write lock.
    private func waitForDueRows(_ kind: String) async -> Bool {
        var wait = Duration.milliseconds(200)
        if let next = try? await chat.nextOutboxDue(kind: kind) {
            let seconds = next.timeIntervalSinceNow
            if seconds <= 0 { return true }
            wait = min(wait, .milliseconds(Int(seconds * 1000) + 1))
        }
        await wake.wait(upTo: wait)
        return false
    }

    // MARK: - Sending

    private func sendLoop(_ provider: any PushProvider, index: Int) async {
        let kind = "push-" + provider.name
        let holder = "\(node)/\(provider.name)/\(index)"
        let queue = DispatchQueue(label: "parley.push.\(provider.name).\(index)")
        guard let http = try? OutboundHTTP(trust: trust, timeout: configuration.requestTimeout) else { return }
        while !Task.isCancelled {
            guard await waitForDueRows(kind) else { continue }
            let rows = (try? await chat.claimOutbox(kind: kind, holder: holder, limit: 16, lease: configuration.requestTimeout * 20)) ?? []
            if rows.isEmpty {
                // Another sender took them first: wait for more rather than ask again at once.
                await wake.wait(upTo: .milliseconds(50))
                continue
            }
            var done: [Int64] = []
            for row in rows {
                guard let notice = try? JSONDecoder().decode(PushNotice.self, from: Data(row.payload)) else {
                    done.append(row.id)
                    continue
                }
                var outcome = await queue.run { provider.send(notice, over: http) }
                if case .renewCredentials = outcome {
                    provider.renewCredentials()
                    outcome = await queue.run { provider.send(notice, over: http) }
                    if case .renewCredentials(let why) = outcome { outcome = .failed("credentials refused after renewing: \(why)") }
                }
                if await settle(row, notice, outcome, provider: provider.name, holder: holder) { done.append(row.id) }
            }
            // Rows done (sent, given up, device removed) go in one write.
            try? await chat.finishOutbox(done, holder: holder)
        }
    }

    /// Counts the outcome and deals with the device; true when the row is done (to remove),
    /// false when it was put back to try again.
    private func settle(_ row: OutboxItem, _ notice: PushNotice, _ outcome: PushOutcome, provider: String, holder: String) async -> Bool {
        switch outcome {
        case .sent:
            count(provider) { $0.sent += 1 }
        case .removeDevice:
            try? await chat.removeDeadDevice(id: notice.deviceID)
            count(provider) { $0.devicesRemoved += 1 }
        case .retry where row.attempts + 1 < configuration.maxAttempts:
            count(provider) { $0.retried += 1 }
            try? await chat.retryOutbox(row.id, holder: holder, after: Self.backoff(attempt: row.attempts))
            return false
        case .retry(let why), .failed(let why), .renewCredentials(let why):
            count(provider) { $0.failed += 1 }
            FileHandle.standardError.write(Data("parley-server: push through \(provider) given up: \(why)\n".utf8))
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
