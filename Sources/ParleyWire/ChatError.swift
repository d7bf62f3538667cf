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

    /// True when retrying the same request later may succeed.
    public var isTemporary: Bool { status == 429 || status >= 500 }

    public var description: String { "\(status) \(code): \(message)" }

    /// Lets callers write `catch ChatError.notMember { … }`-style matches on the code.
    public static func ~= (pattern: ChatError, error: any Error) -> Bool {
        (error as? ChatError)?.code == pattern.code
    }

    // MARK: - The codes

    /// 400: a field is missing, malformed or out of its limits; `message` names it.
    public static func invalid(_ message: String) -> ChatError { ChatError(status: 400, code: "invalid_request", message: message) }
    /// 401: no bearer token, or it is unknown, expired or signed out.
    public static let unauthenticated = ChatError(status: 401, code: "unauthenticated",
                                                  message: "sign in: the bearer token is missing, expired or signed out")
    /// 401: the app key is missing or unknown.
    public static let unknownApp = ChatError(status: 401, code: "unknown_app",
                                             message: "send a valid app key in the X-Parley-App-Key header")
    /// 401: wrong username or password (the same answer for both, so names cannot be probed).
    public static let wrongCredentials = ChatError(status: 401, code: "wrong_credentials", message: "wrong username or password")
    /// 403: the caller may see the thing but not do this to it.
    public static func forbidden(_ message: String) -> ChatError { ChatError(status: 403, code: "forbidden", message: message) }
    /// 403: posting or reading receipts in a public channel the caller has not joined.
    public static let notMember = ChatError(status: 403, code: "not_member", message: "join the channel first")
    /// 404: no such conversation, or the caller is not allowed to know it exists.
    public static let conversationNotFound = ChatError(status: 404, code: "conversation_not_found", message: "no such conversation")
    /// 404: no such message in that conversation.
    public static let messageNotFound = ChatError(status: 404, code: "message_not_found", message: "no such message")
    /// 404: no such user in this app.
    public static let userNotFound = ChatError(status: 404, code: "user_not_found", message: "no such user")
    /// 404: no such upload, or the caller may not see it (never told apart, so ids cannot be probed).
    public static let attachmentNotFound = ChatError(status: 404, code: "attachment_not_found",
                                                     message: "no such attachment; upload it with POST /v1/media first")
    /// 403: storing this upload would take the account past its media quota.
    public static func quotaExceeded(usedBytes: Int64, quotaBytes: Int64) -> ChatError {
        ChatError(status: 403, code: "quota_exceeded",
                  message: "this upload would exceed the account's media quota (\(usedBytes) of \(quotaBytes) bytes used); delete messages with media to free space")
    }
    /// 409: the username is taken in this app (compared case-insensitively).
    public static let usernameTaken = ChatError(status: 409, code: "username_taken", message: "that username is taken; choose another")
    /// 409: the client id was already used for a different message.
    public static let clientIDReused = ChatError(status: 409, code: "client_id_reused",
                                                 message: "this clientId was used for another message; use a new id per message")
    /// 409: the operation conflicts with the conversation's state (last owner leaving, …).
    public static func conflict(_ message: String) -> ChatError { ChatError(status: 409, code: "conflict", message: message) }
    /// 429: too many attempts; retry after `seconds`.
    public static func rateLimited(retryAfter seconds: Int) -> ChatError {
        ChatError(status: 429, code: "rate_limited", message: "too many attempts; retry in \(seconds) s", retryAfterSeconds: seconds)
    }
    /// 503: the database is busy or out of reach for now; nothing was changed, and the same
    /// request (with the same `clientId` for a send) may be retried.
    public static let storeUnavailable = ChatError(status: 503, code: "store_unavailable",
                                                   message: "the database is busy or unreachable; nothing was changed, retry in a moment",
                                                   retryAfterSeconds: 1)
    /// 500: a bug or a storage failure; nothing was changed.
    public static let internalError = ChatError(status: 500, code: "internal_error", message: "the server failed; nothing was changed, retry later")
}
