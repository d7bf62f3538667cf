import Foundation
import Parley
import ParleySync
import Testing

/// The Keychain-backed state store: the token only in the Keychain, the rest in the file; on
/// Linux the Keychain's four calls are an in-memory table (the Security framework does not
/// exist here), everything else is the code an app runs.
struct KeychainStateStoreTests {
    /// The Keychain's generic-password items, in memory.
    final class MemoryKeychain: KeychainItems {
        let items = LockedValue([String: Data]())
        func read(service: String, account: String) throws -> Data? { items.withLock { $0[service + "/" + account] } }
        func write(_ data: Data, service: String, account: String) throws { items.withLock { $0[service + "/" + account] = data } }
        func delete(service: String, account: String) throws { _ = items.withLock { $0.removeValue(forKey: service + "/" + account) } }
    }

    @Test func theTokenIsInTheKeychainOnlyAndSigningOutRemovesIt() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let keychain = MemoryKeychain()
        let path = NSTemporaryDirectory() + "parley-keychain-\(UUID().uuidString)/state.json"
        let client = ParleyClient(server: server.url, appKey: server.appKey, store: KeychainStateStore(keychain: keychain, file: path))
        let lee = ParleyClient(server: server.url, appKey: server.appKey)
        try await lee.register(username: "lee", password: "correct horse battery")
        try await client.register(username: "kim", password: "correct horse battery")
        _ = try await client.send(.text("queued in the file"), to: try await client.directConversation(with: "lee").id)
        let token = try #require(keychain.items.withLock { $0["parley/session"] }.map { String(decoding: $0, as: UTF8.self) })
        let file = try #require(FileManager.default.contents(atPath: path))
        #expect(file.range(of: Data(token.utf8)) == nil, "the file never holds the token")
        #expect(file.range(of: Data("queued in the file".utf8)) != nil, "the outbox is in the file")

        // A relaunch reads both back and is signed in.
        let again = ParleyClient(server: server.url, appKey: server.appKey, store: KeychainStateStore(keychain: keychain, file: path))
        #expect(try await again.conversations().conversations.count == 1)
        #expect(await again.outbox.count == 1)
        // Signing out removes the item.
        try await again.signOut()
        #expect(keychain.items.withLock { $0.isEmpty })
        #expect(try KeychainStateStore(keychain: keychain, file: path).load().token == nil)
    }
}
