import Foundation

/// Named, forward-only schema migrations, applied once each, in order, each in its own
/// transaction.
///
/// ```swift
/// var migrator = Migrator()
/// migrator.register("001 create user") { db in try db.execute("CREATE TABLE user (…)") }
/// try await migrator.migrate(store)
/// ```
///
/// Applied names are recorded in `parley_migration`. A database that records a name this
/// build does not know was written by a newer version; `migrate` refuses it rather than
/// guess (``StoreError/unknownMigrations(_:)``).
package struct Migrator: Sendable {
    /// One migration.
    package struct Migration: Sendable {
        /// A unique name, recorded once applied ("0003 full-text search").
        package var name: String
        /// The schema change; runs inside its own transaction.
        package var apply: @Sendable (any Database) throws -> Void
    }

    /// The registered migrations, in order.
    package private(set) var migrations: [Migration] = []

    /// No migrations yet.
    package init() {}

    /// Adds a migration. Names must be unique; never rename or edit one that has shipped.
    package mutating func register(_ name: String, _ apply: @escaping @Sendable (any Database) throws -> Void) {
        precondition(!migrations.contains { $0.name == name }, "duplicate migration \(name)")
        migrations.append(Migration(name: name, apply: apply))
    }

    /// Applies every migration not yet applied.
    ///
    /// - Returns: the names applied by this call.
    @discardableResult
    package func migrate(_ store: any Store) async throws -> [String] {
        let known = migrations.map(\.name)
        let applied: [String] = try await store.write { db in
            try db.execute("CREATE TABLE IF NOT EXISTS parley_migration (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)")
            return try db.fetchAll("SELECT name FROM parley_migration ORDER BY name").map { try $0.get("name") }
        }
        let unknown = applied.filter { !known.contains($0) }
        guard unknown.isEmpty else { throw StoreError.unknownMigrations(unknown) }
        var done: [String] = []
        for migration in migrations where !applied.contains(migration.name) {
            let now = Int64(Date.now.timeIntervalSince1970)
            // Another node sharing the database may have applied it since the list was read:
            // each migration checks again inside its own transaction (which, on PostgreSQL,
            // holds the lock every write takes first).
            let applied = try await store.write { db -> Bool in
                guard try db.fetchOne("SELECT 1 FROM parley_migration WHERE name = \(migration.name)") == nil else { return false }
                try migration.apply(db)
                try db.execute("INSERT INTO parley_migration (name, applied_at) VALUES (\(migration.name), \(now))")
                return true
            }
            if applied { done.append(migration.name) }
        }
        return done
    }
}
