/// Why a request (or response head) was rejected, with the status the peer gets.
///
/// `status` follows RFC 9110/9112: 400 for malformed syntax and smuggling shapes, 413 for a
/// body over the limit, 414 for a request line over the limit, 431 for a header section over
/// the limit, 501 for an unknown method or transfer coding, 505 for an unknown version.
public struct HTTPParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The response status to send before closing.
    public var status: HTTPStatus
    /// A stable machine-readable code, e.g. `"bad_chunk_size"`.
    public var code: String
    /// A short human explanation.
    public var message: String

    init(_ status: HTTPStatus, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { "\(status.code) \(code): \(message)" }
}

/// Limits applied while parsing; every one has a documented default.
public struct HTTPParserLimits: Sendable, Hashable {
    /// Longest request line, CRLF excluded. Default: 8 KiB; longer gets 414.
    public var maxRequestLineLength = 8 * 1024
    /// Largest header section (all fields, CRLFs included). Default: 16 KiB; larger gets 431.
    public var maxHeaderBytes = 16 * 1024
    /// Most header fields. Default: 100; more gets 431.
    public var maxHeaderCount = 100
    /// Largest body. Default: 1 MiB; larger gets 413. A router may set it per route.
    public var maxBodySize = 1 << 20
    /// Longest chunk-size line including extensions. Default: 1 KiB.
    public var maxChunkLineLength = 1024

    /// The defaults.
    public init() {}
}

/// How the body of a request is framed (RFC 9112 §6).
public enum HTTPBodyFraming: Sendable, Hashable {
    case none
    case length(Int)
    case chunked
}

/// An incremental, strict HTTP/1.1 request parser.
///
/// Feed it any number of bytes at a time through a ``ByteBuffer``; ``next(_:)`` returns one
/// event or `nil` when it needs more bytes, and keeps its place in between. Oversized input is
/// rejected before it is buffered beyond the limit. After `.end` it parses the next pipelined
/// request from the same buffer.
///
/// ```
/// requestLine ─▶ headers ─▶ (body(length) | chunkSize ⇄ chunkData ─▶ trailers) ─▶ end ─▶ requestLine
/// ```
public struct HTTPRequestParser: Sendable {
    /// One step of a request.
    public enum Event: Sendable, Hashable {
        /// The head; `framing` says how the body follows.
        case head(HTTPRequestHead, framing: HTTPBodyFraming, expectsContinue: Bool)
        /// Some body bytes (never empty).
        case body([UInt8])
        /// The request is complete.
        case end
    }

    private enum State: Sendable, Hashable {
        case head(scanned: Int)
        case bodyStart(length: Int)
        case body(remaining: Int)
        case chunkSize(scanned: Int)
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers(scanned: Int)
        case failed(HTTPParseError)
    }

    /// The limits in force; ``HTTPParserLimits/maxBodySize`` may be changed after `.head`.
    public var limits: HTTPParserLimits
    private var state = State.head(scanned: 0)
    private var bodyReceived = 0
    /// Whether the head being scanned has shown its first line end (request-line limit done).
    private var sawLineEnd = false

    /// A parser with `limits`.
    public init(limits: HTTPParserLimits = HTTPParserLimits()) { self.limits = limits }

    /// True between requests: no byte of a next request has been consumed.
    public var isIdle: Bool {
        if case .head(0) = state { return true }
        return false
    }

    /// Parses the next event from `buffer`, consuming what it uses.
    ///
    /// - Returns: an event, or `nil` when more bytes are needed.
    /// - Throws: ``HTTPParseError``; the parser stays failed afterwards (the connection must close).
    public mutating func next(_ buffer: inout ByteBuffer) throws(HTTPParseError) -> Event? {
        do {
            return try step(&buffer)
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func step(_ buffer: inout ByteBuffer) throws(HTTPParseError) -> Event? {
        switch state {
        case .failed(let error):
            throw error
        case .head(let scanned):
            // Robustness (RFC 9112 §2.2): ignore empty lines before a request line.
            var skipped = 0
            while scanned == 0, skipped < 8, buffer.getByte(at: 0) == .cr || buffer.getByte(at: 0) == .lf {
                if buffer.getByte(at: 0) == .cr {
                    guard let next = buffer.getByte(at: 1) else { return nil }
                    guard next == .lf else { throw .init(.badRequest, "bare_cr", "CR not followed by LF") }
                    buffer.moveReaderIndex(forwardBy: 2)
                } else {
                    throw .init(.badRequest, "bare_lf", "line ends with LF alone; CRLF is required")
                }
                skipped += 1
            }
            guard let end = try findHeadEnd(buffer, from: scanned) else {
                // Remember how far we looked so drip-fed bytes are not rescanned.
                if buffer.readableBytes > 0 { state = .head(scanned: buffer.readableBytes) }
                return nil
            }
            guard let headBytes = buffer.getBytes(at: 0, count: end) else { return nil }
            let (head, framing, expectsContinue) = try parseRequestHead(headBytes)
            buffer.moveReaderIndex(forwardBy: end)
            bodyReceived = 0
            switch framing {
            case .none:
                state = .body(remaining: 0)
            case .length(let length):
                // Checked against the limit on the next step, so a router can set the route's
                // limit after seeing the head.
                state = .bodyStart(length: length)
            case .chunked:
                state = .chunkSize(scanned: 0)
            }
            return .head(head, framing: framing, expectsContinue: expectsContinue)

        case .bodyStart(let length):
            guard length <= limits.maxBodySize else {
                throw .init(.contentTooLarge, "body_too_large", "body of \(length) bytes exceeds the limit of \(limits.maxBodySize)")
            }
            state = .body(remaining: length)
            return try step(&buffer)

        case .body(let remaining):
            if remaining == 0 {
                state = .head(scanned: 0)
                return .end
            }
            guard buffer.readableBytes > 0, let bytes = buffer.readBytes(min(remaining, buffer.readableBytes)) else {
                return nil
            }
            state = .body(remaining: remaining - bytes.count)
            return .body(bytes)

        case .chunkSize(let scanned):
            guard let lineEnd = try findLineEnd(buffer, from: scanned, limit: limits.maxChunkLineLength,
                                                tooLong: .init(.badRequest, "chunk_line_too_long", "chunk size line is too long"))
            else {
                state = .chunkSize(scanned: buffer.readableBytes)
                return nil
            }
            guard let line = buffer.getBytes(at: 0, count: lineEnd) else { return nil }
            let size = try parseChunkSize(line)
            buffer.moveReaderIndex(forwardBy: lineEnd + 2)
            if size == 0 {
                state = .trailers(scanned: 0)
                return try step(&buffer)
            }
            guard bodyReceived + size <= limits.maxBodySize else {
                throw .init(.contentTooLarge, "body_too_large", "chunked body exceeds the limit of \(limits.maxBodySize) bytes")
            }
            bodyReceived += size
            state = .chunkData(remaining: size)
            return try step(&buffer)

        case .chunkData(let remaining):
            guard buffer.readableBytes > 0, let bytes = buffer.readBytes(min(remaining, buffer.readableBytes)) else {
                return nil
            }
            state = remaining == bytes.count ? .chunkDataEnd : .chunkData(remaining: remaining - bytes.count)
            return .body(bytes)

        case .chunkDataEnd:
            guard let first = buffer.getByte(at: 0), let second = buffer.getByte(at: 1) else { return nil }
            guard first == .cr, second == .lf else {
                throw .init(.badRequest, "bad_chunk", "chunk data is not followed by CRLF")
            }
            buffer.moveReaderIndex(forwardBy: 2)
            state = .chunkSize(scanned: 0)
            return try step(&buffer)

        case .trailers(let scanned):
            // The trailer section: zero or more fields, then an empty line. Fields are checked
            // like headers and then discarded (none is honoured, RFC 9110 §6.5.1).
            if buffer.getByte(at: 0) == .cr, let next = buffer.getByte(at: 1) {
                guard next == .lf else { throw .init(.badRequest, "bare_cr", "CR not followed by LF") }
                buffer.moveReaderIndex(forwardBy: 2)
                state = .head(scanned: 0)
                return .end
            }
            guard let end = try findHeadEnd(buffer, from: scanned) else {
                if buffer.readableBytes > 0 { state = .trailers(scanned: max(0, buffer.readableBytes - 3)) }
                return nil
            }
            guard let bytes = buffer.getBytes(at: 0, count: end) else { return nil }
            var count = 0
            for line in bytes.dropLast(4).split(separator: .lf, omittingEmptySubsequences: false) {
                _ = try parseField(line.last == .cr ? line.dropLast() : line)
                count += 1
                guard count <= limits.maxHeaderCount else {
                    throw .init(.headerFieldsTooLarge, "too_many_trailers", "more than \(limits.maxHeaderCount) trailer fields")
                }
            }
            buffer.moveReaderIndex(forwardBy: end)
            state = .head(scanned: 0)
            return .end
        }
    }

    // MARK: - Finding lines

    /// Offset just past the CRLFCRLF that ends a head, or `nil` if not buffered yet.
    ///
    /// One forward scan, resumed where the last call stopped (`scanned`), so drip-fed bytes
    /// cost linear time. While no line end has been seen, the request-line limit applies (414);
    /// after it, the header-section limit (431).
    private mutating func findHeadEnd(_ buffer: ByteBuffer, from scanned: Int) throws(HTTPParseError) -> Int? {
        let limit = limits.maxRequestLineLength + 2 + limits.maxHeaderBytes + 2
        var index = max(0, scanned - 3)
        if scanned == 0 { sawLineEnd = false }
        while let byte = buffer.getByte(at: index) {
            if byte == .lf {
                guard index > 0, buffer.getByte(at: index - 1) == .cr else {
                    throw .init(.badRequest, "bare_lf", "line ends with LF alone; CRLF is required")
                }
                sawLineEnd = true
                if index >= 3, buffer.getByte(at: index - 2) == .lf {
                    return index + 1
                }
            } else if index > 0, buffer.getByte(at: index - 1) == .cr {
                throw .init(.badRequest, "bare_cr", "CR not followed by LF")
            }
            index += 1
            if !sawLineEnd, index > limits.maxRequestLineLength + 1 {
                throw .init(.uriTooLong, "request_line_too_long", "request line exceeds \(limits.maxRequestLineLength) bytes")
            }
            if index > limit {
                throw .init(.headerFieldsTooLarge, "headers_too_large", "header section exceeds \(limits.maxHeaderBytes) bytes")
            }
        }
        return nil
    }

    /// Offset of the CR of the first CRLF, or `nil`.
    private func findLineEnd(_ buffer: ByteBuffer, from scanned: Int, limit: Int,
                             tooLong: HTTPParseError) throws(HTTPParseError) -> Int? {
        var index = max(0, scanned - 1)
        while let byte = buffer.getByte(at: index) {
            if byte == .lf {
                guard index > 0, buffer.getByte(at: index - 1) == .cr else {
                    throw .init(.badRequest, "bare_lf", "line ends with LF alone; CRLF is required")
                }
                return index - 1
            } else if index > 0, buffer.getByte(at: index - 1) == .cr {
                throw .init(.badRequest, "bare_cr", "CR not followed by LF")
            }
            index += 1
            if index > limit { throw tooLong }
        }
        return nil
    }

    // MARK: - The head

    private func parseRequestHead(_ bytes: ArraySlice<UInt8>)
        throws(HTTPParseError) -> (HTTPRequestHead, HTTPBodyFraming, Bool)
    {
        var lines = bytes.dropLast(4).split(separator: .lf, omittingEmptySubsequences: false).map {
            $0.last == .cr ? $0.dropLast() : $0
        }
        guard !lines.isEmpty else { throw .init(.badRequest, "empty_request", "no request line") }
        let requestLine = lines.removeFirst()
        let (method, target, version) = try parseRequestLine(requestLine)

        guard lines.count <= limits.maxHeaderCount else {
            throw .init(.headerFieldsTooLarge, "too_many_headers", "more than \(limits.maxHeaderCount) header fields")
        }
        let headerBytes = lines.reduce(0) { $0 + $1.count + 2 }
        guard headerBytes <= limits.maxHeaderBytes else {
            throw .init(.headerFieldsTooLarge, "headers_too_large", "header section exceeds \(limits.maxHeaderBytes) bytes")
        }
        var headers = HTTPHeaders()
        for line in lines {
            let (name, value) = try parseField(line)
            headers.add(name: name, value: value)
        }
        let head = HTTPRequestHead(method: method, target: target, version: version, headers: headers)
        let framing = try bodyFraming(of: head)

        let hosts = headers.values(of: "host")
        if version == .http1_1 {
            guard hosts.count == 1 else {
                throw .init(.badRequest, "bad_host", hosts.isEmpty ? "HTTP/1.1 request without Host" : "more than one Host field")
            }
        } else if hosts.count > 1 {
            throw .init(.badRequest, "bad_host", "more than one Host field")
        }

        var expectsContinue = false
        let expectations = headers.values(of: "expect")
        if !expectations.isEmpty {
            guard expectations.count == 1, expectations[0].trimmingOWS().caseInsensitiveEquals("100-continue") else {
                throw .init(.expectationFailed, "unsupported_expectation", "only Expect: 100-continue is supported")
            }
            // RFC 9110 §10.1.1: ignore it in HTTP/1.0 and when there is no body.
            expectsContinue = version == .http1_1 && framing != .none && framing != .length(0)
        }
        return (head, framing, expectsContinue)
    }

    private func parseRequestLine(_ line: ArraySlice<UInt8>)
        throws(HTTPParseError) -> (HTTPMethod, String, HTTPVersion)
    {
        let parts = line.split(separator: .space, maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw .init(.badRequest, "bad_request_line", "request line must be: method SP target SP version")
        }
        let methodBytes = parts[0], targetBytes = parts[1], versionBytes = parts[2]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(\.isTokenCharacter) else {
            throw .init(.badRequest, "bad_method", "method is not a token")
        }
        let version = try parseVersion(versionBytes)
        guard !targetBytes.isEmpty, targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw .init(.badRequest, "bad_target", "request target is empty or has characters outside visible ASCII")
        }
        guard let method = HTTPMethod(rawValue: String(decoding: methodBytes, as: UTF8.self)) else {
            throw .init(.notImplemented, "method_not_implemented", "method is not implemented")
        }
        var target = String(decoding: targetBytes, as: UTF8.self)
        if target.first == "/" {
            // origin-form
        } else if target == "*" {
            guard method == .OPTIONS else { throw .init(.badRequest, "bad_target", "* is only valid with OPTIONS") }
        } else if target.lowercased().hasPrefix("http://") || target.lowercased().hasPrefix("https://") {
            // absolute-form (RFC 9112 §3.2.2): keep path and query.
            let schemeEnd = target.firstIndex(of: ":") ?? target.startIndex
            let afterScheme = target[target.index(schemeEnd, offsetBy: 3)...]
            let authorityEnd = afterScheme.firstIndex { $0 == "/" || $0 == "?" } ?? afterScheme.endIndex
            guard authorityEnd > afterScheme.startIndex else { throw .init(.badRequest, "bad_target", "absolute target has no host") }
            let rest = afterScheme[authorityEnd...]
            target = rest.isEmpty ? "/" : (rest.first == "?" ? "/" + rest : String(rest))
        } else {
            throw .init(.badRequest, "bad_target", "request target must be origin-form (/path) or absolute-form")
        }
        return (method, target, version)
    }

    private func parseVersion(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPVersion {
        let text = Array(bytes)
        guard text.count == 8, text[0...4] == Array("HTTP/".utf8)[...], text[6] == .period,
              text[5].isDigit, text[7].isDigit
        else {
            throw .init(.badRequest, "bad_version", "HTTP version must look like HTTP/1.1")
        }
        let version = HTTPVersion(major: Int(text[5] - 0x30), minor: Int(text[7] - 0x30))
        guard version == .http1_1 || version == .http1_0 else {
            throw .init(.versionNotSupported, "version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported")
        }
        return version
    }

    private func parseField(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> (String, String) {
        guard let first = line.first else { throw .init(.badRequest, "bad_header", "empty header line") }
        if first == .space || first == .tab {
            throw .init(.badRequest, "obs_fold", "folded header lines (obs-fold) are not accepted")
        }
        guard let colon = line.firstIndex(of: .colon) else {
            throw .init(.badRequest, "bad_header", "header line has no colon")
        }
        let name = line[line.startIndex..<colon]
        guard !name.isEmpty, name.allSatisfy(\.isTokenCharacter) else {
            throw .init(.badRequest, "bad_header_name", "header name is not a token (no white space before the colon)")
        }
        var value = line[(colon + 1)...]
        while let byte = value.first, byte == .space || byte == .tab { value = value.dropFirst() }
        while let byte = value.last, byte == .space || byte == .tab { value = value.dropLast() }
        guard value.allSatisfy({ $0 == .tab || ($0 >= 0x20 && $0 != 0x7f) }) else {
            throw .init(.badRequest, "bad_header_value", "header value has a control character")
        }
        return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
    }

    /// RFC 9112 §6.1–6.3, rejecting every ambiguous shape a smuggler could use.
    private func bodyFraming(of head: HTTPRequestHead) throws(HTTPParseError) -> HTTPBodyFraming {
        let transferEncodings = head.headers.values(of: "transfer-encoding")
        let contentLengths = head.headers.values(of: "content-length")
        if !transferEncodings.isEmpty {
            guard contentLengths.isEmpty else {
                throw .init(.badRequest, "ambiguous_length", "both Transfer-Encoding and Content-Length")
            }
            guard head.version == .http1_1 else {
                throw .init(.badRequest, "bad_transfer_encoding", "Transfer-Encoding in an HTTP/1.0 request")
            }
            let codings = head.headers.tokens(of: "transfer-encoding")
            guard codings == ["chunked"] else {
                if codings.last != "chunked" || codings.isEmpty {
                    throw .init(.badRequest, "bad_transfer_encoding", "the final transfer coding must be chunked")
                }
                throw .init(.notImplemented, "unsupported_transfer_encoding", "only the chunked transfer coding is supported")
            }
            return .chunked
        }
        guard !contentLengths.isEmpty else { return .none }
        var length: Int?
        for field in contentLengths {
            for item in field.split(separator: ",", omittingEmptySubsequences: false) {
                let digits = item.trimmingOWS()
                guard !digits.isEmpty, digits.utf8.count <= 18, digits.utf8.allSatisfy(\.isDigit), let value = Int(digits)
                else {
                    throw .init(.badRequest, "bad_content_length", "Content-Length is not a number")
                }
                if let length, length != value {
                    throw .init(.badRequest, "ambiguous_length", "Content-Length fields disagree")
                }
                length = value
            }
        }
        return .length(length ?? 0)
    }

    private func parseChunkSize(_ line: ArraySlice<UInt8>) throws(HTTPParseError) -> Int {
        let sizeEnd = line.firstIndex { $0 == .semicolon || $0 == .space || $0 == .tab } ?? line.endIndex
        let digits = line[line.startIndex..<sizeEnd]
        guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(\.isHexDigit) else {
            throw .init(.badRequest, "bad_chunk_size", "chunk size is not a hexadecimal number")
        }
        var size = 0
        for digit in digits { size = size << 4 | digit.hexValue }
        // Extensions (`;name=value`, with optional white space before `;`) are allowed and ignored.
        var rest = line[sizeEnd...]
        while let byte = rest.first, byte == .space || byte == .tab { rest = rest.dropFirst() }
        if let first = rest.first {
            guard first == .semicolon, rest.allSatisfy({ $0 == .tab || ($0 >= 0x20 && $0 != 0x7f) }) else {
                throw .init(.badRequest, "bad_chunk_size", "malformed chunk extension")
            }
        }
        return size
    }
}

// MARK: - Response heads (client side)

/// Parses one response head: the status line and header fields, up to the blank line.
public struct HTTPResponseHeadParser: Sendable {
    /// Largest head accepted. Default: 16 KiB.
    public var maxHeadBytes = 16 * 1024

    /// A parser with the default limit.
    public init() {}

    /// Consumes a complete head from `buffer`, or returns `nil` (consuming nothing) if incomplete.
    public func parse(_ buffer: inout ByteBuffer) throws(HTTPParseError) -> HTTPResponseHead? {
        var index = 0
        var end: Int?
        while let byte = buffer.getByte(at: index) {
            if byte == .lf, index >= 3, buffer.getByte(at: index - 1) == .cr, buffer.getByte(at: index - 2) == .lf,
               buffer.getByte(at: index - 3) == .cr {
                end = index + 1
                break
            }
            index += 1
            if index > maxHeadBytes { throw .init(.badRequest, "response_head_too_large", "response head is too large") }
        }
        guard let end, let bytes = buffer.getBytes(at: 0, count: end) else { return nil }
        let lines = bytes.dropLast(4).split(separator: .lf, omittingEmptySubsequences: false).map {
            $0.last == .cr ? $0.dropLast() : $0
        }
        guard let statusLine = lines.first else { throw .init(.badRequest, "bad_status_line", "no status line") }
        let parts = statusLine.split(separator: .space, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].elementsEqual("HTTP/1.1".utf8) || parts[0].elementsEqual("HTTP/1.0".utf8),
              parts[1].count == 3, parts[1].allSatisfy(\.isDigit),
              let code = Int(String(decoding: parts[1], as: UTF8.self))
        else {
            throw .init(.badRequest, "bad_status_line", "malformed status line")
        }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: .colon), colon > line.startIndex,
                  line[line.startIndex..<colon].allSatisfy(\.isTokenCharacter)
            else {
                throw .init(.badRequest, "bad_header", "malformed response header")
            }
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingOWS()
            headers.add(name: String(decoding: line[line.startIndex..<colon], as: UTF8.self), value: String(value))
        }
        buffer.moveReaderIndex(forwardBy: end)
        let version: HTTPVersion = parts[0].last == UInt8(ascii: "1") ? .http1_1 : .http1_0
        let reason = parts.count == 3 ? String(decoding: parts[2], as: UTF8.self) : ""
        return HTTPResponseHead(version: version, status: HTTPStatus(code: code, reason: reason), headers: headers)
    }
}

// MARK: - Bytes

extension UInt8 {
    static let cr: UInt8 = 0x0d
    static let lf: UInt8 = 0x0a
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3a
    static let semicolon: UInt8 = 0x3b
    static let period: UInt8 = 0x2e

    var isDigit: Bool { self >= 0x30 && self <= 0x39 }

    var isHexDigit: Bool { isDigit || (self | 0x20 >= 0x61 && self | 0x20 <= 0x66) }

    var hexValue: Int { isDigit ? Int(self - 0x30) : Int((self | 0x20) - 0x61 + 10) }

    /// tchar (RFC 9110 §5.6.2).
    var isTokenCharacter: Bool {
        switch self {
        case 0x30...0x39, 0x41...0x5a, 0x61...0x7a: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"): true
        default: false
        }
    }
}
