#if canImport(Glibc)
import Glibc
#endif
import CParleyLinux

/// What a protocol layer (HTTP, WebSocket) does with a connection's events.
///
/// Every method is called on the connection's loop thread. A connection holds its handler
/// strongly; swapping ``Connection/handler`` is how an HTTP connection becomes a WebSocket.
public protocol ConnectionHandler: AnyObject {
    /// The connection is registered and may be written to.
    func connectionActive(_ connection: Connection)
    /// Bytes arrived. `bytes` is only valid during the call.
    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer)
    /// The peer closed its sending side. Default: close.
    func connectionDidReadEOF(_ connection: Connection)
    /// Queued outbound bytes crossed a watermark (see ``WriteBudget``).
    func connection(_ connection: Connection, writabilityChanged writable: Bool)
    /// The descriptor is closed; called exactly once. `error` is set when an I/O call failed.
    func connectionDidClose(_ connection: Connection, error: IOError?)
}

extension ConnectionHandler {
    public func connectionActive(_ connection: Connection) {}
    public func connectionDidReadEOF(_ connection: Connection) { connection.close() }
    public func connection(_ connection: Connection, writabilityChanged writable: Bool) {}
    public func connectionDidClose(_ connection: Connection, error: IOError?) {}
}

/// The per-connection outbound budget.
///
/// When queued bytes rise above `highWatermark` the connection reports itself unwritable
/// (``Connection/isWritable``) and the handler is told; below `lowWatermark` it is writable
/// again. Layers above use this to stop producing (HTTP) or to drop slow clients (WebSocket).
public struct WriteBudget: Sendable, Hashable {
    /// Default: 1 MiB.
    public var highWatermark: Int = 1 << 20
    /// Default: 256 KiB.
    public var lowWatermark: Int = 256 << 10

    /// The default budget.
    public init() {}

    /// A budget with explicit watermarks; `low` must not exceed `high`.
    public init(low: Int, high: Int) {
        precondition(low <= high, "the low watermark must not exceed the high one")
        lowWatermark = low
        highWatermark = high
    }
}

/// A non-blocking TCP connection owned by one ``EventLoop``.
///
/// Reads are level-triggered and delivered to ``handler``; writes are queued and flushed with
/// `writev`, waiting for EPOLLOUT only when the kernel's buffer is full.
public final class Connection: @unchecked Sendable {
    // @unchecked: all mutable state is touched only on `loop`'s thread (asserted in debug).
    // Other threads must go through `loop.execute` (see `executeOnLoop`).

    enum State {
        case open
        /// Close once the queue drains; `linger` half-closes first and reads until EOF.
        case closingAfterFlush(linger: Bool)
        /// Our side is shut down; waiting for the peer's EOF (bounded by a timer).
        case lingering
        case closed
    }

    /// The loop that owns this connection.
    public let loop: EventLoop
    /// The protocol layer receiving this connection's events.
    public var handler: any ConnectionHandler
    /// The remote address, when known.
    public let peer: SocketAddress?
    /// The outbound budget.
    public var budget: WriteBudget

    let fd: CInt
    /// TLS over the socket, when the listener or the connect asked for it.
    let tls: TLSSession?
    /// TLS needs to write before a read can go on (a handshake message), or to read before a
    /// write can (the peer's handshake message): each waits for the other direction.
    private var tlsReadWantsWrite = false
    private var tlsWriteWantsRead = false
    /// The length of an SSL_write that must be repeated as it was (OpenSSL's rule).
    private var tlsRetryLength: Int?
    private(set) var state = State.open
    private var queue: [[UInt8]] = []
    private var queueHead = 0
    private var headOffset = 0
    /// Bytes queued and not yet accepted by the kernel.
    public private(set) var queuedBytes = 0
    /// False while queued bytes are above the high watermark.
    public private(set) var isWritable = true
    private var waitingForWritable = false
    private var flushScheduled = false
    private var readPaused = false
    private var registered = false
    private var lingerTimer: ScheduledTimer?
    /// Gives the connection's place back to its server's limits (``ConnectionLimits``), once closed.
    private let onClose: (@Sendable () -> Void)?

    init(fd: CInt, loop: EventLoop, handler: any ConnectionHandler, budget: WriteBudget, tls: TLSSession? = nil,
         onClose: (@Sendable () -> Void)? = nil) {
        self.onClose = onClose
        self.fd = fd
        self.tls = tls
        self.loop = loop
        self.handler = handler
        self.budget = budget
        self.peer = SocketAddress.peer(of: fd)
        Sock.setOption(fd, CInt(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    /// Registers with the loop and tells the handler. Loop thread only.
    func activate() throws(IOError) {
        try loop.register(fd, interest: interest, handler: self)
        registered = true
        NetMetrics.shared.connectionOpened()
        handler.connectionActive(self)
    }

    /// True until the descriptor is closed.
    public var isOpen: Bool {
        if case .closed = state { return false }
        return true
    }

    /// True while the connection accepts new writes (open and not closing).
    public var isAcceptingWrites: Bool {
        if case .open = state { return true }
        return false
    }

    private var interest: UInt32 {
        // EPOLLRDHUP only while reading: level-triggered, it would spin while paused.
        var events: UInt32 = 0
        if !readPaused { events |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if waitingForWritable || tlsReadWantsWrite { events |= EPOLLOUT.rawValue }
        return events
    }

    private func updateInterest() {
        if registered { loop.reregister(fd, interest: interest) }
    }

    /// Runs `body` on the loop thread with this connection: directly when already there.
    public func executeOnLoop(_ body: @escaping @Sendable (Connection) -> Void) {
        if loop.inEventLoop {
            body(self)
        } else {
            loop.execute { body(self) }
        }
    }

    // MARK: - Writing

    /// Queues `bytes` and writes them now, or with `coalesce` once before the loop next
    /// sleeps (together with every other write queued meanwhile). Loop thread only; ignored
    /// once closing.
    public func write(_ bytes: [UInt8], coalesce: Bool = false) {
        loop.preconditionInEventLoop()
        guard isAcceptingWrites else { return }
        enqueue(bytes)
        didEnqueue(coalesce: coalesce)
    }

    /// Queues several buffers, written together with one `writev`. Loop thread only.
    public func write(contentsOf chunks: [[UInt8]], coalesce: Bool = false) {
        loop.preconditionInEventLoop()
        guard isAcceptingWrites else { return }
        for chunk in chunks { enqueue(chunk) }
        didEnqueue(coalesce: coalesce)
    }

    /// Drops queued buffers the kernel has not started on; a buffer partly written stays, so
    /// the byte stream remains well-formed (a WebSocket frame is never cut). Loop thread only.
    ///
    /// - Returns: the bytes dropped.
    @discardableResult
    public func discardUnsentWrites() -> Int {
        loop.preconditionInEventLoop()
        // A TLS write waiting to be repeated has its record half sent too: it stays.
        let keep = headOffset > 0 || tlsRetryLength != nil ? queueHead + 1 : queueHead
        guard keep < queue.count else { return 0 }
        let dropped = queue[keep...].reduce(0) { $0 + $1.count }
        queue.removeSubrange(keep...)
        queuedBytes -= dropped
        return dropped
    }

    /// The queue never holds an empty buffer: `writeQueued` relies on it.
    private func enqueue(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        queue.append(chunk)
        queuedBytes += chunk.count
    }

    private func didEnqueue(coalesce: Bool) {
        if coalesce {
            if !flushScheduled, !waitingForWritable {
                flushScheduled = true
                loop.flushBeforeSleeping(self)
            }
        } else if !waitingForWritable {
            flush()
        }
        if case .open = state, isWritable, queuedBytes > budget.highWatermark {
            isWritable = false
            handler.connection(self, writabilityChanged: false)
        }
    }

    /// Called by the loop for a coalesced write.
    func flushPending() {
        flushScheduled = false
        guard isOpen, !waitingForWritable else { return }
        flush()
    }

    private func flush() {
        while queueHead < queue.count {
            let written: IOResult<Int>
            do {
                written = try writeQueued()
            } catch let error as IOError {
                abort(error)
                return
            } catch {
                abort(IOError(code: EIO, call: "writev"))
                return
            }
            switch written {
            case .processed(let count):
                NetMetrics.shared.bytesWritten(count)
                consume(count)
            case .wouldBlock:
                // A TLS write waiting for the peer's handshake goes on when a read comes in.
                if tlsWriteWantsRead { return }
                if !waitingForWritable {
                    waitingForWritable = true
                    updateInterest()
                }
                return
            }
        }
        queue.removeAll(keepingCapacity: true)
        queueHead = 0
        if waitingForWritable {
            waitingForWritable = false
            updateInterest()
        }
        if !isWritable, queuedBytes <= budget.lowWatermark {
            isWritable = true
            handler.connection(self, writabilityChanged: true)
        }
        if case .closingAfterFlush(let linger) = state { finishClose(linger: linger) }
    }

    private func consume(_ count: Int) {
        var remaining = count
        queuedBytes -= count
        while remaining > 0 {
            let available = queue[queueHead].count - headOffset
            if remaining >= available {
                remaining -= available
                queue[queueHead] = []
                queueHead += 1
                headOffset = 0
            } else {
                headOffset += remaining
                remaining = 0
            }
        }
        if queueHead > 64, queueHead * 2 > queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
    }

    /// One `writev` over up to 16 queued buffers (with TLS, one SSL_write of the first).
    private func writeQueued() throws -> IOResult<Int> {
        if let tls { return try writeTLS(tls) }
        let end = min(queue.count, queueHead + 16)
        if end - queueHead == 1 {
            let offset = headOffset
            return try queue[queueHead].withUnsafeBytes { raw in
                guard let base = raw.baseAddress else { preconditionFailure("an empty buffer in the write queue") }
                return try syscall("write") { Glibc.write(fd, base + offset, raw.count - offset) }
            }
        }
        var vectors: [iovec] = []
        vectors.reserveCapacity(end - queueHead)
        return try gather(index: queueHead, end: end, into: &vectors)
    }

    private func writeTLS(_ tls: TLSSession) throws -> IOResult<Int> {
        let offset = headOffset
        let length = tlsRetryLength ?? min(queue[queueHead].count - offset, 1 << 16)
        let outcome = queue[queueHead].withUnsafeBytes { raw in
            tls.write(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)]))
        }
        switch outcome {
        case .processed(let count):
            tlsRetryLength = nil
            tlsWriteWantsRead = false
            return .processed(count)
        case .wantWrite:
            tlsRetryLength = length
            return .wouldBlock
        case .wantRead:
            tlsRetryLength = length
            tlsWriteWantsRead = true
            return .wouldBlock
        case .closed:
            throw IOError(code: EPIPE, call: "TLS write")
        case .failed(let error):
            throw error
        }
    }

    private func gather(index: Int, end: Int, into vectors: inout [iovec]) throws -> IOResult<Int> {
        if index == end {
            let fd = self.fd
            return try vectors.withUnsafeBufferPointer { iov in
                try syscall("writev") { writev(fd, iov.baseAddress, CInt(iov.count)) }
            }
        }
        let offset = index == queueHead ? headOffset : 0
        return try queue[index].withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { preconditionFailure("an empty buffer in the write queue") }
            vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: base + offset),
                                 iov_len: raw.count - offset))
            return try gather(index: index + 1, end: end, into: &vectors)
        }
    }

    // MARK: - Reading

    /// Stops reading from the socket (backpressure on the peer) until ``resumeReading()``.
    public func pauseReading() {
        loop.preconditionInEventLoop()
        guard !readPaused, isOpen else { return }
        readPaused = true
        updateInterest()
    }

    /// Resumes reading after ``pauseReading()``.
    public func resumeReading() {
        loop.preconditionInEventLoop()
        guard readPaused, isOpen else { return }
        readPaused = false
        updateInterest()
        // What TLS already took off the socket raises no event: read it now.
        if let tls, tls.hasBuffered { loop.execute { [self] in readAvailable() } }
    }

    private func readAvailable() {
        let scratch = loop.readScratch
        // A few reads per wake-up at most, so one busy peer cannot starve the others.
        for _ in 0..<4 {
            guard isOpen, !readPaused || isLingering else { return }
            let result: IOResult<Int>
            if let tls {
                switch tls.read(into: scratch) {
                case .processed(let count): result = .processed(count)
                case .wantRead:
                    // OpenSSL may hold a record it already read (see hasBuffered): try again
                    // (at most the loop's few times: a partial record's rest raises an event).
                    if tls.hasBuffered { continue }
                    result = .wouldBlock
                case .wantWrite:
                    // The handshake must send before it can read on: wait until the socket takes it.
                    tlsReadWantsWrite = true
                    updateInterest()
                    return
                case .closed: result = .processed(0)
                case .failed(let error):
                    abort(error)
                    return
                }
            } else {
                do {
                    result = try syscall("read") { read(fd, scratch.baseAddress, scratch.count) }
                } catch {
                    abort(error)
                    return
                }
            }
            switch result {
            case .wouldBlock:
                return
            case .processed(0):
                if isLingering {
                    close(mode: .now)
                } else {
                    handler.connectionDidReadEOF(self)
                }
                return
            case .processed(let count):
                NetMetrics.shared.bytesRead(count)
                if isLingering { continue }  // discard: we already answered and are closing
                guard case .open = state else { continue }
                handler.connection(self, didRead: UnsafeRawBufferPointer(rebasing: scratch[0..<count]))
                // A short plain read emptied the socket; TLS reads one record at a time, so it reads on.
                if tls == nil, count < scratch.count { return }
            }
        }
        // TLS may hold decrypted bytes the socket no longer signals: read them on the next turn.
        if let tls, tls.hasDecrypted { loop.execute { [self] in readAvailable() } }
    }

    private var isLingering: Bool {
        if case .lingering = state { return true }
        return false
    }

    // MARK: - Closing

    /// How ``close(mode:)`` ends the connection.
    public enum CloseMode: Sendable {
        /// Close the descriptor now; queued bytes are dropped.
        case now
        /// Write what is queued, then close.
        case afterFlush
        /// Write what is queued, shut down our sending side, and read until the peer's EOF
        /// (at most 2 s) before closing, so a peer still sending does not get a reset that
        /// destroys the response (RFC 9112 §9.6).
        case lingering
    }

    /// Closes the connection. Loop thread only; idempotent.
    public func close(mode: CloseMode = .afterFlush) {
        loop.preconditionInEventLoop()
        switch (state, mode) {
        case (.closed, _):
            return
        case (_, .now):
            finalize(error: nil)
        case (.open, .afterFlush), (.open, .lingering):
            state = .closingAfterFlush(linger: mode == .lingering)
            if queueHead == queue.count { finishClose(linger: mode == .lingering) }
        case (.closingAfterFlush, _), (.lingering, _):
            return
        }
    }

    private func finishClose(linger: Bool) {
        guard linger else {
            finalize(error: nil)
            return
        }
        state = .lingering
        tls?.shutdown()
        shutdown(fd, CInt(SHUT_WR))
        if readPaused {
            readPaused = false
            updateInterest()
        }
        // Strong capture: `finalize` cancels the timer, which releases it. (A weak reference would
        // give every Connection a refcount side table, slowing each retain on the hot path.)
        lingerTimer = loop.schedule(after: .seconds(2)) { [self] in close(mode: .now) }
    }

    private func abort(_ error: IOError) {
        finalize(error: error.code == ECONNRESET || error.code == EPIPE ? nil : error)
    }

    private func finalize(error: IOError?) {
        if case .closed = state { return }
        state = .closed
        if let lingerTimer { loop.cancel(lingerTimer) }
        if registered {
            loop.deregister(fd)
            NetMetrics.shared.connectionClosed()
        }
        if error == nil { tls?.shutdown() }
        Glibc.close(fd)
        onClose?()
        queue.removeAll()
        queueHead = 0
        queuedBytes = 0
        handler.connectionDidClose(self, error: error)
    }
}

extension Connection: Selectable {
    func handleEvent(_ events: UInt32) {
        if events & EPOLLOUT.rawValue != 0, tlsReadWantsWrite {
            tlsReadWantsWrite = false
            updateInterest()
            readAvailable()
            guard isOpen else { return }
        }
        if events & EPOLLOUT.rawValue != 0, waitingForWritable { flush() }
        guard isOpen else { return }
        if events & EPOLLIN.rawValue != 0, tlsWriteWantsRead {
            tlsWriteWantsRead = false
            flush()
            guard isOpen else { return }
        }
        if events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
            if events & EPOLLERR.rawValue != 0 {
                var code: CInt = 0
                var length = socklen_t(MemoryLayout<CInt>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
                abort(IOError(code: code == 0 ? EIO : code, call: "socket"))
                return
            }
            readAvailable()
            // A hang-up with the read side paused would spin (level-triggered): close now.
            if isOpen, readPaused, events & EPOLLHUP.rawValue != 0 { close(mode: .now) }
        }
    }
}
