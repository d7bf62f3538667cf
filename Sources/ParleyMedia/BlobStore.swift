import Foundation
import ParleyCrypto
#if canImport(Glibc)
import Glibc
#endif

/// The SHA-256 of a stored file's bytes, in lower-case hex: its name in a ``BlobStore``.
/// The same bytes are stored once however often they are uploaded.
package struct BlobKey: Sendable, Hashable, CustomStringConvertible {
    /// 64 hex digits.
    package let hex: String

    /// A key from 64 lower-case hex digits; `nil` for anything else (so a key can never be a
    /// path like `../x`).
    package init?(hex: String) {
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        self.hex = hex
    }

    package var description: String { hex }
}

/// An open stored file, closed when the last reference goes.
package final class BlobFile: Sendable {
    /// The open descriptor (read-only).
    package let descriptor: Int32
    /// Its size in bytes.
    package let size: Int64

    init(descriptor: Int32, size: Int64) {
        self.descriptor = descriptor
        self.size = size
    }

    deinit { close(descriptor) }
}

/// Where attachment bytes live. ``FileBlobStore`` keeps them under the data directory; an
/// object store (S3 and the like) implements the same four operations, with `put` uploading
/// the staged file and `open` fetching or redirecting.
///
/// Callers serialise `put` and `delete` of the same key (the server does both behind one
/// gate), so a blob being collected is never re-used halfway.
package protocol BlobStore: Sendable {
    /// A new empty file to stream an upload into, on the same file system as the blobs (so
    /// ``put(_:from:)`` is a rename). The caller removes it if it does not `put` it.
    func makeStagingFile() throws -> StagingFile
    /// Stores the staged file under `key`, durably (file and directory synced), and removes
    /// the staged file. Storing a key that exists keeps the existing bytes.
    func put(_ key: BlobKey, from staging: StagingFile) throws
    /// Opens a stored file for reading; `nil` when there is none.
    func open(_ key: BlobKey) throws -> BlobFile?
    /// Removes a stored file; removing one that is not there is not an error.
    func delete(_ key: BlobKey) throws
}

/// A file being written: its path and open descriptor.
package final class StagingFile: @unchecked Sendable {
    // @unchecked: used by one upload at a time.
    /// Where it is.
    package let path: String
    /// The descriptor it is written through (write-only, 0600).
    package private(set) var descriptor: Int32

    init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    /// Appends bytes.
    ///
    /// - Throws: ``BlobStoreError/io(_:_:)`` (the disk is full, …).
    package func write(_ bytes: UnsafeRawBufferPointer) throws(BlobStoreError) {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(descriptor, bytes.baseAddress.map { $0 + offset }, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw .io("write", errno)
            }
            offset += written
        }
    }

    /// Appends bytes.
    package func write(_ bytes: [UInt8]) throws(BlobStoreError) {
        let failure: BlobStoreError? = bytes.withUnsafeBytes { buffer in
            do throws(BlobStoreError) {
                try write(buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Flushes the bytes to disk (through a fresh descriptor when this one was closed, e.g.
    /// after another library wrote the file by path).
    package func sync() throws(BlobStoreError) {
        if descriptor >= 0 {
            guard fsync(descriptor) == 0 else { throw .io("fsync", errno) }
            return
        }
        let reader = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard reader >= 0 else { throw .io("open", errno) }
        defer { close(reader) }
        guard fsync(reader) == 0 else { throw .io("fsync", errno) }
    }

    /// A second name for the same bytes (a hard link beside this one, no copy), to store them
    /// again if the stored copy is removed before the upload is recorded. The caller
    /// discards it.
    package func secondName() throws(BlobStoreError) -> StagingFile {
        let other = path + ".second"
        unlink(other)
        guard link(path, other) == 0 else { throw .io("link", errno) }
        return StagingFile(path: other, descriptor: -1)
    }

    /// Closes the write descriptor (before another library writes the file by path).
    package func closeForWriting() { closeDescriptor() }

    /// Closes and deletes the file (an upload that was refused or failed).
    package func discard() {
        closeDescriptor()
        unlink(path)
    }

    func closeDescriptor() {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
    }

    deinit { if descriptor >= 0 { close(descriptor) } }
}

/// A storage failure.
package enum BlobStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A system call failed with `errno`.
    case io(String, Int32)

    /// The disk is full (or the quota of the file system reached).
    package var isNoSpace: Bool {
        if case .io(_, let code) = self { return code == ENOSPC || code == EDQUOT }
        return false
    }

    package var description: String {
        switch self {
        case .io(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        }
    }
}

/// Content-addressed files under a directory: `blobs/ab/cd/abcd…` (two levels of 256
/// directories keep each small), staged in `staging/` on the same file system and renamed
/// into place after `fsync`, so a stored file is always complete.
package struct FileBlobStore: BlobStore {
    /// The root (`<data-dir>/media`).
    package let root: String

    /// A store rooted at `root`, creating its directories; files left in `staging/` by a
    /// crash are removed.
    package init(root: String) throws {
        self.root = root
        let manager = FileManager.default
        try manager.createDirectory(atPath: root + "/blobs", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try manager.createDirectory(atPath: root + "/staging", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        for leftover in (try? manager.contentsOfDirectory(atPath: root + "/staging")) ?? [] {
            unlink(root + "/staging/" + leftover)
        }
    }

    package func makeStagingFile() throws -> StagingFile {
        for _ in 0..<8 {
            let path = root + "/staging/" + Crypto.randomID(prefix: "", length: 32)
            let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if descriptor >= 0 { return StagingFile(path: path, descriptor: descriptor) }
            if errno != EEXIST { throw BlobStoreError.io("open", errno) }
        }
        throw BlobStoreError.io("open", EEXIST)
    }

    package func put(_ key: BlobKey, from staging: StagingFile) throws {
        try staging.sync()
        staging.closeDescriptor()
        let directory = directory(of: key)
        if access(directory, F_OK) != 0 {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let target = path(of: key)
        if access(target, F_OK) == 0 {
            unlink(staging.path)
            return
        }
        guard rename(staging.path, target) == 0 else {
            let code = errno
            unlink(staging.path)
            throw BlobStoreError.io("rename", code)
        }
        try syncDirectory(directory)
    }

    package func open(_ key: BlobKey) throws -> BlobFile? {
        let descriptor = Glibc.open(path(of: key), O_RDONLY | O_CLOEXEC)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            throw BlobStoreError.io("open", errno)
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let code = errno
            close(descriptor)
            throw BlobStoreError.io("fstat", code)
        }
        return BlobFile(descriptor: descriptor, size: Int64(status.st_size))
    }

    package func delete(_ key: BlobKey) throws {
        guard unlink(path(of: key)) == 0 || errno == ENOENT else { throw BlobStoreError.io("unlink", errno) }
    }

    /// Where `key` is stored.
    package func path(of key: BlobKey) -> String {
        directory(of: key) + "/" + key.hex
    }

    private func directory(of key: BlobKey) -> String {
        let hex = Array(key.hex)
        return root + "/blobs/" + String(hex[0..<2]) + "/" + String(hex[2..<4])
    }

    private func syncDirectory(_ path: String) throws {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BlobStoreError.io("open", errno) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw BlobStoreError.io("fsync", errno) }
    }
}
