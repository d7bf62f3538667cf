public import ParleyLog
#if canImport(Glibc)
import Glibc
import ParleySync
#endif

/// Everything an ``HTTPServer`` needs to know; every field has a documented default.
public struct HTTPServerConfiguration: Sendable {
    /// Address to bind. Default: `127.0.0.1`.
    public var host = "127.0.0.1"
    /// Port to bind; 0 picks a free one. Default: 8080.
    public var port: UInt16 = 8080
    /// Parser limits (request line, headers, default body size).
    public var limits = HTTPParserLimits()
    /// Read timeouts.
    public var timeouts = HTTPTimeouts.Configuration()
    /// How many connections may be open, in all and from one address.
    public var connections = ConnectionLimits()
    /// Outbound budget per connection.
    public var writeBudget = WriteBudget()
    /// The `Server` response header, or `nil` for none. Default: `parley`.
    public var serverName: String? = "parley"
    /// Headers every response carries (test mode's `Parley-Test-Mode`). Default: none.
    public var everyResponse: [(name: String, value: String)] = []
    /// HTTPS and WSS: the certificate every connection is accepted with (reloadable). Default:
    /// none (plain HTTP).
    public var tls: TLSCertificateStore? = nil
    /// Where each request's line goes (method, path, route, status, duration, request id and
    /// what the handler added: ``Response/logMetadata``), at info. Default: nowhere.
    public var logger: Logger = .discarding(label: "parley.http")

    /// The defaults.
    public init() {}
}

/// An HTTP/1.1 server with WebSocket upgrades, running on an ``EventLoopGroup``.
///
/// Each accepted connection lives on one loop. Handlers run as tasks that prefer that loop's
/// executor, so a request is parsed, handled and answered on one thread unless the handler
/// itself awaits work elsewhere.
public final class HTTPServer: Sendable {
    /// The group the server runs on.
    public let group: EventLoopGroup
    /// The bound address (with the real port when 0 was asked for).
    public var localAddress: SocketAddress { listener.localAddress }
    let configuration: HTTPServerConfiguration
    let router: Router
    let registries: [ConnectionRegistry]
    private let listener: TCPServer

    /// Binds and starts serving.
    ///
    /// - Throws: ``IOError`` or ``ResolveError`` when the address cannot be bound.
    public init(configuration: HTTPServerConfiguration, router: Router, group: EventLoopGroup) throws {
        self.group = group
        self.configuration = configuration
        self.router = router
        let registries = group.loops.map { _ in ConnectionRegistry() }
        self.registries = registries
        let shared = HTTPServerShared(configuration: configuration, router: router)
        listener = try TCPServer(group: group, host: configuration.host, port: configuration.port,
                                 budget: configuration.writeBudget, tls: configuration.tls, limits: configuration.connections) { loop in
            HTTPServerHandler(shared: shared, registry: registries[loop.index], loop: loop)
        }
    }

    /// Number of open connections (HTTP and upgraded WebSockets).
    public var connectionCount: Int { registries.reduce(0) { $0 + $1.count } }

    /// Stops gracefully: stop accepting, close idle connections, let requests in flight finish
    /// (their responses carry `Connection: close`), close WebSockets with 1001 (going away).
    /// Whatever is still open after `timeout` is closed.
    public func shutdown(timeout: Duration = .seconds(10)) async {
        listener.stopAccepting()
        for (loop, registry) in zip(group.loops, registries) {
            loop.execute { registry.beginShutdown() }
        }
        let deadline = ContinuousClock.now + timeout
        while connectionCount > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if connectionCount > 0 {
            for (loop, registry) in zip(group.loops, registries) {
                loop.execute { registry.closeAll() }
            }
            let hardDeadline = ContinuousClock.now + .seconds(1)
            while connectionCount > 0, ContinuousClock.now < hardDeadline {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
    }
}

/// Something the server can ask to wind down.
protocol ShutdownParticipant: AnyObject {
    /// Finish what is in flight, then close.
    func beginShutdown()
    /// Close now.
    func closeNow()
}

/// The open connections of one loop, for graceful shutdown. Loop-confined except `count`.
final class ConnectionRegistry: @unchecked Sendable {
    // @unchecked: `members` and `shuttingDown` are touched only on the owning loop's thread;
    // `liveCount` is an atomic-like counter behind a lock, read from any thread.
    private var members: [ObjectIdentifier: any ShutdownParticipant] = [:]
    private let liveCount = LockedValue(0)
    private(set) var shuttingDown = false

    var count: Int { liveCount.withLock { $0 } }

    func add(_ member: any ShutdownParticipant) {
        members[ObjectIdentifier(member)] = member
        liveCount.withLock { $0 += 1 }
    }

    /// Replaces a member (an HTTP connection that became a WebSocket).
    func replace(_ old: any ShutdownParticipant, with new: any ShutdownParticipant) {
        members[ObjectIdentifier(old)] = nil
        members[ObjectIdentifier(new)] = new
    }

    func remove(_ member: any ShutdownParticipant) {
        if members.removeValue(forKey: ObjectIdentifier(member)) != nil {
            liveCount.withLock { $0 -= 1 }
        }
    }

    func beginShutdown() {
        shuttingDown = true
        for member in Array(members.values) { member.beginShutdown() }
    }

    func closeAll() {
        for member in Array(members.values) { member.closeNow() }
    }
}

/// Immutable state shared by every connection of a server.
final class HTTPServerShared: Sendable {
    let configuration: HTTPServerConfiguration
    let router: Router
    /// The configuration's server name, read per response without copying the configuration.
    let serverName: String?
    /// Served over TLS: responses carry `Strict-Transport-Security`.
    let isHTTPS: Bool
    /// Headers every response carries.
    let everyResponse: [(name: String, value: String)]

    init(configuration: HTTPServerConfiguration, router: Router) {
        self.configuration = configuration
        self.router = router
        serverName = configuration.serverName
        everyResponse = configuration.everyResponse
        isHTTPS = configuration.tls != nil
    }
}

/// One server-side HTTP connection: parses requests, runs handlers one at a time, answers in
/// order (pipelined requests wait in the buffer), enforces timeouts, and hands the socket to
/// a WebSocket handler on upgrade.
final class HTTPServerHandler: ConnectionHandler, ShutdownParticipant, @unchecked Sendable {
    // @unchecked: every property is touched only on `loop`'s thread. Handler tasks run with
    // the loop's task executor as preference and hop back through `loop.execute` to write.

    private enum Phase {
        /// Reading the next request head.
        case idle
        /// Reading a body to hand over whole.
        case collecting(Request, Router.Handler, [UInt8])
        /// Handler running with a streamed body still arriving.
        case streaming(RequestBodyStream)
        /// Handler running; the request is fully read.
        case responding
        /// Handler finished before its streamed body did; reading and dropping the rest.
        case draining
        /// Upgrade to WebSocket decided or in progress; no more HTTP parsing.
        case upgrading
        case closed
    }

    let shared: HTTPServerShared
    let registry: ConnectionRegistry
    let loop: EventLoop
    /// Strong (set to nil on close): a weak reference would slow every retain of the Connection.
    private var connection: Connection?
    private var parser: HTTPRequestParser
    private var buffer = ByteBuffer()
    private var phase = Phase.idle
    private var timeouts: HTTPTimeouts
    private var timer: ScheduledTimer?
    private var timerDeadline: UInt64?
    private var keepAlive = true
    private var isHeadRequest = false
    private var shuttingDown = false
    private var readPausedForBody = false
    /// Reading paused because a handler is busy and pipelined bytes piled up (see below).
    private var readPausedForPipeline = false
    /// Unparsed bytes a connection may buffer while its handler runs. A client pipelining
    /// more than this waits (TCP backpressure) instead of growing our memory.
    static let maxBufferedWhileBusy = 64 * 1024
    private var dateCache: (second: Int, text: String) = (0, "")
    /// A file body being sent, and how many of its bytes are queued so far.
    private var sendingFile: (region: FileRegion, sent: Int64)?
    /// Where request lines go (the configuration's, held here so a request does not copy it).
    private let logger: Logger
    /// The request being answered, for its log line and `X-Request-Id`.
    private var current: (id: String, method: HTTPMethod, path: Substring, route: String?, started: UInt64)?
    /// Bytes read from a file per write.
    static let fileChunk = 128 * 1024

    init(shared: HTTPServerShared, registry: ConnectionRegistry, loop: EventLoop) {
        logger = shared.configuration.logger
        self.shared = shared
        self.registry = registry
        self.loop = loop
        parser = HTTPRequestParser(limits: shared.configuration.limits)
        timeouts = HTTPTimeouts(shared.configuration.timeouts, now: loop.now)
    }

    // MARK: - ConnectionHandler

    func connectionActive(_ connection: Connection) {
        self.connection = connection
        registry.add(self)
        if registry.shuttingDown {
            connection.close(mode: .now)
            return
        }
        armTimer()
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        buffer.write(bytes)
        timeouts.bytesArrived(now: loop.now, count: bytes.count)
        armTimer()
        process()
        switch phase {
        case .responding, .upgrading:
            if buffer.readableBytes > Self.maxBufferedWhileBusy, !readPausedForPipeline {
                readPausedForPipeline = true
                connection.pauseReading()
            }
        case .idle, .collecting, .streaming, .draining, .closed:
            break
        }
    }

    func connectionDidReadEOF(_ connection: Connection) {
        switch phase {
        case .idle where parser.isIdle && buffer.readableBytes == 0:
            connection.close(mode: .now)
        case .streaming(let stream):
            stream.fail(HTTPError(.badRequest, code: "incomplete_body", message: "the client closed before sending the whole body"))
            keepAlive = false
            connection.pauseReading()
        case .responding, .upgrading:
            // Half-closed by the client: still answer the request in flight, then close.
            keepAlive = false
            connection.pauseReading()
        default:
            connection.close(mode: .now)
        }
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        // Byte responses are written whole and one at a time, so the queue is bounded by one
        // response; a file body continues when the peer has taken some of the queue.
        if writable, sendingFile != nil { sendFile() }
    }

    func connectionDidClose(_ connection: Connection, error: IOError?) {
        if case .streaming(let stream) = phase {
            stream.fail(HTTPError(.badRequest, code: "connection_closed", message: "the connection closed"))
        }
        phase = .closed
        sendingFile = nil
        if let timer { loop.cancel(timer) }
        timer = nil
        registry.remove(self)
        self.connection = nil
    }

    // MARK: - ShutdownParticipant

    func beginShutdown() {
        shuttingDown = true
        if case .idle = phase, parser.isIdle, buffer.readableBytes == 0 {
            connection?.close(mode: .now)
        }
    }

    func closeNow() { connection?.close(mode: .now) }

    // MARK: - Parsing

    private func process() {
        guard let connection else { return }
        while true {
            switch phase {
            case .idle, .collecting, .streaming, .draining: break
            case .responding, .upgrading, .closed: return
            }
            if readPausedForBody { return }
            let event: HTTPRequestParser.Event?
            do {
                event = try parser.next(&buffer)
            } catch {
                fail(error, on: connection)
                return
            }
            guard let event else { return }
            switch event {
            case .head(let head, let framing, let expectsContinue):
                handleHead(head, framing: framing, expectsContinue: expectsContinue, on: connection)
            case .body(let bytes):
                handleBody(bytes, on: connection)
            case .end:
                handleEnd(on: connection)
            }
        }
    }

    private func handleHead(_ head: HTTPRequestHead, framing: HTTPBodyFraming, expectsContinue: Bool,
                            on connection: Connection) {
        let hasBody = framing != .none && framing != .length(0)
        timeouts.headParsed(now: loop.now, expectingBody: hasBody)
        keepAlive = head.keepAlive && !shuttingDown
        isHeadRequest = head.method == .HEAD
        current = (RequestID.accept(head.headers["x-request-id"]), head.method, head.path, nil, loop.now)

        if head.headers.contains(name: "upgrade", token: "websocket"), let (route, parameters) = shared.router.matchWebSocket(head) {
            phase = .upgrading
            timeouts.becameBusy()
            if hasBody {
                respond(HTTPError(.badRequest, code: "bad_upgrade", message: "an upgrade request must not have a body").response,
                        closing: true)
                return
            }
            startUpgrade(head, route: route, parameters: parameters, on: connection)
            return
        }

        switch shared.router.match(head) {
        case .notFound where shared.router.matchWebSocket(head) != nil:
            // A WebSocket endpoint asked with a plain request (a browser tab, curl): say what it is.
            phase = .responding
            if hasBody { keepAlive = false }
            var headers = HTTPHeaders()
            headers.add(name: "Upgrade", value: "websocket")
            headers.add(name: "Connection", value: "Upgrade")
            respond(HTTPError(.upgradeRequired, code: "bad_upgrade",
                              message: "\(head.path.prefix(100)) is a WebSocket endpoint: connect to it with a WebSocket client (ws:// or wss://), not a plain HTTP request",
                              headers: headers).response)
        case .notFound:
            phase = .responding
            if hasBody { keepAlive = false }
            respond(HTTPError(.notFound, code: "not_found", message: "no route for \(head.method) \(head.path)").response)
        case .methodNotAllowed(let allowed):
            phase = .responding
            if hasBody { keepAlive = false }
            var headers = HTTPHeaders()
            headers.add(name: "Allow", value: allowed.map(\.rawValue).joined(separator: ", "))
            respond(HTTPError(.methodNotAllowed, code: "method_not_allowed",
                              message: "\(head.method) is not allowed here; use \(allowed.map(\.rawValue).joined(separator: " or "))",
                              headers: headers).response)
        case .found(let route, let parameters):
            current?.route = route.path
            let maxBytes = route.options.body.maxBytes
            parser.limits.maxBodySize = maxBytes
            if case .length(let length) = framing, length > maxBytes {
                phase = .responding
                keepAlive = false
                respond(HTTPError.bodyTooLarge(maxBytes).response)
                return
            }
            if expectsContinue {
                connection.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
            }
            var request = Request(head: head, parameters: parameters, remoteAddress: connection.peer)
            request.id = current?.id ?? ""
            switch route.options.body {
            case .collect:
                phase = .collecting(request, route.handler, [])
            case .stream:
                let weakSelf = WeakBox(self)
                let stream = RequestBodyStream { [loop] in
                    loop.execute { weakSelf.value?.resumeBodyReading() }
                }
                request.body = .stream(stream)
                phase = .streaming(stream)
                run(route.handler, request)
            }
        }
    }

    private func handleBody(_ bytes: [UInt8], on connection: Connection) {
        switch phase {
        case .collecting(let request, let handler, var body):
            phase = .idle  // drop the reference so `body` stays uniquely owned
            body += bytes
            phase = .collecting(request, handler, body)
        case .streaming(let stream):
            if !stream.append(bytes) {
                readPausedForBody = true
                timeouts.becameBusy()
                connection.pauseReading()
            }
        case .draining, .idle, .responding, .upgrading, .closed:
            break
        }
    }

    private func handleEnd(on connection: Connection) {
        switch phase {
        case .collecting(let request, let handler, let body):
            var request = request
            request.body = .bytes(body)
            phase = .responding
            timeouts.becameBusy()
            run(handler, request)
        case .streaming(let stream):
            stream.finish()
            phase = .responding
            timeouts.becameBusy()
        case .draining:
            phase = .idle
            timeouts.responseSent(now: loop.now)
            armTimer()
            if !keepAlive || shuttingDown { connection.close(mode: .lingering) }
        case .idle, .responding, .upgrading, .closed:
            break
        }
    }

    private func resumeBodyReading() {
        guard readPausedForBody, let connection, connection.isOpen else { return }
        readPausedForBody = false
        timeouts.bodyResumed(now: loop.now)
        armTimer()
        connection.resumeReading()
        process()
    }

    private func fail(_ error: HTTPParseError, on connection: Connection) {
        keepAlive = false
        switch phase {
        case .streaming(let stream):
            // The handler owns the response; it will see this error when it reads the body.
            stream.fail(HTTPError(error.status, code: error.code, message: error.message))
            phase = .responding
            connection.pauseReading()
        case .responding, .upgrading, .closed:
            break
        case .idle, .collecting, .draining:
            phase = .responding
            respond(Response.error(status: error.status, code: error.code, message: error.message), closing: true)
        }
    }

    // MARK: - Handlers and responses

    private func run(_ handler: @escaping Router.Handler, _ request: Request) {
        let loop = self.loop
        Task(executorPreference: loop.taskExecutor) { [self] in
            let response: Response
            do {
                response = try await handler(request)
            } catch let error as HTTPError {
                response = error.response
            } catch let error as HTTPParseError {
                response = Response.error(status: error.status, code: error.code, message: error.message)
            } catch {
                response = Response.error(status: .internalServerError, code: "internal_error",
                                          message: "the server failed to handle the request; try again later")
            }
            if loop.inEventLoop {
                finishHandler(response)
            } else {
                loop.execute { self.finishHandler(response) }
            }
        }
    }

    private func finishHandler(_ response: Response) {
        guard let connection, connection.isOpen else { return }
        switch phase {
        case .streaming:
            // Answered before the body ended: send now, drop the rest of the body. A refusal
            // (an upload over its limit) closes instead of reading what may be gigabytes.
            phase = .draining
            if response.status.code >= 400 { keepAlive = false }
            if readPausedForBody {
                readPausedForBody = false
                connection.resumeReading()
            }
            respond(response)
        case .responding:
            respond(response)
        case .idle, .collecting, .draining, .upgrading, .closed:
            break
        }
    }

    private func respond(_ response: Response, closing: Bool = false) {
        guard let connection else { return }
        if closing { keepAlive = false }
        var response = response
        if let serverName = shared.serverName { response.headers.replaceOrAdd(name: "Server", value: serverName) }
        for header in shared.everyResponse { response.headers.replaceOrAdd(name: header.name, value: header.value) }
        // Over HTTPS, browsers are told to use nothing else for two years (Mozilla's advice).
        if shared.isHTTPS { response.headers.replaceOrAdd(name: "Strict-Transport-Security", value: "max-age=63072000") }
        if let current {
            response.headers.replaceOrAdd(name: "X-Request-Id", value: current.id)
            NetMetrics.shared.requestLatency.observe(nanoseconds: loop.now &- current.started)
            logRequest(current, response)
            self.current = nil
        }
        keepAlive = keepAlive && !shuttingDown
        let head = response.serializedHead(date: currentDate(), keepAlive: keepAlive)
        NetMetrics.shared.response(status: response.status.code)
        if let file = response.file, !isHeadRequest, file.length > 0 {
            connection.write(head)
            sendingFile = (file, 0)
            timeouts.sendProgressed(now: loop.now)
            armTimer()
            sendFile()
            return
        }
        if isHeadRequest || response.body.isEmpty {
            connection.write(head)
        } else {
            connection.write(contentsOf: [head, response.body])
        }
        finishResponse()
    }

    /// The request's line: what it asked, how it was answered, how long it took to the first
    /// byte of the answer, and what the handler added (the caller, the app).
    private func logRequest(_ request: (id: String, method: HTTPMethod, path: Substring, route: String?, started: UInt64), _ response: Response) {
        let logger = logger
        let level: LogLevel = response.status.code >= 500 ? .error : response.logLevel
        guard logger.enabled(level) else { return }
        var metadata = LogMetadata(minimumCapacity: 10 + response.logMetadata.count)
        metadata["request.id"] = .string(request.id)
        metadata["method"] = .string(request.method.rawValue)
        metadata["path"] = .string(String(request.path))
        metadata["status"] = .integer(Int64(response.status.code))
        metadata["ms"] = .double(Double(loop.now &- request.started) / 1_000_000)
        if let route = request.route { metadata["route"] = .string(route) }
        if let peer = connection?.peer { metadata["peer"] = .string(peer.host) }
        for (key, value) in response.logMetadata { metadata[key] = value }
        logger.log(level, "request", metadata: metadata)
    }

    /// Queues the file body's next pieces while the connection is under its write budget;
    /// the rest follows when it drains (``connection(_:writabilityChanged:)``).
    private func sendFile() {
        guard let connection, connection.isOpen, let pending = sendingFile else { return }
        let region = pending.region
        var sent = pending.sent
        while sent < region.length, connection.isWritable {
            let count = Int(min(Int64(Self.fileChunk), region.length - sent))
            let offset = off_t(region.offset + sent)
            let chunk = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                var read = 0
                while read < count {
                    let result = pread(region.descriptor, buffer.baseAddress.map { $0 + read }, count - read, offset + off_t(read))
                    if result < 0, errno == EINTR { continue }
                    guard result > 0 else { break }
                    read += result
                }
                initialized = read
            }
            guard chunk.count == count else {
                // The file shrank or could not be read: the head promised a length that can no
                // longer be kept, so the only honest signal is to close the connection.
                sendingFile = nil
                connection.close(mode: .now)
                return
            }
            connection.write(chunk)
            sent += Int64(count)
        }
        timeouts.sendProgressed(now: loop.now, sent: sent)
        armTimer()
        guard sent == region.length else {
            sendingFile = (region, sent)
            return
        }
        sendingFile = nil
        finishResponse()
    }

    /// After a response is queued: close, drain, or wait for the next request.
    private func finishResponse() {
        guard let connection else { return }
        switch phase {
        case .draining:
            // Keep reading the unread body; `handleEnd` finishes the request.
            if !keepAlive { connection.close(mode: .lingering) }
            return
        case .upgrading:
            connection.close(mode: .lingering)
            return
        case .idle, .collecting, .streaming, .responding, .closed:
            break
        }
        guard keepAlive else {
            phase = .closed
            connection.close(mode: .lingering)
            return
        }
        phase = .idle
        timeouts.responseSent(now: loop.now)
        if buffer.readableBytes > 0 { timeouts.bytesArrived(now: loop.now) }
        armTimer()
        if readPausedForPipeline {
            readPausedForPipeline = false
            connection.resumeReading()
        }
        process()
    }

    private func currentDate() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let second = Int(now.tv_sec)
        if second != dateCache.second { dateCache = (second, HTTPDate.format(epochSeconds: second)) }
        return dateCache.text
    }

    // MARK: - Timeouts

    /// Keeps at most one timer per connection: moved deadlines are picked up when it fires.
    private func armTimer() {
        guard let deadline = timeouts.deadline else { return }
        if let timerDeadline, timer != nil, timerDeadline <= deadline { return }
        if let timer { loop.cancel(timer) }
        let now = loop.now
        timerDeadline = deadline
        timer = loop.schedule(after: .nanoseconds(Int64(deadline > now ? deadline - now : 0))) { [self] in
            timerFired()
        }
    }

    private func timerFired() {
        timer = nil
        timerDeadline = nil
        guard let connection, connection.isOpen else { return }
        switch timeouts.check(now: loop.now) {
        case .wait:
            armTimer()
        case .closeIdle:
            connection.close(mode: .now)
        case .requestTimeout:
            if case .streaming(let stream) = phase {
                stream.fail(HTTPError(.requestTimeout, code: "request_timeout", message: "the body stopped arriving"))
            }
            phase = .responding
            respond(Response.error(status: .requestTimeout, code: "request_timeout",
                                   message: "the request took too long to arrive"), closing: true)
        }
    }

    // MARK: - WebSocket upgrade

    private func startUpgrade(_ head: HTTPRequestHead, route: Router.WebSocketRoute, parameters: [String: String],
                              on connection: Connection) {
        let accept: String
        do {
            accept = try WebSocketHandshake.validateClientRequest(head)
        } catch {
            respond(error.response, closing: true)
            return
        }
        let request = Request(head: head, parameters: parameters, remoteAddress: connection.peer)
        let loop = self.loop
        Task(executorPreference: loop.taskExecutor) { [self] in
            let outcome: Result<WebSocketHandler, HTTPError>
            do {
                outcome = .success(try await route.upgrade(request))
            } catch let error as HTTPError {
                outcome = .failure(error)
            } catch {
                outcome = .failure(HTTPError(.internalServerError, code: "internal_error", message: "the upgrade failed"))
            }
            loop.execute { self.finishUpgrade(outcome, head: head, accept: accept, configuration: route.configuration) }
        }
    }

    private func finishUpgrade(_ outcome: Result<WebSocketHandler, HTTPError>, head: HTTPRequestHead, accept: String,
                               configuration: WebSocketConfiguration) {
        guard let connection, connection.isOpen else { return }
        switch outcome {
        case .failure(let error):
            respond(error.response, closing: true)
        case .success(let handler):
            guard !shuttingDown else {
                respond(HTTPError(.serviceUnavailable, code: "shutting_down", message: "the server is restarting; reconnect shortly").response,
                        closing: true)
                return
            }
            var headers = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            headers += "Sec-WebSocket-Accept: \(accept)\r\n\r\n"
            NetMetrics.shared.response(status: 101)
            connection.write(Array(headers.utf8))
            if let timer { loop.cancel(timer) }
            timer = nil
            phase = .closed
            let leftover = buffer
            buffer = ByteBuffer()
            let protocolHandler = WebSocketProtocolHandler(role: .server, configuration: configuration, handler: handler,
                                                           connection: connection, registry: registry)
            registry.replace(self, with: protocolHandler)
            connection.handler = protocolHandler
            self.connection = nil
            protocolHandler.start(leftover: leftover, request: head)
        }
    }
}

/// A weak reference that can cross threads; the referent is only used on its loop.
final class WeakBox<T: AnyObject>: @unchecked Sendable {
    // @unchecked: `value` is only dereferenced on the referent's own loop thread.
    weak var value: T?
    init(_ value: T) { self.value = value }
}
