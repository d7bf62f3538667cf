// Test helpers for ParleyNet's tests (STYLE.md rule 7): a blocking raw TCP client, WebSocket
// recording handlers and an HTTP server on an ephemeral port. The event queue and timeouts,
// which need no sockets, are in ParleyTesting.
import Foundation
package import ParleyNet
package import ParleyTesting

#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client for tests: it writes raw bytes and reads with a timeout, so a test
/// waits for what the server does (a response, a close) and fails instead of hanging.
package final class RawClient: @unchecked Sendable {
    // @unchecked: one test drives one client; the descriptor is only used from that test.
    let fd: Int32

    /// Connects to 127.0.0.1:`port`; reads give up after `receiveTimeout` seconds. A
    /// `receiveBuffer` (bytes) is set before connecting, so the window the server sees is
    /// small from the start (a reader that stops reading is then felt at once).
    package init(port: UInt16, receiveTimeout: Double = 5, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer { setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw IOError(code: errno, call: "connect") }
        var timeout = timeval(tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    package func send(_ text: String) { send(Array(text.utf8)) }

    /// Sends a WebSocket upgrade for `path` with RFC 6455's sample key; the accept value is
    /// `s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`. Reading the answer is up to the test.
    package func sendUpgrade(path: String, version: Int = 13) {
        send("GET \(path) HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             + "Sec-WebSocket-Version: \(version)\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    }

    package func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    /// Closes the sending side (the server reads EOF); reading still works.
    package func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Sends `bytes` without blocking until they are all sent or the peer has accepted nothing
    /// for `quiet` seconds (it stopped reading: TCP flow control). Returns the bytes sent.
    /// The send buffer is first cut to 64 KiB so the kernel absorbs little on our side.
    package func sendUntilStalled(_ bytes: [UInt8], quiet: Double = 1) -> Int {
        var size: Int32 = 64 * 1024
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if n > 0 {
                sent += n
                continue
            }
            guard n < 0, errno == EAGAIN || errno == EINTR else { return sent }
            var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&waiting, 1, Int32(quiet * 1000)) == 0 { return sent }
        }
        return sent
    }

    /// Reads until `predicate` holds for everything read so far, the peer closes, or the timeout.
    package func read(until predicate: ([UInt8]) -> Bool) -> [UInt8] {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !predicate(received) {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        return received
    }

    /// Reads until the peer closes (or the timeout); true if it closed.
    package func readToEnd() -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return (received, true) }
            if n < 0 { return (received, errno == ECONNRESET) }
            received += chunk[0..<n]
        }
    }

    /// Reads `count` complete HTTP responses (Content-Length framed).
    package func readResponses(_ count: Int) -> [(status: Int, headers: [String: String], body: String)] {
        var parsed: [(Int, [String: String], String)] = []
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while parsed.count < count {
            if let response = Self.parseResponse(&buffer) {
                parsed.append(response)
                continue
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            buffer += chunk[0..<n]
        }
        return parsed
    }

    package static func parseResponse(_ buffer: inout [UInt8]) -> (Int, [String: String], String)? {
        let text = buffer
        guard let end = text.indices.first(where: { $0 + 3 < text.count && text[$0...($0 + 3)].elementsEqual([13, 10, 13, 10]) })
        else { return nil }
        let head = String(decoding: text[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        guard text.count >= end + 4 + length else { return nil }
        let body = String(decoding: text[(end + 4)..<(end + 4 + length)], as: UTF8.self)
        buffer.removeFirst(end + 4 + length)
        return (status, headers, body)
    }
}

/// Events a test WebSocket saw.
package enum SocketEvent: Sendable, Equatable {
    case open
    case message(WebSocketMessage)
    case close(WebSocketCloseCode, String)
}

package func recordingHandler() -> (WebSocketHandler, EventQueue<SocketEvent>) {
    let events = EventQueue<SocketEvent>()
    let handler = WebSocketHandler(
        onOpen: { _ in events.push(.open) },
        onMessage: { _, message in events.push(.message(message)) },
        onClose: { _, code, reason in events.push(.close(code, reason)) })
    return (handler, events)
}

/// The next event that is not `.open`, within the timeout.
package func nextEvent(_ events: EventQueue<SocketEvent>) async throws -> SocketEvent {
    while true {
        let event = try await events.next()
        if event != .open { return event }
    }
}

/// A server with `router` on an ephemeral port and its own loops, stopped by `stop()`.
package final class TestServer: Sendable {
    package let group: EventLoopGroup
    package let server: HTTPServer
    package var port: UInt16 { server.localAddress.port }

    package init(router: Router, loops: Int = 2, configure: (inout HTTPServerConfiguration) -> Void = { _ in }) throws {
        ProcessSetup.prepare()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configure(&configuration)
        group = try EventLoopGroup(loopCount: loops)
        server = try HTTPServer(configuration: configuration, router: router, group: group)
    }

    package func stop() async {
        await server.shutdown(timeout: .seconds(2))
        group.shutdown()
    }
}

/// Feeds `bytes` to `consume` through one `ByteBuffer`, `step` bytes at a time (one piece at
/// least, even for no bytes), as a socket would deliver them. `consume` takes what it can from
/// the buffer each time; its error ends the feed. Parsers are tested and fuzzed this way.
package func feed<E: Error>(_ bytes: [UInt8], step: Int,
                           into consume: (inout ByteBuffer) throws(E) -> Void) throws(E) {
    let step = max(1, step)
    var buffer = ByteBuffer()
    var offset = 0
    repeat {
        let end = bytes.count - offset <= step ? bytes.count : offset + step
        buffer.write(bytes[offset..<end])
        offset = end
        try consume(&buffer)
    } while offset < bytes.count
}
