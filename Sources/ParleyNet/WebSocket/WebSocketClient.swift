import ParleySync
/// Why a client connection attempt failed.
public struct WebSocketClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, for humans.
    public var message: String
    /// The HTTP status the server answered with, when it refused the upgrade.
    public var status: Int?

    public var description: String { status.map { "\(message) (HTTP \($0))" } ?? message }
}

/// A WebSocket client on Parley's own event loops (URLSession has no WebSocket support on
/// Linux: PLATFORM.md §6).
public enum WebSocketClient: Sendable {
    /// Connects to `url` (`ws://host:port/path?query`) and completes the handshake.
    ///
    /// - Parameters:
    ///   - headers: extra request headers (for example an app key).
    ///   - source: the local address to connect from (see ``Connection/connect(to:from:on:timeout:budget:handler:)``).
    ///   - loop: the loop to run on; the handler's callbacks run there.
    ///   - handler: receives the open socket, messages and the close.
    /// - Returns: the open socket.
    /// - Throws: ``WebSocketClientError`` for a bad URL, a refused upgrade or a bad handshake;
    ///   ``IOError``/``ResolveError`` when the server cannot be reached.
    public static func connect(to url: String, headers: HTTPHeaders = HTTPHeaders(),
                               configuration: WebSocketConfiguration = WebSocketConfiguration(),
                               timeout: Duration = .seconds(10), from source: SocketAddress? = nil, on loop: EventLoop,
                               tlsContext: TLSContext? = nil, handler: WebSocketHandler) async throws -> WebSocket {
        let target = try parse(url)
        // wss://: the server's certificate is checked against the trusted roots and the host name.
        let tls: (context: TLSContext, serverName: String)? = target.secure ? (try tlsContext ?? TLSContext.defaultClient.get(), target.host) : nil
        guard let address = try SocketAddress.resolve(host: target.host, port: target.port).first else {
            throw ResolveError(host: target.host, reason: "no addresses")
        }
        var head = HTTPRequestHead(method: .GET, target: target.path)
        let defaultPort: UInt16 = target.secure ? 443 : 80
        let hostHeader = target.host.contains(":") ? "[\(target.host)]" : target.host
        head.headers.add(name: "Host", value: target.port == defaultPort ? hostHeader : "\(hostHeader):\(target.port)")
        head.headers.add(name: "Upgrade", value: "websocket")
        head.headers.add(name: "Connection", value: "Upgrade")
        let key = WebSocketHandshake.makeKey()
        head.headers.add(name: "Sec-WebSocket-Key", value: key)
        head.headers.add(name: "Sec-WebSocket-Version", value: "13")
        for field in headers { head.headers.add(name: field.name, value: field.value) }
        let request = head

        let result = LockedValue<CheckedContinuation<WebSocket, any Error>?>(nil)
        return try await withCheckedThrowingContinuation { continuation in
            result.withLock { $0 = continuation }
            Task {
                do {
                    _ = try await Connection.connect(to: address, from: source, on: loop, timeout: timeout, tls: tls) {
                        ClientHandshakeHandler(request: request, expectedAccept: WebSocketHandshake.acceptValue(forKey: key),
                                               configuration: configuration, handler: handler, timeout: timeout) { outcome in
                            let continuation = result.withLock { value in
                                defer { value = nil }
                                return value
                            }
                            continuation?.resume(with: outcome)
                        }
                    }
                } catch {
                    let continuation = result.withLock { value in
                        defer { value = nil }
                        return value
                    }
                    continuation?.resume(throwing: error)
                }
            }
        }
    }

    struct Target: Equatable {
        var host: String
        var port: UInt16
        var path: String
        var secure = false
    }

    static func parse(_ url: String) throws(WebSocketClientError) -> Target {
        let secure = url.hasPrefix("wss://")
        guard secure || url.hasPrefix("ws://") else {
            throw WebSocketClientError(message: "a WebSocket URL starts with ws:// or wss:// (got \(url.prefix(16)))")
        }
        let rest = url.dropFirst(secure ? 6 : 5)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var path = String(rest[authorityEnd...])
        if path.isEmpty || path.first == "?" { path = "/" + path }
        var host = String(authority)
        var port: UInt16 = secure ? 443 : 80
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw WebSocketClientError(message: "bad IPv6 host in \(url)") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") {
                guard let value = UInt16(after.dropFirst()) else { throw WebSocketClientError(message: "bad port in \(url)") }
                port = value
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            guard let value = UInt16(authority[authority.index(after: colon)...]) else {
                throw WebSocketClientError(message: "bad port in \(url)")
            }
            port = value
        }
        guard !host.isEmpty else { throw WebSocketClientError(message: "no host in \(url)") }
        return Target(host: host, port: port, path: path, secure: secure)
    }
}

/// Sends the upgrade request, checks the answer, then hands the connection to the protocol.
private final class ClientHandshakeHandler: ConnectionHandler {
    let request: HTTPRequestHead
    let expectedAccept: String
    let configuration: WebSocketConfiguration
    let handler: WebSocketHandler
    let timeout: Duration
    let completion: (Result<WebSocket, any Error>) -> Void
    var buffer = ByteBuffer()
    var done = false
    var timer: ScheduledTimer?

    init(request: HTTPRequestHead, expectedAccept: String, configuration: WebSocketConfiguration,
         handler: WebSocketHandler, timeout: Duration, completion: @escaping (Result<WebSocket, any Error>) -> Void) {
        self.request = request
        self.expectedAccept = expectedAccept
        self.configuration = configuration
        self.handler = handler
        self.timeout = timeout
        self.completion = completion
    }

    func connectionActive(_ connection: Connection) {
        var text = "GET \(request.target) HTTP/1.1\r\n"
        for field in request.headers { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        connection.write(Array(text.utf8))
        timer = connection.loop.schedule(after: timeout) { [self, connection] in
            finish(.failure(WebSocketClientError(message: "the handshake timed out")), connection)
        }
    }

    func connection(_ connection: Connection, didRead bytes: UnsafeRawBufferPointer) {
        guard !done else { return }
        buffer.write(bytes)
        let head: HTTPResponseHead?
        do {
            head = try HTTPResponseHeadParser().parse(&buffer)
        } catch {
            return finish(.failure(WebSocketClientError(message: "malformed handshake response: \(error.message)")), connection)
        }
        guard let head else { return }
        guard head.status.code == 101 else {
            return finish(.failure(WebSocketClientError(message: "the server refused the upgrade", status: head.status.code)),
                          connection)
        }
        guard head.headers.contains(name: "upgrade", token: "websocket"),
              head.headers.contains(name: "connection", token: "upgrade"),
              head.headers["sec-websocket-accept"] == expectedAccept
        else {
            return finish(.failure(WebSocketClientError(message: "the server's handshake is not a valid WebSocket accept")),
                          connection)
        }
        done = true
        if let timer { connection.loop.cancel(timer) }
        let protocolHandler = WebSocketProtocolHandler(role: .client, configuration: configuration, handler: handler,
                                                       connection: connection, registry: nil)
        connection.handler = protocolHandler
        let leftover = buffer
        buffer = ByteBuffer()
        // Report the socket before replaying leftover frames, so the caller has it first.
        protocolHandler.start(leftover: ByteBuffer(), request: request)
        if let socket = protocolHandler.socket { completion(.success(socket)) }
        if leftover.readableBytes > 0 {
            leftover.readableView.withUnsafeBytes { protocolHandler.connection(connection, didRead: $0) }
        }
    }

    func connectionDidReadEOF(_ connection: Connection) {
        finish(.failure(WebSocketClientError(message: "the server closed the connection during the handshake")), connection)
    }

    func connectionDidClose(_ connection: Connection, error: IOError?) {
        guard !done else { return }
        done = true
        if let timer { connection.loop.cancel(timer) }
        completion(.failure(error ?? IOError(code: 104, call: "handshake")))
    }

    private func finish(_ result: Result<WebSocket, any Error>, _ connection: Connection?) {
        guard !done else { return }
        done = true
        if let timer { connection?.loop.cancel(timer) }
        completion(result)
        connection?.close(mode: .now)
    }
}
