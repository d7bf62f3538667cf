import ParleySync

/// A token bucket: `rate` per second sustained, `burst` at once.
package struct TokenBucket: Sendable {
    let rate: Double
    let burst: Double
    private var tokens: Double
    private var updated: ContinuousClock.Instant?

    package init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
        tokens = burst
    }

    /// Takes a token; nil if one was there, else whole seconds until one is.
    package mutating func take(now: ContinuousClock.Instant) -> Int? {
        if let updated {
            let seconds = (now - updated).inSeconds
            tokens = min(burst, tokens + max(0, seconds) * rate)
        }
        updated = now
        guard tokens >= 1 else { return max(1, Int(((1 - tokens) / rate).rounded(.up))) }
        tokens -= 1
        return nil
    }
}
