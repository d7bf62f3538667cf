/// Decides when to ping a quiet peer and when to give it up; time is passed in.
///
/// A peer is pinged after `interval` of silence and dropped after twice that: a dead peer is
/// noticed within two intervals (the requirement), a live one costs one ping per
/// quiet interval.
public struct WebSocketKeepalive: Sendable, Hashable {
    /// What to do now.
    public enum Action: Sendable, Hashable {
        /// Nothing; check again at this instant.
        case wait(until: UInt64)
        /// Send a ping, then check again at this instant.
        case ping(next: UInt64)
        /// The peer is silent for two intervals: close the connection.
        case dead
    }

    private let interval: UInt64
    private var lastHeard: UInt64
    private var pinged = false

    /// Starts counting silence at `now`.
    public init(interval: Duration, now: UInt64) {
        self.interval = max(1, interval.nanoseconds)
        lastHeard = now
    }

    /// Any frame arrived from the peer.
    public mutating func heard(now: UInt64) {
        lastHeard = now
        pinged = false
    }

    /// The decision at `now`.
    public mutating func check(now: UInt64) -> Action {
        let silence = now >= lastHeard ? now - lastHeard : 0
        if silence >= 2 * interval { return .dead }
        if silence >= interval {
            if pinged { return .wait(until: lastHeard + 2 * interval) }
            pinged = true
            return .ping(next: lastHeard + 2 * interval)
        }
        return .wait(until: lastHeard + interval)
    }
}
