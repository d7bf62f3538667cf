import Foundation
import ParleyChat
import ParleyLog
import ParleyNet
import ParleyPush
import ParleyWire

/// The server API (`/v1/server/…`, docs/server-api.md): what an app's own backend calls with
/// the app secret. Each call is authenticated with the secret, counted against the app's
/// budget (shared across nodes), and logged with the app's name, never the secret.
enum ServerRoutes {
    static func add(to router: inout Router, chat: Chat, requestsPerSecond: Int, test: TestModeParts? = nil) {
        let api = API(chat: chat)
        let server = ServerAPI(chat: chat, api: api, rate: SharedRate(name: "server-api", rate: Double(requestsPerSecond),
                                                                     burst: Double(2 * requestsPerSecond), shared: chat.sharedCounters),
                               requestsPerSecond: requestsPerSecond)
        @Sendable func username(_ request: Request) throws -> String { try request.parameter("username") }
        @Sendable func webhookID(_ request: Request) throws -> String { try request.parameter("webhookId") }

        // Users
        router.post("/v1/server/users") { request in
            await server.handle(request) { app in
                await api.respondCreatedOrFound { try await chat.backend.upsertUser(app, try await request.decode(UpsertUserRequest.self)) }
            }
        }
        router.get("/v1/server/users") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.backend.users(app, query: request.queryItems["query"] ?? "", limit: try api.integer(request, "limit"),
                                               offset: try api.integer(request, "offset"))
                }
            }
        }
        router.get("/v1/server/users/:username") { request in
            await server.handle(request) { app in await api.respond { try await chat.backend.user(app, username: try username(request)) } }
        }
        router.delete("/v1/server/users/:username") { request in
            await server.handle(request) { app in await api.respondEmpty {
                    try await chat.backend.deleteUser(app, username: try username(request), erase: try api.boolean(request, "erase") ?? false)
                } }
        }
        router.get("/v1/server/retention") { request in
            await server.handle(request) { app in await api.respond { try await chat.retention.policy(app) } }
        }
        router.put("/v1/server/retention") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.retention.setPolicy(app, try await request.decode(RetentionPolicy.self)) }
            }
        }
        router.get("/v1/server/messages/:messageId/trace") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.tracing.trace(app, message: MessageID(rawValue: try request.parameter("messageId"))) }
            }
        }
        if let test { addTestRoutes(to: &router, chat: chat, server: server, api: api, test: test) }
        router.get("/v1/server/link-previews") { request in
            await server.handle(request) { app in await api.respond { try await chat.linkPreviews.settings(app) } }
        }
        router.put("/v1/server/link-previews") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.linkPreviews.setSettings(app, try await request.decode(LinkPreviewSettings.self)) }
            }
        }
        router.get("/v1/server/jwt") { request in
            await server.handle(request) { app in await api.respond { try await chat.jwt.settings(app) } }
        }
        router.put("/v1/server/jwt") { request in
            await server.handle(request) { app in await api.respond { try await chat.jwt.set(app, try await request.decode(SetJWTSettingsRequest.self)) } }
        }
        router.delete("/v1/server/jwt") { request in
            await server.handle(request) { app in await api.respondEmpty { try await chat.jwt.remove(app) } }
        }
        router.get("/v1/server/reports") { request in
            await server.handle(request) { app in
                await api.respond {
                    let state = request.queryItems["state"] ?? "open"
                    guard state == "open" || state == "resolved" else { throw ChatError.invalid("state must be open or resolved") }
                    return try await chat.moderation.appReports(app, resolved: state == "resolved", after: request.queryItems["after"],
                                                                limit: try api.integer(request, "limit"))
                }
            }
        }
        // The content filter (docs/trust-and-safety.md)
        router.get("/v1/server/blocklists") { request in
            await server.handle(request) { app in await api.respond { try await chat.contentFilters.blocklists(app) } }
        }
        router.get("/v1/server/blocklists/:name") { request in
            await server.handle(request) { app in await api.respond { try await chat.contentFilters.blocklist(app, name: try request.parameter("name")) } }
        }
        router.put("/v1/server/blocklists/:name") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.contentFilters.setBlocklist(app, name: try request.parameter("name"), try await request.decode(SetBlocklistRequest.self))
                }
            }
        }
        router.delete("/v1/server/blocklists/:name") { request in
            await server.handle(request) { app in await api.respondEmpty { try await chat.contentFilters.deleteBlocklist(app, name: try request.parameter("name")) } }
        }
        router.get("/v1/server/before-send") { request in
            await server.handle(request) { app in await api.respond { try await chat.contentFilters.hook(app) } }
        }
        router.put("/v1/server/before-send") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.contentFilters.setHook(app, try await request.decode(SetBeforeSendHookRequest.self)) }
            }
        }
        router.delete("/v1/server/before-send") { request in
            await server.handle(request) { app in await api.respondEmpty { try await chat.contentFilters.deleteHook(app) } }
        }
        router.get("/v1/server/users/:username/export") { request in
            await server.handle(request) { app in
                await api.export(name: "parley-export.ndjson") { sink in
                    try await chat.exports.user(try await chat.backend.actingUser(app, username: try username(request)), into: sink)
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId/export") { request in
            await server.handle(request) { app in
                await api.export(name: "parley-conversation.ndjson") { sink in
                    try await chat.exports.conversation(app.caller, conversation: try request.conversationID(), into: sink)
                }
            }
        }
        router.put("/v1/server/users/:username/shadow-ban") { request in
            await server.handle(request) { app in
                await api.respondEmpty { try await chat.moderation.setShadowBan(app, username: try username(request), banned: true) }
            }
        }
        router.delete("/v1/server/users/:username/shadow-ban") { request in
            await server.handle(request) { app in
                await api.respondEmpty { try await chat.moderation.setShadowBan(app, username: try username(request), banned: false) }
            }
        }
        router.post("/v1/server/conversations/:conversationId/bans") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) {
                    try await chat.moderation.ban(app.caller, conversation: try request.conversationID(), try await request.decode(BanRequest.self))
                }
            }
        }
        router.delete("/v1/server/conversations/:conversationId/bans/:userId") { request in
            await server.handle(request) { app in
                await api.respondEmpty {
                    try await chat.moderation.unban(app.caller, conversation: try request.conversationID(), user: try request.userID())
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId/reports") { request in
            await server.handle(request) { app in
                await api.respond {
                    let state = request.queryItems["state"] ?? "open"
                    guard state == "open" || state == "resolved" else { throw ChatError.invalid("state must be open or resolved") }
                    return try await chat.moderation.reports(app.caller, conversation: try request.conversationID(), resolved: state == "resolved",
                                                  after: request.queryItems["after"], limit: try api.integer(request, "limit"))
                }
            }
        }
        router.post("/v1/server/conversations/:conversationId/reports/:reportId/resolve") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.moderation.resolveReport(app.caller, conversation: try request.conversationID(), report: try request.parameter("reportId"),
                                                 try await request.decode(ResolveReportRequest.self))
                }
            }
        }
        router.post("/v1/server/users/:username/deactivate") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.backend.setDeactivated(app, username: try username(request), true) }
            }
        }
        router.post("/v1/server/users/:username/reactivate") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.backend.setDeactivated(app, username: try username(request), false) }
            }
        }
        router.post("/v1/server/users/:username/sessions") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) {
                    let empty = (request.headers["content-length"] ?? "0") == "0" && request.headers["transfer-encoding"] == nil
                    let body = empty ? IssueSessionRequest() : try await request.decode(IssueSessionRequest.self)
                    return try await chat.backend.issueSession(app, username: try username(request), body)
                }
            }
        }
        router.delete("/v1/server/users/:username/sessions") { request in
            await server.handle(request) { app in
                await api.respondEmpty { _ = try await chat.backend.signOutEverywhere(app, username: try username(request)) }
            }
        }
        router.post("/v1/server/users/:username/password") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.backend.setPassword(app, username: try username(request), try await request.decode(SetPasswordRequest.self)) }
            }
        }
        router.get("/v1/server/users/:username/conversations") { request in
            await server.handle(request) { app in
                await api.respond {
                    let user = try await chat.backend.actingUser(app, username: try username(request))
                    return try await chat.listConversations(user, limit: try api.integer(request, "limit"), before: request.queryItems["before"])
                }
            }
        }

        // Conversations and members
        router.post("/v1/server/conversations") { request in
            await server.handle(request) { app in
                await api.respondCreatedOrFound {
                    try await chat.backend.createConversation(app, try await request.decode(ServerCreateConversationRequest.self))
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId") { request in
            await server.handle(request) { app in await api.respond { try await chat.conversation(app.caller, id: try request.conversationID()) } }
        }
        router.patch("/v1/server/conversations/:conversationId") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.updateConversation(app.caller, id: try request.conversationID(), try await request.decode(UpdateConversationRequest.self))
                }
            }
        }
        router.get("/v1/server/conversations/:conversationId/members") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.members(app.caller, id: try request.conversationID(), limit: try api.integer(request, "limit"),
                                           offset: try api.integer(request, "offset"))
                }
            }
        }
        router.post("/v1/server/conversations/:conversationId/members") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) {
                    try await chat.addMembers(app.caller, id: try request.conversationID(), try await request.decode(AddMembersRequest.self))
                }
            }
        }
        router.patch("/v1/server/conversations/:conversationId/members/:username") { request in
            await server.handle(request) { app in
                await api.respond {
                    let user = try await chat.backend.userID(app, username: try username(request))
                    return try await chat.updateMember(app.caller, id: try request.conversationID(), user: user,
                                                       try await request.decode(UpdateMemberRequest.self))
                }
            }
        }
        router.delete("/v1/server/conversations/:conversationId/members/:username") { request in
            await server.handle(request) { app in
                await api.respondEmpty {
                    let user = try await chat.backend.userID(app, username: try username(request))
                    try await chat.removeMember(app.caller, id: try request.conversationID(), user: user)
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
                    return try await chat.history(app.caller, id: try request.conversationID(), query)
                }
            }
        }
        router.post("/v1/server/conversations/:conversationId/messages") { request in
            await server.handle(request) { app in
                await api.respondCreatedOrFound {
                    let body = try await request.decode(ServerSendMessageRequest.self)
                    var sender = app.caller
                    if let from = body.from { sender = try await chat.backend.actingUser(app, username: from) }
                    return try await chat.sendRecord(sender, to: try request.conversationID(), body.message)
                }
            }
        }
        router.patch("/v1/server/conversations/:conversationId/messages/:messageId") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.edit(app.caller, conversation: try request.conversationID(), message: try request.messageID(),
                                        try await request.decode(EditMessageRequest.self))
                }
            }
        }
        router.delete("/v1/server/conversations/:conversationId/messages/:messageId") { request in
            await server.handle(request) { app in
                await api.respond {
                    let deleted = try await chat.delete(app.caller, conversation: try request.conversationID(), messages: [try request.messageID()])
                    guard let tombstone = deleted.first else { throw ChatError.messageNotFound }
                    return tombstone
                }
            }
        }

        // Webhooks
        router.post("/v1/server/webhooks") { request in
            await server.handle(request) { app in
                await api.respond(status: .created) { try await chat.webhooks.create(app, try await request.decode(CreateWebhookRequest.self)) }
            }
        }
        router.get("/v1/server/webhooks") { request in
            await server.handle(request) { app in await api.respond { try await chat.webhooks.list(app) } }
        }
        router.get("/v1/server/webhooks/:webhookId") { request in
            await server.handle(request) { app in await api.respond { try await chat.webhooks.endpoint(app, id: try webhookID(request)) } }
        }
        router.patch("/v1/server/webhooks/:webhookId") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.webhooks.update(app, id: try webhookID(request), try await request.decode(UpdateWebhookRequest.self)) }
            }
        }
        router.delete("/v1/server/webhooks/:webhookId") { request in
            await server.handle(request) { app in await api.respondEmpty { try await chat.webhooks.delete(app, id: try webhookID(request)) } }
        }
        router.post("/v1/server/webhooks/:webhookId/rotate-secret") { request in
            await server.handle(request) { app in await api.respond { try await chat.webhooks.rotateSecret(app, id: try webhookID(request)) } }
        }
        router.get("/v1/server/webhooks/:webhookId/deliveries") { request in
            await server.handle(request) { app in
                await api.respond {
                    let status = request.queryItems["status"] ?? "failed"
                    guard status == "failed" || status == "pending" else { throw ChatError.invalid("status must be failed or pending") }
                    return try await chat.webhooks.deliveries(app, id: try webhookID(request), failed: status == "failed",
                                                            after: request.queryItems["after"], limit: try api.integer(request, "limit"))
                }
            }
        }
        router.post("/v1/server/webhooks/:webhookId/replay") { request in
            await server.handle(request) { app in
                await api.respond { try await chat.webhooks.replay(app, id: try webhookID(request), delivery: nil) }
            }
        }
        router.post("/v1/server/webhooks/:webhookId/deliveries/:deliveryId/replay") { request in
            await server.handle(request) { app in
                await api.respond {
                    try await chat.webhooks.replay(app, id: try webhookID(request), delivery: try request.parameter("deliveryId"))
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

    /// Authenticates with the secret, takes from the app's budget, runs `body`, and names the
    /// app in the request's log line (the secret travels only in the Authorization header and
    /// is never logged).
    func handle(_ request: Request, _ body: (ServerApp) async -> Response) async -> Response {
        let app: ServerApp
        do {
            app = try await authenticate(request)
        } catch {
            return api.errorResponse(error)
        }
        var response: Response
        if let wait = rate.take(String(app.app.id)) {
            response = api.errorResponse(ChatError.rateLimited(retryAfter: wait, "more than \(requestsPerSecond) server API requests per second for this app"))
        } else {
            response = await body(app)
        }
        response.logMetadata["app"] = .string(app.name)
        response.logMetadata["app.id"] = .integer(app.app.id)
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
        return try await chat.backend.authenticateApp(secret: secret)
    }
}
