/// Per-route settings.
public struct RouteOptions: Sendable, Hashable {
    /// How the request body reaches the handler.
    public enum BodyMode: Sendable, Hashable {
        /// Read the whole body first; larger than `maxBytes` gets 413 before the handler runs.
        case collect(maxBytes: Int)
        /// Hand the body over as a ``RequestBodyStream`` as it arrives, with backpressure.
        case stream(maxBytes: Int)

        var maxBytes: Int {
            switch self {
            case .collect(let maxBytes), .stream(let maxBytes): maxBytes
            }
        }
    }

    /// Default: collect up to 1 MiB.
    public var body: BodyMode = .collect(maxBytes: 1 << 20)

    /// The defaults.
    public init() {}

    /// Options with a body mode.
    public init(body: BodyMode) { self.body = body }
}

/// Maps method and path to handlers. Paths are `/`-separated segments; a segment `:name`
/// captures one segment, a final `*` captures the rest.
///
/// ```swift
/// var router = Router()
/// router.get("/v1/users/:userID") { request in
///     let id = try request.require("userID", as: String.self)
///     return try .json(["id": id])
/// }
/// ```
public struct Router: Sendable {
    /// A request handler. It runs on the connection's loop thread (as a task preferring that
    /// loop's executor); blocking work belongs on another thread behind an `await`.
    public typealias Handler = @Sendable (Request) async throws -> Response

    struct Route: Sendable {
        var method: HTTPMethod
        /// The path as registered (`/v1/conversations/:conversationId`), for logs.
        var path: String
        var pattern: [Segment]
        var options: RouteOptions
        var handler: Handler
    }

    struct WebSocketRoute: Sendable {
        var pattern: [Segment]
        var configuration: WebSocketConfiguration
        var upgrade: WebSocketUpgrade
    }

    enum Segment: Sendable, Hashable {
        case literal(String)
        case parameter(String)
        case rest
    }

    private(set) var routes: [Route] = []
    private(set) var webSocketRoutes: [WebSocketRoute] = []
    /// Indices into ``routes`` by their number of segments, in registration order: a request
    /// is tried against the routes of its own length and those ending in `*`, not all of them.
    private var routesByLength: [Int: [Int]] = [:]
    /// Indices of the routes ending in `*`, in registration order.
    private var restRoutes: [Int] = []

    /// An empty router.
    public init() {}

    /// Adds a route for `method` and `path`.
    public mutating func on(_ method: HTTPMethod, _ path: String, options: RouteOptions = RouteOptions(),
                            handler: @escaping Handler) {
        let pattern = Self.compile(path)
        #if DEBUG
        precondition(!routes.contains { $0.method == method && $0.pattern == pattern }, "duplicate route \(method) \(path)")
        #endif
        if pattern.last == .rest {
            restRoutes.append(routes.count)
        } else {
            routesByLength[pattern.count, default: []].append(routes.count)
        }
        routes.append(Route(method: method, path: path, pattern: pattern, options: options, handler: handler))
    }

    /// Adds a GET route (HEAD is answered by it too, without the body).
    public mutating func get(_ path: String, handler: @escaping Handler) { on(.GET, path, handler: handler) }
    /// Adds a POST route.
    public mutating func post(_ path: String, options: RouteOptions = RouteOptions(), handler: @escaping Handler) {
        on(.POST, path, options: options, handler: handler)
    }
    /// Adds a PUT route.
    public mutating func put(_ path: String, options: RouteOptions = RouteOptions(), handler: @escaping Handler) {
        on(.PUT, path, options: options, handler: handler)
    }
    /// Adds a PATCH route.
    public mutating func patch(_ path: String, options: RouteOptions = RouteOptions(), handler: @escaping Handler) {
        on(.PATCH, path, options: options, handler: handler)
    }
    /// Adds a DELETE route.
    public mutating func delete(_ path: String, options: RouteOptions = RouteOptions(), handler: @escaping Handler) {
        on(.DELETE, path, options: options, handler: handler)
    }

    /// Adds a WebSocket endpoint. `upgrade` runs once the handshake is valid; it returns the
    /// connection's handler or throws an ``HTTPError`` to refuse with that status.
    public mutating func webSocket(_ path: String, configuration: WebSocketConfiguration = WebSocketConfiguration(),
                                   upgrade: @escaping WebSocketUpgrade) {
        webSocketRoutes.append(WebSocketRoute(pattern: Self.compile(path), configuration: configuration, upgrade: upgrade))
    }

    // MARK: - Matching

    enum Match {
        case found(Route, [String: String])
        case methodNotAllowed([HTTPMethod])
        case notFound
    }

    func match(_ head: HTTPRequestHead) -> Match {
        let segments = Self.split(head.path)
        var allowed: [HTTPMethod] = []
        // The routes of this length and those ending in `*`, merged back into registration
        // order (the first route that matches wins); literals are compared before anything
        // is decoded or allocated.
        let sameLength = routesByLength[segments.count] ?? []
        var (nextSame, nextRest) = (0, 0)
        while nextSame < sameLength.count || nextRest < restRoutes.count {
            let index: Int
            if nextRest == restRoutes.count || (nextSame < sameLength.count && sameLength[nextSame] < restRoutes[nextRest]) {
                index = sameLength[nextSame]
                nextSame += 1
            } else {
                index = restRoutes[nextRest]
                nextRest += 1
            }
            let route = routes[index]
            guard Self.literalsFit(route.pattern, segments), let parameters = Self.match(route.pattern, segments) else { continue }
            if route.method == head.method || (head.method == .HEAD && route.method == .GET) {
                return .found(route, parameters)
            }
            allowed.append(route.method)
            if route.method == .GET { allowed.append(.HEAD) }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    func matchWebSocket(_ head: HTTPRequestHead) -> (WebSocketRoute, [String: String])? {
        let segments = Self.split(head.path)
        for route in webSocketRoutes {
            if let parameters = Self.match(route.pattern, segments) { return (route, parameters) }
        }
        return nil
    }

    static func compile(_ path: String) -> [Segment] {
        split(path[...]).map { segment in
            if segment == "*" { return .rest }
            if segment.hasPrefix(":") { return .parameter(String(segment.dropFirst())) }
            return .literal(String(segment))
        }
    }

    private static func split(_ path: Substring) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    /// Whether `segments` has `pattern`'s literals in their places (parameters unchecked).
    private static func literalsFit(_ pattern: [Segment], _ segments: [Substring]) -> Bool {
        for (index, segment) in pattern.enumerated() {
            switch segment {
            case .rest: return true
            case .literal(let literal): if index >= segments.count || segments[index] != literal { return false }
            case .parameter: if index >= segments.count { return false }
            }
        }
        return pattern.count == segments.count
    }

    private static func match(_ pattern: [Segment], _ segments: [Substring]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (index, segment) in pattern.enumerated() {
            switch segment {
            case .rest:
                parameters["*"] = segments.dropFirst(index).joined(separator: "/")
                return parameters
            case .literal(let literal):
                guard index < segments.count, segments[index] == literal else { return nil }
            case .parameter(let name):
                guard index < segments.count, let decoded = segments[index].removingPercentEncodingStrict() else { return nil }
                parameters[name] = decoded
            }
        }
        return pattern.count == segments.count ? parameters : nil
    }
}

extension StringProtocol {
    /// Percent-decodes; `nil` for a malformed escape or invalid UTF-8.
    func removingPercentEncodingStrict() -> String? {
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(), high.isHexDigit, low.isHexDigit else { return nil }
                bytes.append(UInt8(high.hexValue << 4 | low.hexValue))
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
