import Foundation
import ParleyChat
import ParleyStore
import ParleyStoreSQLite
import ParleySync

/// An exclusive lock on a data directory (`<data>/parley.lock`, flock), held by a running
/// server for its whole life, so a second server, or a restore, cannot use the same files.
final class DataDirectoryLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock, or says who holds it.
    ///
    /// - Throws: ``StartError`` when another process holds it.
    init(directory: String) throws {
        let path = (directory as NSString).appendingPathComponent("parley.lock")
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw StartError(message: "cannot create \(path): \(String(cString: strerror(errno)))") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            throw StartError(message: "another parley-server is using \(directory) (it holds \(path)); stop it first, or use another --data-dir")
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }  // closing releases the lock
}

extension ParleyServer {
    /// `parley-server backup <file>`: a consistent copy of the database, taken while the server
    /// runs (docs/operations.md, "Backups"). An existing `file` is replaced only when `overwrite`.
    ///
    /// - Returns: what was written, and what to do for the media files.
    package static func runBackup(to file: String, overwrite: Bool = false, configuration: ServerConfiguration) async throws -> String {
        try refuseOnPostgres(configuration, "backup")
        let database = (configuration.dataDirectory as NSString).appendingPathComponent("parley.sqlite")
        guard FileManager.default.fileExists(atPath: database) else {
            throw StartError(message: "no database at \(database): pass the server's --data-dir")
        }
        guard overwrite || !FileManager.default.fileExists(atPath: file) else {
            throw StartError(message: "\(file) already exists: give another name (a date in it, say), or --overwrite to replace it; nothing was written")
        }
        let started = ContinuousClock.now
        let summary: SQLiteBackup.Summary
        do {
            summary = try SQLiteBackup.backup(from: database, to: file)
        } catch {
            throw StartError(message: "backup failed: \(error); nothing was written to \(file)")
        }
        let seconds = (ContinuousClock.now - started).inSeconds
        let media = (configuration.dataDirectory as NSString).appendingPathComponent("media")
        return """
            Backed up \(database) to \(file): \(summary.pages) pages, \(summary.bytes) bytes, one consistent snapshot (\(String(format: "%.1f", seconds)) s).
            Media files are not in it: copy \(media)/blobs as well, within a day of this backup
            (files are written once and never changed; unused ones are removed after a day), e.g.
              rsync -a \(media)/blobs/ <backup-dir>/blobs/
            Restore with 'parley-server restore \(file) --data-dir <dir>' while the server is stopped.
            """
    }

    /// `parley-server restore <file>`: puts a backup in place of the data directory's database
    /// (the server stopped), keeps the replaced one beside it, and starts a new epoch so devices
    /// resync instead of resuming into a different history.
    package static func runRestore(from file: String, configuration: ServerConfiguration) async throws -> String {
        try refuseOnPostgres(configuration, "restore")
        let database = (configuration.dataDirectory as NSString).appendingPathComponent("parley.sqlite")
        // Check that the file is a Parley database this build can open, before touching anything.
        do {
            let names = try SQLiteBackup.appliedMigrations(in: file)
            let known = Set(Schema.sqlite.migrations.map(\.name))
            guard !names.isEmpty, Set(names).isSubset(of: known) else {
                throw StartError(message: "\(file) was written by a newer Parley (migrations this build does not know); restore it with that version")
            }
        } catch let error as StartError {
            throw error
        } catch {
            throw StartError(message: "\(file) is not a Parley backup (\(error)); nothing was changed")
        }
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        let lock = try DataDirectoryLock(directory: configuration.dataDirectory)
        defer { withExtendedLifetime(lock) {} }
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let kept = database + ".before-restore-" + stamp
        let summary: SQLiteBackup.Summary
        do {
            summary = try SQLiteBackup.restore(file, to: database, keepingCurrentAs: kept)
        } catch {
            throw StartError(message: "restore failed: \(error)")
        }
        let (store, chat) = try await openChat(configuration)
        defer { store.close() }
        let epoch = try await chat.renewEpoch()
        let hadDatabase = FileManager.default.fileExists(atPath: kept)
        return """
            Restored \(file) into \(database) (\(summary.pages) pages, \(summary.bytes) bytes, migrated to this version).
            \(hadDatabase ? "The database it replaced is kept as \(kept); delete it when you are sure." : "There was no database before.")
            New epoch \(epoch): devices that connect with a position from before are told to resync.
            Put the media files back too (the blobs directory copied with the backup) before starting the server.
            """
    }

    /// backup and restore copy the SQLite file; PostgreSQL has its own tools.
    private static func refuseOnPostgres(_ configuration: ServerConfiguration, _ command: String) throws {
        guard configuration.databaseURL != nil else { return }
        throw StartError(message: """
            '\(command)' copies the SQLite database; this server uses PostgreSQL (--database-url): use pg_dump / pg_restore or \
            point-in-time recovery as docs/operations.md ("Backups on PostgreSQL") describes
            """)
    }
}
