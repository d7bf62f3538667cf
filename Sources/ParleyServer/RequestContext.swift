import ParleyChat
import ParleyLog
import ParleyNet
import ParleyWire

// The REST API's middleware (issue 28): a route for a signed-in user is registered with
// `api.user(&router, …)`, which resolves the caller once — app key and bearer token — before
// the handler runs, answers 401 itself when it cannot, and names the caller and app in the
// request's log line. Handlers take the request and the caller; none authenticates on its own.

extension Request {
    /// A path parameter the route requires: 400 `invalid_parameter` naming it when it is
    /// missing, empty, longer than 128 bytes or holds a control character — never an empty id.
    func parameter(_ name: String) throws -> String {
        guard let value = parameters[name], (1...128).contains(value.utf8.count),
              !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw ChatError(.invalidParameter, "the path's \(name) is not an id: give one as the API returned it")
        }
        return value
    }

    /// A log cursor in the query (`after=1041`, or one position per shard of the log:
    /// `after=1040,1037,1042,1039`); absent, the start of a log of `shards` shards.
    func cursor(_ name: String, shards: Int) throws -> LogCursor {
        guard let text = queryItems[name] else { return LogCursor(shards: shards) }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= LogCursor.maximumShards else { throw ChatError.invalid("\(name) has more positions than a log has shards") }
        var positions: [Int64] = []
        for part in parts {
            guard let position = Int64(part) else {
                throw ChatError.invalid("\(name) must be a position, or one position per shard separated by commas")
            }
            guard position >= 0 else { throw ChatError.invalid("\(name) must not be negative") }
            positions.append(position)
        }
        do {
            return try LogCursor(positions: positions)
        } catch let error as ChatError {
            throw ChatError.invalid("\(name): \(error.message)")
        }
    }

    /// The `:conversationId` of the path.
    func conversationID() throws -> ConversationID { ConversationID(rawValue: try parameter("conversationId")) }
    /// The `:messageId` of the path.
    func messageID() throws -> MessageID { MessageID(rawValue: try parameter("messageId")) }
    /// A user id of the path (`:userId` by default).
    func userID(_ name: String = "userId") throws -> UserID { UserID(rawValue: try parameter(name)) }
}

extension Response {
    /// Names the caller and their app in the request's log line (ids only, never a token).
    mutating func annotate(_ caller: Caller?) {
        guard let caller else { return }
        logMetadata["user.id"] = .string(caller.userID.rawValue)
        logMetadata["app.id"] = .integer(caller.appID)
    }
}

extension API {
    /// A signed-in user's route, answered with the handler's value as JSON (`status`, 200 by default).
    func user<T: Encodable & Sendable>(_ router: inout Router, _ method: HTTPMethod, _ path: String, status: HTTPStatus = .ok,
                                       _ handler: @escaping @Sendable (Request, Caller) async throws -> T) {
        router.on(method, path) { request in
            await authenticated(request) { caller in await respond(status: status) { try await handler(request, caller) } }
        }
    }

    /// A signed-in user's route whose value is written with ``JSONWriter`` (hot paths).
    func user<T: JSONWritable>(_ router: inout Router, _ method: HTTPMethod, _ path: String, status: HTTPStatus = .ok,
                               _ handler: @escaping @Sendable (Request, Caller) async throws -> T) {
        router.on(method, path) { request in
            await authenticated(request) { caller in await respond(status: status) { try await handler(request, caller) } }
        }
    }

    /// A signed-in user's route that answers 204.
    func userEmpty(_ router: inout Router, _ method: HTTPMethod, _ path: String,
                   _ handler: @escaping @Sendable (Request, Caller) async throws -> Void) {
        router.on(method, path) { request in
            await authenticated(request) { caller in await respondEmpty { try await handler(request, caller) } }
        }
    }

    /// A signed-in user's route that created its value (201) or found it (200).
    func userCreatedOrFound<T: Encodable & Sendable>(_ router: inout Router, _ method: HTTPMethod, _ path: String,
                                                     options: RouteOptions = RouteOptions(),
                                                     _ handler: @escaping @Sendable (Request, Caller) async throws -> (T, created: Bool)) {
        router.on(method, path, options: options) { request in
            await authenticated(request) { caller in await respondCreatedOrFound { try await handler(request, caller) } }
        }
    }

    /// ``userCreatedOrFound(_:_:_:_:)`` for values written with ``JSONWriter``.
    func userCreatedOrFound<T: JSONWritable>(_ router: inout Router, _ method: HTTPMethod, _ path: String,
                                             _ handler: @escaping @Sendable (Request, Caller) async throws -> (T, created: Bool)) {
        router.on(method, path) { request in
            await authenticated(request) { caller in await respondCreatedOrFound { try await handler(request, caller) } }
        }
    }

    /// A signed-in user's export, answered as an NDJSON attachment (``export(name:_:)``).
    func userExport(_ router: inout Router, _ path: String, name: String,
                    _ handler: @escaping @Sendable (Request, Caller, any ExportSink) async throws -> Void) {
        router.on(.GET, path) { request in
            await authenticated(request) { caller in await export(name: name) { sink in try await handler(request, caller, sink) } }
        }
    }

    /// Resolves the caller once, runs `body` with it (or answers the refusal), and names the
    /// caller in the response's log line.
    private func authenticated(_ request: Request, _ body: (Caller) async -> Response) async -> Response {
        let caller: Caller
        do {
            caller = try await self.caller(request)
        } catch {
            return errorResponse(error)
        }
        var response = await body(caller)
        response.annotate(caller)
        return response
    }
}
