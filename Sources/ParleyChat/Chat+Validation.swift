package import ParleyWire

// The checks a request goes through before any storage, callable without a store: the
// fuzz-wire target runs them on generated bodies.

extension Chat {
    /// Validates a send as ``send(_:to:_:)`` would before it touches the store.
    package static func validate(_ request: SendMessageRequest) throws {
        _ = try PreparedMessage(request.clientID, request.content, request.metadata)
    }

    /// Validates a new conversation's fields as ``createConversation(_:_:)`` would.
    package static func validate(_ request: CreateConversationRequest) throws {
        try Validate.names(request.members ?? [], field: "members")
        _ = try request.title.map(Validate.title)
        _ = try request.customData.map { try Validate.customData($0) }
    }

    /// Validates a profile change as ``updateProfile(_:_:)`` would.
    package static func validate(_ request: UpdateProfileRequest) throws {
        _ = try request.displayName.map(Validate.displayName)
        _ = try request.customData.map { try Validate.customData($0) }
    }
}
