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

    @Test func aLargeFileReachesASlowReaderWholeAndTheConnectionGoesOn() async throws {
        let size = 8 << 20
        let (path, bytes) = try Self.file(size: size)
        defer { unlink(path) }
        let server = try TestServer(router: Self.router(path: path, size: size))
        defer { Task { await server.stop() } }
        let client = try RawClient(port: server.port, receiveTimeout: 20, receiveBuffer: 64 << 10)
        client.send("GET /file HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = client.read { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }
        let headText = String(decoding: head, as: UTF8.self)
        #expect(headText.hasPrefix("HTTP/1.1 200 OK") && headText.contains("Content-Length: \(size)\r\n"))
        let headerEnd = (headText.range(of: "\r\n\r\n")?.upperBound).map { headText.utf8.distance(from: headText.utf8.startIndex, to: $0) } ?? 0
        var body = Array(head[headerEnd...])
        // The client reads nothing for now: the server must wait for it, not read the file
        // into memory. It writes until the socket buffers are full, then stops; what it has
        // read of the file (this process's read bytes) stays within one write budget of what
        // the sockets took. Buffering the file would read all 8 MiB at once.
        let readBefore = try Self.bytesReadByProcess(), writtenBefore = NetMetrics.shared.snapshot().bytesWritten
        let stalled = try await Self.whenWritesStop()
        let readMeanwhile = try Self.bytesReadByProcess() - readBefore
        let writtenMeanwhile = stalled - writtenBefore
        #expect(writtenMeanwhile < size / 2, "the kernel took \(writtenMeanwhile) bytes of a reader that reads nothing")
        #expect(readMeanwhile - writtenMeanwhile < 3 << 20,
                "read \(readMeanwhile) bytes of the file while the sockets took \(writtenMeanwhile): the server buffered it")
        let all = client.read { body.count + $0.count >= size + 60 }
        body += all
        #expect(Array(body.prefix(size)) == bytes)
        var rest = Array(body.dropFirst(size))
        #expect(RawClient.parseResponse(&rest)?.2 == "next")
    }

    /// Bytes this process read through read(2) and pread(2) so far (`rchar` in /proc/self/io).
    static func bytesReadByProcess() throws -> Int {
        let text = try String(contentsOfFile: "/proc/self/io", encoding: .utf8)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("rchar:") }),
              let value = Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) else { throw TimedOut(seconds: 0) }
        return value
    }

    /// Waits until the sockets stop taking bytes (unchanged for 300 ms; at most 10 s) and
    /// returns the process's bytes written then.
    static func whenWritesStop() async throws -> Int {
        var last = NetMetrics.shared.snapshot().bytesWritten
        var unchangedSince = ContinuousClock.now
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
            let now = NetMetrics.shared.snapshot().bytesWritten
            if now != last {
                last = now
                unchangedSince = ContinuousClock.now
            } else if ContinuousClock.now - unchangedSince >= .milliseconds(300) {
                return now
            }
        }
        throw TimedOut(seconds: 10)
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
