#if canImport(Glibc)
import Glibc
#endif
import CParleyLinux
import ParleyLog
import ParleySync

/// A listening TCP socket whose accepted connections are spread round-robin over a group's loops.
///
/// One loop (the group's first) accepts; each new descriptor is handed to the next loop, which
/// creates the ``Connection`` and its handler on its own thread.
public final class TCPServer: Sendable {
    /// Creates the handler for a freshly accepted connection, on the connection's loop.
    public typealias ChildInitializer = @Sendable (EventLoop) -> any ConnectionHandler

    /// The address actually bound (the real port when 0 was asked for).
    public let localAddress: SocketAddress
    private let acceptor: Acceptor

    /// Binds and starts accepting.
    ///
    /// - Parameters:
    ///   - host: a literal or a name; the first address it resolves to is bound.
    ///   - port: 0 for an ephemeral port.
    ///   - backlog: the kernel's accept queue length. Default: 4096.
    ///   - budget: each connection's outbound budget.
    ///   - tls: when set, every accepted connection speaks TLS with the store's current certificate.
    ///   - limits: how many connections may be open, in all and from one address; one past
    ///     them is closed as soon as it is accepted.
    ///   - childInitializer: makes each connection's handler.
    /// - Throws: ``ResolveError`` or ``IOError`` (for example `bind: Address already in use`).
    public init(group: EventLoopGroup, host: String, port: UInt16, backlog: Int32 = 4096,
                budget: WriteBudget = WriteBudget(), tls: TLSCertificateStore? = nil, limits: ConnectionLimits = ConnectionLimits(),
                childInitializer: @escaping ChildInitializer) throws {
        guard let address = try SocketAddress.resolve(host: host, port: port).first else {
            throw ResolveError(host: host, reason: "no addresses")
        }
        let fd = socket(address.family, Sock.streamFlags, 0)
        guard fd >= 0 else { throw IOError.current("socket") }
        Sock.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
        let bound = address.withSockAddr { bind(fd, $0, $1) }
        guard bound == 0 else {
            let error = IOError.current("bind \(address)")
            Glibc.close(fd)
            throw error
        }
        guard listen(fd, backlog) == 0 else {
            let error = IOError.current("listen")
            Glibc.close(fd)
            throw error
        }
        localAddress = SocketAddress.local(of: fd) ?? address
        acceptor = Acceptor(fd: fd, group: group, budget: budget, tls: tls, gate: ConnectionGate(limits), childInitializer: childInitializer)
        let acceptor = self.acceptor
        let loop = group.loops[0]
        let started = LockedValue<Result<Void, IOError>?>(nil)
        let semaphore = Semaphore()
        loop.execute {
            do throws(IOError) {
                try acceptor.start(on: loop)
                started.withLock { $0 = .success(()) }
            } catch {
                started.withLock { $0 = .failure(error) }
            }
            semaphore.signal()
        }
        semaphore.wait()
        if case .failure(let error) = started.withLock({ $0 }) {
            Glibc.close(fd)
            throw error
        }
    }

    /// Stops accepting and closes the listening socket. Existing connections are untouched.
    public func stopAccepting() {
        let acceptor = self.acceptor
        let semaphore = Semaphore()
        acceptor.loop.execute {
            acceptor.stop()
            semaphore.signal()
        }
        semaphore.wait()
    }
}

/// The accepting side of a ``TCPServer``; lives on the group's first loop.
private final class Acceptor: Selectable, @unchecked Sendable {
    // @unchecked: `fd`'s registration and `pausedUntil` are touched only on `loop`'s thread.
    let fd: CInt
    let group: EventLoopGroup
    let budget: WriteBudget
    let tls: TLSCertificateStore?
    let gate: ConnectionGate
    let childInitializer: TCPServer.ChildInitializer
    var loop: EventLoop { group.loops[0] }
    private var open = false
    private var paused = false
    private let logger = Logger.process.labelled("parley.net")

    init(fd: CInt, group: EventLoopGroup, budget: WriteBudget, tls: TLSCertificateStore?, gate: ConnectionGate,
         childInitializer: @escaping TCPServer.ChildInitializer) {
        self.fd = fd
        self.group = group
        self.budget = budget
        self.tls = tls
        self.gate = gate
        self.childInitializer = childInitializer
    }

    func start(on loop: EventLoop) throws(IOError) {
        try loop.register(fd, interest: EPOLLIN.rawValue, handler: self)
        open = true
    }

    func stop() {
        guard open else { return }
        open = false
        if !paused { loop.deregister(fd) }
        Glibc.close(fd)
    }

    func handleEvent(_ events: UInt32) {
        // Bounded per wake-up so accepting cannot starve the connections on this loop.
        for _ in 0..<64 {
            let result: IOResult<CInt>
            do {
                result = try syscall("accept4") { accept4(fd, nil, nil, Sock.acceptFlags) }
            } catch {
                switch error.code {
                case ECONNABORTED, EPROTO, EPERM:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: stop accepting for a moment rather than spin.
                    logger.failed("cannot accept connections: out of descriptors or memory; pausing 100 ms (raise LimitNOFILE, or lower --max-connections)", error,
                                  level: .error)
                    pauseAccepting()
                    return
                default:
                    return
                }
            }
            guard case .processed(let child) = result else { return }
            // Over a limit: closed at once, before TLS or a handler costs anything.
            guard case .success(let release) = gate.admit(SocketAddress.peer(of: child)) else {
                Glibc.close(child)
                continue
            }
            let target = group.next()
            let budget = self.budget
            let initializer = childInitializer
            let context = tls?.context
            let start: @Sendable () -> Void = {
                let session: TLSSession?
                do {
                    session = try context.map { context throws(TLSError) in try TLSSession(context: context, fd: child, serverName: nil) }
                } catch {
                    Glibc.close(child)
                    release()
                    return
                }
                let connection = Connection(fd: child, loop: target, handler: initializer(target), budget: budget, tls: session, onClose: release.callAsFunction)
                do throws(IOError) {
                    try connection.activate()
                } catch {
                    connection.close(mode: .now)
                }
            }
            if target === loop { start() } else { target.execute(start) }
        }
    }

    private func pauseAccepting() {
        guard !paused else { return }
        paused = true
        loop.deregister(fd)
        loop.schedule(after: .milliseconds(100)) { [self] in
            paused = false
            guard open else { return }
            try? loop.register(fd, interest: EPOLLIN.rawValue, handler: self)
        }
    }
}

/// A counting semaphore for the few places where a thread must wait for a loop.
final class Semaphore: @unchecked Sendable {
    // @unchecked: the sem_t is only used through sem_* calls, which are thread-safe.
    private let semaphore: UnsafeMutablePointer<sem_t>

    init(value: UInt32 = 0) {
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, value)
    }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    func signal() { sem_post(semaphore) }

    func wait() {
        while sem_wait(semaphore) != 0 && errno == EINTR {}
    }
}

// MARK: - Connecting

extension Connection {
    /// Connects to `address` from `loop` and returns the active connection.
    ///
    /// - Parameters:
    ///   - timeout: how long the TCP handshake may take. Default: 10 s.
    ///   - source: the local address to connect from (port 0: any), for load generators that
    ///     need more than one address's worth of ephemeral ports. Default: the kernel's choice.
    ///   - handler: made on the loop once connected; receives every event.
    /// - Throws: ``IOError`` (`connect: Connection refused`, or `ETIMEDOUT`).
    public static func connect(
        to address: SocketAddress, from source: SocketAddress? = nil, on loop: EventLoop, timeout: Duration = .seconds(10),
        budget: WriteBudget = WriteBudget(), tls: (context: TLSContext, serverName: String)? = nil,
        handler: @escaping @Sendable () -> any ConnectionHandler
    ) async throws -> Connection {
        let tlsBox = UncheckedTLS(value: tls)
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Connection, any Error>) in
            loop.execute {
                let connector = Connector(loop: loop, budget: budget, tls: tlsBox.value, makeHandler: handler, continuation: continuation)
                connector.start(address: address, source: source, timeout: timeout)
            }
        }
    }
}

/// Drives one non-blocking `connect` to completion on a loop.
/// A TLS choice carried to the loop (TLSContext is Sendable; the tuple is not by itself).
private struct UncheckedTLS: @unchecked Sendable {
    // @unchecked: `TLSContext` is Sendable and `serverName` a String; only the optional tuple around them is not marked so.
    let value: (context: TLSContext, serverName: String)?
}

private final class Connector: Selectable {
    let loop: EventLoop
    let budget: WriteBudget
    let tls: (context: TLSContext, serverName: String)?
    let makeHandler: @Sendable () -> any ConnectionHandler
    var continuation: CheckedContinuation<Connection, any Error>?
    var fd: CInt = -1
    var timer: ScheduledTimer?

    init(loop: EventLoop, budget: WriteBudget, tls: (context: TLSContext, serverName: String)?,
         makeHandler: @escaping @Sendable () -> any ConnectionHandler, continuation: CheckedContinuation<Connection, any Error>) {
        self.loop = loop
        self.budget = budget
        self.tls = tls
        self.makeHandler = makeHandler
        self.continuation = continuation
    }

    func start(address: SocketAddress, source: SocketAddress?, timeout: Duration) {
        fd = socket(address.family, Sock.streamFlags, 0)
        guard fd >= 0 else { return fail(IOError.current("socket")) }
        if let source {
            // Bind before connect picks a port, so each source address has its own port range.
            Sock.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            guard source.withSockAddr({ bind(fd, $0, $1) }) == 0 else { return fail(IOError.current("bind \(source)")) }
        }
        let rc = address.withSockAddr { Glibc.connect(fd, $0, $1) }
        if rc == 0 { return finish() }
        guard errno == EINPROGRESS else { return fail(IOError.current("connect \(address)")) }
        do throws(IOError) {
            try loop.register(fd, interest: EPOLLOUT.rawValue, handler: self)
        } catch {
            return fail(error)
        }
        timer = loop.schedule(after: timeout) { [self] in
            loop.deregister(fd)
            fail(IOError(code: ETIMEDOUT, call: "connect \(address)"))
        }
    }

    func handleEvent(_ events: UInt32) {
        loop.deregister(fd)
        if let timer { loop.cancel(timer) }
        var code: CInt = 0
        var length = socklen_t(MemoryLayout<CInt>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
        if code != 0 { return fail(IOError(code: code, call: "connect")) }
        finish()
    }

    private func finish() {
        let session: TLSSession?
        do {
            session = try tls.map { tls throws(TLSError) in try TLSSession(context: tls.context, fd: fd, serverName: tls.serverName) }
        } catch {
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
            continuation?.resume(throwing: error)
            continuation = nil
            return
        }
        let connection = Connection(fd: fd, loop: loop, handler: makeHandler(), budget: budget, tls: session)
        fd = -1
        do throws(IOError) {
            try connection.activate()
            continuation?.resume(returning: connection)
        } catch {
            connection.close(mode: .now)
            continuation?.resume(throwing: error)
        }
        continuation = nil
    }

    private func fail(_ error: IOError) {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        continuation?.resume(throwing: error)
        continuation = nil
    }
}
