/// The request methods Parley recognises. TRACE is recognised only so that it gets 405 from
/// the router like any other method a route lacks (RFC 9110 §9.3.8: it is optional); any
/// other syntactically valid method gets 501.
public enum HTTPMethod: String, Sendable, Hashable, CaseIterable {
    case GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS, TRACE
}

/// An HTTP version, `HTTP/1.0` or `HTTP/1.1`.
public struct HTTPVersion: Sendable, Hashable, CustomStringConvertible {
    /// Major and minor digits.
    public var major: Int, minor: Int
    /// HTTP/1.1.
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
    /// HTTP/1.0.
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public var description: String { "HTTP/\(major).\(minor)" }
}

/// Header fields in arrival order. Names compare case-insensitively (RFC 9110 §5.1).
public struct HTTPHeaders: Sendable, Hashable, Sequence {
    /// The fields, in order, names as received.
    public private(set) var fields: [(name: String, value: String)] = []

    /// No fields.
    public init() {}

    /// The given fields.
    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    /// Appends a field.
    public mutating func add(name: String, value: String) { fields.append((name, value)) }

    /// Replaces every field named `name` with one field.
    public mutating func replaceOrAdd(name: String, value: String) {
        if fields.contains(where: { $0.name.caseInsensitiveEquals(name) }) { remove(name: name) }
        fields.append((name, value))
    }

    /// Removes every field named `name`.
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    /// The first value of `name`, or `nil`.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of `name`, in order.
    public func values(of name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// The comma-separated tokens of every `name` field, lower-cased and trimmed.
    public func tokens(of name: String) -> [String] {
        values(of: name).flatMap { $0.split(separator: ",") }.map { $0.trimmingOWS().lowercased() }.filter { !$0.isEmpty }
    }

    /// True when some `name` field holds `token` in its comma-separated list (case-insensitive).
    public func contains(name: String, token: String) -> Bool { tokens(of: name).contains(token.lowercased()) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }
}

/// A parsed request line and header section.
public struct HTTPRequestHead: Sendable, Hashable {
    /// The method.
    public var method: HTTPMethod
    /// The request target as sent (origin form `/path?query`, or `*`).
    public var target: String
    /// The version.
    public var version: HTTPVersion
    /// The header fields.
    public var headers: HTTPHeaders

    /// Creates a head.
    public init(method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
    }

    /// The path part of the target, without the query.
    public var path: Substring {
        if let mark = target.firstIndex(of: "?") { return target[..<mark] }
        return target[...]
    }

    /// The raw query string after `?`, if any.
    public var query: Substring? {
        guard let mark = target.firstIndex(of: "?") else { return nil }
        return target[target.index(after: mark)...]
    }

    /// Whether the connection stays open after this request (RFC 9112 §9.3).
    public var keepAlive: Bool {
        let tokens = headers.tokens(of: "connection")
        if tokens.contains("close") { return false }
        if version == .http1_1 { return true }
        return tokens.contains("keep-alive")
    }
}

/// A response status: code and reason phrase.
public struct HTTPStatus: Sendable, Hashable, CustomStringConvertible {
    /// The three-digit code.
    public var code: Int
    /// The reason phrase.
    public var reason: String

    /// Creates a status.
    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code) \(reason)" }

    /// The status with its standard reason phrase (RFC 9110 §15), or a generic one for a code
    /// Parley never sends.
    public init(code: Int) {
        self = Self.known.first { $0.code == code } ?? HTTPStatus(code: code, reason: code >= 500 ? "Server Error" : "Error")
    }

    private static let known: [HTTPStatus] = [
        .continue, .switchingProtocols, .ok, .created, .accepted, .noContent, .partialContent, .notModified, .badRequest,
        .unauthorized, .forbidden, .notFound, .methodNotAllowed, .requestTimeout, .conflict, .lengthRequired, .contentTooLarge,
        .uriTooLong, .unsupportedMediaType, .expectationFailed, .rangeNotSatisfiable, .unprocessableContent, .upgradeRequired,
        .tooManyRequests, .headerFieldsTooLarge, .internalServerError, .notImplemented, .serviceUnavailable,
        .insufficientStorage, .versionNotSupported,
    ]

    public static let `continue` = HTTPStatus(code: 100, reason: "Continue")
    public static let switchingProtocols = HTTPStatus(code: 101, reason: "Switching Protocols")
    public static let ok = HTTPStatus(code: 200, reason: "OK")
    public static let created = HTTPStatus(code: 201, reason: "Created")
    public static let accepted = HTTPStatus(code: 202, reason: "Accepted")
    public static let noContent = HTTPStatus(code: 204, reason: "No Content")
    public static let partialContent = HTTPStatus(code: 206, reason: "Partial Content")
    public static let notModified = HTTPStatus(code: 304, reason: "Not Modified")
    public static let badRequest = HTTPStatus(code: 400, reason: "Bad Request")
    public static let unauthorized = HTTPStatus(code: 401, reason: "Unauthorized")
    public static let forbidden = HTTPStatus(code: 403, reason: "Forbidden")
    public static let notFound = HTTPStatus(code: 404, reason: "Not Found")
    public static let methodNotAllowed = HTTPStatus(code: 405, reason: "Method Not Allowed")
    public static let requestTimeout = HTTPStatus(code: 408, reason: "Request Timeout")
    public static let conflict = HTTPStatus(code: 409, reason: "Conflict")
    public static let lengthRequired = HTTPStatus(code: 411, reason: "Length Required")
    public static let contentTooLarge = HTTPStatus(code: 413, reason: "Content Too Large")
    public static let uriTooLong = HTTPStatus(code: 414, reason: "URI Too Long")
    public static let unsupportedMediaType = HTTPStatus(code: 415, reason: "Unsupported Media Type")
    public static let expectationFailed = HTTPStatus(code: 417, reason: "Expectation Failed")
    public static let rangeNotSatisfiable = HTTPStatus(code: 416, reason: "Range Not Satisfiable")
    public static let unprocessableContent = HTTPStatus(code: 422, reason: "Unprocessable Content")
    public static let upgradeRequired = HTTPStatus(code: 426, reason: "Upgrade Required")
    public static let tooManyRequests = HTTPStatus(code: 429, reason: "Too Many Requests")
    public static let headerFieldsTooLarge = HTTPStatus(code: 431, reason: "Request Header Fields Too Large")
    public static let internalServerError = HTTPStatus(code: 500, reason: "Internal Server Error")
    public static let notImplemented = HTTPStatus(code: 501, reason: "Not Implemented")
    public static let serviceUnavailable = HTTPStatus(code: 503, reason: "Service Unavailable")
    public static let insufficientStorage = HTTPStatus(code: 507, reason: "Insufficient Storage")
    public static let versionNotSupported = HTTPStatus(code: 505, reason: "HTTP Version Not Supported")
}

/// A parsed status line and header section (the client side of a WebSocket handshake).
public struct HTTPResponseHead: Sendable, Hashable {
    /// The version.
    public var version: HTTPVersion
    /// The status code and reason.
    public var status: HTTPStatus
    /// The header fields.
    public var headers: HTTPHeaders
}

extension StringProtocol {
    func caseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        return zip(utf8, other.utf8).allSatisfy { lhs, rhs in
            lhs == rhs || (lhs | 0x20 == rhs | 0x20 && (lhs | 0x20) >= 0x61 && (lhs | 0x20) <= 0x7a)
        }
    }

    /// Trims optional white space (SP and HTAB, RFC 9110 §5.6.3).
    func trimmingOWS() -> Substring {
        var text = self[...]
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return Substring(text)
    }
}
