public import ParleyLog
import Foundation
import ParleySync
import Synchronization

/// An error a handler throws to answer with a status and a JSON error body.
///
/// The body is always `{"error":{"code":…,"message":…}}`; `code` is stable and machine-readable,
/// `message` is for humans and never contains secrets or user content.
public struct HTTPError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The response status.
    public var status: HTTPStatus
    /// A stable snake_case code, e.g. `"not_found"`.
    public var code: String
    /// A short explanation that says what to do next where it can.
    public var message: String
    /// Extra response headers (e.g. `Allow`, `Retry-After`).
    public var headers: HTTPHeaders

    /// Creates an error.
    public init(_ status: HTTPStatus, code: String, message: String, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    /// The JSON error response for this error.
    public var response: Response {
        var response = Response.error(status: status, code: code, message: message)
        for field in headers { response.headers.add(name: field.name, value: field.value) }
        return response
    }
}

/// A request as a handler sees it.
public struct Request: Sendable {
    /// Method, target, version and headers.
    public var head: HTTPRequestHead
    /// Values of the route's `:name` segments, percent-decoded.
    public var parameters: [String: String]
    /// The body: collected bytes, or a stream for routes that asked for one.
    public var body: RequestBody
    /// The client's address.
    public var remoteAddress: SocketAddress?
    /// The request's id: the client's `X-Request-Id` when it sent a usable one, else one made
    /// here; echoed in the response and logged with it.
    public var id: String = ""

    /// Creates a request (tests build them directly).
    public init(head: HTTPRequestHead, parameters: [String: String] = [:], body: RequestBody = .bytes([]),
                remoteAddress: SocketAddress? = nil) {
        self.head = head
        self.parameters = parameters
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The method.
    public var method: HTTPMethod { head.method }
    /// The header fields.
    public var headers: HTTPHeaders { head.headers }
    /// The path without the query.
    public var path: Substring { head.path }

    /// Decoded query items (`+` and percent escapes decoded); later duplicates win.
    public var queryItems: [String: String] {
        guard let query = head.query else { return [:] }
        var items: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(parts[0])
            let value = parts.count > 1
                ? parts[1].replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(parts[1]) : ""
            items[name] = value
        }
        return items
    }

    /// The path parameter `name`, converted; throws a 400 naming it if absent or malformed.
    public func require<T: LosslessStringConvertible>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let text = parameters[name] ?? queryItems[name] else {
            throw HTTPError(.badRequest, code: "missing_parameter", message: "parameter '\(name)' is required")
        }
        guard let value = T(text) else {
            throw HTTPError(.badRequest, code: "invalid_parameter", message: "parameter '\(name)' is not a valid \(T.self)")
        }
        return value
    }

    /// Whether `If-None-Match` names `etag` or `*` (weak comparison, RFC 9110 §13.1.2): the
    /// client's copy is current and the answer is 304.
    public func ifNoneMatch(_ etag: String) -> Bool {
        guard let header = headers["if-none-match"] else { return false }
        return header.split(separator: ",").contains { candidate in
            let tag = candidate.trimmingOWS()
            return tag == "*" || tag == etag || tag == "W/" + etag
        }
    }

    /// Decodes the body as `T`: JSON, or a form (`application/x-www-form-urlencoded`) for a
    /// flat body, which Alamofire and HTML forms send by default (``FormBody``).
    ///
    /// - Throws: 415 `unsupported_media_type` for any other type; 400 `invalid_json` naming the
    ///   field when decoding fails (a form field that needs nesting says to send JSON).
    /// What a field of `type` must be, in the words of JSON.
    static func kind(of type: Any.Type) -> String {
        switch type {
        case is String.Type, is Substring.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type, is Double.Type, is Float.Type: "a number"
        case is [String].Type: "a list of strings"
        case is [Any].Type: "a list"
        case is [String: Any].Type: "an object"
        default: String(describing: type).hasPrefix("Array") ? "a list" : String(describing: type).hasPrefix("Dictionary") ? "an object" : "another type"
        }
    }

    public func decode<T: Decodable>(_ type: T.Type = T.self) async throws -> T {
        let mediaType = headers["content-type"].map { $0.split(separator: ";", omittingEmptySubsequences: false)[0].trimmingOWS() }
        let isForm = mediaType?.caseInsensitiveEquals("application/x-www-form-urlencoded") ?? false
        if let mediaType, !isForm, !mediaType.caseInsensitiveEquals("application/json") {
            throw HTTPError(.unsupportedMediaType, code: "unsupported_media_type",
                            message: "send the body as application/json (or application/x-www-form-urlencoded when it is flat)")
        }
        let bytes = try await body.collect(upTo: Int.max)
        // `curl -d '{…}'` sends JSON labelled as a form: say so rather than "a field is missing".
        if isForm, let first = bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }), first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
            throw HTTPError(.badRequest, code: "invalid_json",
                            message: "the body looks like JSON but is sent as a form: send it with Content-Type: application/json (curl: --json, or -H 'Content-Type: application/json')")
        }
        do {
            if isForm { return try FormBody(parsing: bytes).decode(T.self) }
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let error as FormBodyError {
            throw HTTPError(.badRequest, code: "invalid_json", message: error.description)
        } catch let DecodingError.keyNotFound(key, context) {
            let path = (context.codingPath + [key]).map(\.stringValue).joined(separator: ".")
            throw HTTPError(.badRequest, code: "invalid_json", message: "missing field '\(path)'")
        } catch let DecodingError.typeMismatch(type, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw HTTPError(.badRequest, code: "invalid_json", message: "field '\(path)' must be \(Self.kind(of: type))")
        } catch let DecodingError.valueNotFound(type, context) {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw HTTPError(.badRequest, code: "invalid_json", message: "field '\(path)' must be \(Self.kind(of: type)), not null")
        } catch let DecodingError.dataCorrupted(context) where !context.codingPath.isEmpty {
            // A value the type refused (an unknown content type, a date that is not ISO 8601): its reason.
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw HTTPError(.badRequest, code: "invalid_json", message: "field '\(path)': \(context.debugDescription)")
        } catch {
            throw HTTPError(.badRequest, code: "invalid_json", message: "the body is not valid JSON")
        }
    }
}

/// A request body: fully collected, or streamed as it arrives.
public enum RequestBody: Sendable {
    /// The whole body (routes with ``RouteOptions/BodyMode/collect(maxBytes:)``).
    case bytes([UInt8])
    /// The body as it arrives (routes with ``RouteOptions/BodyMode/stream(maxBytes:)``).
    case stream(RequestBodyStream)

    /// The whole body, reading the stream to its end if needed.
    ///
    /// - Throws: 413 `body_too_large` past `limit`.
    public func collect(upTo limit: Int) async throws -> [UInt8] {
        switch self {
        case .bytes(let bytes):
            guard bytes.count <= limit else { throw HTTPError.bodyTooLarge(limit) }
            return bytes
        case .stream(let stream):
            var bytes: [UInt8] = []
            for try await chunk in stream {
                bytes += chunk
                guard bytes.count <= limit else { throw HTTPError.bodyTooLarge(limit) }
            }
            return bytes
        }
    }
}

extension HTTPError {
    static func bodyTooLarge(_ limit: Int) -> HTTPError {
        HTTPError(.contentTooLarge, code: "body_too_large", message: "the body exceeds \(limit) bytes")
    }
}

/// A byte range of an open file, sent as a response body in pieces as the peer takes them
/// (at most about the connection's write budget in memory, whatever the file's size).
public struct FileRegion: Sendable {
    /// An open, readable descriptor.
    public var descriptor: Int32
    /// The first byte to send.
    public var offset: Int64
    /// How many bytes to send.
    public var length: Int64
    /// Whatever keeps `descriptor` open (it is released once the body is sent).
    public var owner: any Sendable

    /// A region of `descriptor`, kept open by `owner`.
    public init(descriptor: Int32, offset: Int64, length: Int64, owner: any Sendable) {
        self.descriptor = descriptor
        self.offset = offset
        self.length = length
        self.owner = owner
    }
}

/// A response.
public struct Response: Sendable {
    /// The status.
    public var status: HTTPStatus
    /// Header fields. `Content-Length`, `Date` and `Connection` are added when sent.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: [UInt8]
    /// A file region sent as the body instead of ``body`` (downloads).
    public var file: FileRegion?
    /// Fields the request's log line carries besides what the server knows (the caller, the
    /// app); never sent.
    public var logMetadata: LogMetadata = [:]
    /// The level of the request's log line when it succeeds (a 5xx is always `error`): `info`
    /// unless the handler lowers it, as the health check and metrics do (probes and scrapes
    /// arrive every few seconds and say nothing an operator needs to read).
    public var logLevel: LogLevel = .info

    /// Creates a response.
    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: HTTPStatus = .ok) -> Response {
        Response(status: status, headers: HTTPHeaders([("Content-Type", "text/plain; charset=utf-8")]), body: Array(text.utf8))
    }

    /// An `application/json` response with `value` encoded (sorted keys, ISO 8601 dates).
    public static func json(_ value: some Encodable, status: HTTPStatus = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return Response(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]),
                        body: Array(try encoder.encode(value)))
    }

    /// The JSON error body `{"error":{"code":…,"message":…}}`.
    public static func error(status: HTTPStatus, code: String, message: String) -> Response {
        var body = Array(#"{"error":{"code":"#.utf8)
        body += jsonString(code)
        body += Array(#","message":"#.utf8)
        body += jsonString(message)
        body += Array("}}".utf8)
        return Response(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: body)
    }

    private static func jsonString(_ text: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += Array(#"\""#.utf8)
            case "\\": out += Array(#"\\"#.utf8)
            case "\n": out += Array(#"\n"#.utf8)
            case "\r": out += Array(#"\r"#.utf8)
            case "\t": out += Array(#"\t"#.utf8)
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += Array(("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8)
            default: out += Array(String(scalar).utf8)
            }
        }
        out.append(UInt8(ascii: "\""))
        return out
    }
}

// MARK: - Serialization

extension Response {
    /// The bytes of the status line and header section; `Content-Length` and `Date` added.
    func serializedHead(date: String, keepAlive: Bool) -> [UInt8] {
        // Bytes appended to one buffer sized once: every response pays for this, and string
        // interpolation grew and copied the head several times over.
        var head: [UInt8] = []
        head.reserveCapacity(160 + headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 })
        head += "HTTP/1.1 ".utf8
        head += String(status.code).utf8
        head.append(0x20)
        head += status.reason.utf8
        head += "\r\n".utf8
        for field in headers where !field.name.caseInsensitiveEquals("content-length") {
            head += field.name.utf8
            head += ": ".utf8
            head += field.value.utf8
            head += "\r\n".utf8
        }
        if status.code >= 200, status.code != 204, status.code != 304 {
            head += "Content-Length: ".utf8
            head += String(file?.length ?? Int64(body.count)).utf8
            head += "\r\n".utf8
        }
        head += "Date: ".utf8
        head += date.utf8
        head += "\r\n".utf8
        if !keepAlive { head += "Connection: close\r\n".utf8 }
        head += "\r\n".utf8
        return head
    }
}

/// Formats IMF-fixdate (RFC 9110 §5.6.7) without Foundation's formatter on the hot path.
enum HTTPDate {
    private static let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func format(epochSeconds: Int) -> String {
        let day = epochSeconds / 86_400
        let secondsOfDay = epochSeconds % 86_400
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = day + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[day % 7]), \(two(d)) \(months[m - 1]) \(y) \(two(secondsOfDay / 3600)):\(two(secondsOfDay / 60 % 60)):\(two(secondsOfDay % 60)) GMT"
    }
}

/// Request ids: the client's `X-Request-Id` when it is usable (1–128 characters of letters,
/// digits and `-._:/+=`), else `r` and a prefix random to this process with a counter. No
/// `UUID()`: on Linux it silently returns a constant when the process is out of descriptors
/// (PLATFORM.md §10), exactly when ids matter most.
public enum RequestID: Sendable {
    /// 6 hex digits random to this process.
    private static let prefix: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = {
        let value = UInt32.random(in: 0...0xFF_FFFF)
        func digit(_ shift: UInt32) -> UInt8 { hexDigit(UInt64(value >> shift) & 0xF) }
        return (digit(20), digit(16), digit(12), digit(8), digit(4), digit(0))
    }()
    private static let counter = Atomic<UInt64>(0)

    private static func hexDigit(_ value: UInt64) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + UInt8(value) : UInt8(ascii: "a") + UInt8(value - 10)
    }

    /// The id for a request that sent `offered` (nil: none).
    public static func accept(_ offered: String?) -> String {
        if let offered, (1...128).contains(offered.utf8.count), offered.utf8.allSatisfy(isAllowed) { return offered }
        return make()
    }

    /// A new id: `r<6 hex>-<counter in hex>`. Made for every request that brings none, so it
    /// is written straight into the string's storage with an atomic counter: no lock, no
    /// formatter, and for the first 268 million requests no allocation (15 bytes or fewer is
    /// a small string).
    public static func make() -> String {
        let next = counter.wrappingAdd(1, ordering: .relaxed).newValue
        var digits = 1
        while digits < 16 && next >> (4 * UInt64(digits)) != 0 { digits += 1 }
        return String(unsafeUninitializedCapacity: 8 + digits) { buffer in
            let prefix = prefix
            buffer[0] = UInt8(ascii: "r")
            (buffer[1], buffer[2], buffer[3], buffer[4], buffer[5], buffer[6]) = prefix
            buffer[7] = UInt8(ascii: "-")
            for index in 0..<digits { buffer[8 + index] = hexDigit((next >> (4 * UInt64(digits - 1 - index))) & 0xF) }
            return 8 + digits
        }
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "+"), UInt8(ascii: "="): true
        default: false
        }
    }
}
