/// A Prometheus histogram of durations: bucket counts, the count and the sum (nanoseconds)
/// under one lock, held for an increment. Cheap enough for every request and every commit.
public final class LatencyHistogram: Sendable {
    /// The buckets' upper bounds, in seconds (Prometheus's `le`), rising.
    public let bounds: [Double]
    private let boundsNanoseconds: [UInt64]
    private let state: LockedValue<(buckets: [Int], count: Int, sumNanoseconds: UInt64)>

    /// A histogram with these upper bounds (seconds); the default suits requests and commits:
    /// 0.5 ms to 10 s.
    public init(bounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]) {
        self.bounds = bounds
        boundsNanoseconds = bounds.map { UInt64($0 * 1_000_000_000) }
        state = LockedValue((Array(repeating: 0, count: bounds.count), 0, 0))
    }

    /// Counts one duration, or `count` equal ones (one message reaching several devices at once).
    public func observe(nanoseconds: UInt64, count: Int = 1) {
        // Non-cumulative here; cumulative when read.
        guard count > 0 else { return }
        let index = boundsNanoseconds.firstIndex { nanoseconds <= $0 }
        state.withLock { state in
            if let index { state.buckets[index] += count }
            state.count += count
            state.sumNanoseconds &+= nanoseconds &* UInt64(count)
        }
    }

    /// Counts one duration.
    public func observe(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        observe(nanoseconds: seconds < 0 ? 0 : UInt64(seconds) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000))
    }

    /// The exposition lines of this histogram: `_bucket` (cumulative, with `+Inf`), `_sum` and
    /// `_count`, labelled with `labels` (e.g. `kind="write"`, or empty).
    public func samples(labels: String = "") -> [(suffix: String, labels: String, value: String)] {
        let (buckets, count, sum) = state.get()
        let prefix = labels.isEmpty ? "" : labels + ","
        var running = 0
        var lines: [(String, String, String)] = []
        for (index, bound) in bounds.enumerated() {
            running += buckets[index]
            lines.append(("_bucket", "{\(prefix)le=\"\(bound)\"}", "\(running)"))
        }
        lines.append(("_bucket", "{\(prefix)le=\"+Inf\"}", "\(count)"))
        let wrapped = labels.isEmpty ? "" : "{\(labels)}"
        lines.append(("_sum", wrapped, "\(Double(sum) / 1_000_000_000)"))
        lines.append(("_count", wrapped, "\(count)"))
        return lines
    }
}
