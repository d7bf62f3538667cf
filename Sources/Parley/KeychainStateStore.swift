public import Foundation
#if canImport(Security)
import Security
#endif

/// The Keychain calls a ``KeychainStateStore`` makes — read, write (add or replace) and delete
/// one generic-password item — behind a protocol, so that everything else of the store is the
/// same code on every platform and runs in this repository's tests on Linux.
/// ``SystemKeychain`` is the real one on Apple platforms.
public protocol KeychainItems: Sendable {
    /// The item's bytes, or nil when there is none.
    func read(service: String, account: String) throws -> Data?
    /// Stores `data` as the item, replacing what was there.
    func write(_ data: Data, service: String, account: String) throws
    /// Removes the item (none is not an error).
    func delete(service: String, account: String) throws
}

/// A Keychain call that failed: the `OSStatus` and what was being done.
public struct KeychainError: Error, Sendable, CustomStringConvertible {
    /// The status the Security framework returned.
    public var status: Int32
    /// The call.
    public var operation: String
    public var description: String { "the Keychain refused to \(operation) (OSStatus \(status))" }

    /// An error for `operation` with `status`.
    public init(status: Int32, operation: String) {
        self.status = status
        self.operation = operation
    }
}

#if canImport(Security)
/// The device's Keychain: a generic password per service and account, readable after the
/// first unlock and never migrated to another device (`kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`:
/// a socket reconnecting in the background can read it; a backup restored elsewhere cannot).
/// Compiled on Apple platforms only (the Security framework exists nowhere else).
public struct SystemKeychain: KeychainItems {
    /// The Keychain.
    public init() {}

    private func query(_ service: String, _ account: String) -> [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: account]
    }

    public func read(service: String, account: String) throws -> Data? {
        var search = query(service, account)
        search[kSecReturnData as String] = true
        search[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(search as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess else { throw KeychainError(status: status, operation: "read the session") }
        return result as? Data
    }

    public func write(_ data: Data, service: String, account: String) throws {
        let update: [String: Any] = [kSecValueData as String: data]
        let status = SecItemUpdate(query(service, account) as CFDictionary, update as CFDictionary)
        if status == errSecSuccess { return }
        guard status == errSecItemNotFound else { throw KeychainError(status: status, operation: "update the session") }
        var item = query(service, account)
        item[kSecValueData as String] = data
        item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        let added = SecItemAdd(item as CFDictionary, nil)
        guard added == errSecSuccess else { throw KeychainError(status: added, operation: "store the session") }
    }

    public func delete(service: String, account: String) throws {
        let status = SecItemDelete(query(service, account) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw KeychainError(status: status, operation: "remove the session") }
    }
}
#endif

/// The client's state with its secret where secrets go: the session token in the Keychain
/// (``KeychainItems``: ``SystemKeychain`` on Apple platforms), everything else — user,
/// position, outbox — in a 0600 file (``FileStateStore``). The file never holds the token, so
/// a backup or a copied container does not carry a session; signing out removes the item.
///
/// ```swift
/// #if canImport(Security)
/// let store = KeychainStateStore(keychain: SystemKeychain(), file: support.appendingPathComponent("parley.json").path)
/// #endif
/// ```
public final class KeychainStateStore: ClientStateStore {
    private let keychain: any KeychainItems
    private let service: String
    private let account: String
    private let file: FileStateStore

    /// A store keeping the token in `keychain` under `service` and `account` and the rest at `file`.
    public init(keychain: any KeychainItems, service: String = "parley", account: String = "session", file: String) {
        self.keychain = keychain
        self.service = service
        self.account = account
        self.file = FileStateStore(path: file)
    }

    public func load() throws -> ClientState {
        var state = try file.load()
        state.token = try keychain.read(service: service, account: account).map { String(decoding: $0, as: UTF8.self) }
        return state
    }

    public func save(_ state: ClientState) throws {
        if let token = state.token {
            try keychain.write(Data(token.utf8), service: service, account: account)
        } else {
            try keychain.delete(service: service, account: account)
        }
        var rest = state
        rest.token = nil
        try file.save(rest)
    }
}
