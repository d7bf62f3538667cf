import CParleySQLite
import Foundation
import ParleyStore

/// Online copies of a SQLite database (docs/operations.md, "Backups"): a consistent snapshot
/// taken while the server runs, and putting one back while it is stopped.
package enum SQLiteBackup: Sendable {
    /// What a backup or a restore did.
    package struct Summary: Sendable {
        /// Pages copied.
        package var pages: Int
        /// Bytes written.
        package var bytes: Int64
    }

    /// Copies the database at `source` to `destination` with SQLite's online backup API, in one
    /// step, so the copy is one consistent snapshot: in WAL mode the server keeps reading and
    /// writing meanwhile, and what it commits afterwards is not in the copy. The copy is written
    /// to `destination` + `.partial`, checked (`integrity_check`), synced, then renamed, so a
    /// crash never leaves a half copy under the final name.
    ///
    /// - Throws: ``StoreError`` saying what failed; `destination` is then untouched.
    package static func backup(from source: String, to destination: String) throws -> Summary {
        guard FileManager.default.fileExists(atPath: source) else { throw StoreError.cannotOpen("\(source) does not exist") }
        let partial = destination + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        let from = try SQLiteConnection(path: source, readOnly: true)
        let pages: Int
        do {
            let to = try SQLiteConnection(path: partial, readOnly: false)
            guard let backup = sqlite3_backup_init(to.handle, "main", from.handle, "main") else {
                throw StoreError.statement(message: "cannot start the backup: \(String(cString: sqlite3_errmsg(to.handle)))", constraint: false)
            }
            let status = sqlite3_backup_step(backup, -1)
            pages = Int(sqlite3_backup_pagecount(backup))
            let finished = sqlite3_backup_finish(backup)
            guard status == SQLITE_DONE, finished == SQLITE_OK else {
                throw StoreError.statement(message: "the backup stopped: \(String(cString: sqlite3_errstr(status == SQLITE_DONE ? finished : status)))",
                                           constraint: false)
            }
            // The copy is a plain rollback-journal file: one file, nothing beside it.
            try to.run("PRAGMA journal_mode = DELETE")
            guard try to.fetchValue(String.self, "PRAGMA integrity_check") == "ok" else {
                throw StoreError.decoding("the copy failed its integrity check; the source may be damaged: run PRAGMA integrity_check on it")
            }
        } catch {
            try? FileManager.default.removeItem(atPath: partial)
            throw error
        }
        try sync(path: partial)
        do {
            if FileManager.default.fileExists(atPath: destination) { try FileManager.default.removeItem(atPath: destination) }
            try FileManager.default.moveItem(atPath: partial, toPath: destination)
        } catch {
            throw StoreError.cannotOpen("cannot write \(destination): \(error.localizedDescription)")
        }
        try sync(path: (destination as NSString).deletingLastPathComponent.isEmpty ? "." : (destination as NSString).deletingLastPathComponent)
        let bytes = ((try? FileManager.default.attributesOfItem(atPath: destination))?[.size] as? NSNumber)?.int64Value ?? 0
        return Summary(pages: pages, bytes: bytes)
    }

    /// Puts `backup` in place of the database at `database`: the backup is copied beside it
    /// and checked first, the current files (with their WAL) are moved to `keptAs`, then the copy
    /// takes the database's name. The server must be stopped (the caller checks).
    ///
    /// - Throws: ``StoreError`` when the backup is not a healthy SQLite file; nothing is changed.
    package static func restore(_ backup: String, to database: String, keepingCurrentAs keptAs: String) throws -> Summary {
        // The copy made beside the database is integrity-checked (``backup(from:to:)``) before
        // anything is moved: a damaged backup fails there and changes nothing.
        let incoming = database + ".restoring"
        let summary = try self.backup(from: backup, to: incoming)
        let manager = FileManager.default
        do {
            for suffix in ["", "-wal", "-shm"] where manager.fileExists(atPath: database + suffix) {
                try manager.moveItem(atPath: database + suffix, toPath: keptAs + suffix)
            }
            try manager.moveItem(atPath: incoming, toPath: database)
        } catch {
            throw StoreError.cannotOpen("cannot put the backup in place: \(error.localizedDescription); the previous database is at \(keptAs)")
        }
        try sync(path: (database as NSString).deletingLastPathComponent.isEmpty ? "." : (database as NSString).deletingLastPathComponent)
        return summary
    }

    /// The migrations a database file records (read-only: the file is not changed).
    ///
    /// - Throws: ``StoreError`` when it is not SQLite or has no migration table.
    package static func appliedMigrations(in path: String) throws -> [String] {
        guard FileManager.default.fileExists(atPath: path) else { throw StoreError.cannotOpen("\(path) does not exist") }
        let connection = try SQLiteConnection(path: path, readOnly: true)
        return try connection.fetchAll("SELECT name FROM parley_migration ORDER BY name").map { try $0.get("name") }
    }

    /// fsync of a file or a directory.
    private static func sync(path: String) throws {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw StoreError.cannotOpen("cannot open \(path) to sync it") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw StoreError.cannotOpen("cannot sync \(path)") }
    }
}
