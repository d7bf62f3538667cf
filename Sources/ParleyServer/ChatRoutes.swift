import Foundation
import ParleyChat
import ParleyNet
import ParleyWire

/// The REST API (docs/openapi.yaml), mapped onto ``Chat``. Each handler authenticates,
/// decodes, calls one domain method and encodes its answer; ``ChatError``s become the JSON
/// error body with their status here, in one place.
enum ChatRoutes {
    static func add(to router: inout Router, chat: Chat) {
        let api = API(chat: chat)

        // Accounts and sessions
        router.post("/v1/users") { request in
            await api.respond(status: .created) {
                let app = try await api.app(request)
                return try await chat.register(try await request.decode(RegisterRequest.self), app: app, address: api.address(request))
            }
        }
        router.post("/v1/sessions") { request in
            await api.respond(status: .created) {
                let app = try await api.app(request)
                return try await chat.signIn(try await request.decode(SignInRequest.self), app: app, address: api.address(request))
            }
        }
        router.post("/v1/sessions/guest") { request in
            await api.respond(status: .created) {
                let app = try await api.app(request)
                return try await chat.signInAsGuest(try await request.decode(GuestSignInRequest.self), app: app, address: api.address(request))
            }
        }
        router.get("/v1/sessions") { request in
            await api.respond { try await chat.listSessions(try await api.caller(request)) }
        }
        router.delete("/v1/sessions/current") { request in
            await api.respondEmpty { try await chat.signOut(try await api.caller(request), everywhere: false) }
        }
        router.delete("/v1/sessions") { request in
            await api.respondEmpty { try await chat.signOut(try await api.caller(request), everywhere: true) }
        }
        router.get("/v1/me") { request in
            await api.respond { try await chat.me(try await api.caller(request)) }
        }
        router.patch("/v1/me") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.updateProfile(caller, try await request.decode(UpdateProfileRequest.self))
            }
        }

        router.post("/v1/me/password") { request in
            await api.respondEmpty {
                let caller = try await api.caller(request)
                try await chat.changePassword(caller, try await request.decode(ChangePasswordRequest.self), address: api.address(request))
            }
        }

        // Devices for push (docs/push.md)
        router.post("/v1/devices") { request in
            await api.respond(status: .created) {
                let caller = try await api.caller(request)
                return try await chat.registerDevice(caller, try await request.decode(RegisterDeviceRequest.self))
            }
        }
        router.get("/v1/devices") { request in
            await api.respond { try await chat.listDevices(try await api.caller(request)) }
        }
        router.delete("/v1/devices/current") { request in
            await api.respondEmpty { try await chat.removeSessionDevices(try await api.caller(request)) }
        }
        router.delete("/v1/devices/:deviceId") { request in
            await api.respondEmpty {
                let caller = try await api.caller(request)
                try await chat.removeDevice(caller, id: request.parameters["deviceId"] ?? "")
            }
        }

        // Directory
        router.get("/v1/users") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let query = request.queryItems
                let sort = try query["sort"].map { name in
                    guard let sort = UserSort(rawValue: name) else {
                        throw ChatError.invalid("sort must be one of \(UserSort.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    return sort
                } ?? .username
                return try await chat.searchUsers(caller, query: query["query"] ?? "", limit: try api.integer(request, "limit"),
                                                  offset: try api.integer(request, "offset"), sort: sort)
            }
        }
        router.get("/v1/users/:userId") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.user(caller, id: UserID(rawValue: request.parameters["userId"] ?? ""))
            }
        }
        router.post("/v1/users/resolve") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.resolveUsers(caller, usernames: try await request.decode(ResolveUsersRequest.self).usernames)
            }
        }

        // Conversations
        router.post("/v1/conversations") { request in
            await api.respondCreatedOrFound {
                let caller = try await api.caller(request)
                return try await chat.createConversation(caller, try await request.decode(CreateConversationRequest.self))
            }
        }
        router.get("/v1/conversations") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.listConversations(caller, limit: try api.integer(request, "limit"), before: request.queryItems["before"])
            }
        }
        router.get("/v1/channels") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.listChannels(caller, query: request.queryItems["query"] ?? "", limit: try api.integer(request, "limit"),
                                                   offset: try api.integer(request, "offset"))
            }
        }
        router.get("/v1/conversations/:conversationId") { request in
            await api.respond { try await chat.conversation(try await api.caller(request), id: api.conversationID(request)) }
        }
        router.patch("/v1/conversations/:conversationId") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.updateConversation(caller, id: api.conversationID(request), try await request.decode(UpdateConversationRequest.self))
            }
        }
        router.post("/v1/conversations/:conversationId/join") { request in
            await api.respond { try await chat.join(try await api.caller(request), id: api.conversationID(request)) }
        }
        router.get("/v1/conversations/:conversationId/members") { request in
            await api.respond {
                try await chat.members(try await api.caller(request), id: api.conversationID(request), limit: try api.integer(request, "limit"),
                                       offset: try api.integer(request, "offset"))
            }
        }
        router.post("/v1/conversations/:conversationId/members") { request in
            await api.respond(status: .created) {
                let caller = try await api.caller(request)
                return try await chat.addMembers(caller, id: api.conversationID(request), try await request.decode(AddMembersRequest.self))
            }
        }
        router.patch("/v1/conversations/:conversationId/members/:userId") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.updateMember(caller, id: api.conversationID(request), user: UserID(rawValue: request.parameters["userId"] ?? ""),
                                                   try await request.decode(UpdateMemberRequest.self))
            }
        }
        router.delete("/v1/conversations/:conversationId/members/:userId") { request in
            await api.respondEmpty {
                try await chat.removeMember(try await api.caller(request), id: api.conversationID(request),
                                            user: UserID(rawValue: request.parameters["userId"] ?? ""))
            }
        }

        router.put("/v1/conversations/:conversationId/mute") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.mute(caller, conversation: api.conversationID(request), try await request.decode(MuteRequest.self))
            }
        }
        router.delete("/v1/conversations/:conversationId/mute") { request in
            await api.respondEmpty { try await chat.unmute(try await api.caller(request), conversation: api.conversationID(request)) }
        }
        router.put("/v1/conversations/:conversationId/notifications") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.setNotifications(caller, conversation: api.conversationID(request),
                                                       try await request.decode(NotificationsRequest.self))
            }
        }

        // Messages
        router.post("/v1/conversations/:conversationId/messages") { request in
            await api.respondCreatedOrFound {
                let caller = try await api.caller(request)
                return try await chat.sendRecord(caller, to: api.conversationID(request), try await request.decode(SendMessageRequest.self))
            }
        }
        router.post("/v1/messages") { request in
            await api.respondCreatedOrFound {
                let caller = try await api.caller(request)
                return try await chat.sendToUsers(caller, try await request.decode(SendToUsersRequest.self))
            }
        }
        router.get("/v1/conversations/:conversationId/messages") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let order = request.queryItems["order"] ?? "asc"
                guard order == "asc" || order == "desc" else { throw ChatError.invalid("order must be asc or desc") }
                let query = HistoryQuery(before: try api.integer(request, "before"), after: try api.integer(request, "after"),
                                         around: try api.integer(request, "around"), limit: try api.integer(request, "limit"),
                                         ascending: order == "asc")
                return try await chat.history(caller, id: api.conversationID(request), query)
            }
        }
        router.get("/v1/conversations/:conversationId/messages/:messageId") { request in
            await api.respond {
                try await chat.message(try await api.caller(request), conversation: api.conversationID(request), message: api.messageID(request))
            }
        }
        router.patch("/v1/conversations/:conversationId/messages/:messageId") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.edit(caller, conversation: api.conversationID(request), message: api.messageID(request),
                                           try await request.decode(EditMessageRequest.self))
            }
        }
        router.delete("/v1/conversations/:conversationId/messages/:messageId") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let deleted = try await chat.delete(caller, conversation: api.conversationID(request), messages: [api.messageID(request)])
                guard let tombstone = deleted.first else { throw ChatError.messageNotFound }
                return tombstone
            }
        }
        router.post("/v1/conversations/:conversationId/messages/delete") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let ids = try await request.decode(DeleteMessagesRequest.self).ids
                return DeletedMessages(messages: try await chat.delete(caller, conversation: api.conversationID(request), messages: ids))
            }
        }
        router.get("/v1/conversations/:conversationId/messages/:messageId/receipts") { request in
            await api.respond {
                try await chat.messageReceipts(try await api.caller(request), conversation: api.conversationID(request), message: api.messageID(request))
            }
        }
        // Reactions, pins and mentions (docs/api.md)
        router.post("/v1/conversations/:conversationId/messages/:messageId/reactions") { request in
            await api.respondCreatedOrFound {
                let caller = try await api.caller(request)
                let emoji = try await request.decode(ReactionRequest.self).emoji
                let (message, changed) = try await chat.react(caller, conversation: api.conversationID(request), message: api.messageID(request), emoji: emoji)
                return (message, changed)
            }
        }
        router.delete("/v1/conversations/:conversationId/messages/:messageId/reactions/:emoji") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.unreact(caller, conversation: api.conversationID(request), message: api.messageID(request),
                                              emoji: request.parameters["emoji"] ?? "").0
            }
        }
        router.get("/v1/conversations/:conversationId/messages/:messageId/reactions") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.reactions(caller, conversation: api.conversationID(request), message: api.messageID(request),
                                                emoji: request.queryItems["emoji"], limit: try api.integer(request, "limit"),
                                                offset: try api.integer(request, "offset"))
            }
        }
        router.put("/v1/conversations/:conversationId/messages/:messageId/pin") { request in
            await api.respond {
                try await chat.pin(try await api.caller(request), conversation: api.conversationID(request), message: api.messageID(request)).0
            }
        }
        router.delete("/v1/conversations/:conversationId/messages/:messageId/pin") { request in
            await api.respond {
                try await chat.unpin(try await api.caller(request), conversation: api.conversationID(request), message: api.messageID(request)).0
            }
        }
        router.get("/v1/conversations/:conversationId/pins") { request in
            await api.respond { try await chat.pins(try await api.caller(request), conversation: api.conversationID(request)) }
        }
        // Moderation (docs/api.md, "Moderation")
        router.post("/v1/conversations/:conversationId/bans") { request in
            await api.respond(status: .created) {
                let caller = try await api.caller(request)
                return try await chat.ban(caller, conversation: api.conversationID(request), try await request.decode(BanRequest.self))
            }
        }
        router.get("/v1/conversations/:conversationId/bans") { request in
            await api.respond { try await chat.bans(try await api.caller(request), conversation: api.conversationID(request)) }
        }
        router.delete("/v1/conversations/:conversationId/bans/:userId") { request in
            await api.respondEmpty {
                try await chat.unban(try await api.caller(request), conversation: api.conversationID(request),
                                     user: UserID(rawValue: request.parameters["userId"] ?? ""))
            }
        }
        router.put("/v1/conversations/:conversationId/members/:userId/mute") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.muteMember(caller, conversation: api.conversationID(request), user: UserID(rawValue: request.parameters["userId"] ?? ""),
                                                 try await request.decode(MuteMemberRequest.self))
            }
        }
        router.delete("/v1/conversations/:conversationId/members/:userId/mute") { request in
            await api.respond {
                try await chat.unmuteMember(try await api.caller(request), conversation: api.conversationID(request),
                                            user: UserID(rawValue: request.parameters["userId"] ?? ""))
            }
        }
        router.post("/v1/conversations/:conversationId/messages/:messageId/reports") { request in
            await api.respond(status: .created) {
                let caller = try await api.caller(request)
                return try await chat.report(caller, conversation: api.conversationID(request), message: api.messageID(request),
                                             try await request.decode(ReportRequest.self))
            }
        }
        router.get("/v1/conversations/:conversationId/reports") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let state = request.queryItems["state"] ?? "open"
                guard state == "open" || state == "resolved" else { throw ChatError.invalid("state must be open or resolved") }
                return try await chat.reports(caller, conversation: api.conversationID(request), resolved: state == "resolved",
                                              after: request.queryItems["after"], limit: try api.integer(request, "limit"))
            }
        }
        router.post("/v1/conversations/:conversationId/reports/:reportId/resolve") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.resolveReport(caller, conversation: api.conversationID(request), report: request.parameters["reportId"] ?? "",
                                                    try await request.decode(ResolveReportRequest.self))
            }
        }
        router.get("/v1/me/blocks") { request in
            await api.respond { try await chat.blocks(try await api.caller(request)) }
        }
        router.put("/v1/me/blocks/:userId") { request in
            await api.respondEmpty { try await chat.block(try await api.caller(request), user: UserID(rawValue: request.parameters["userId"] ?? "")) }
        }
        router.delete("/v1/me/blocks/:userId") { request in
            await api.respondEmpty { try await chat.unblock(try await api.caller(request), user: UserID(rawValue: request.parameters["userId"] ?? "")) }
        }

        // Photos (docs/api.md, "Photos")
        router.put("/v1/me/photo") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.setProfilePhoto(caller, attachment: try await request.decode(PhotoRequest.self).attachmentID)
            }
        }
        router.delete("/v1/me/photo") { request in
            await api.respond { try await chat.setProfilePhoto(try await api.caller(request), attachment: nil) }
        }
        router.put("/v1/conversations/:conversationId/photo") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.setConversationPhoto(caller, conversation: api.conversationID(request),
                                                           attachment: try await request.decode(PhotoRequest.self).attachmentID)
            }
        }
        router.delete("/v1/conversations/:conversationId/photo") { request in
            await api.respond {
                try await chat.setConversationPhoto(try await api.caller(request), conversation: api.conversationID(request), attachment: nil)
            }
        }

        // Export (docs/api.md, "Export")
        router.get("/v1/me/export") { request in
            await api.export(name: "parley-export.ndjson") { sink in
                try await chat.exportUser(try await api.caller(request), into: sink)
            }
        }
        router.get("/v1/conversations/:conversationId/export") { request in
            await api.export(name: "parley-conversation.ndjson") { sink in
                try await chat.exportConversation(try await api.caller(request), conversation: api.conversationID(request), into: sink)
            }
        }

        // Threads (docs/api.md, "Threads")
        router.get("/v1/conversations/:conversationId/threads") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let before = try request.queryItems["before"].map { text in
                    guard let date = WireCoding.parseDate(text) else { throw ChatError.invalid("before must be a time like 2026-12-02T12:00:00.000Z") }
                    return date
                }
                return try await chat.threads(caller, conversation: api.conversationID(request), before: before, limit: try api.integer(request, "limit"))
            }
        }
        router.get("/v1/conversations/:conversationId/threads/:messageId") { request in
            await api.respond {
                try await chat.thread(try await api.caller(request), conversation: api.conversationID(request), root: api.messageID(request))
            }
        }
        router.get("/v1/conversations/:conversationId/threads/:messageId/messages") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.threadHistory(caller, conversation: api.conversationID(request), root: api.messageID(request),
                                                    before: try api.integer(request, "before"), after: try api.integer(request, "after"),
                                                    limit: try api.integer(request, "limit"))
            }
        }
        router.post("/v1/conversations/:conversationId/threads/:messageId/read") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.markThreadRead(caller, conversation: api.conversationID(request), root: api.messageID(request),
                                                     seq: try await request.decode(ThreadReadRequest.self).seq)
            }
        }
        router.get("/v1/mentions") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.mentions(caller, before: request.queryItems["before"].map(MessageID.init(rawValue:)),
                                               limit: try api.integer(request, "limit"))
            }
        }
        router.get("/v1/conversations/:conversationId/events") { request in
            await api.respond {
                try await chat.events(try await api.caller(request), conversation: api.conversationID(request),
                                      afterSeq: try api.integer(request, "after") ?? 0, limit: try api.integer(request, "limit"))
            }
        }
        router.get("/v1/events") { request in
            await api.respond {
                try await chat.feed(try await api.caller(request), afterPosition: try api.integer(request, "after") ?? 0,
                                    limit: try api.integer(request, "limit"))
            }
        }
        router.get("/v1/search") { request in
            await api.respond {
                let caller = try await api.caller(request)
                let query = request.queryItems
                return try await chat.search(caller, query: query["q"] ?? "", conversation: query["conversationId"].map(ConversationID.init(rawValue:)),
                                             limit: try api.integer(request, "limit"))
            }
        }

        // Receipts
        router.post("/v1/conversations/:conversationId/receipts") { request in
            await api.respond {
                let caller = try await api.caller(request)
                return try await chat.updateReceipt(caller, conversation: api.conversationID(request), try await request.decode(ReceiptUpdate.self))
            }
        }
        router.get("/v1/conversations/:conversationId/receipts") { request in
            await api.respond {
                try await chat.receipts(try await api.caller(request), conversation: api.conversationID(request),
                                        limit: try api.integer(request, "limit"), offset: try api.integer(request, "offset"))
            }
        }
    }
}

/// The tombstones of a bulk delete.
struct DeletedMessages: Codable, Sendable {
    var messages: [Message]
}

/// Request plumbing shared by the handlers.
struct API: Sendable {
    let chat: Chat

    /// The app named by `X-Parley-App-Key`.
    func app(_ request: Request) async throws -> AppRef {
        guard let key = request.headers["x-parley-app-key"] else { throw ChatError.unknownApp }
        return try await chat.app(publicKey: key)
    }

    /// The signed-in caller: app key plus `Authorization: Bearer <token>`.
    func caller(_ request: Request) async throws -> Caller {
        let app = try await app(request)
        guard let authorization = request.headers["authorization"] else { throw ChatError.unauthenticated }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw ChatError.unauthenticated }
        let token = String(parts[1]).trimmingCharacters(in: .whitespaces)
        if token.hasPrefix("sk_") { throw ChatError.secretOnUserEndpoint }
        return try await chat.authenticate(token: token, app: app)
    }

    /// The client's address without the port, for per-address rate limits.
    func address(_ request: Request) -> String {
        guard let address = request.remoteAddress?.description else { return "unknown" }
        guard let colon = address.lastIndex(of: ":") else { return address }
        return String(address[..<colon])
    }

    func conversationID(_ request: Request) -> ConversationID { ConversationID(rawValue: request.parameters["conversationId"] ?? "") }
    func messageID(_ request: Request) -> MessageID { MessageID(rawValue: request.parameters["messageId"] ?? "") }

    /// A whole-number query parameter, nil when absent.
    func integer(_ request: Request, _ name: String) throws -> Int64? {
        guard let text = request.queryItems[name] else { return nil }
        guard let value = Int64(text) else { throw ChatError.invalid("\(name) must be a whole number") }
        return value
    }

    func integer(_ request: Request, _ name: String) throws -> Int? {
        guard let value: Int64 = try integer(request, name) else { return nil }
        guard let small = Int(exactly: value), abs(small) <= 1 << 40 else { throw ChatError.invalid("\(name) is out of range") }
        return small
    }

    /// Runs `work` and encodes its value with `JSONEncoder`, or the error it threw.
    func respond<T: Encodable & Sendable>(status: HTTPStatus = .ok, _ work: () async throws -> T) async -> Response {
        await respond(encode: API.encode) { (try await work(), status) }
    }

    /// Runs `work` and writes its value with ``JSONWriter`` (hot paths: history, sends).
    func respond<T: JSONWritable>(status: HTTPStatus = .ok, _ work: () async throws -> T) async -> Response {
        await respond(encode: \.jsonBytes) { (try await work(), status) }
    }

    /// Runs `work`, which says whether it created its value (201) or found an existing one, a
    /// retry or an existing direct conversation (200).
    func respondCreatedOrFound<T: Encodable & Sendable>(_ work: () async throws -> (T, created: Bool)) async -> Response {
        await respond(encode: API.encode) { let (value, created) = try await work(); return (value, created ? .created : .ok) }
    }

    /// ``respondCreatedOrFound(_:)`` for values written with ``JSONWriter``.
    func respondCreatedOrFound<T: JSONWritable>(_ work: () async throws -> (T, created: Bool)) async -> Response {
        await respond(encode: \.jsonBytes) { let (value, created) = try await work(); return (value, created ? .created : .ok) }
    }

    /// The one responder the others share: the value's JSON with its status, or the error.
    private func respond<T>(encode: (T) throws -> [UInt8], _ work: () async throws -> (T, HTTPStatus)) async -> Response {
        do {
            let (value, status) = try await work()
            return Response(status: status, headers: HTTPHeaders([("Content-Type", "application/json")]), body: try encode(value))
        } catch {
            return errorResponse(error)
        }
    }

    private static func encode(_ value: some Encodable) throws -> [UInt8] {
        Array(try WireCoding.encoder().encode(value))
    }

    /// Runs an export into a temporary file (unlinked once open, so nothing is left behind)
    /// and answers it as an NDJSON attachment sent from the file: an export of any size is
    /// never whole in memory. An export that fails midway answers its error, never a partial file.
    func export(name: String, _ work: (any ExportSink) async throws -> Void) async -> Response {
        let path = NSTemporaryDirectory() + "parley-export-\(UUID().uuidString).ndjson"
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
              let writer = FileHandle(forWritingAtPath: path) else {
            return errorResponse(ChatError.internalError)
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            try await work(FileExportSink(handle: writer))
            try writer.close()
            guard let reader = FileHandle(forReadingAtPath: path) else { throw ChatError.internalError }
            let size = try reader.seekToEnd()
            try reader.seek(toOffset: 0)
            var response = Response(status: .ok, headers: HTTPHeaders([("Content-Type", "application/x-ndjson; charset=utf-8"),
                                                                       ("Content-Disposition", "attachment; filename=\"\(name)\""),
                                                                       ("Cache-Control", "no-store")]))
            response.file = FileRegion(descriptor: reader.fileDescriptor, offset: 0, length: Int64(size), owner: reader)
            return response
        } catch {
            try? writer.close()
            return errorResponse(error)
        }
    }

    /// Runs `work` and answers 204.
    func respondEmpty(_ work: () async throws -> Void) async -> Response {
        do {
            try await work()
            return Response(status: .noContent)
        } catch {
            return errorResponse(error)
        }
    }

    /// The one place a domain error becomes an HTTP response.
    func errorResponse(_ error: any Error) -> Response {
        switch error {
        case let error as ChatError:
            var response = Response.error(status: HTTPStatus(code: error.status), code: error.code, message: error.message)
            if let seconds = error.retryAfterSeconds { response.headers.add(name: "Retry-After", value: String(seconds)) }
            return response
        case let error as HTTPError:
            return error.response
        default:
            return Response.error(status: .internalServerError, code: ChatError.internalError.code, message: ChatError.internalError.message)
        }
    }
}
