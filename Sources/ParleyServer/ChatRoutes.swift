import Foundation
import ParleyChat
import ParleyCrypto
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
        router.post("/v1/sessions/jwt") { request in
            await api.respond(status: .created) {
                let app = try await api.app(request)
                return try await chat.signIn(jwt: try await request.decode(JWTSignInRequest.self), app: app, address: api.address(request))
            }
        }
        router.post("/v1/sessions/guest") { request in
            await api.respond(status: .created) {
                let app = try await api.app(request)
                return try await chat.signInAsGuest(try await request.decode(GuestSignInRequest.self), app: app, address: api.address(request))
            }
        }
        api.user(&router, .GET, "/v1/sessions") { request, caller in try await chat.listSessions(caller) }
        api.userEmpty(&router, .DELETE, "/v1/sessions/current") { request, caller in try await chat.signOut(caller, everywhere: false) }
        api.userEmpty(&router, .DELETE, "/v1/sessions") { request, caller in try await chat.signOut(caller, everywhere: true) }
        api.user(&router, .GET, "/v1/me") { request, caller in try await chat.me(caller) }
        api.user(&router, .PATCH, "/v1/me") { request, caller in
            return try await chat.updateProfile(caller, try await request.decode(UpdateProfileRequest.self))
        }

        api.userEmpty(&router, .DELETE, "/v1/me") { request, caller in
            try await chat.deleteAccount(caller, try await request.decode(DeleteAccountRequest.self), address: api.address(request))
        }
        api.userEmpty(&router, .POST, "/v1/me/password") { request, caller in
            try await chat.changePassword(caller, try await request.decode(ChangePasswordRequest.self), address: api.address(request))
        }

        // Devices for push (docs/push.md)
        api.user(&router, .POST, "/v1/devices", status: .created) { request, caller in
            return try await chat.notifications.register(caller, try await request.decode(RegisterDeviceRequest.self))
        }
        api.user(&router, .GET, "/v1/devices") { request, caller in try await chat.notifications.devices(caller) }
        api.userEmpty(&router, .DELETE, "/v1/devices/current") { request, caller in try await chat.notifications.removeSessionDevices(caller) }
        api.userEmpty(&router, .DELETE, "/v1/devices/:deviceId") { request, caller in
            try await chat.notifications.removeDevice(caller, id: try request.parameter("deviceId"))
        }

        // Directory
        api.user(&router, .GET, "/v1/users") { request, caller in
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
        api.user(&router, .GET, "/v1/users/:userId") { request, caller in
            return try await chat.user(caller, id: try request.userID())
        }
        api.user(&router, .POST, "/v1/users/resolve") { request, caller in
            return try await chat.resolveUsers(caller, usernames: try await request.decode(ResolveUsersRequest.self).usernames)
        }

        // Conversations
        api.userCreatedOrFound(&router, .POST, "/v1/conversations") { request, caller in
            return try await chat.createConversation(caller, try await request.decode(CreateConversationRequest.self))
        }
        api.user(&router, .GET, "/v1/conversations") { request, caller in
            var fields: [String: String] = [:]
            for (name, value) in request.queryItems where name.hasPrefix("customData.") {
                fields[String(name.dropFirst("customData.".count))] = value
            }
            return try await chat.listConversations(caller, limit: try api.integer(request, "limit"), before: request.queryItems["before"],
                                                    fields: fields, archived: try api.boolean(request, "archived") ?? false)
        }
        api.user(&router, .GET, "/v1/channels") { request, caller in
            return try await chat.listChannels(caller, query: request.queryItems["query"] ?? "", limit: try api.integer(request, "limit"),
                                               offset: try api.integer(request, "offset"))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId") { request, caller in try await chat.conversation(caller, id: try request.conversationID()) }
        api.user(&router, .PATCH, "/v1/conversations/:conversationId") { request, caller in
            return try await chat.updateConversation(caller, id: try request.conversationID(), try await request.decode(UpdateConversationRequest.self))
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/join") { request, caller in try await chat.join(caller, id: try request.conversationID()) }
        api.user(&router, .GET, "/v1/conversations/:conversationId/members") { request, caller in
            try await chat.members(caller, id: try request.conversationID(), limit: try api.integer(request, "limit"),
                                   offset: try api.integer(request, "offset"))
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/members", status: .created) { request, caller in
            return try await chat.addMembers(caller, id: try request.conversationID(), try await request.decode(AddMembersRequest.self))
        }
        api.user(&router, .PATCH, "/v1/conversations/:conversationId/members/:userId") { request, caller in
            return try await chat.updateMember(caller, id: try request.conversationID(), user: try request.userID(),
                                               try await request.decode(UpdateMemberRequest.self))
        }
        api.userEmpty(&router, .DELETE, "/v1/conversations/:conversationId/members/:userId") { request, caller in
            try await chat.removeMember(caller, id: try request.conversationID(),
                                        user: try request.userID())
        }

        api.user(&router, .PUT, "/v1/conversations/:conversationId/mute") { request, caller in
            return try await chat.notifications.mute(caller, conversation: try request.conversationID(), try await request.decode(MuteRequest.self))
        }
        api.userEmpty(&router, .DELETE, "/v1/conversations/:conversationId/mute") { request, caller in try await chat.notifications.unmute(caller, conversation: try request.conversationID()) }
        api.user(&router, .PATCH, "/v1/conversations/:conversationId/state") { request, caller in
            return try await chat.inbox.setState(caller, conversation: try request.conversationID(), try await request.decode(ConversationStateRequest.self))
        }
        api.user(&router, .PUT, "/v1/conversations/:conversationId/draft") { request, caller in
            return try await chat.inbox.saveDraft(caller, conversation: try request.conversationID(), try await request.decode(Draft.self))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/draft") { request, caller in
            return try await chat.inbox.draft(caller, conversation: try request.conversationID(),
                                              thread: request.queryItems["threadId"].map(MessageID.init(rawValue:)))
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/scheduled", status: .created) { request, caller in
            return try await chat.scheduling.schedule(caller, conversation: try request.conversationID(), try await request.decode(ScheduleMessageRequest.self))
        }
        api.user(&router, .GET, "/v1/scheduled") { request, caller in
            return try await chat.scheduling.scheduled(caller, conversation: request.queryItems["conversationId"].map(ConversationID.init(rawValue:)))
        }
        api.user(&router, .PATCH, "/v1/scheduled/:scheduledId") { request, caller in
            return try await chat.scheduling.edit(caller, id: try request.parameter("scheduledId"), try await request.decode(EditScheduledRequest.self))
        }
        api.userEmpty(&router, .DELETE, "/v1/scheduled/:scheduledId") { request, caller in
            try await chat.scheduling.cancel(caller, id: try request.parameter("scheduledId"))
        }
        api.user(&router, .GET, "/v1/me/pinned-conversations") { request, caller in try await chat.inbox.pinned(caller) }
        api.user(&router, .PUT, "/v1/me/pinned-conversations") { request, caller in
            return try await chat.inbox.setPinned(caller, try await request.decode(PinnedConversations.self))
        }
        api.user(&router, .PUT, "/v1/conversations/:conversationId/notifications") { request, caller in
            return try await chat.notifications.setLevel(caller, conversation: try request.conversationID(),
                                                   try await request.decode(NotificationsRequest.self))
        }

        // Messages
        api.userCreatedOrFound(&router, .POST, "/v1/conversations/:conversationId/messages") { request, caller in
            return try await chat.sendRecord(caller, to: try request.conversationID(), try await request.decode(SendMessageRequest.self))
        }
        api.userCreatedOrFound(&router, .POST, "/v1/messages") { request, caller in
            return try await chat.sendToUsers(caller, try await request.decode(SendToUsersRequest.self))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/messages") { request, caller in
            let order = request.queryItems["order"] ?? "asc"
            guard order == "asc" || order == "desc" else { throw ChatError.invalid("order must be asc or desc") }
            let query = HistoryQuery(before: try api.integer(request, "before"), after: try api.integer(request, "after"),
                                     around: try api.integer(request, "around"), limit: try api.integer(request, "limit"),
                                     ascending: order == "asc")
            return try await chat.history(caller, id: try request.conversationID(), query)
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/messages/:messageId") { request, caller in
            try await chat.message(caller, conversation: try request.conversationID(), message: try request.messageID())
        }
        api.user(&router, .PATCH, "/v1/conversations/:conversationId/messages/:messageId") { request, caller in
            return try await chat.edit(caller, conversation: try request.conversationID(), message: try request.messageID(),
                                       try await request.decode(EditMessageRequest.self))
        }
        api.user(&router, .DELETE, "/v1/conversations/:conversationId/messages/:messageId") { request, caller in
            let deleted = try await chat.delete(caller, conversation: try request.conversationID(), messages: [try request.messageID()])
            guard let tombstone = deleted.first else { throw ChatError.messageNotFound }
            return tombstone
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/messages/delete") { request, caller in
            let ids = try await request.decode(DeleteMessagesRequest.self).ids
            return DeletedMessages(messages: try await chat.delete(caller, conversation: try request.conversationID(), messages: ids))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/messages/:messageId/receipts") { request, caller in
            try await chat.messageReceipts(caller, conversation: try request.conversationID(), message: try request.messageID())
        }
        // Reactions, pins and mentions (docs/api.md)
        api.userCreatedOrFound(&router, .POST, "/v1/conversations/:conversationId/messages/:messageId/reactions") { request, caller in
            let emoji = try await request.decode(ReactionRequest.self).emoji
            let (message, changed) = try await chat.annotations.react(caller, conversation: try request.conversationID(), message: try request.messageID(), emoji: emoji)
            return (message, changed)
        }
        api.user(&router, .DELETE, "/v1/conversations/:conversationId/messages/:messageId/reactions/:emoji") { request, caller in
            return try await chat.annotations.unreact(caller, conversation: try request.conversationID(), message: try request.messageID(),
                                          emoji: try request.parameter("emoji")).0
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/messages/:messageId/reactions") { request, caller in
            return try await chat.annotations.reactions(caller, conversation: try request.conversationID(), message: try request.messageID(),
                                            emoji: request.queryItems["emoji"], limit: try api.integer(request, "limit"),
                                            offset: try api.integer(request, "offset"))
        }
        api.user(&router, .PUT, "/v1/conversations/:conversationId/messages/:messageId/pin") { request, caller in
            try await chat.annotations.pin(caller, conversation: try request.conversationID(), message: try request.messageID()).0
        }
        api.user(&router, .DELETE, "/v1/conversations/:conversationId/messages/:messageId/pin") { request, caller in
            try await chat.annotations.unpin(caller, conversation: try request.conversationID(), message: try request.messageID()).0
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/pins") { request, caller in try await chat.annotations.pins(caller, conversation: try request.conversationID()) }
        // Polls (docs/api.md, "Polls")
        api.user(&router, .PUT, "/v1/conversations/:conversationId/messages/:messageId/poll/vote") { request, caller in
            let options = try await request.decode(VoteRequest.self).options
            return try await chat.polls.vote(caller, conversation: try request.conversationID(), message: try request.messageID(), options: options).0
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/messages/:messageId/poll/close") { request, caller in
            try await chat.polls.close(caller, conversation: try request.conversationID(), message: try request.messageID()).0
        }
        // Moderation (docs/api.md, "Moderation")
        api.user(&router, .POST, "/v1/conversations/:conversationId/bans", status: .created) { request, caller in
            return try await chat.moderation.ban(caller, conversation: try request.conversationID(), try await request.decode(BanRequest.self))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/bans") { request, caller in try await chat.moderation.bans(caller, conversation: try request.conversationID()) }
        api.userEmpty(&router, .DELETE, "/v1/conversations/:conversationId/bans/:userId") { request, caller in
            try await chat.moderation.unban(caller, conversation: try request.conversationID(),
                                 user: try request.userID())
        }
        api.user(&router, .PUT, "/v1/conversations/:conversationId/members/:userId/mute") { request, caller in
            return try await chat.moderation.muteMember(caller, conversation: try request.conversationID(), user: try request.userID(),
                                             try await request.decode(MuteMemberRequest.self))
        }
        api.user(&router, .DELETE, "/v1/conversations/:conversationId/members/:userId/mute") { request, caller in
            try await chat.moderation.unmuteMember(caller, conversation: try request.conversationID(),
                                        user: try request.userID())
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/messages/:messageId/reports", status: .created) { request, caller in
            return try await chat.moderation.report(caller, conversation: try request.conversationID(), message: try request.messageID(),
                                         try await request.decode(ReportRequest.self))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/reports") { request, caller in
            let state = request.queryItems["state"] ?? "open"
            guard state == "open" || state == "resolved" else { throw ChatError.invalid("state must be open or resolved") }
            return try await chat.moderation.reports(caller, conversation: try request.conversationID(), resolved: state == "resolved",
                                          after: request.queryItems["after"], limit: try api.integer(request, "limit"))
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/reports/:reportId/resolve") { request, caller in
            return try await chat.moderation.resolveReport(caller, conversation: try request.conversationID(), report: try request.parameter("reportId"),
                                                try await request.decode(ResolveReportRequest.self))
        }
        api.user(&router, .GET, "/v1/me/blocks") { request, caller in try await chat.moderation.blocks(caller) }
        api.userEmpty(&router, .PUT, "/v1/me/blocks/:userId") { request, caller in try await chat.moderation.block(caller, user: try request.userID()) }
        api.userEmpty(&router, .DELETE, "/v1/me/blocks/:userId") { request, caller in try await chat.moderation.unblock(caller, user: try request.userID()) }

        // Photos (docs/api.md, "Photos")
        api.user(&router, .PUT, "/v1/me/photo") { request, caller in
            return try await chat.attachments.setProfilePhoto(caller, attachment: try await request.decode(PhotoRequest.self).attachmentID)
        }
        api.user(&router, .DELETE, "/v1/me/photo") { request, caller in try await chat.attachments.setProfilePhoto(caller, attachment: nil) }
        api.user(&router, .PUT, "/v1/conversations/:conversationId/photo") { request, caller in
            return try await chat.attachments.setConversationPhoto(caller, conversation: try request.conversationID(),
                                                       attachment: try await request.decode(PhotoRequest.self).attachmentID)
        }
        api.user(&router, .DELETE, "/v1/conversations/:conversationId/photo") { request, caller in
            try await chat.attachments.setConversationPhoto(caller, conversation: try request.conversationID(), attachment: nil)
        }

        // Export (docs/api.md, "Export")
        api.userExport(&router, "/v1/me/export", name: "parley-export.ndjson") { request, caller, sink in
            try await chat.exports.user(caller, into: sink)
        }
        api.userExport(&router, "/v1/conversations/:conversationId/export", name: "parley-conversation.ndjson") { request, caller, sink in
            try await chat.exports.conversation(caller, conversation: try request.conversationID(), into: sink)
        }

        // Threads (docs/api.md, "Threads")
        api.user(&router, .GET, "/v1/conversations/:conversationId/threads") { request, caller in
            let before = try request.queryItems["before"].map { text in
                guard let date = WireCoding.parseDate(text) else { throw ChatError.invalid("before must be a time like 2026-12-02T12:00:00.000Z") }
                return date
            }
            return try await chat.threads.list(caller, conversation: try request.conversationID(), before: before, limit: try api.integer(request, "limit"))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/threads/:messageId") { request, caller in
            try await chat.threads.thread(caller, conversation: try request.conversationID(), root: try request.messageID())
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/threads/:messageId/messages") { request, caller in
            return try await chat.threads.replies(caller, conversation: try request.conversationID(), root: try request.messageID(),
                                                before: try api.integer(request, "before"), after: try api.integer(request, "after"),
                                                limit: try api.integer(request, "limit"))
        }
        api.user(&router, .POST, "/v1/conversations/:conversationId/threads/:messageId/read") { request, caller in
            return try await chat.threads.markRead(caller, conversation: try request.conversationID(), root: try request.messageID(),
                                                 seq: try await request.decode(ThreadReadRequest.self).seq)
        }
        api.user(&router, .GET, "/v1/mentions") { request, caller in
            return try await chat.annotations.mentions(caller, before: request.queryItems["before"].map(MessageID.init(rawValue:)),
                                           limit: try api.integer(request, "limit"))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/events") { request, caller in
            try await chat.events(caller, conversation: try request.conversationID(),
                                  afterSeq: try api.integer(request, "after") ?? 0, limit: try api.integer(request, "limit"))
        }
        api.user(&router, .GET, "/v1/events") { request, caller in
            try await chat.feed(caller, after: try request.cursor("after", shards: chat.logShards),
                                limit: try api.integer(request, "limit"))
        }
        api.user(&router, .GET, "/v1/search") { request, caller in
            let query = request.queryItems
            func date(_ name: String) throws -> Date? {
                guard let text = query[name] else { return nil }
                guard let date = WireCoding.parseDate(text) else { throw ChatError.invalid("\(name) must be a time like 2026-12-02T12:00:00.000Z") }
                return date
            }
            var hasAttachment: Bool?
            switch query["hasAttachment"] {
            case nil: hasAttachment = nil
            case "true": hasAttachment = true
            case "false": hasAttachment = false
            default: throw ChatError.invalid("hasAttachment must be true or false")
            }
            let filters = SearchFilters(from: query["from"], before: try date("before"), after: try date("after"), kind: query["kind"],
                                        hasAttachment: hasAttachment, threadID: query["threadId"].map(MessageID.init(rawValue:)))
            return try await chat.search(caller, query: query["q"] ?? "", conversation: query["conversationId"].map(ConversationID.init(rawValue:)),
                                         filters: filters, cursor: query["cursor"], limit: try api.integer(request, "limit"))
        }

        // Receipts
        api.user(&router, .POST, "/v1/conversations/:conversationId/receipts") { request, caller in
            return try await chat.updateReceipt(caller, conversation: try request.conversationID(), try await request.decode(ReceiptUpdate.self))
        }
        api.user(&router, .GET, "/v1/conversations/:conversationId/receipts") { request, caller in
            try await chat.receipts(caller, conversation: try request.conversationID(),
                                    limit: try api.integer(request, "limit"), offset: try api.integer(request, "offset"))
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
    ///
    /// - Throws: 401 `unknown_app`, saying which of three mistakes it is: no key, the secret
    ///   sent as the key, or a key no app has.
    func app(_ request: Request) async throws -> AppRef {
        try await API.app(key: request.headers["x-parley-app-key"], in: chat, header: "X-Parley-App-Key")
    }

    /// The app of `key`, with the error that says which mistake a refused one is.
    static func app(key: String?, in chat: Chat, header: String) async throws -> AppRef {
        guard let key, !key.isEmpty else {
            throw ChatError(.unknownApp, "the app key is missing: send the app's public pk_… key in \(header)")
        }
        if key.hasPrefix("sk_") {
            throw ChatError(.unknownApp, "that is the app secret, which stays on your backend: clients send the public pk_… key in \(header)")
        }
        do {
            return try await chat.app(publicKey: key)
        } catch let error as ChatError where error.code == ChatError.unknownApp.code {
            throw ChatError(.unknownApp, "no app has the key in \(header): use the pk_… key the server printed when it made the app")
        }
    }

    /// The signed-in caller: app key plus `Authorization: Bearer <token>`.
    func caller(_ request: Request) async throws -> Caller {
        let app = try await app(request)
        guard let authorization = request.headers["authorization"] else {
            throw ChatError(.unauthenticated, "sign in first: send Authorization: Bearer <token>, with the token sign-in or sign-up answered")
        }
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw ChatError(.unauthenticated, "the Authorization header is the word Bearer, a space, then the token: Authorization: Bearer <token>")
        }
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


    /// A whole-number query parameter, nil when absent.
    func integer(_ request: Request, _ name: String) throws -> Int64? {
        guard let text = request.queryItems[name] else { return nil }
        guard let value = Int64(text) else { throw ChatError.invalid("\(name) must be a whole number") }
        return value
    }

    /// A `true`/`false` query parameter, nil when absent.
    func boolean(_ request: Request, _ name: String) throws -> Bool? {
        switch request.queryItems[name] {
        case nil: nil
        case "true": true
        case "false": false
        default: throw ChatError.invalid("\(name) must be true or false")
        }
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
        let path = NSTemporaryDirectory() + "parley-export-\(Crypto.randomID(prefix: "", length: 24)).ndjson"
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
            ErrorCounts.shared.count(error, via: .rest)
            var response = Response.error(status: HTTPStatus(code: error.status), code: error.code, message: error.message)
            if let seconds = error.retryAfterSeconds { response.headers.add(name: "Retry-After", value: String(seconds)) }
            return response
        case let error as HTTPError:
            return error.response
        default:
            // A failure outside the domain's retry loop (Chat.run maps its own): a full disk
            // still says so; anything else says nothing of its cause.
            return errorResponse(ChatError.answering(error))
        }
    }
}
