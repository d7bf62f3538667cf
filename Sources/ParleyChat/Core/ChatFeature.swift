import ParleyStore
import ParleyWire

/// A feature over the chat core (docs/decisions/0025-chat-core-and-feature-services.md):
/// moderation, retention, exports, webhooks and the app's backend, push, threads and
/// annotations, attachments and photos, named channels. Each is a small value that holds the
/// core and reaches, through it, the store, the one write path (``Chat/write(_:)``), the
/// access rules and the event log — and nothing else: a feature keeps no state of its own and
/// never opens a transaction any other way, so every change it makes is an event with its
/// hooks in the same transaction, as the core's are. The way Centrifuge's `Node` hands work to
/// its broker and presence manager, the core hands each feature its part.
package protocol ChatFeature: Sendable {
    /// The core it works over.
    var core: Chat { get }
}

extension ChatFeature {
    var store: any Store { core.store }
    var configuration: Chat.Configuration { core.configuration }
    var bus: (any Bus)? { core.bus }
    var nowMilliseconds: Int64 { core.nowMilliseconds }

    /// The core's ``Chat/run(_:)``: storage failures that may pass are retried, others answered.
    @discardableResult
    func run<T: Sendable>(_ work: () async throws -> T) async throws -> T { try await core.run(work) }

    /// The core's one write path (``Chat/write(_:)``).
    func write<T: Sendable>(in conversation: ConversationID? = nil, _ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await core.write(in: conversation, body)
    }

    /// A secret as it is stored (``Chat/seal(_:)``).
    func seal(_ secret: String) -> String { core.seal(secret) }
}

/// Moderation: bans, moderators' mutes, blocks, shadow bans and reports (docs/api.md, "Moderation").
package struct Moderation: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Bans, mutes, blocks, shadow bans and reports.
    package var moderation: Moderation { Moderation(core: self) }
}
