#if canImport(Glibc)
import Glibc
#endif
import ParleyLog
import ParleySync

/// How many connections a server holds at once, in all and from one address (issue 31,
/// item 2): a flood from one address, or from many, meets a quick close instead of the
/// descriptor limit.
public struct ConnectionLimits: Sendable, Hashable {
    /// The most open connections in all; nil: the descriptor limit less ``reservedDescriptors``.
    /// A value past that is lowered to it (``effectiveTotal``).
    public var total: Int? = nil
    /// The most open connections from one address (an IPv6 client: from one /64); 0 for no
    /// limit. Unless ``perAddressCoversPrivate``, loopback and private addresses are exempt:
    /// a load balancer or proxy in front connects from one of them for everyone.
    public var perAddress: Int = 1000
    /// The per-address limit applies to loopback and private addresses too (the operator gave
    /// it explicitly, knowing what is in front).
    public var perAddressCoversPrivate = false

    /// Descriptors kept for everything but client connections (database, files, outbound
    /// requests) when ``total`` is taken from the descriptor limit.
    public static let reservedDescriptors = 256

    /// The defaults.
    public init() {}

    /// ``total``, at most what the process's descriptor limit allows (``descriptorCeiling``).
    ///
    /// Client connections must never fill the descriptor table: other parts of the server can
    /// fail for a moment and recover (an accept, an outbound request, a file), but libdispatch,
    /// which runs Swift's tasks, checks its worker threads every second by opening
    /// `/proc/<tid>/stat` while tasks wait, and aborts the process when it cannot (seen here:
    /// SIGILL in `_dispatch_workq_monitor_pools`, within seconds of a full table).
    public var effectiveTotal: Int {
        let ceiling = Self.descriptorCeiling
        return min(total ?? ceiling, ceiling)
    }

    /// The most client connections the process's descriptor limit allows: the limit less
    /// ``reservedDescriptors``, and at least 64.
    public static var descriptorCeiling: Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < 1 << 40 else { return 1_000_000 }
        return max(64, Int(limit.rlim_cur) - reservedDescriptors)
    }
}

/// Counts open connections against ``ConnectionLimits``: `admit` when one is accepted, the
/// returned ticket's `release` when it closes (on whichever loop).
final class ConnectionGate: Sendable {
    /// Why a connection was turned away.
    enum Refusal: String, Error, Sendable {
        /// The server holds as many as it may.
        case total
        /// Its address holds as many as one may.
        case address
    }

    private struct Counts {
        var total = 0
        var byAddress: [[UInt8]: Int] = [:]
    }

    private let limits: ConnectionLimits
    private let total: Int
    private let counts = LockedValue(Counts())
    private let logger = Logger.process.labelled("parley.net")

    init(_ limits: ConnectionLimits) {
        self.limits = limits
        total = limits.effectiveTotal
        if let asked = limits.total, asked > total {
            logger.warning("--max-connections is more than the descriptor limit allows; holding fewer (raise LimitNOFILE to hold more)",
                           metadata: ["asked": .integer(Int64(asked)), "holding": .integer(Int64(total)),
                                      "reserved": .integer(Int64(ConnectionLimits.reservedDescriptors))])
        }
    }

    /// Takes a place for a connection from `peer`; nil (and counted) when it must be closed.
    func admit(_ peer: SocketAddress?) -> Result<Release, Refusal> {
        let key = peer.flatMap { limits.perAddress > 0 && (limits.perAddressCoversPrivate || !$0.isLoopbackOrPrivate) ? $0.limitKey : nil }
        let refusal: Refusal? = counts.withLock { counts in
            guard counts.total < total else { return .total }
            if let key {
                guard counts.byAddress[key, default: 0] < limits.perAddress else { return .address }
                counts.byAddress[key, default: 0] += 1
            }
            counts.total += 1
            return nil
        }
        guard let refusal else { return .success(Release(gate: self, key: key)) }
        NetMetrics.shared.connectionRefused(refusal)
        switch refusal {
        case .total:
            logger.failed("at the connection limit: new connections are closed at once", LimitReached(limit: total),
                          metadata: ["limit": .integer(Int64(total))])
        case .address:
            logger.failed("an address is at its connection limit: its new connections are closed at once", LimitReached(limit: limits.perAddress),
                          metadata: ["peer": .string(peer?.host ?? "?"), "limit": .integer(Int64(limits.perAddress))])
        }
        return .failure(refusal)
    }

    fileprivate func release(_ key: [UInt8]?) {
        counts.withLock { counts in
            counts.total -= 1
            guard let key else { return }
            let left = counts.byAddress[key, default: 1] - 1
            counts.byAddress[key] = left > 0 ? left : nil
        }
    }

    /// A connection's place, given back once when it closes.
    final class Release: Sendable {
        private let gate: ConnectionGate
        private let key: [UInt8]?
        private let released = LockedValue(false)

        fileprivate init(gate: ConnectionGate, key: [UInt8]?) {
            self.gate = gate
            self.key = key
        }

        func callAsFunction() {
            guard !released.withLock({ done in defer { done = true }; return done }) else { return }
            gate.release(key)
        }
    }

    /// The error a refusal is logged with.
    struct LimitReached: Error, CustomStringConvertible {
        var limit: Int
        var description: String { "limit \(limit) reached (--max-connections, --max-connections-per-address)" }
    }
}

extension SocketAddress {
    /// What the per-address limit counts by: an IPv4 address, or an IPv6 address's /64 (one
    /// client's usual allocation); an IPv4-mapped IPv6 address as the IPv4 one.
    var limitKey: [UInt8] {
        switch storage {
        case .v4(let host, _): withUnsafeBytes(of: host.bigEndian) { Array($0) }
        case .v6(let host, _, _) where host.count == 16 && host[0..<10].allSatisfy({ $0 == 0 }) && host[10] == 0xff && host[11] == 0xff:
            Array(host[12...])
        case .v6(let host, _, _): Array(host.prefix(8))
        }
    }

    /// Loopback, RFC 1918 private, link-local or IPv6 unique-local: where a proxy in front sits.
    var isLoopbackOrPrivate: Bool {
        let key = limitKey
        if key.count == 4 {
            return key[0] == 127 || key[0] == 10 || (key[0] == 172 && key[1] & 0xf0 == 16) || (key[0] == 192 && key[1] == 168)
                || (key[0] == 169 && key[1] == 254)
        }
        guard case .v6(let host, _, _) = storage, host.count == 16 else { return false }
        let loopback = host[0..<15].allSatisfy { $0 == 0 } && host[15] == 1
        return loopback || host[0] & 0xfe == 0xfc || (host[0] == 0xfe && host[1] & 0xc0 == 0x80)
    }
}
