import Foundation
import ParleyChat
import ParleyNet
import ParleyWire

/// The server API (`/v1/server/…`, docs/server-api.md): what an app's own backend calls with
/// the app secret. Each call is authenticated with the secret, counted against the app's
/// budget (shared across nodes), and logged with the app's name, never the secret.
enum ServerRoutes {
    static func add(to router: inout Router, chat: Chat, requestsPerSecond: Int) {
        let api = API(chat: chat)
        let server = ServerAPI(chat: chat, api: api, rate: SharedRate(name: "server-api", rate: Double(requestsPerSecond),
                                                                     burst: Double(2 * requestsPerSecond), shared: chat.sharedCounters),
                               requestsPerSecond: requestsPerSecond)
        @Sendable func username(_ request: Request) -> String { request.parameters["username"] ?? "" }
        @Sendable func webhookID(_ request: Request) -> String { request.parameters["webhookId"] ?? "" }

        // Users
        router.post("/v1/server/users") { request in
            await server.handle(request) { app in
                await api.respondCreatedOrFound { try await chat.upsertUser(app, try await request.decode(UpsertUserRequest.self)) }
            }
        }
        router.get("/v1/server/users") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.serverUsers(app, query: request.queryItems["query"] ?? "", limit: try api.integer(request, "limit"),
                                               offset: try api.integer(request, "offset"))
                }
            }
        }
        router.get("/v1/server/users/:username") { request in
            await server.handle(request) { app in await api.respond { try await chat.serverUser(app, username: username(request)) } }
        }
        router.delete("/v1/server/users/:username") { request in
            await server.handle(request) { app in await api.respondEmpty { try await chat.deleteUser(app, username: username(request)) } }
        }
        router.get("/v1/server/retention") { request in
            await server.handle(request) { app in await api.respond { try await chat.retention(app) } }
        }
        router.put("/v1/server/retention") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.setRetention(app, try await request.decode(RetentionPolicy.self)) }
            }
        }
        router.get("/v1/server/users/:username/export") { request in
            await server.handle(request) { app in
                await api.export(name: "parley-export.ndjson") { sink in
                    try await chat.exportUser(try await chat.actingUser(app, username: username(request)), into: sink)
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId/export") { request in
            await server.handle(request) { app in
                await api.export(name: "parley-conversation.ndjson") { sink in
                    try await chat.exportConversation(app.caller, conversation: api.conversationID(request), into: sink)
                }
            }
        }
        router.put("/v1/server/users/:username/shadow-ban") { request in
            await server.handle(request) { app in
                await api.respondEmpty { try await chat.setShadowBan(app, username: username(request), banned: true) }
            }
        }
        router.delete("/v1/server/users/:username/shadow-ban") { request in
            await server.handle(request) { app in
                await api.respondEmpty { try await chat.setShadowBan(app, username: username(request), banned: false) }
            }
        }
        router.post("/v1/server/conversations/:conversationId/bans") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) {
                    try await chat.ban(app.caller, conversation: api.conversationID(request), try await request.decode(BanRequest.self))
                }
            }
        }
        router.delete("/v1/server/conversations/:conversationId/bans/:userId") { request in
            await server.handle(request) { app in
                await api.respondEmpty {
                    try await chat.unban(app.caller, conversation: api.conversationID(request), user: UserID(rawValue: request.parameters["userId"] ?? ""))
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId/reports") { request in
            await server.handle(request) { app in
                await api.respond {
                    let state = request.queryItems["state"] ?? "open"
                    guard state == "open" || state == "resolved" else { throw ChatError.invalid("state must be open or resolved") }
                    return try await chat.reports(app.caller, conversation: api.conversationID(request), resolved: state == "resolved",
                                                  after: request.queryItems["after"], limit: try api.integer(request, "limit"))
                }
            }
        }
        router.post("/v1/server/conversations/:conversationId/reports/:reportId/resolve") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.resolveReport(app.caller, conversation: api.conversationID(request), report: request.parameters["reportId"] ?? "",
                                                 try await request.decode(ResolveReportRequest.self))
                }
            }
        }
        router.post("/v1/server/users/:username/deactivate") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.setDeactivated(app, username: username(request), true) }
            }
        }
        router.post("/v1/server/users/:username/reactivate") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.setDeactivated(app, username: username(request), false) }
            }
        }
        router.post("/v1/server/users/:username/sessions") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) {
                    let empty = (request.headers["content-length"] ?? "0") == "0" && request.headers["transfer-encoding"] == nil
                    let body = empty ? IssueSessionRequest() : try await request.decode(IssueSessionRequest.self)
                    return try await chat.issueSession(app, username: username(request), body)
                }
            }
        }
        router.delete("/v1/server/users/:username/sessions") { request in
            await server.handle(request) { app in
                await api.respondEmpty { _ = try await chat.signOutEverywhere(app, username: username(request)) }
            }
        }
        router.post("/v1/server/users/:username/password") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.setPassword(app, username: username(request), try await request.decode(SetPasswordRequest.self)) }
            }
        }
        router.get("/v1/server/users/:username/conversations") { request in
            await server.handle(request) { app in
                await api.respond {
                    let user = try await chat.actingUser(app, username: username(request))
                    return try await chat.listConversations(user, limit: try api.integer(request, "limit"), before: request.queryItems["before"])
                }
            }
        }

        // Conversations and members
        router.post("/v1/server/conversations") { request in
            await server.handle(request) { app in
                await api.respondCreatedOrFound {
                    try await chat.serverCreateConversation(app, try await request.decode(ServerCreateConversationRequest.self))
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId") { request in
            await server.handle(request) { app in await api.respond { try await chat.conversation(app.caller, id: api.conversationID(request)) } }
        }
        router.patch("/v1/server/conversations/:conversationId") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.updateConversation(app.caller, id: api.conversationID(request), try await request.decode(UpdateConversationRequest.self))
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId/members") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.members(app.caller, id: api.conversationID(request), limit: try api.integer(request, "limit"),
                                           offset: try api.integer(request, "offset"))
                }
            }
        }
        router.post("/v1/server/conversations/:conversationId/members") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) {
                    try await chat.addMembers(app.caller, id: api.conversationID(request), try await request.decode(AddMembersRequest.self))
                }
            }
        }
        router.patch("/v1/server/conversations/:conversationId/members/:username") { request in
            await server.handle(request) { app in
                await api.respond {
                    let user = try await chat.userID(app, username: username(request))
                    return try await chat.updateMember(app.caller, id: api.conversationID(request), user: user,
                                                       try await request.decode(UpdateMemberRequest.self))
                }
            }
        }
        router.delete("/v1/server/conversations/:conversationId/members/:username") { request in
            await server.handle(request) { app in
                await api.respondEmpty {
                    let user = try await chat.userID(app, username: username(request))
                    try await chat.removeMember(app.caller, id: api.conversationID(request), user: user)
                }
            }
        }

        // Messages
        router.get("/v1/server/conversations/:conversationId/messages") { request in
            await server.handle(request) { app in
                await api.respond {
                    let order = request.queryItems["order"] ?? "asc"
                    guard order == "asc" || order == "desc" else { throw ChatError.invalid("order must be asc or desc") }
                    let query = HistoryQuery(before: try api.integer(request, "before"), after: try api.integer(request, "after"),
                                             around: try api.integer(request, "around"), limit: try api.integer(request, "limit"),
                                             ascending: order == "asc")
                    return try await chat.history(app.caller, id: api.conversationID(request), query)
                }
            }
        }
        router.post("/v1/server/conversations/:conversationId/messages") { request in
            await server.handle(request) { app in
                await api.respondCreatedOrFound {
                    let body = try await request.decode(ServerSendMessageRequest.self)
                    var sender = app.caller
                    if let from = body.from { sender = try await chat.actingUser(app, username: from) }
                    return try await chat.sendRecord(sender, to: api.conversationID(request), body.message)
                }
            }
        }
        router.patch("/v1/server/conversations/:conversationId/messages/:messageId") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.edit(app.caller, conversation: api.conversationID(request), message: api.messageID(request),
                                        try await request.decode(EditMessageRequest.self))
                }
            }
        }
        router.delete("/v1/server/conversations/:conversationId/messages/:messageId") { request in
            await server.handle(request) { app in
                await api.respond {
                    let deleted = try await chat.delete(app.caller, conversation: api.conversationID(request), messages: [api.messageID(request)])
                    guard let tombstone = deleted.first else { throw ChatError.messageNotFound }
                    return tombstone
                }
            }
        }

        // Webhooks
        router.post("/v1/server/webhooks") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) { try await chat.createWebhook(app, try await request.decode(CreateWebhookRequest.self)) }
            }
        }
        router.get("/v1/server/webhooks") { request in
            await server.handle(request) { app in await api.respond { try await chat.listWebhooks(app) } }
        }
        router.get("/v1/server/webhooks/:webhookId") { request in
            await server.handle(request) { app in await api.respond { try await chat.webhook(app, id: webhookID(request)) } }
        }
        router.patch("/v1/server/webhooks/:webhookId") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.updateWebhook(app, id: webhookID(request), try await request.decode(UpdateWebhookRequest.self)) }
            }
        }
        router.delete("/v1/server/webhooks/:webhookId") { request in
            await server.handle(request) { app in await api.respondEmpty { try await chat.deleteWebhook(app, id: webhookID(request)) } }
        }
        router.post("/v1/server/webhooks/:webhookId/rotate-secret") { request in
            await server.handle(request) { app in await api.respond { try await chat.rotateWebhookSecret(app, id: webhookID(request)) } }
        }
        router.get("/v1/server/webhooks/:webhookId/deliveries") { request in
            await server.handle(request) { app in
                await api.respond {
                    let status = request.queryItems["status"] ?? "failed"
                    guard status == "failed" || status == "pending" else { throw ChatError.invalid("status must be failed or pending") }
                    return try await chat.webhookDeliveries(app, id: webhookID(request), failed: status == "failed",
                                                            after: request.queryItems["after"], limit: try api.integer(request, "limit"))
                }
            }
        }
        router.post("/v1/server/webhooks/:webhookId/replay") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.replayWebhookDeliveries(app, id: webhookID(request), delivery: nil) }
            }
        }
        router.post("/v1/server/webhooks/:webhookId/deliveries/:deliveryId/replay") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.replayWebhookDeliveries(app, id: webhookID(request), delivery: request.parameters["deliveryId"] ?? "")
                }
            }
        }
    }
}

/// Authentication, budget and log line shared by every server API call.
struct ServerAPI: Sendable {
    let chat: Chat
    let api: API
    let rate: SharedRate
    let requestsPerSecond: Int

    /// Authenticates with the secret, takes from the app's budget, runs `body` and logs the
    /// call as `server-api app=<name> <method> <path> <status> <ms>ms`.
    func handle(_ request: Request, _ body: (ServerApp) async -> Response) async -> Response {
        let started = ContinuousClock.now
        let app: ServerApp
        do {
            app = try await authenticate(request)
        } catch {
            let response = api.errorResponse(error)
            log(app: nil, request, response, started)
            return response
        }
        if let wait = rate.take(String(app.app.id)) {
            let response = api.errorResponse(ChatError.rateLimited(retryAfter: wait, "more than \(requestsPerSecond) server API requests per second for this app"))
            log(app: app.name, request, response, started)
            return response
        }
        let response = await body(app)
        log(app: app.name, request, response, started)
        return response
    }

    private func authenticate(_ request: Request) async throws -> ServerApp {
        guard let authorization = request.headers["authorization"] else { throw ChatError.invalidAppSecret }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw ChatError.invalidAppSecret }
        let secret = parts[1].trimmingCharacters(in: .whitespaces)
        if secret.hasPrefix("pt_") {
            throw ChatError(.invalidAppSecret, "this is a user's session token: the server API takes the app secret (sk_…); user endpoints take session tokens")
        }
        return try await chat.authenticateApp(secret: secret)
    }

    private func log(app: String?, _ request: Request, _ response: Response, _ started: ContinuousClock.Instant) {
        let elapsed = (ContinuousClock.now - started).inSeconds * 1000
        // The path carries no secret (the secret travels only in the Authorization header).
        let path = request.path.prefix(200)
        let line = "parley-server: server-api app=\(app ?? "-") \(request.method.rawValue) \(path) \(response.status.code) \(String(format: "%.1f", elapsed))ms\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
