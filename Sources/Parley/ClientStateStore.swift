import Foundation
public import ParleyWire
import ParleySync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a client keeps between launches: the session token and user, the last event
/// position it processed (to resume without a gap), and the outbox of sends not yet
/// acknowledged (so nothing typed offline is lost).
public struct ClientState: Codable, Sendable, Hashable {
    /// The session token (a secret: stores keep it private).
    public var token: String?
    /// The signed-in user.
    public var user: User?
    /// The newest event position processed (with a log of one shard, the whole of `cursor`;
    /// what a state saved before cursors holds).
    public var position: Int64?
    /// Where the client stands in the server's log: the newest position processed of each of
    /// its shards (docs/protocol.md, "Resuming"). Sent back on resume.
    public var cursor: LogCursor?
    /// The epoch `cursor` belongs to (the server's `ready`/`resync`); sent back on resume so
    /// that a server restored from a backup answers `resync` instead of replaying another history.
    public var epoch: String?
    /// Sends waiting for the server's acknowledgement, oldest first.
    public var outbox: [OutboxItem] = []

    /// An empty state.
    public init() {}

    /// Where to resume from: `cursor`, or in a state saved before cursors, `position`.
    public var resumePoint: LogCursor? { cursor ?? position.map { LogCursor(position: $0) } }
}

/// A send made by this client and not yet acknowledged. Its `clientID` is the idempotency
/// key: resending it after a crash or a lost ack can never store a second message.
public struct OutboxItem: Codable, Sendable, Hashable {
    /// The idempotency key.
    public var clientID: String
    /// Where it goes.
    public var conversationID: ConversationID
    /// What it says.
    public var content: MessageContent
    /// App-defined strings.
    public var metadata: [String: String]?
    /// The message it answers.
    public var replyTo: MessageID?
    /// The thread it is a reply in (its root).
    public var threadID: MessageID? = nil
    /// A thread reply shown in the conversation too.
    public var alsoInConversation: Bool? = nil
    /// `false`: the sender asked for no link preview.
    public var previewLinks: Bool? = nil
}

/// Where a client's state lives. The Keychain (token) plus a file (the rest) is the obvious
/// Apple implementation; on Linux, ``FileStateStore`` keeps it in a 0600 file.
public protocol ClientStateStore: Sendable {
    /// The saved state (an empty one the first time).
    func load() throws -> ClientState
    /// Replaces the saved state.
    func save(_ state: ClientState) throws
}

/// State in memory only: gone when the process ends (tests, throwaway scripts).
public final class MemoryStateStore: ClientStateStore {
    private let state = LockedValue(ClientState())

    /// An empty store.
    public init() {}
    public func load() throws -> ClientState { state.withLock { $0 } }
    public func save(_ state: ClientState) throws { self.state.withLock { $0 = state } }
}

/// State in a JSON file readable by its owner only (0600), replaced atomically on each save.
public final class FileStateStore: ClientStateStore {
    /// The file.
    public let path: String
    /// Serializes loads and saves: the file is the state.
    private let lock = LockedValue(())

    /// A store at `path`; its directory is created when missing (0700).
    public init(path: String) {
        self.path = path
    }

    public func load() throws -> ClientState {
        try lock.withLock { _ in
            guard let data = FileManager.default.contents(atPath: path) else { return ClientState() }
            return try JSONDecoder().decode(ClientState.self, from: data)
        }
    }

    public func save(_ state: ClientState) throws {
        try lock.withLock { _ in
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.isEmpty {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            let temporary = path + ".tmp"
            guard FileManager.default.createFile(atPath: temporary, contents: try encoder.encode(state),
                                                 attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteUnknown)
            }
            guard rename(temporary, path) == 0 else { throw CocoaError(.fileWriteUnknown) }
        }
    }
}
