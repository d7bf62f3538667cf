/// Decides when an HTTP connection has waited too long; time is passed in, so it is tested
/// without a clock or sleeps.
///
/// ```
///   idle ──first byte──▶ head ──head parsed──▶ body ──body done──▶ busy ──response sent──▶ idle
///     │                    │                     │
///  idleTimeout         headTimeout          bodyTimeout (since the last progress)
///  (close quietly)     (408, close)         (408, close)
/// ```
/// `busy` (a handler is running, or reading is paused for backpressure) never times out here.
/// While a file body is being sent, `sending` closes a connection whose peer has not taken
/// a byte for `body` (a download that stopped reading).
public struct HTTPTimeouts: Sendable, Hashable {
    /// The limits, in nanoseconds.
    public struct Configuration: Sendable, Hashable {
        /// How long a whole request head may take to arrive: slowloris defence. Default: 10 s.
        public var head: Duration = .seconds(10)
        /// Longest silence while a body is arriving. Default: 30 s.
        public var body: Duration = .seconds(30)
        /// How long a keep-alive connection may sit idle between requests. Default: 60 s.
        public var idle: Duration = .seconds(60)
        /// The slowest a body may arrive, or a file response be read, on average once
        /// ``rateGrace`` has passed: bytes per second, 0 for no floor. A byte every few seconds
        /// resets the silence limit but not this one. Default: 500 (Apache's mod_reqtimeout's).
        public var minimumRate = 500
        /// How long a body or a file response may take before ``minimumRate`` applies. Default: 10 s.
        public var rateGrace: Duration = .seconds(10)

        /// The defaults.
        public init() {}
    }

    /// What the connection should do now.
    public enum Action: Sendable, Hashable {
        /// Nothing yet; check again at this instant (if any).
        case wait(until: UInt64?)
        /// Close without a response (idle keep-alive connection).
        case closeIdle
        /// Answer 408 Request Timeout, then close.
        case requestTimeout
    }

    enum Phase: Sendable, Hashable {
        case idle(since: UInt64)
        case head(since: UInt64)
        case body(since: UInt64)
        case busy
        case sending(since: UInt64)
    }

    private(set) var phase: Phase
    private let head: UInt64, body: UInt64, idle: UInt64
    private let minimumRate: UInt64, rateGrace: UInt64
    /// When the current body (or file response) began, and its bytes so far: the rate floor.
    private struct Transfer: Sendable, Hashable {
        var started: UInt64
        var bytes: UInt64
    }
    private var transfer: Transfer?

    /// Starts idle at `now`.
    public init(_ configuration: Configuration, now: UInt64) {
        phase = .idle(since: now)
        head = configuration.head.nanoseconds
        body = configuration.body.nanoseconds
        idle = configuration.idle.nanoseconds
        minimumRate = UInt64(max(0, configuration.minimumRate))
        rateGrace = configuration.rateGrace.nanoseconds
    }

    /// `count` bytes arrived.
    public mutating func bytesArrived(now: UInt64, count: Int = 0) {
        switch phase {
        case .idle: phase = .head(since: now)
        case .body:
            phase = .body(since: now)
            transfer?.bytes &+= UInt64(max(0, count))
        case .head, .busy, .sending: break
        }
    }

    /// A head was parsed; `expectingBody` when body bytes must still arrive.
    public mutating func headParsed(now: UInt64, expectingBody: Bool) {
        phase = expectingBody ? .body(since: now) : .busy
        transfer = expectingBody ? Transfer(started: now, bytes: 0) : nil
    }

    /// The body is complete, or reading is paused by backpressure.
    public mutating func becameBusy() { phase = .busy }

    /// Reading of a body resumed after a pause (the server's, not the client's: the rate
    /// floor starts again).
    public mutating func bodyResumed(now: UInt64) {
        phase = .body(since: now)
        transfer = Transfer(started: now, bytes: 0)
    }

    /// A file body started (`sent` 0) or made progress to `sent` bytes.
    public mutating func sendProgressed(now: UInt64, sent: Int64 = 0) {
        if sent == 0 || transfer == nil { transfer = Transfer(started: now, bytes: 0) }
        transfer?.bytes = UInt64(max(0, sent))
        phase = .sending(since: now)
    }
    /// The response was written; the connection waits for the next request.
    public mutating func responseSent(now: UInt64) {
        phase = .idle(since: now)
        transfer = nil
    }

    /// The instant at which the current phase expires, if it can.
    public var deadline: UInt64? {
        switch phase {
        case .idle(let since): return since &+ idle
        case .head(let since): return since &+ head
        case .body(let since), .sending(let since):
            guard minimumRate > 0, let transfer else { return since &+ body }
            // The bytes so far buy time at the floor's rate, after the grace.
            let earned = transfer.bytes > UInt64.max / 1_000_000_000 ? UInt64.max / 4 : transfer.bytes * 1_000_000_000 / minimumRate
            return min(since &+ body, transfer.started &+ rateGrace &+ earned)
        case .busy: return nil
        }
    }

    /// What to do at `now`.
    public func check(now: UInt64) -> Action {
        guard let deadline else { return .wait(until: nil) }
        guard now >= deadline else { return .wait(until: deadline) }
        switch phase {
        case .idle, .sending: return .closeIdle
        case .head, .body: return .requestTimeout
        case .busy: return .wait(until: nil)
        }
    }
}

extension Duration {
    /// The duration in whole nanoseconds (negative durations count as zero).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(max(0, attoseconds) / 1_000_000_000)
    }
}
