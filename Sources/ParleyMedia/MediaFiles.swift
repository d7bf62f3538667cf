import Foundation
package import ParleyCrypto
package import ParleyWire
#if canImport(Glibc)
import Glibc
#endif

/// File-level steps of an upload: hashing and metadata removal over memory-mapped files, so
/// even a large file is never copied whole into the heap.
package enum MediaFiles: Sendable {
    /// A file's SHA-256 and size.
    package struct Hashed: Sendable, Hashable {
        /// The SHA-256, lowercase hex.
        package var hex: String
        /// The size in bytes.
        package var size: Int64
    }

    /// The SHA-256 (hex) and size of the file at `path`.
    package static func sha256(path: String) throws -> Hashed {
        try withMapped(path) { buffer in
            var hasher = SHA256()
            hasher.update(buffer)
            return Hashed(hex: hasher.finalize().hexString, size: Int64(buffer.count))
        }
    }

    /// A hasher fed with the file at `path`, and the file's first `prefixLength` bytes: where
    /// a resumed upload's hashing and type check carry on from.
    package static func resumeHashing(path: String, prefixLength: Int) throws -> (SHA256, [UInt8]) {
        try withMapped(path) { buffer in
            var hasher = SHA256()
            hasher.update(buffer)
            return (hasher, Array(buffer.prefix(prefixLength)))
        }
    }

    /// Checks that the image at `path` is well-formed by ``MetadataStripper``'s rules (every
    /// length inside the file) without writing anything.
    ///
    /// - Throws: ``MetadataStripper/Problem`` for a structure that does not add up.
    package static func checkStructure(_ format: MediaFormat, path: String) throws {
        try withMapped(path) { buffer in _ = try MetadataStripper.plan(format, buffer) }
    }

    /// Writes `input` without location-bearing metadata (``MetadataStripper``) to `output`.
    ///
    /// - Returns: the new file's SHA-256 (hex) and size, or `nil` when nothing needed
    ///   removing (the input is kept as it is and `output` is left empty).
    /// - Throws: ``MetadataStripper/Problem`` for a structure that does not add up.
    package static func stripMetadata(_ format: MediaFormat, input: String, output: StagingFile) throws -> Hashed? {
        try withMapped(input) { buffer in
            let (pieces, _) = try MetadataStripper.plan(format, buffer)
            if pieces == [.copy(0..<buffer.count)] { return nil }
            var hasher = SHA256()
            var size: Int64 = 0
            for piece in pieces {
                switch piece {
                case .copy(let range):
                    let slice = UnsafeRawBufferPointer(rebasing: buffer[range])
                    hasher.update(slice)
                    try output.write(slice)
                    size += Int64(range.count)
                case .insert(let bytes):
                    hasher.update(bytes)
                    try output.write(bytes)
                    size += Int64(bytes.count)
                }
            }
            return Hashed(hex: hasher.finalize().hexString, size: size)
        }
    }

    /// Runs `body` over the file mapped read-only (an empty buffer for an empty file).
    static func withMapped<T>(_ path: String, _ body: (UnsafeRawBufferPointer) throws -> T) throws -> T {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BlobStoreError.io("open", errno) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw BlobStoreError.io("fstat", errno) }
        let size = Int(status.st_size)
        guard size > 0 else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        guard let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, descriptor, 0), address != MAP_FAILED else {
            throw BlobStoreError.io("mmap", errno)
        }
        defer { munmap(address, size) }
        return try body(UnsafeRawBufferPointer(start: address, count: size))
    }
}
