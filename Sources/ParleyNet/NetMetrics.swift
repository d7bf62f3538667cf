public import ParleySync
import Synchronization

/// Process-wide counters of the networking layer, read by `/metrics`.
///
/// Atomics with relaxed ordering: each counter is independent and only ever summed.
public final class NetMetrics: Sendable {
    /// The one instance.
    public static let shared = NetMetrics()

    private let openConnections = Atomic<Int>(0)
    private let acceptedTotal = Atomic<Int>(0)
    private let readTotal = Atomic<Int>(0)
    private let writtenTotal = Atomic<Int>(0)
    private let responses1xx = Atomic<Int>(0)
    private let responses2xx = Atomic<Int>(0)
    private let responses3xx = Atomic<Int>(0)
    private let responses4xx = Atomic<Int>(0)
    private let responses5xx = Atomic<Int>(0)
    private let openWebSockets = Atomic<Int>(0)
    private let framesIn = Atomic<Int>(0)
    private let framesOut = Atomic<Int>(0)
    private let webSocketBytesIn = Atomic<Int>(0)
    private let webSocketBytesOut = Atomic<Int>(0)
    private let slowPeersClosed = Atomic<Int>(0)
    /// How long HTTP requests took, from the head's first byte to the response queued.
    public let requestLatency = LatencyHistogram()
    private let refusedTotal = Atomic<Int>(0)
    private let refusedByAddress = Atomic<Int>(0)

    func connectionRefused(_ refusal: ConnectionGate.Refusal) {
        switch refusal {
        case .total: refusedTotal.add(1, ordering: .relaxed)
        case .address: refusedByAddress.add(1, ordering: .relaxed)
        }
    }
    /// Connections closed as soon as accepted, over the limit in all and over one address's.
    public var connectionsRefused: (total: Int, address: Int) {
        (refusedTotal.load(ordering: .relaxed), refusedByAddress.load(ordering: .relaxed))
    }

    func connectionOpened() {
        openConnections.add(1, ordering: .relaxed)
        acceptedTotal.add(1, ordering: .relaxed)
    }
    func connectionClosed() { openConnections.subtract(1, ordering: .relaxed) }
    func bytesRead(_ count: Int) { readTotal.add(count, ordering: .relaxed) }
    func bytesWritten(_ count: Int) { writtenTotal.add(count, ordering: .relaxed) }
    func response(status: Int) {
        switch status {
        case ..<200: responses1xx.add(1, ordering: .relaxed)
        case 200..<300: responses2xx.add(1, ordering: .relaxed)
        case 300..<400: responses3xx.add(1, ordering: .relaxed)
        case 400..<500: responses4xx.add(1, ordering: .relaxed)
        default: responses5xx.add(1, ordering: .relaxed)
        }
    }
    func webSocketOpened() { openWebSockets.add(1, ordering: .relaxed) }
    func webSocketClosed() { openWebSockets.subtract(1, ordering: .relaxed) }
    func webSocketSlowPeerClosed() { slowPeersClosed.add(1, ordering: .relaxed) }
    /// WebSockets closed because the peer fell too far behind.
    public var slowWebSocketsClosed: Int { slowPeersClosed.load(ordering: .relaxed) }
    func frameReceived(bytes: Int) {
        framesIn.add(1, ordering: .relaxed)
        webSocketBytesIn.add(bytes, ordering: .relaxed)
    }
    func frameSent(bytes: Int) {
        framesOut.add(1, ordering: .relaxed)
        webSocketBytesOut.add(bytes, ordering: .relaxed)
    }

    /// A consistent-enough copy of every counter.
    public struct Snapshot: Sendable, Hashable {
        /// TCP connections currently open (HTTP and WebSocket, server and client side).
        public var openConnections: Int
        /// TCP connections opened since start.
        public var connectionsTotal: Int
        /// Bytes read from and written to sockets.
        public var bytesRead: Int, bytesWritten: Int
        /// HTTP responses by status class: index 0 is 1xx, 4 is 5xx.
        public var responsesByClass: [Int]
        /// WebSocket connections currently open.
        public var openWebSockets: Int
        /// WebSocket frames and payload bytes, in and out.
        public var framesIn: Int, framesOut: Int, webSocketBytesIn: Int, webSocketBytesOut: Int
    }

    /// Reads every counter.
    public func snapshot() -> Snapshot {
        Snapshot(
            openConnections: openConnections.load(ordering: .relaxed),
            connectionsTotal: acceptedTotal.load(ordering: .relaxed),
            bytesRead: readTotal.load(ordering: .relaxed),
            bytesWritten: writtenTotal.load(ordering: .relaxed),
            responsesByClass: [
                responses1xx.load(ordering: .relaxed), responses2xx.load(ordering: .relaxed),
                responses3xx.load(ordering: .relaxed), responses4xx.load(ordering: .relaxed),
                responses5xx.load(ordering: .relaxed),
            ],
            openWebSockets: openWebSockets.load(ordering: .relaxed),
            framesIn: framesIn.load(ordering: .relaxed),
            framesOut: framesOut.load(ordering: .relaxed),
            webSocketBytesIn: webSocketBytesIn.load(ordering: .relaxed),
            webSocketBytesOut: webSocketBytesOut.load(ordering: .relaxed))
    }
}
