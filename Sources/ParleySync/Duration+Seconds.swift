extension Duration {
    /// The duration in seconds, fractions included (for the APIs that take a `TimeInterval`:
    /// a sleep, a condition's deadline, a figure in `/metrics`).
    package var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
