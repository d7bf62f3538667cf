import Foundation
#if canImport(Glibc)
import Glibc
import ParleySync
#endif

/// Where Redis is: `redis://[[user]:password@]host[:port][/db]`.
package struct RedisURL: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address.
    package var host: String
    /// The port. Default: 6379.
    package var port: UInt16
    /// The ACL user, if any.
    package var user: String?
    /// The password, if any.
    package var password: String?

    /// Parses `text`.
    ///
    /// - Throws: ``RedisError/badURL(_:)`` saying what is wrong.
    package init(_ text: String) throws(RedisError) {
        guard let components = URLComponents(string: text), components.scheme == "redis" else {
            throw .badURL("must be redis://host:port (rediss:// and unix sockets are not supported): \(text.prefix(60))")
        }
        guard let host = components.host, !host.isEmpty else { throw .badURL("names no host: \(text.prefix(60))") }
        self.host = host
        guard let port = UInt16(exactly: components.port ?? 6379), port > 0 else { throw .badURL("has no valid port") }
        self.port = port
        user = components.user.flatMap { $0.isEmpty ? nil : $0.removingPercentEncoding }
        password = components.password?.removingPercentEncoding
    }

    /// The URL without its password.
    package var description: String { "redis://\(user.map { "\($0)@" } ?? (password != nil ? "…@" : ""))\(host):\(port)" }
}

/// A Redis failure.
package enum RedisError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL is not one this client speaks.
    case badURL(String)
    /// Redis could not be reached, or the connection broke.
    case connection(String)
    /// Redis answered with an error.
    case server(String)
    /// Nothing arrived in time.
    case timeout
    /// The reply was not RESP.
    case protocolError(String)

    package var description: String {
        switch self {
        case .badURL(let message): "--redis-url \(message)"
        case .connection(let message): "Redis connection: \(message)"
        case .server(let message): "Redis: \(message)"
        case .timeout: "Redis did not answer in time"
        case .protocolError(let message): "Redis sent something that is not RESP: \(message)"
        }
    }
}

/// Test mode's fault (docs/test-mode.md): Redis made unreachable for a while. Every open
/// connection is cut at once (a blocked read returns), and none can be made, read or written
/// until the time passes: the node sees what it sees when Redis dies, and recovers as it does.
package enum RedisFault {
    private static let state = LockedValue<(until: ContinuousClock.Instant?, open: [ObjectIdentifier: Int32])>((nil, [:]))

    /// Redis is unreachable for `duration` from now (zero: reachable again at once).
    package static func unavailable(for duration: Duration) {
        let open = state.withLock { state -> [Int32] in
            state.until = duration > .zero ? .now + duration : nil
            return state.until == nil ? [] : Array(state.open.values)
        }
        for descriptor in open { shutdown(descriptor, Int32(SHUT_RDWR)) }
    }

    /// Whether Redis is made unreachable now.
    static var isDown: Bool {
        state.withLock { state in
            guard let until = state.until else { return false }
            if ContinuousClock.now < until { return true }
            state.until = nil
            return false
        }
    }

    static func opened(_ connection: RedisConnection, _ descriptor: Int32) {
        state.withLock { $0.open[ObjectIdentifier(connection)] = descriptor }
    }

    static func closed(_ connection: RedisConnection) {
        _ = state.withLock { $0.open.removeValue(forKey: ObjectIdentifier(connection)) }
    }
}

/// One blocking connection to Redis, used by one thread at a time: the bus keeps one for
/// publishing and one for its subscription, each on a thread of its own, so nothing here
/// ever runs on an event loop.
final class RedisConnection {
    private let descriptor: Int32
    private var parser = RESPParser()
    private var readBuffer = [UInt8](repeating: 0, count: 64 << 10)

    /// Connects (within `timeout`), then authenticates if the URL has a password.
    init(_ url: RedisURL, timeout: Duration) throws(RedisError) {
        if RedisFault.isDown { throw .connection("cannot connect to \(url): test mode made Redis unavailable") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(url.host, String(url.port), &hints, &list) == 0, let first = list else {
            throw .connection("cannot resolve \(url.host)")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address for \(url.host)"
        var connected: Int32 = -1
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let address = candidate {
            candidate = address.pointee.ai_next
            let fd = socket(address.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { continue }
            Self.setTimeout(fd, SO_SNDTIMEO, timeout)  // bounds connect() too
            if connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 {
                connected = fd
                break
            }
            lastError = String(cString: strerror(errno))
            Glibc.close(fd)
        }
        guard connected >= 0 else { throw .connection("cannot connect to \(url): \(lastError)") }
        descriptor = connected
        RedisFault.opened(self, connected)
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_KEEPALIVE, &one, socklen_t(MemoryLayout<Int32>.size))
        setReadTimeout(timeout)
        if let password = url.password {
            let auth = url.user.map { RESPCommand.encode("AUTH", $0, password) } ?? RESPCommand.encode("AUTH", password)
            try write(auth)
            if case .error(let message) = try read() {
                close()
                throw .server("AUTH failed: \(message)")
            }
        }
    }

    deinit { close() }

    private var closed = false

    /// Closes the socket (a blocked read on another thread returns).
    func close() {
        guard !closed else { return }
        closed = true
        RedisFault.closed(self)
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }

    /// How long a read waits before ``RedisError/timeout``.
    func setReadTimeout(_ timeout: Duration) {
        Self.setTimeout(descriptor, SO_RCVTIMEO, timeout)
    }

    private static func setTimeout(_ fd: Int32, _ option: Int32, _ timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes every byte (commands may be pipelined: several in one write).
    func write(_ bytes: [UInt8]) throws(RedisError) {
        if RedisFault.isDown { throw .connection("test mode made Redis unavailable") }
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                send(descriptor, buffer.baseAddress.map { $0 + sent }, buffer.count - sent, Int32(MSG_NOSIGNAL))
            }
            if result < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw .timeout }
                throw .connection(String(cString: strerror(errno)))
            }
            sent += result
        }
    }

    /// The next reply (or pushed message), waiting up to the read timeout.
    func read() throws(RedisError) -> RESPValue {
        while true {
            do {
                if let value = try parser.next() { return value }
            } catch {
                throw .protocolError(error.description)
            }
            let count = readBuffer.withUnsafeMutableBytes { buffer in
                recv(descriptor, buffer.baseAddress, buffer.count, 0)
            }
            if count > 0 {
                parser.append(readBuffer[0..<count])
            } else if count == 0 {
                throw .connection("Redis closed the connection")
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                throw .timeout
            } else {
                throw .connection(String(cString: strerror(errno)))
            }
        }
    }

    /// Sends one command and returns its reply; an error reply is thrown.
    @discardableResult
    func command(_ arguments: [[UInt8]]) throws(RedisError) -> RESPValue {
        try write(RESPCommand.encode(arguments))
        let reply = try read()
        if case .error(let message) = reply { throw .server(message) }
        return reply
    }

    /// ``command(_:)`` with text arguments.
    @discardableResult
    func command(_ arguments: String...) throws(RedisError) -> RESPValue {
        try command(arguments.map { Array($0.utf8) })
    }
}
