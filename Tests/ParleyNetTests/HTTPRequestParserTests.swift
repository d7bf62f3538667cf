import Testing
@testable import ParleyNet
import ParleyNetTesting

/// Parses everything in `text` (fed `step` bytes at a time) into events, or the error.
private func parse(_ text: String, step: Int = .max, limits: HTTPParserLimits = HTTPParserLimits())
    -> (events: [HTTPRequestParser.Event], error: HTTPParseError?)
{
    var parser = HTTPRequestParser(limits: limits)
    var events: [HTTPRequestParser.Event] = []
    do {
        try feed(Array(text.utf8), step: step) { buffer throws(HTTPParseError) in
            while let event = try parser.next(&buffer) { events.append(event) }
        }
    } catch {
        return (events, error)
    }
    return (events, nil)
}

/// Body events merged into one, so drip-fed and whole parses compare equal.
private func normalized(_ events: [HTTPRequestParser.Event]) -> [HTTPRequestParser.Event] {
    var out: [HTTPRequestParser.Event] = []
    for event in events {
        if case .body(let more) = event, case .body(let previous)? = out.last {
            out[out.count - 1] = .body(previous + more)
        } else {
            out.append(event)
        }
    }
    return out
}

struct HTTPRequestParserTests {
    @Test func simpleGet() throws {
        let (events, error) = parse("GET /healthz?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n")
        #expect(error == nil)
        guard case .head(let head, let framing, let expectsContinue) = events.first else {
            Issue.record("no head")
            return
        }
        #expect(head.method == .GET)
        #expect(head.path == "/healthz")
        #expect(head.query == "x=1")
        #expect(head.headers["accept"] == "*/*")
        #expect(framing == .none)
        #expect(!expectsContinue)
        #expect(events.last == .end)
    }

    @Test func pipelinedRequestsParseInOrder() {
        let text = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /c HTTP/1.1\r\nHost: x\r\n\r\n"
        let (events, error) = parse(text)
        #expect(error == nil)
        let paths = events.compactMap { event -> Substring? in
            if case .head(let head, _, _) = event { return head.path }
            return nil
        }
        #expect(paths == ["/a", "/b", "/c"])
        #expect(events.contains(.body(Array("abc".utf8))))
        #expect(events.filter { $0 == .end }.count == 3)
    }

    @Test(arguments: [1, 2, 3, 7, 64])
    func dripFedBytesGiveTheSameEvents(step: Int) {
        let text = "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n"
            + "GET /next HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok"
        let whole = parse(text)
        let dripped = parse(text, step: step)
        #expect(whole.error == nil)
        #expect(dripped.error == nil)
        #expect(normalized(whole.events) == normalized(dripped.events))
        #expect(normalized(whole.events).contains(.body(Array("hello world".utf8))))
    }

    @Test func leadingEmptyLinesAreIgnored() {
        let (events, error) = parse("\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(error == nil)
        #expect(events.count == 2)
    }

    @Test func identicalDuplicateContentLengthIsAccepted() {
        let (events, error) = parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi")
        #expect(error == nil)
        #expect(events.contains(.body(Array("hi".utf8))))
    }

    @Test func expectContinueIsReported() {
        let (events, _) = parse("PUT /f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
        guard case .head(_, _, let expectsContinue) = events.first else {
            Issue.record("no head")
            return
        }
        #expect(expectsContinue)
    }

    @Test func http10WithoutHostIsAccepted() throws {
        let (events, error) = parse("GET / HTTP/1.0\r\n\r\n")
        #expect(error == nil)
        let first = try #require(events.first)
        guard case .head(let head, _, _) = first else { Issue.record("the first event is \(first), not the head"); return }
        #expect(!head.keepAlive)
    }

    @Test func absoluteFormTargetKeepsPathAndQuery() {
        let (events, _) = parse("GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\n\r\n")
        guard case .head(let head, _, _) = events.first else {
            Issue.record("no head")
            return
        }
        #expect(head.target == "/a/b?c=d")
    }

    struct Rejection: Sendable, CustomTestStringConvertible {
        var name: String
        var request: String
        var status: Int
        var testDescription: String { name }
    }

    static let rejections: [Rejection] = [
        .init(name: "bare LF", request: "GET / HTTP/1.1\nHost: x\n\n", status: 400),
        .init(name: "bare CR", request: "GET / HTTP/1.1\rHost: x\r\n\r\n", status: 400),
        .init(name: "CL and TE", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400),
        .init(name: "differing CL", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", status: 400),
        .init(name: "CL list disagrees", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\nabcd", status: 400),
        .init(name: "signed CL", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", status: 400),
        .init(name: "negative CL", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", status: 400),
        .init(name: "hex CL", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc", status: 400),
        .init(name: "bad chunk size", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", status: 400),
        .init(name: "chunk size overflow", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", status: 400),
        .init(name: "chunk without CRLF", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", status: 400),
        .init(name: "obs-fold", request: "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n", status: 400),
        .init(name: "space before colon", request: "GET / HTTP/1.1\r\nHost : x\r\n\r\n", status: 400),
        .init(name: "NUL in value", request: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{0}b\r\n\r\n", status: 400),
        .init(name: "DEL in value", request: "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\u{7f}b\r\n\r\n", status: 400),
        .init(name: "no Host in 1.1", request: "GET / HTTP/1.1\r\n\r\n", status: 400),
        .init(name: "two Hosts", request: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400),
        .init(name: "unknown method", request: "BREW / HTTP/1.1\r\nHost: x\r\n\r\n", status: 501),
        .init(name: "method not a token", request: "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        .init(name: "HTTP/2.0", request: "GET / HTTP/2.0\r\nHost: x\r\n\r\n", status: 505),
        .init(name: "garbage version", request: "GET / HTTX/1.1\r\nHost: x\r\n\r\n", status: 400),
        .init(name: "double space", request: "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        .init(name: "relative target", request: "GET foo HTTP/1.1\r\nHost: x\r\n\r\n", status: 400),
        .init(name: "gzip transfer coding", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 501),
        .init(name: "chunked not last", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", status: 400),
        .init(name: "TE in HTTP/1.0", request: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400),
        .init(name: "unknown expectation", request: "POST / HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 1\r\n\r\na", status: 417),
        .init(name: "body over limit by CL", request: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", status: 413),
        .init(name: "long URI", request: "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", status: 414),
        .init(name: "huge header", request: "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 17000) + "\r\n\r\n", status: 431),
        .init(name: "chunk line over 1 KiB", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;" + String(repeating: "e", count: 1100) + "\r\nhello\r\n0\r\n\r\n", status: 400),
        .init(name: "too many trailers", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + String(repeating: "T: v\r\n", count: 101) + "\r\n", status: 431),
        .init(name: "trailer with obs-fold", request: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: v\r\n folded\r\n\r\n", status: 400),
        .init(name: "too many headers", request: "GET / HTTP/1.1\r\nHost: x\r\n" + String(repeating: "X-A: 1\r\n", count: 101) + "\r\n", status: 431),
    ]

    @Test(arguments: rejections)
    func rejectsWithTheRightStatus(_ case_: Rejection) {
        let whole = parse(case_.request)
        #expect(whole.error?.status.code == case_.status, "\(case_.name): \(String(describing: whole.error))")
        // Drip-fed, the verdict is the same.
        let dripped = parse(case_.request, step: 1)
        #expect(dripped.error?.status.code == case_.status, "\(case_.name) drip-fed")
    }

    @Test func chunkedBodyOverLimitIs413() {
        var limits = HTTPParserLimits()
        limits.maxBodySize = 4
        let (_, error) = parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", limits: limits)
        #expect(error?.status.code == 413)
    }

    @Test func aFailedParserStaysFailed() {
        var parser = HTTPRequestParser()
        var buffer = ByteBuffer(string: "GET / HTTP/9.9\r\nHost: x\r\n\r\n")
        #expect(throws: HTTPParseError.self) { _ = try parser.next(&buffer) }
        var more = ByteBuffer(string: "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(throws: HTTPParseError.self) { _ = try parser.next(&more) }
    }

    @Test func responseHeadParser() throws {
        var buffer = ByteBuffer(string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nextra")
        let head = try #require(try HTTPResponseHeadParser().parse(&buffer))
        #expect(head.status.code == 101)
        #expect(head.headers["upgrade"] == "websocket")
        #expect(buffer.readableView.elementsEqual("extra".utf8))
        var partial = ByteBuffer(string: "HTTP/1.1 200 OK\r\nA: b\r\n")
        #expect(try HTTPResponseHeadParser().parse(&partial) == nil)
    }

    @Test func imfFixdate() {
        // RFC 9110 §5.6.7's example.
        #expect(HTTPDate.format(epochSeconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(epochSeconds: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(epochSeconds: 1_795_996_800) == "Mon, 30 Nov 2026 00:00:00 GMT")
    }
}
