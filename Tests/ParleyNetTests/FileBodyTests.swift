import Foundation
import Testing
@testable import ParleyNet
import ParleyNetTesting
import ParleyTesting

#if canImport(Glibc)
import Glibc
#endif

/// File bodies: sent in pieces as the peer reads, so a large download costs about one write
/// budget of memory; then the connection serves the next request.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct FileBodyTests {
    final class OpenFile: Sendable {
        let descriptor: Int32
        init(_ path: String) { descriptor = open(path, O_RDONLY) }
        deinit { close(descriptor) }
    }

    static func file(size: Int) throws -> (String, [UInt8]) {
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ ($0 >> 8)) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("parley-file-\(UUID().uuidString)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    static func router(path: String, size: Int) -> Router {
        var router = Router()
        router.get("/file") { request in
            let file = OpenFile(path)
            var response = Response(headers: HTTPHeaders([("Content-Type", "application/octet-stream")]))
            if let range = request.headers["range"], case .part(let first, let last) = ByteRange.parse(range, length: Int64(size)) {
                response.status = .partialContent
                response.file = FileRegion(descriptor: file.descriptor, offset: first, length: last - first + 1, owner: file)
            } else {
                response.file = FileRegion(descriptor: file.descriptor, offset: 0, length: Int64(size), owner: file)
            }
            return response
        }
        router.get("/after") { _ in Response.text("next") }
        return router
    }

    @Test func aLargeFileReachesItsReaderWholeAndTheConnectionGoesOn() async throws {
        let size = 8 << 20
        let (path, bytes) = try Self.file(size: size)
        defer { unlink(path) }
        let server = try TestServer(router: Self.router(path: path, size: size))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port, receiveTimeout: 20)
        client.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = client.read { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        let headText = String(decoding: head, as: UTF8.self)
        #expect(headText.hasPrefix("HTTP/1.1 200 OK") && headText.contains("Content-Length: \(size)\r\n"))
        let headerEnd = (headText.range(of: "\r\n\r\n")?.upperBound).map { headText.utf8.distance(from: headText.utf8.startIndex, to: $0) } ?? 0
        var body = Array(head[headerEnd...])
        let all = client.read { body.count + $0.count >= size + 60 }
        body += all
        #expect(Array(body.prefix(size)) == bytes)
        var rest = Array(body.dropFirst(size))
        #expect(RawClient.parseResponse(&rest)?.2 == "next")
    }

    /// The server must read a file as the peer takes it, not into memory first. The reader
    /// takes nothing (a 64 KiB window), so the server can have read at most what the kernel
    /// accepted (its send buffer, 4 MiB here at most, and the window) plus one write budget
    /// (1 MiB). The test then cuts the file to 12 of its 16 MiB: a server that streams it
    /// reaches the cut, cannot keep the promised length and closes; one that had buffered the
    /// whole file would still deliver all 16 MiB.
    @Test func aFileIsReadAsThePeerTakesItNotBufferedWhole() async throws {
        let size = 16 << 20, cut = 12 << 20
        let (path, _) = try Self.file(size: size)
        defer { unlink(path) }
        let server = try TestServer(router: Self.router(path: path, size: size))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port, receiveTimeout: 20, receiveBuffer: 64 << 10)
        client.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = client.read { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        #expect(String(decoding: head, as: UTF8.self).contains("Content-Length: \(size)\r\n"))
        #expect(truncate(path, off_t(cut)) == 0)
        let rest = client.read { _ in false }  // until the server closes (or the 20 s timeout)
        let body = head.count + rest.count
        #expect(body < size, "all \(size) bytes arrived after the file was cut: the server had read it whole")
        #expect(body > cut - (1 << 20), "the bytes before the cut arrive")
    }

    @Test func aRangeIsSentExactly() async throws {
        let size = 1 << 20
        let (path, bytes) = try Self.file(size: size)
        defer { unlink(path) }
        let server = try TestServer(router: Self.router(path: path, size: size))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port)
        client.send("GET /file HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-1009\r\n\r\n")
        func headEnd(_ bytes: [UInt8]) -> Int? {
            guard bytes.count >= 4 else { return nil }
            return (0...(bytes.count - 4)).first { bytes[$0..<($0 + 4)] == [13, 10, 13, 10] }.map { $0 + 4 }
        }
        let raw = client.read { received in headEnd(received).map { received.count >= $0 + 10 } ?? false }
        let text = String(decoding: raw, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 206 Partial Content\r\n") && text.contains("Content-Length: 10\r\n"))
        #expect(Array(raw[(headEnd(raw) ?? 0)...]) == Array(bytes[1000...1009]))
    }

    @Test(arguments: [
        ("bytes=0-9", 100, ByteRange.part(first: 0, last: 9)),
        ("bytes=90-", 100, .part(first: 90, last: 99)),
        ("bytes=90-1000", 100, .part(first: 90, last: 99)),
        ("bytes=-10", 100, .part(first: 90, last: 99)),
        ("bytes=-1000", 100, .part(first: 0, last: 99)),
        ("bytes=100-", 100, .unsatisfiable),
        ("bytes=-0", 100, .unsatisfiable),
        ("bytes=5-2", 100, .whole),
        ("bytes=0-1,5-6", 100, .whole),
        ("items=0-1", 100, .whole),
        ("bytes=a-b", 100, .whole),
        ("bytes=99999999999999999999-", 100, .whole),
        ("Bytes = 1-2", 100, .whole),
    ] as [(String, Int64, ByteRange)])
    func rangeHeadersParse(_ header: String, _ length: Int64, _ expected: ByteRange) {
        #expect(ByteRange.parse(header, length: length) == expected)
    }
}
