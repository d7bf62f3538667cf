package import Foundation
import ParleyCrypto
import Synchronization
package import ParleyWire
#if canImport(Glibc)
import Glibc
#endif

/// Uploads that stopped before their last byte (the connection dropped, the app was
/// suspended, the server restarted), kept so the client can send only the rest.
///
/// Each is two files in one directory, named by the SHA-256 of the account and the client's
/// upload id: `<key>.json` (what was declared: kind, type, name, total size) and `<key>.part`
/// (the bytes received so far, in order). The bytes received are the `.part` file's size, so
/// there is no counter to drift from the data after a crash. The directory is on the blob
/// store's file system, so a finished upload is renamed into place like a staging file.
///
/// An index in memory (read from the directory at start and at each collection) answers
/// per-account totals and expiry without touching the disk; one upload's state is always read
/// from its files, because with several nodes on one media directory another node may have
/// continued or removed it.
package final class PartialUploadStore: Sendable {
    /// What an upload declared when it began.
    package struct Record: Codable, Sendable, Hashable {
        /// The account (user key).
        package var user: Int64
        /// The client's id for the upload (`clientId`).
        package var clientID: String
        /// The declared kind.
        package var kind: MediaKind
        /// The declared media type.
        package var mimeType: String
        /// The file name, sanitised.
        package var name: String?
        /// The whole file's size (the first request's `Content-Length`).
        package var totalBytes: Int64
        /// When it began.
        package var createdAt: Date

        /// Creates the value.
        package init(user: Int64, clientID: String, kind: MediaKind, mimeType: String, name: String?, totalBytes: Int64, createdAt: Date) {
            self.user = user
            self.clientID = clientID
            self.kind = kind
            self.mimeType = mimeType
            self.name = name
            self.totalBytes = totalBytes
            self.createdAt = createdAt
        }
    }

    /// An unfinished upload: what it declared, how many bytes are kept, and when the last
    /// arrived.
    package struct Entry: Sendable, Hashable {
        /// What it declared.
        package var record: Record
        /// Bytes kept so far.
        package var receivedBytes: Int64
        /// When bytes last arrived (what expiry counts from).
        package var updatedAt: Date
    }

    /// The directory.
    package let root: String
    private let index = Mutex([String: Entry]())

    /// Opens (creating) the directory and reads what it holds; a record without its bytes,
    /// or bytes without a readable record, is removed.
    package init(root: String) throws {
        self.root = root
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        refresh()
    }

    /// Reads the directory again: with several nodes on one media directory, uploads other
    /// nodes began or removed (the collector calls this before expiring). A record without
    /// its bytes, or bytes without a readable record, is removed.
    package func refresh() {
        var found: [String: Entry] = [:]
        let names = Set((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
        for name in names {
            let key = String(name.prefix(while: { $0 != "." }))
            if name.hasSuffix(".second") {
                // A second name an upload kept while recording (StagingFile.secondName()); its
                // upload removes it, so one an hour old was left by a crash.
                if let (_, made) = Self.sizeAndTime(root + "/" + name), Date().timeIntervalSince(made) > 3600 { unlink(root + "/" + name) }
                continue
            }
            guard name == key + ".json" else {
                // Bytes without their record: never a step of another node's work (the record
                // is written first and removed last), so left over from a crash.
                if !names.contains(key + ".json") { unlink(root + "/" + name) }
                continue
            }
            if let entry = load(key) { found[key] = entry }
        }
        index.withLock { $0 = found }
    }

    /// The entry `key` as the files say: the record, and the bytes' size and time now. A
    /// broken pair is removed.
    private func load(_ key: String) -> Entry? {
        let json = root + "/" + key + ".json", part = root + "/" + key + ".part"
        guard let data = FileManager.default.contents(atPath: json) else { return nil }
        guard let record = try? Self.decoder.decode(Record.self, from: data),
              key == Self.key(user: record.user, clientID: record.clientID),
              let (size, modified) = Self.sizeAndTime(part) else {
            // A record being written, or one whose bytes are not there yet, may be another
            // node between its two writes: removed once it is a minute old.
            if let (_, written) = Self.sizeAndTime(json), Date().timeIntervalSince(written) > 60 {
                unlink(json)
                unlink(part)
            }
            return nil
        }
        guard size <= record.totalBytes else {
            unlink(json)
            unlink(part)
            return nil
        }
        return Entry(record: record, receivedBytes: size, updatedAt: modified)
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }

    /// The entry's file name stem: hex SHA-256 of the account and client id.
    static func key(user: Int64, clientID: String) -> String {
        SHA256.hash(Array("\(user)\n\(clientID)".utf8)).hexString
    }

    /// The unfinished upload `clientID` of `user`, if one is kept: read from the files, so an
    /// upload another node began, continued or removed is seen as it is now.
    package func entry(user: Int64, clientID: String) -> Entry? {
        let key = Self.key(user: user, clientID: clientID)
        let entry = load(key)
        index.withLock { $0[key] = entry }
        return entry
    }

    /// Every unfinished upload of `user` this node knows of: those it began, and those in the
    /// directory when it last read it (``refresh()``).
    package func entries(user: Int64) -> [Entry] {
        index.withLock { $0.values.filter { $0.record.user == user } }
    }

    /// Begins an upload, replacing an unfinished one with the same id: the record is written,
    /// then an empty `.part` is returned to write the bytes to. Nothing is synced here (an
    /// upload that completes never needed it; one that breaks off is synced by
    /// ``suspend(_:user:clientID:)``): a crash in the middle of receiving may lose the record,
    /// and then the bytes, and the client starts over.
    package func begin(_ record: Record) throws -> StagingFile {
        let key = Self.key(user: record.user, clientID: record.clientID)
        remove(user: record.user, clientID: record.clientID)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        let json = try StagingFile.create(root + "/" + key + ".json", flags: O_TRUNC)
        do {
            try json.write(Array(try encoder.encode(record)))
            json.closeForWriting()
        } catch {
            json.discard()
            throw error
        }
        let part = try StagingFile.create(root + "/" + key + ".part", flags: O_TRUNC)
        index.withLock { $0[key] = Entry(record: record, receivedBytes: 0, updatedAt: Date()) }
        return part
    }

    /// Opens the kept bytes of an unfinished upload to append the rest.
    package func resume(user: Int64, clientID: String) throws -> (Entry, StagingFile)? {
        let key = Self.key(user: user, clientID: clientID)
        guard var entry = entry(user: user, clientID: clientID) else { return nil }
        let part = try StagingFile.create(root + "/" + key + ".part", flags: O_APPEND, mustExist: true)
        let size = lseek(part.descriptor, 0, SEEK_END)
        guard size >= 0 else { part.closeForWriting(); throw BlobStoreError.io("lseek", errno) }
        entry.receivedBytes = Int64(size)
        return (entry, part)
    }

    /// Records how far an upload got when its connection ended: syncs the bytes, the record
    /// and the directory, so a crash after this keeps them.
    package func suspend(_ part: StagingFile, user: Int64, clientID: String) {
        let key = Self.key(user: user, clientID: clientID)
        try? part.sync()
        part.closeForWriting()
        for path in [root + "/" + key + ".json", root] {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            if descriptor >= 0 {
                fsync(descriptor)
                close(descriptor)
            }
        }
        let now = Date()
        if let (size, _) = Self.sizeAndTime(part.path) {
            index.withLock { index in
                index[key]?.receivedBytes = size
                index[key]?.updatedAt = now
            }
        }
    }

    /// Forgets an upload (finished, refused or abandoned) and removes its files; `true` when
    /// one was kept.
    @discardableResult
    package func remove(user: Int64, clientID: String) -> Bool {
        let key = Self.key(user: user, clientID: clientID)
        let existed = index.withLock { $0.removeValue(forKey: key) != nil }
        unlink(root + "/" + key + ".part")
        unlink(root + "/" + key + ".json")
        return existed
    }

    /// Unfinished uploads no byte has reached since `cutoff` (to expire; the caller skips any
    /// being written and removes the rest).
    package func stale(before cutoff: Date) -> [Entry] {
        index.withLock { $0.values.filter { $0.updatedAt < cutoff } }
    }

    private static func sizeAndTime(_ path: String) -> (Int64, Date)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let seconds = TimeInterval(status.st_mtim.tv_sec) + TimeInterval(status.st_mtim.tv_nsec) / 1e9
        return (Int64(status.st_size), Date(timeIntervalSince1970: seconds))
    }
}

extension StagingFile {
    /// Opens `path` for writing (0600), creating it unless `mustExist`.
    static func create(_ path: String, flags: Int32, mustExist: Bool = false) throws(BlobStoreError) -> StagingFile {
        let descriptor = Glibc.open(path, O_WRONLY | O_CLOEXEC | flags | (mustExist ? 0 : O_CREAT), 0o600)
        guard descriptor >= 0 else { throw .io("open", errno) }
        return StagingFile(path: path, descriptor: descriptor)
    }
}
