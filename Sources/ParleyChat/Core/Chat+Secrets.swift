import ParleyCrypto
import ParleyStore

extension Chat {
    /// The setting that proves the key: `parley` sealed with it, written by the first start
    /// that had a key.
    static let secretsCheckSetting = "secrets.check"
    private static let secretsCheckText = "parley"

    /// `secret` as it is stored: sealed when the server has a key.
    func seal(_ secret: String) -> String { configuration.sealer?.seal(secret) ?? secret }

    /// A stored secret, opened.
    ///
    /// - Throws: ``StoreError/decoding(_:)`` when it is sealed and cannot be opened here.
    static func unseal(_ stored: String, with sealer: SecretSealer?) throws -> String {
        guard SecretSealer.isSealed(stored) else { return stored }
        guard let sealer else { throw StoreError.decoding("a secret is sealed and this server has no key: give --secrets-key-file") }
        do {
            return try sealer.open(stored)
        } catch {
            throw StoreError.decoding(error.description)
        }
    }

    /// At start: checks the key against the database (the first start with a key records its
    /// proof), then seals every secret stored before sealing (an upgraded database).
    ///
    /// - Returns: how many secrets it sealed now.
    /// - Throws: ``SecretsKeyMismatch`` when the database's secrets were sealed with another key.
    package func sealSecrets() async throws -> Int {
        guard let sealer = configuration.sealer else { return 0 }
        return try await store.write { db in
            if let proof = try db.fetchValue([UInt8].self, "SELECT value FROM setting WHERE name = \(Self.secretsCheckSetting)") {
                guard (try? sealer.open(String(decoding: proof, as: UTF8.self))) == Self.secretsCheckText else { throw SecretsKeyMismatch() }
            } else {
                try db.execute("INSERT INTO setting (name, value) VALUES (\(Self.secretsCheckSetting), \(Array(sealer.seal(Self.secretsCheckText).utf8)))")
            }
            var sealed = 0
            for row in try db.fetchAll("SELECT id, secret, previous_secret FROM app") {
                let id: Int64 = try row.get("id")
                if let secret = try row.get("secret", as: String?.self), !SecretSealer.isSealed(secret) {
                    try db.execute("UPDATE app SET secret = \(sealer.seal(secret)) WHERE id = \(id)")
                    sealed += 1
                }
                if let previous = try row.get("previous_secret", as: String?.self), !SecretSealer.isSealed(previous) {
                    try db.execute("UPDATE app SET previous_secret = \(sealer.seal(previous)) WHERE id = \(id)")
                    sealed += 1
                }
            }
            for row in try db.fetchAll("SELECT id, secret FROM webhook_endpoint") {
                let secret: String = try row.get("secret")
                guard !SecretSealer.isSealed(secret) else { continue }
                try db.execute("UPDATE webhook_endpoint SET secret = \(sealer.seal(secret)) WHERE id = \(try row.get("id", as: Int64.self))")
                sealed += 1
            }
            return sealed
        }
    }
}

/// The database's secrets were sealed with another key than the one this server has.
package struct SecretsKeyMismatch: Error, Sendable, CustomStringConvertible {
    package var description: String {
        "the database's secrets were sealed with another key: give this server the key file of the one that sealed them " +
            "(--secrets-key-file; every node of one database needs the same; docs/operations.md, \"Sealed secrets\")"
    }
}
