package import Foundation
import ParleyCrypto
import ParleyStore
import ParleyWire

/// An app as the operator sees it. `secret` is present only right after it was created or
/// rotated: the server keeps a hash, so a lost secret can only be replaced.
package struct AppCredentials: Sendable, Hashable {
    /// A unique name for operators ("default", "shop").
    package var name: String
    /// Sent by clients in `X-Parley-App-Key`.
    package var publicKey: String
    /// For the app's backend; shown once.
    package var secret: String?
    /// When the app was created.
    package var createdAt: Date
    /// The numeric id the Pusher libraries require (`app_id`); the Pusher key is the app key
    /// and the Pusher secret the app secret (docs/pusher.md).
    package var pusherID: Int64
}

/// An app a request was made for.
package struct AppRef: Sendable, Hashable {
    /// The app's internal key.
    package var id: Int64
}

extension Chat {
    /// Creates an app with a fresh public key and secret.
    ///
    /// - Throws: 409 `conflict` if the name is taken; 400 for a bad name.
    package func createApp(name: String) async throws -> AppCredentials {
        let name = name.trimmingCharacters(in: .whitespaces)
        guard (1...64).contains(name.count), name.allSatisfy({ $0.isLetter || $0.isNumber || "-_. ".contains($0) }) else {
            throw ChatError.invalid("an app name is 1–64 letters, digits, spaces, '-', '_' or '.'")
        }
        let key = Crypto.randomID(prefix: "pk_", length: 24)
        let secret = "sk_" + Crypto.randomToken()
        let hash = Crypto.secretHash(secret)
        let sealed = seal(secret)
        let now = nowMilliseconds
        return try await run {
            try await store.write { db in
                if try db.fetchOne("SELECT 1 FROM app WHERE name = \(name)") != nil {
                    throw ChatError.conflict("an app named '\(name)' exists; choose another name")
                }
                let pusherID = try Schema.freshPusherID(db)
                try db.execute("""
                    INSERT INTO app (name, public_key, secret_hash, secret, pusher_id, created_at)
                    VALUES (\(name), \(key), \(hash), \(sealed), \(pusherID), \(now))
                    """)
                return AppCredentials(name: name, publicKey: key, secret: secret, createdAt: Chat.date(now), pusherID: pusherID)
            }
        }
    }

    /// Every app, oldest first, without secrets.
    package func listApps() async throws -> [AppCredentials] {
        try await run {
            try await store.read { db in
                try db.fetchAll("SELECT name, public_key, created_at, pusher_id FROM app ORDER BY id").map { row in
                    AppCredentials(name: try row.get("name"), publicKey: try row.get("public_key"), secret: nil,
                                   createdAt: Chat.date(try row.get("created_at")), pusherID: try row.get("pusher_id"))
                }
            }
        }
    }

    /// Creates the app named "default" when the server has no app yet.
    ///
    /// - Returns: its credentials (with the secret) if it was created now; nil otherwise.
    package func createDefaultAppIfNeeded() async throws -> AppCredentials? {
        let count: Int = try await run { try await store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM app") ?? 0 } }
        guard count == 0 else { return nil }
        return try await createApp(name: "default")
    }

    /// Checks the app key a client sent.
    ///
    /// - Throws: 401 `unknown_app`.
    package func app(publicKey: String) async throws -> AppRef {
        if let id = apps.get(publicKey) { return AppRef(id: id) }
        guard publicKey.utf8.count <= 64 else { throw ChatError.unknownApp }
        let id: Int64? = try await run {
            try await store.read { db in try db.fetchValue(Int64.self, "SELECT id FROM app WHERE public_key = \(publicKey)") }
        }
        guard let id else { throw ChatError.unknownApp }
        apps.put(publicKey, id)
        return AppRef(id: id)
    }

    /// Checks an app's secret (for its backend) in constant time.
    package func verifySecret(_ secret: String, app: AppRef) async throws -> Bool {
        let stored: [UInt8]? = try await run {
            try await store.read { db in try db.fetchValue([UInt8].self, "SELECT secret_hash FROM app WHERE id = \(app.id)") }
        }
        guard let stored else { return false }
        return Crypto.constantTimeEqual(stored, Crypto.secretHash(secret))
    }
}
