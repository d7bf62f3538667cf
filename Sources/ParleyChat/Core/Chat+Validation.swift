package import ParleyWire

// The checks a request goes through before any storage, callable without a store: the
// domain methods call them first, and the fuzz-wire target runs them on generated bodies.

extension Chat {
    /// Validates a send as ``send(_:to:_:)`` would before it touches the store.
    package static func validate(_ request: SendMessageRequest) throws {
        _ = try PreparedMessage(request.clientID, request.content, request.metadata,
                                from: Caller(appID: 0, userKey: 0, userID: UserID(rawValue: ""), sessionKey: 0))
    }

    /// Validates a new conversation's fields.
    ///
    /// - Returns: the trimmed title and the custom data as stored.
    @discardableResult
    package static func validate(_ request: CreateConversationRequest) throws -> (title: String?, customData: String?) {
        try Validate.names(request.members ?? [], field: "members")
        return (try request.title.map(Validate.title), try request.customData.map { try Validate.customData($0) })
    }

    /// A reaction's emoji as ``react(_:conversation:message:emoji:)`` stores it.
    package static func validateEmoji(_ text: String) throws -> String { try Validate.emoji(text) }

    /// The `@names` a message's text mentions, before they are resolved to members.
    package static func mentions(in text: String) -> [String] { mentionedNames(text) }

    /// Validates a ban's and a report's notes.
    package static func validate(_ request: BanRequest) throws { _ = try request.reason.map { try Validate.note($0, field: "reason", max: 500) } }

    /// Validates a report.
    package static func validate(_ request: ReportRequest) throws { _ = try request.note.map { try Validate.note($0, field: "note", max: 1000) } }

    /// Validates a profile change.
    ///
    /// - Returns: the trimmed display name and the custom data as stored.
    @discardableResult
    package static func validate(_ request: UpdateProfileRequest) throws -> (displayName: String?, customData: String?) {
        (try request.displayName.map(Validate.displayName), try request.customData.map { try Validate.customData($0) })
    }

    /// Checks a webhook URL as ``createWebhook(_:_:)`` does.
    ///
    /// - Returns: the URL as stored.
    package static func validateWebhookURL(_ url: String, allowPrivate: Bool) throws -> String {
        try Validate.webhookURL(url, allowPrivate: allowPrivate)
    }

    /// Checks a new endpoint's events and note as ``createWebhook(_:_:)`` does.
    package static func validate(_ request: CreateWebhookRequest) throws {
        _ = try Validate.webhookURL(request.url, allowPrivate: false)
        _ = try Validate.webhookEvents(request.events, format: request.format ?? .parley)
        _ = try request.description.map { try Validate.webhookDescription($0) }
    }
}
