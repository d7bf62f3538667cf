import ParleyStore

/// Test mode's reset (`POST /v1/test/reset`, docs/test-mode.md): the server as a test suite
/// wants it before each test — every user, conversation, message, device, push and webhook
/// delivery waiting, and trace gone — while the apps stay as they were set up: their keys and
/// secrets, system accounts, webhook endpoints, blocklists, before-send hooks, JWT settings and
/// policies. Only a server in test mode offers it.
extension Chat {
    /// The tables whose rows are the apps' setup, kept by a reset.
    static let setupTables: Set<String> = ["app", "setting", "parley_migration", "webhook_endpoint", "blocklist", "before_send_hook", "jwt_settings"]

    /// Empties every table but the setup ones (system accounts stay), children before parents;
    /// returns how many rows went. Signed-in sessions end with their rows.
    @discardableResult
    package func resetForTests() async throws -> Int {
        let removed = try await run {
            try await store.write { db in
                let (tables, fullText) = try Self.dataTablesChildrenFirst(db)
                var removed = 0
                // SQLite's full-text indexes are emptied by their own command (contentless ones refuse DELETE).
                for index in fullText { try db.execute(SQL(stringLiteral: "INSERT INTO \(index) (\(index)) VALUES ('delete-all')")) }
                for table in tables {
                    removed += try db.execute(SQL(stringLiteral: table == "account" ? "DELETE FROM account WHERE is_system = 0" : "DELETE FROM \(table)"))
                }
                return removed
            }
        }
        sessions.removeAll()
        _ = traceRecorder.take()
        return removed
    }

    /// Every table but the setup ones, ordered so that a table comes before every table its
    /// foreign keys point at (rows that reference others are removed first).
    static func dataTablesChildrenFirst(_ db: any Database) throws -> (tables: [String], fullText: [String]) {
        var tables: [String]
        var fullText: [String] = []
        var parents: [String: Set<String>] = [:]
        switch db.dialect {
        case .sqlite:
            let rows = try db.fetchAll("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            // A full-text index's own tables are emptied through it, never directly.
            let virtual = try rows.filter { (try $0.get("sql", as: String?.self) ?? "").uppercased().hasPrefix("CREATE VIRTUAL TABLE") }
                .map { try $0.get("name", as: String.self) }
            tables = try rows.map { try $0.get("name", as: String.self) }.filter { name in !virtual.contains { name.hasPrefix($0 + "_") || name == $0 } }
            fullText = virtual.sorted()
            for row in try db.fetchAll("""
                SELECT m.name AS child, p."table" AS parent FROM sqlite_schema m JOIN pragma_foreign_key_list(m.name) p WHERE m.type = 'table'
                """) {
                parents[try row.get("child"), default: []].insert(try row.get("parent"))
            }
        case .postgres:
            tables = try db.fetchAll("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").map { try $0.get("tablename") }
            for row in try db.fetchAll("""
                SELECT tc.relname AS child, pc.relname AS parent FROM pg_constraint c
                JOIN pg_class tc ON tc.oid = c.conrelid JOIN pg_class pc ON pc.oid = c.confrelid
                WHERE c.contype = 'f' AND tc.relnamespace = current_schema()::regnamespace
                """) {
                parents[try row.get("child"), default: []].insert(try row.get("parent"))
            }
        }
        tables = tables.filter { !setupTables.contains($0) }.sorted()
        // Children first: a table goes once no remaining table points at it.
        var ordered: [String] = []
        var left = Set(tables)
        while !left.isEmpty {
            let ready = left.filter { table in !left.contains { $0 != table && parents[$0, default: []].contains(table) } }.sorted()
            guard !ready.isEmpty else {
                ordered += left.sorted()  // a cycle: PostgreSQL would refuse, and the reset with it (no such cycle in the schema)
                break
            }
            ordered += ready
            left.subtract(ready)
        }
        return (ordered, fullText)
    }
}
