import Foundation
import Testing
@testable import ParleyNet
import ParleyNetTesting
import ParleyTesting

#if canImport(Glibc)
import Glibc
import ParleySync
#endif

/// The real server on an ephemeral port, driven by raw sockets and by the Swift client.
/// Serialized: the raw clients block in `recv`, and the cooperative pool has only two threads.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPServerIntegrationTests {
    static func router() -> Router {
        var router = Router()
        router.get("/hello/:name") { request in Response.text("hello \(try request.require("name", as: String.self))") }
        router.post("/echo") { request in Response(body: try await request.body.collect(upTo: .max)) }
        router.post("/count", options: RouteOptions(body: .stream(maxBytes: 64 << 20))) { request in
            var total = 0
            var checksum: UInt64 = 0
            if case .stream(let stream) = request.body {
                for try await chunk in stream {
                    total += chunk.count
                    for byte in chunk { checksum = checksum &* 31 &+ UInt64(byte) }
                }
            }
            return Response.text("\(total) \(checksum)")
        }
        router.post("/small", options: RouteOptions(body: .collect(maxBytes: 10))) { _ in Response.text("ok") }
        router.post("/small-stream", options: RouteOptions(body: .stream(maxBytes: 10))) { request in
            Response(body: try await request.body.collect(upTo: .max))
        }
        return router
    }

    @Test func keepAliveAnswersPipelinedRequestsInOrder() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("GET /hello/a HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nfirstGET /hello/b HTTP/1.1\r\nHost: x\r\n\r\n")
        let responses = client.readResponses(3)
        #expect(responses.map(\.body) == ["hello a", "first", "hello b"])
        #expect(responses.allSatisfy { $0.headers["connection"] == nil })
        // The same connection still serves.
        client.send("GET /hello/c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let last = client.readResponses(1)
        #expect(last.first?.body == "hello c")
        #expect(last.first?.headers["connection"] == "close")
        #expect(client.readToEnd().closed)
    }

    @Test func expectContinueGets100BeforeTheBody() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
        let interim = client.read { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        #expect(String(decoding: interim, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        client.send("body")
        #expect(client.readResponses(1).first?.body == "body")
    }

    @Test func oversizeBodyIs413WithoutReadingIt() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("POST /small HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n")
        let response = client.readResponses(1).first
        #expect(response?.status == 413)
        #expect(response?.body.contains("body_too_large") == true)
        #expect(client.readToEnd().closed)
    }

    @Test func malformedRequestGetsAJSONErrorAndTheConnectionCloses() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
        let response = client.readResponses(1).first
        #expect(response?.status == 400)
        #expect(response?.body == #"{"error":{"code":"ambiguous_length","message":"both Transfer-Encoding and Content-Length"}}"#)
        #expect(client.readToEnd().closed)
    }

    @Test func streamedUploadsArriveWholeWithBackpressure() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let size = 8 << 20
        let body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var checksum: UInt64 = 0
        for byte in body { checksum = checksum &* 31 &+ UInt64(byte) }
        let client = try RawClient(port: server.port, receiveTimeout: 20)
        client.send("POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: \(size)\r\n\r\n")
        client.send(body)
        #expect(client.readResponses(1).first?.body == "\(size) \(checksum)")
    }

    @Test func aClientThatHangsUpMidBodyGetsTheErrorInsteadOfAHang() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten b")
        client.shutdownWrite()
        let response = client.readResponses(1).first
        #expect(response?.status == 400)
        #expect(response?.body.contains("incomplete_body") == true)
        #expect(client.readToEnd().closed)
    }

    @Test func aChunkedBodyOverAStreamedRoutesLimitIs413() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        // The handler is already reading the stream when the 11th byte arrives.
        client.send("POST /small-stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n")
        let response = client.readResponses(1).first
        #expect(response?.status == 413)
        #expect(response?.body.contains("body_too_large") == true)
        #expect(client.readToEnd().closed)
    }

    @Test func slowHeadGets408() async throws {
        let server = try TestServer(router: Self.router()) { $0.timeouts.head = .milliseconds(300) }
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("GET /hello/slow HTTP/1.1\r\nHo")
        let (bytes, closed) = client.readToEnd()
        #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 408 Request Timeout"))
        #expect(closed)
    }

    @Test func idleKeepAliveConnectionIsClosedQuietly() async throws {
        let server = try TestServer(router: Self.router()) { $0.timeouts.idle = .milliseconds(300) }
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("GET /hello/x HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(client.readResponses(1).first?.status == 200)
        let (rest, closed) = client.readToEnd()
        #expect(rest.isEmpty)
        #expect(closed)
    }

    @Test func aPipelinedFloodBehindASlowHandlerIsBoundedAndAnsweredInOrder() async throws {
        let gate = Gate()
        var router = Router()
        router.get("/slow") { _ in
            await gate.wait()
            return Response.text("slow")
        }
        router.get("/fast") { _ in Response.text("fast") }
        let server = try TestServer(router: router)
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port, receiveTimeout: 20)
        client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        try await withTimeout { await gate.waitUntilWaiting() }
        // 2,000 pipelined requests (about 8 MB) while the first is stuck. The server stops
        // reading past 64 KiB of unparsed input (HTTPServerHandler.maxBufferedWhileBusy), so
        // the flood stalls in TCP once the socket buffers (well under 8 MB here) are full.
        // Were the server to keep reading, all of it would go through.
        let padding = String(repeating: "p", count: 4000)
        let flood = Array(String(repeating: "GET /fast HTTP/1.1\r\nHost: x\r\nX-Pad: \(padding)\r\n\r\n", count: 2000).utf8)
        let sent = client.sendUntilStalled(flood)
        #expect(sent < flood.count / 2, "the server buffered \(sent) of \(flood.count) bytes behind a busy handler")
        // Once the handler answers, everything is read and answered, in order.
        let rest = Array(flood[sent...])
        let sender = Thread { client.send(rest) }
        sender.start()
        await gate.open()
        let responses = client.readResponses(2001)
        #expect(responses.count == 2001)
        #expect(responses.first?.body == "slow")
        #expect(responses.dropFirst().allSatisfy { $0.body == "fast" })
    }

    @Test func unknownRoutesAnd405() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("GET /nothing HTTP/1.1\r\nHost: x\r\n\r\nDELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        let responses = client.readResponses(2)
        #expect(responses.map(\.status) == [404, 405])
        #expect(responses.last?.headers["allow"] == "POST")
    }

    @Test func requestInFlightFinishesDuringShutdown() async throws {
        let gate = Gate()
        var router = Router()
        router.get("/slow") { _ in
            await gate.wait()
            return Response.text("finished")
        }
        let server = try TestServer(router: router)
        let client = try RawClient(port: server.port)
        let idle = try RawClient(port: server.port)
        client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        try await withTimeout { await gate.waitUntilWaiting() }
        let stopping = Task { await server.stop() }
        // The idle connection is closed at once; the busy one still gets its answer, marked close.
        #expect(idle.readToEnd().closed)
        await gate.open()
        let response = client.readResponses(1).first
        #expect(response?.body == "finished")
        #expect(response?.headers["connection"] == "close")
        await stopping.value
    }
}

/// A one-shot gate a handler waits on, opened by the test.
actor Gate {
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var watchers: [CheckedContinuation<Void, Never>] = []
    private var isOpen = false

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { continuation in
            waiters.append(continuation)
            for watcher in watchers { watcher.resume() }
            watchers.removeAll()
        }
    }

    func waitUntilWaiting() async {
        if !waiters.isEmpty { return }
        await withCheckedContinuation { watchers.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters.removeAll()
    }
}

@Suite(.serialized, .timeLimit(.minutes(1)))
struct WebSocketIntegrationTests {
    static func router(configuration: WebSocketConfiguration = WebSocketConfiguration(),
                       serverEvents: EventQueue<SocketEvent>? = nil,
                       broadcaster: LockedValue<WebSocketBroadcaster?>? = nil,
                       lifetimes: EventQueue<Duration>? = nil) -> Router {
        var router = Router()
        router.webSocket("/timed", configuration: configuration) { _ in
            // Measured on the loop that owns the socket, so a busy test process cannot skew it.
            let opened = LockedValue<UInt64>(0)
            return WebSocketHandler(
                onOpen: { socket in opened.withLock { $0 = socket.loop.now } },
                onClose: { socket, code, reason in
                    let lifetime = socket.loop.now - opened.withLock { $0 }
                    lifetimes?.push(.nanoseconds(Int64(lifetime)))
                    serverEvents?.push(.close(code, reason))
                })
        }
        router.webSocket("/echo", configuration: configuration) { _ in
            WebSocketHandler(
                onMessage: { socket, message in
                    switch message {
                    case .text(let text): socket.send(text: text)
                    case .binary(let bytes): socket.send(binary: bytes)
                    }
                },
                onClose: { _, code, reason in serverEvents?.push(.close(code, reason)) })
        }
        router.webSocket("/flood", configuration: configuration) { _ in
            WebSocketHandler(
                onOpen: { socket in
                    let chunk = [UInt8](repeating: 0x61, count: 64 << 10)
                    for _ in 0..<200 { socket.send(binary: chunk) }
                },
                onClose: { _, code, reason in serverEvents?.push(.close(code, reason)) })
        }
        router.webSocket("/closer", configuration: configuration) { _ in
            // Starts the close handshake at once; the test's peer never answers it.
            let opened = LockedValue<UInt64>(0)
            return WebSocketHandler(
                onOpen: { socket in
                    opened.withLock { $0 = socket.loop.now }
                    socket.close(code: WebSocketCloseCode(rawValue: 4000), reason: "closing")
                },
                onClose: { socket, code, reason in
                    lifetimes?.push(.nanoseconds(Int64(socket.loop.now - opened.withLock { $0 })))
                    serverEvents?.push(.close(code, reason))
                })
        }
        router.webSocket("/private") { request in
            guard request.queryItems["key"] == "secret" else {
                throw HTTPError(.unauthorized, code: "bad_app_key", message: "unknown app key")
            }
            return WebSocketHandler()
        }
        router.webSocket("/broadcast") { _ in
            let group = broadcaster?.withLock { $0 }
            return WebSocketHandler(
                onOpen: { group?.add($0) },
                onMessage: { _, message in
                    if case .text(let text) = message { group?.broadcast(EncodedWebSocketFrame(text: text)) }
                },
                onClose: { socket, _, _ in group?.remove(socket) })
        }
        return router
    }

    @Test func swiftClientEchoesTextAndBinaryAndClosesCleanly() async throws {
        let serverEvents = EventQueue<SocketEvent>()
        let server = try TestServer(router: Self.router(serverEvents: serverEvents))
        defer { Task { await server.stop() } }
        let (handler, events) = recordingHandler()
        let socket = try await WebSocketClient.connect(to: "ws://127.0.0.1:\(server.port)/echo",
                                                       on: server.group.loops[0], handler: handler)
        socket.send(text: "héllo 👋")
        let big = (0..<300_000).map { UInt8(truncatingIfNeeded: $0) }
        socket.send(binary: big)
        #expect(try await nextEvent(events) == .message(.text("héllo 👋")))
        #expect(try await nextEvent(events) == .message(.binary(big)))
        socket.close(code: .normalClosure, reason: "bye")
        #expect(try await nextEvent(events) == .close(.normalClosure, ""))
        #expect(try await serverEvents.next() == .close(.normalClosure, "bye"))
    }

    @Test func aServerThatNeverAnswersTheHandshakeTimesOut() async throws {
        // A listener that never accepts: the kernel completes TCP, nobody speaks HTTP.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                _ = bind(listener, raw, length)
                _ = listen(listener, 8)
                _ = getsockname(listener, raw, &length)
            }
        }
        let port = UInt16(bigEndian: address.sin_port)
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        do {
            _ = try await WebSocketClient.connect(to: "ws://127.0.0.1:\(port)/", timeout: .milliseconds(300),
                                                  on: group.loops[0], handler: WebSocketHandler())
            Issue.record("the handshake should have timed out")
        } catch let error as WebSocketClientError {
            #expect(error.message == "the handshake timed out")
        }
    }

    @Test func refusedUpgradeReportsTheStatus() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        do {
            _ = try await WebSocketClient.connect(to: "ws://127.0.0.1:\(server.port)/private?key=wrong",
                                                  on: server.group.loops[0], handler: WebSocketHandler())
            Issue.record("the upgrade should have been refused")
        } catch let error as WebSocketClientError {
            #expect(error.status == 401)
        }
        _ = try await WebSocketClient.connect(to: "ws://127.0.0.1:\(server.port)/private?key=secret",
                                              on: server.group.loops[0], handler: WebSocketHandler())
    }

    @Test func broadcastReachesEverySocketOnEveryLoop() async throws {
        let holder = LockedValue<WebSocketBroadcaster?>(nil)
        let server = try TestServer(router: Self.router(broadcaster: holder))
        holder.withLock { $0 = WebSocketBroadcaster(group: server.group) }
        defer { Task { await server.stop() } }
        var sockets: [WebSocket] = []
        var streams: [EventQueue<SocketEvent>] = []
        for index in 0..<4 {
            let (handler, events) = recordingHandler()
            sockets.append(try await WebSocketClient.connect(to: "ws://127.0.0.1:\(server.port)/broadcast",
                                                             on: server.group.loops[index % 2], handler: handler))
            streams.append(events)
        }
        try await withTimeout {
            while (holder.withLock { $0?.count } ?? 0) < 4 { await Task.yield() }
        }
        sockets[0].send(text: "to everyone")
        for events in streams {
            #expect(try await nextEvent(events) == .message(.text("to everyone")))
        }
    }

    @Test func shutdownClosesWebSocketsWithGoingAway() async throws {
        let server = try TestServer(router: Self.router())
        let clientGroup = try EventLoopGroup(loopCount: 1)
        defer { clientGroup.shutdown() }
        let (handler, events) = recordingHandler()
        _ = try await WebSocketClient.connect(to: "ws://127.0.0.1:\(server.port)/echo", on: clientGroup.loops[0], handler: handler)
        let stopping = Task { await server.stop() }
        #expect(try await nextEvent(events) == .close(.goingAway, "server shutting down"))
        await stopping.value
    }

    @Test func aClientThatStopsReadingIsDroppedWith1013() async throws {
        var configuration = WebSocketConfiguration()
        configuration.maxQueuedBytes = 1 << 20
        configuration.closeTimeout = .milliseconds(300)
        let serverEvents = EventQueue<SocketEvent>()
        let server = try TestServer(router: Self.router(configuration: configuration, serverEvents: serverEvents))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.sendUpgrade(path: "/flood")
        // The client does not read: 12.5 MiB of frames cannot all be queued.
        let event = try await serverEvents.next()
        #expect(event == .close(.tryAgainLater, "too slow: reconnect and resume"))
        // When it reads again, what was in flight ends with the close frame that says why
        // (the frames not yet started were dropped, so the stream is still well-formed).
        let (bytes, closed) = client.readToEnd()
        #expect(closed)
        let reason = Array("too slow: reconnect and resume".utf8)
        let closeFrame: [UInt8] = [0x88, UInt8(2 + reason.count), 0x03, 0xF5] + reason
        #expect(Array(bytes.suffix(closeFrame.count)) == closeFrame)
    }

    @Test func aSilentPeerIsDroppedWithinTwoPingIntervals() async throws {
        var configuration = WebSocketConfiguration()
        configuration.pingInterval = .milliseconds(200)
        let serverEvents = EventQueue<SocketEvent>()
        let lifetimes = EventQueue<Duration>()
        let server = try TestServer(router: Self.router(configuration: configuration, serverEvents: serverEvents,
                                                        lifetimes: lifetimes))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.sendUpgrade(path: "/timed")
        let event = try await serverEvents.next()
        #expect(event == .close(.abnormalClosure, "peer stopped responding"))
        // Dropped after two silent intervals (400 ms), not before, and not much later.
        let lifetime = try await lifetimes.next()
        #expect(lifetime >= .milliseconds(400))
        #expect(lifetime < .milliseconds(1000))
        // It was pinged before being dropped: the bytes it received include a ping frame (0x89).
        let (bytes, _) = client.readToEnd()
        #expect(bytes.contains(0x89))
    }

    @Test func anUnansweredCloseIsAbandonedAfterTheCloseTimeout() async throws {
        var configuration = WebSocketConfiguration()
        configuration.closeTimeout = .milliseconds(300)
        let serverEvents = EventQueue<SocketEvent>()
        let lifetimes = EventQueue<Duration>()
        let server = try TestServer(router: Self.router(configuration: configuration, serverEvents: serverEvents,
                                                        lifetimes: lifetimes))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.sendUpgrade(path: "/closer")
        // The peer reads the close frame (code 4000) but never answers it.
        func headEnd(_ bytes: [UInt8]) -> Int? {
            bytes.indices.first { bytes[$0...].starts(with: [13, 10, 13, 10]) }.map { $0 + 4 }
        }
        let received = client.read { bytes in headEnd(bytes).map { bytes.count >= $0 + 4 } ?? false }
        let frame = Array(received[(headEnd(received) ?? received.count)...])
        #expect(frame.starts(with: [0x88]))
        #expect(Array(frame.dropFirst(2).prefix(2)) == [0x0F, 0xA0])  // 4000
        #expect(try await serverEvents.next() == .close(.abnormalClosure, ""))
        let lifetime = try await lifetimes.next()
        #expect(lifetime >= .milliseconds(300))
        #expect(lifetime < .milliseconds(1000))
        #expect(client.readToEnd().closed)
    }

    @Test func anUnmaskedClientFrameGetsClose1002() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.sendUpgrade(path: "/echo")
        let handshake = client.read { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        #expect(String(decoding: handshake, as: UTF8.self).contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        client.send([0x81, 0x02, 0x68, 0x69])  // "hi", not masked
        let (bytes, closed) = client.readToEnd()
        #expect(Array(bytes.prefix(4)) == [0x88, bytes.count > 1 ? bytes[1] : 0, 0x03, 0xEA])  // close, code 1002
        #expect(closed)
    }

    @Test func wrongVersionGets426() async throws {
        let server = try TestServer(router: Self.router())
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.sendUpgrade(path: "/echo", version: 8)
        let response = client.readResponses(1).first
        #expect(response?.status == 426)
        #expect(response?.headers["sec-websocket-version"] == "13")
    }
}

struct RequestBodyStreamTests {
    @Test func pausesAboveTheHighWatermarkAndResumesBelowTheLow() async throws {
        let resumed = LockedValue(0)
        let stream = RequestBodyStream { resumed.withLock { $0 += 1 } }
        let chunk = [UInt8](repeating: 1, count: 256 << 10)
        var accepted = 0
        while stream.append(chunk) { accepted += 1 }
        #expect(accepted == 4)  // the fifth chunk crosses 1 MiB
        stream.finish()
        var iterator = stream.makeAsyncIterator()
        var total = 0
        while let next = try await iterator.next() { total += next.count }
        #expect(total == 5 * (256 << 10))
        #expect(resumed.withLock { $0 } == 1)
    }

    @Test func aFailureReachesTheReader() async {
        let stream = RequestBodyStream {}
        _ = stream.append([1, 2, 3])
        stream.fail(HTTPError(.requestTimeout, code: "request_timeout", message: "slow"))
        var iterator = stream.makeAsyncIterator()
        let first = try? await iterator.next()
        #expect(first == [1, 2, 3])
        await #expect(throws: HTTPError.self) { _ = try await iterator.next() }
    }
}
