/// A failure the client is told about: an HTTP status, a stable machine-readable code and a
/// short human message. `code` is part of the protocol and never changes meaning; `message`
/// never contains message bodies, passwords or tokens.
///
/// On the wire: `{"error":{"code":"not_member","message":"join the channel to post in it"}}`.
public struct ChatError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The HTTP status it maps to (400, 401, 403, 404, 409, 413, 422, 429, 500, 503).
    public var status: Int
    /// A stable snake_case code.
    public var code: String
    /// What went wrong and, where it can, what to do next.
    public var message: String
    /// Seconds to wait before retrying (429 and 503 only).
    public var retryAfterSeconds: Int?

    /// Creates an error.
    public init(status: Int, code: String, message: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// An error as a server answered it (the SDK rebuilding a response it received); the
    /// server itself only answers the statics below.
    public static func answered(status: Int, code: String, message: String, retryAfterSeconds: Int?) -> ChatError {
        ChatError(status: status, code: code, message: message, retryAfterSeconds: retryAfterSeconds)
    }

    /// True when retrying the same request later may succeed.
    public var isTemporary: Bool { status == 429 || status >= 500 }

    public var description: String { "\(status) \(code): \(message)" }

    /// Lets callers write `catch ChatError.notMember { … }`-style matches on the code.
    public static func ~= (pattern: ChatError, error: any Error) -> Bool {
        (error as? ChatError)?.code == pattern.code
    }

    // MARK: - The codes

    /// Creates the error of a code in ``Code``, with its status.
    public init(_ code: Code, _ message: String, retryAfterSeconds: Int? = nil) {
        self.init(status: code.status, code: code.rawValue, message: message, retryAfterSeconds: retryAfterSeconds)
    }

    /// 400: a field is missing, malformed or out of its limits; `message` names it.
    public static func invalid(_ message: String) -> ChatError { ChatError(.invalidRequest, message) }
    /// 400: the body or a realtime frame is not the JSON expected; `message` names the field.
    public static func invalidJSON(_ message: String) -> ChatError { ChatError(.invalidJSON, message) }
    /// 400: a realtime frame of a type the server does not know.
    public static func unknownCommand(known: [String]) -> ChatError {
        ChatError(.unknownCommand, "unknown type; one of \(known.joined(separator: ", "))")
    }
    /// 401: no bearer token, or it is unknown, expired or signed out.
    public static let unauthenticated = ChatError(.unauthenticated, "sign in: the bearer token is missing, expired or signed out")
    /// 401: the app key is missing or unknown.
    public static let unknownApp = ChatError(.unknownApp, "send a valid app key in the X-Parley-App-Key header")
    /// 401: wrong username or password (the same answer for both, so names cannot be probed).
    public static let wrongCredentials = ChatError(.wrongCredentials, "wrong username or password")
    /// 403: the caller may see the thing but not do this to it.
    public static func forbidden(_ message: String) -> ChatError { ChatError(.forbidden, message) }
    /// 403: posting or reading receipts in a public channel the caller has not joined.
    public static let notMember = ChatError(.notMember, "join the channel first")
    /// 403: a signed media link that is malformed, forged or expired.
    public static let invalidSignature = ChatError(.invalidSignature,
                                                   "the link is invalid or has expired; ask for a new one with GET /v1/media/{id}/url")
    /// 401: a request of the app's backend (the Pusher HTTP API) whose signature, key or
    /// timestamp is refused; the message says which and what was expected.
    public static func badRequestSignature(_ message: String) -> ChatError { ChatError(.badRequestSignature, message) }
    /// 413: a value past its size limit (a Pusher event's data).
    public static func tooLarge(_ message: String) -> ChatError { ChatError(.bodyTooLarge, message) }
    /// 403: storing this upload would take the account past its media quota.
    public static func quotaExceeded(usedBytes: Int64, quotaBytes: Int64) -> ChatError {
        ChatError(.quotaExceeded,
                  "this upload would exceed the account's media quota (\(usedBytes) of \(quotaBytes) bytes used); delete messages with media to free space")
    }
    /// 404: no such conversation, or the caller is not allowed to know it exists.
    public static let conversationNotFound = ChatError(.conversationNotFound, "no such conversation")
    /// 404: no such message in that conversation.
    public static let messageNotFound = ChatError(.messageNotFound, "no such message")
    /// 404: no such user in this app.
    public static let userNotFound = ChatError(.userNotFound, "no such user")
    /// 404: none of the named users exists (the names are listed, at most ten).
    public static func usersNotFound(_ names: [String]) -> ChatError {
        let shown = names.prefix(10).joined(separator: ", ")
        return ChatError(.userNotFound, "no such users: \(shown)\(names.count > 10 ? ", …" : "")")
    }
    /// 404: no app with that name or key (the `apps` commands).
    public static let appNotFound = ChatError(.appNotFound, "no app with that name or key; see 'parley-server apps list'")
    /// 404: no such upload, or the caller may not see it (never told apart, so ids cannot be probed).
    public static let attachmentNotFound = ChatError(.attachmentNotFound, "no such attachment; upload it with POST /v1/media first")
    /// 404: no device with that id is registered by the caller.
    public static let deviceNotFound = ChatError(.deviceNotFound, "no device with this id is registered for your account; GET /v1/devices lists them")
    /// 404: no unfinished upload with that client id.
    public static let uploadNotFound = ChatError(.uploadNotFound,
                                                 "no unfinished upload with this clientId (it finished, expired or never began); send the whole file without Content-Range")
    /// 404: a thumbnail asked of an attachment that has none.
    public static let thumbnailNotFound = ChatError(.thumbnailNotFound,
                                                    "only photos have a server-made thumbnail; a video's preview is its message's thumbnailId")
    /// 409: the username is taken in this app (compared case-insensitively).
    public static let usernameTaken = ChatError(.usernameTaken, "that username is taken; choose another")
    /// 409: the client id was already used for a different message.
    public static let clientIDReused = ChatError(.clientIDReused, "this clientId was used for another message; use a new id per message")
    /// 409: a reaction or pin on a message that was deleted.
    public static let messageDeleted = ChatError(.messageDeleted, "the message was deleted; it takes no reactions or pins")
    /// 409: a message has as many different emoji as it may, or the caller reacted to it as
    /// often as one person may; `message` says which.
    public static func tooManyReactions(_ message: String) -> ChatError { ChatError(.tooManyReactions, message) }
    /// The poll was closed (by its author, a moderator or its closing time): it takes no more votes.
    public static let pollClosed = ChatError(.pollClosed, "the poll is closed; it takes no more votes")
    /// 403: the user is banned from the conversation (joining, being added).
    public static func userBanned(until: String?) -> ChatError {
        ChatError(.userBanned, until.map { "banned from this conversation until \($0)" } ?? "banned from this conversation until a moderator lifts it")
    }
    /// 403: a moderator muted the caller in this conversation: they read but may not post.
    public static func memberMuted(until: String?) -> ChatError {
        ChatError(.memberMuted, until.map { "a moderator muted you here until \($0); you can read but not post" }
                  ?? "a moderator muted you here until they unmute you; you can read but not post")
    }
    /// 404: no such report in this conversation.
    public static let reportNotFound = ChatError(.reportNotFound, "no such report in this conversation")
    /// 409: the operation conflicts with the conversation's state (last owner leaving, …).
    public static func conflict(_ message: String) -> ChatError { ChatError(.conflict, message) }
    /// 409: a continuation that does not match how its upload began.
    public static func uploadMismatch(kind: String, mimeType: String, totalBytes: Int64) -> ChatError {
        ChatError(.uploadMismatch, "this upload began as a \(kind) of \(mimeType), \(totalBytes) bytes; "
                  + "continue it as such, or abandon it with DELETE /v1/uploads/{clientId}")
    }
    /// 409: a continuation that does not start at the first byte the server lacks.
    public static func uploadOffsetMismatch(received: Int64, totalBytes: Int64) -> ChatError {
        ChatError(.uploadOffsetMismatch, "the server holds \(received) bytes of this upload; "
                  + "send from byte \(received) (Content-Range: bytes \(received)-\(totalBytes - 1)/\(totalBytes))")
    }
    /// 503: another node's collector is removing a file with the same bytes this moment (the
    /// server waits for it first; this reaches the client only when it took seconds).
    public static let fileBeingCollected = ChatError(.storeUnavailable, "the same file is being removed as unused this moment; send the upload again")
    /// 409: a request on another node still holds the unfinished upload and did not let go in time.
    public static let uploadBusy = ChatError(.conflict, "another request is still receiving this upload; ask GET /v1/uploads/{clientId} again in a few seconds")
    /// 409: what an upload's older request ends with when a newer one took the upload over.
    public static let uploadSuperseded = ChatError(.uploadSuperseded, "a newer request for this upload took it over; the bytes that arrived are kept")
    /// 413: an upload larger than its kind allows.
    public static func fileTooLarge(kind: String, limit: Int64) -> ChatError {
        ChatError(.fileTooLarge, "a \(kind) upload may be at most \(limit) bytes")
    }
    /// 415: an upload whose declared media type is missing or not accepted for its kind.
    public static func unsupportedMediaType(_ message: String) -> ChatError { ChatError(.unsupportedMediaType, message) }
    /// 415: an upload whose bytes are not what its Content-Type declared.
    public static func typeMismatch(found: String?, declared: String) -> ChatError {
        ChatError(.typeMismatch, "the content is \(found ?? "not a recognised format"), not \(declared) as declared")
    }
    /// 415: a photo whose structure is broken; `message` says where.
    public static func invalidImage(_ message: String) -> ChatError { ChatError(.invalidImage, message) }
    /// 422: a photo over the pixel limits (read from its header, so bombs are refused unread).
    public static func imageTooLarge(_ message: String) -> ChatError { ChatError(.imageTooLarge, message) }
    /// 429: too many attempts; retry after `seconds`.
    public static func rateLimited(retryAfter seconds: Int, _ what: String = "too many attempts") -> ChatError {
        ChatError(.rateLimited, "\(what); retry in \(seconds) s", retryAfterSeconds: seconds)
    }
    /// 429: more uploads at once than an account may run.
    public static func tooManyUploads(limit: Int) -> ChatError {
        ChatError(.tooManyUploads, "at most \(limit) uploads at once per account; retry when one finishes", retryAfterSeconds: 1)
    }
    /// 429: more unfinished (resumable) uploads than an account may keep.
    /// 409: an account past ``Limits/pushDevicesPerUser`` devices.
    public static func tooManyDevices(limit: Int) -> ChatError {
        ChatError(.tooManyDevices, "at most \(limit) devices per account receive push notifications; remove one with DELETE /v1/devices/{id}")
    }
    /// 429: an account past its unfinished uploads.
    public static func tooManyUnfinishedUploads(limit: Int) -> ChatError {
        ChatError(.tooManyUnfinishedUploads,
                  "at most \(limit) unfinished uploads per account; complete one or abandon it with DELETE /v1/uploads/{clientId}")
    }
    /// 503: the database is busy or out of reach for now; nothing was changed, and the same
    /// request (with the same `clientId` for a send) may be retried.
    public static let storeUnavailable = ChatError(.storeUnavailable, "the database is busy or unreachable; nothing was changed, retry in a moment",
                                                   retryAfterSeconds: 1)
    /// 507: the server's disk is full; nothing was stored.
    public static let storageFull = ChatError(.storageFull, "the server is out of disk space; nothing was stored, retry later")
    /// 401: a server API call (`/v1/server/…`) without the app secret, or with one that is
    /// wrong, or rotated out and past its grace period.
    public static let invalidAppSecret = ChatError(.invalidAppSecret,
        "send the app secret as 'Authorization: Bearer sk_…' (shown when the app was created or its secret rotated: parley-server apps rotate-secret)")
    /// 401: the app secret sent to a user endpoint, which takes a user's session token.
    public static let secretOnUserEndpoint = ChatError(.unauthenticated,
        "this is the app secret: it is for /v1/server/… only; user endpoints take a session token (POST /v1/server/users/{username}/sessions issues one)")
    /// 403: deleting an account without a password needs a session made in the last few minutes.
    public static let recentSignInRequired = ChatError(.recentSignInRequired,
        "deleting this account needs a recent sign-in: get a new session (the app's backend issues one) and try again within 10 minutes")
    /// 422: a content filter refused the message (the app's blocklist or its before-send hook);
    /// `reason` is shown to the sender.
    public static func contentRejected(_ reason: String) -> ChatError { ChatError(.contentRejected, reason) }
    /// 404: the app has no blocklist by that name.
    public static let blocklistNotFound = ChatError(.blocklistNotFound, "no blocklist with this name; GET /v1/server/blocklists lists them")
    /// 404: the app has no before-send hook.
    public static let hookNotFound = ChatError(.hookNotFound, "this app has no before-send hook; PUT /v1/server/before-send sets one")
    /// 403: the account is deactivated: it cannot sign in or be given a session.
    public static let userDeactivated = ChatError(.userDeactivated, "this account is deactivated; the app's backend can reactivate it")
    /// 404: no webhook endpoint with that id in this app.
    public static let webhookNotFound = ChatError(.webhookNotFound, "no webhook endpoint with this id; GET /v1/server/webhooks lists them")
    /// 404: no delivery with that id for that endpoint.
    public static let deliveryNotFound = ChatError(.deliveryNotFound,
        "no failed delivery with this id for this endpoint; GET /v1/server/webhooks/{id}/deliveries lists them")
    /// 409: the app has as many webhook endpoints as it may.
    public static func tooManyWebhooks(limit: Int) -> ChatError {
        ChatError(.tooManyWebhooks, "an app has at most \(limit) webhook endpoints; delete one first")
    }
    /// 500: a bug or a storage failure; nothing was changed.
    public static let internalError = ChatError(.internalError, "the server failed; nothing was changed, retry later")
}

extension ChatError {
    /// Every code the server answers, with its HTTP status: the one list. The OpenAPI spec's
    /// `Error.code` enum is this list (a test compares them), and `scripts/check-errors.sh`
    /// fails the build on a code written anywhere else. The codes marked *HTTP layer* are
    /// answered by ParleyNet, which knows nothing of chat and writes them itself.
    public enum Code: String, CaseIterable, Sendable {
        case invalidRequest = "invalid_request"
        case invalidJSON = "invalid_json"
        case unknownCommand = "unknown_command"
        case unauthenticated
        case unknownApp = "unknown_app"
        case wrongCredentials = "wrong_credentials"
        case forbidden
        case notMember = "not_member"
        case invalidSignature = "invalid_signature"
        case badRequestSignature = "bad_request_signature"
        case quotaExceeded = "quota_exceeded"
        case conversationNotFound = "conversation_not_found"
        case messageNotFound = "message_not_found"
        case userNotFound = "user_not_found"
        case appNotFound = "app_not_found"
        case attachmentNotFound = "attachment_not_found"
        case uploadNotFound = "upload_not_found"
        case thumbnailNotFound = "thumbnail_not_found"
        case usernameTaken = "username_taken"
        case clientIDReused = "client_id_reused"
        case conflict
        case uploadMismatch = "upload_mismatch"
        case uploadOffsetMismatch = "upload_offset_mismatch"
        case uploadSuperseded = "upload_superseded"
        case fileTooLarge = "file_too_large"
        case unsupportedMediaType = "unsupported_media_type"
        case typeMismatch = "type_mismatch"
        case invalidImage = "invalid_image"
        case imageTooLarge = "image_too_large"
        case rateLimited = "rate_limited"
        case tooManyUploads = "too_many_uploads"
        case tooManyUnfinishedUploads = "too_many_unfinished_uploads"
        case tooManyDevices = "too_many_devices"
        case deviceNotFound = "device_not_found"
        case invalidAppSecret = "invalid_app_secret"
        case userDeactivated = "user_deactivated"
        case webhookNotFound = "webhook_not_found"
        case deliveryNotFound = "delivery_not_found"
        case tooManyWebhooks = "too_many_webhooks"
        case messageDeleted = "message_deleted"
        case tooManyReactions = "too_many_reactions"
        case pollClosed = "poll_closed"
        case userBanned = "user_banned"
        case memberMuted = "member_muted"
        case reportNotFound = "report_not_found"
        case recentSignInRequired = "recent_sign_in_required"
        case contentRejected = "content_rejected"
        case blocklistNotFound = "blocklist_not_found"
        case hookNotFound = "hook_not_found"
        case invalidToken = "invalid_token"
        case storeUnavailable = "store_unavailable"
        case storageFull = "storage_full"
        case internalError = "internal_error"
        /// The web client's files need an app: none exists yet.
        case noApp = "no_app"
        // HTTP layer (ParleyNet):
        case notFound = "not_found"
        case methodNotAllowed = "method_not_allowed"
        case missingParameter = "missing_parameter"
        case invalidParameter = "invalid_parameter"
        case bodyTooLarge = "body_too_large"
        case incompleteBody = "incomplete_body"
        case connectionClosed = "connection_closed"
        case requestTimeout = "request_timeout"
        case rangeNotSatisfiable = "range_not_satisfiable"
        case badUpgrade = "bad_upgrade"
        case unsupportedWebSocketVersion = "unsupported_websocket_version"
        case shuttingDown = "shutting_down"

        /// The HTTP status this code is answered with.
        public var status: Int {
            switch self {
            case .invalidRequest, .invalidJSON, .unknownCommand, .missingParameter, .invalidParameter, .incompleteBody,
                 .connectionClosed, .badUpgrade: 400
            case .unauthenticated, .unknownApp, .wrongCredentials, .badRequestSignature, .invalidAppSecret, .invalidToken: 401
            case .forbidden, .notMember, .invalidSignature, .quotaExceeded, .userDeactivated, .userBanned, .memberMuted,
                 .recentSignInRequired: 403
            case .conversationNotFound, .messageNotFound, .userNotFound, .appNotFound, .attachmentNotFound, .uploadNotFound,
                 .thumbnailNotFound, .deviceNotFound, .webhookNotFound, .blocklistNotFound, .hookNotFound, .deliveryNotFound, .reportNotFound, .notFound: 404
            case .methodNotAllowed: 405
            case .requestTimeout: 408
            case .usernameTaken, .clientIDReused, .conflict, .uploadMismatch, .uploadOffsetMismatch, .uploadSuperseded, .tooManyDevices,
                 .tooManyWebhooks, .messageDeleted, .tooManyReactions, .pollClosed: 409
            case .fileTooLarge, .bodyTooLarge: 413
            case .unsupportedMediaType, .typeMismatch, .invalidImage: 415
            case .rangeNotSatisfiable: 416
            case .imageTooLarge, .contentRejected: 422
            case .unsupportedWebSocketVersion: 426
            case .rateLimited, .tooManyUploads, .tooManyUnfinishedUploads: 429
            case .internalError: 500
            case .storeUnavailable, .noApp, .shuttingDown: 503
            case .storageFull: 507
            }
        }
    }
}
