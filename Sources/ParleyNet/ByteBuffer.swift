/// A growable byte buffer with a reader index: bytes are appended at the end and consumed
/// from the front. Consumed space is reclaimed lazily, so parsing costs no copies per byte.
public struct ByteBuffer: Sendable, Equatable {
    private var storage: [UInt8]
    /// Index of the first unread byte in `storage`.
    private var readerIndex = 0

    /// An empty buffer.
    public init() { storage = [] }

    /// A buffer holding `bytes`.
    public init(_ bytes: some Sequence<UInt8>) { storage = Array(bytes) }

    /// A buffer holding the UTF-8 of `string`.
    public init(string: String) { storage = Array(string.utf8) }

    /// Number of unread bytes.
    @inline(__always)
    public var readableBytes: Int { storage.count - readerIndex }

    /// The unread bytes, as a view.
    public var readableView: ArraySlice<UInt8> { storage[readerIndex...] }

    /// Appends bytes at the end.
    public mutating func write(_ bytes: UnsafeRawBufferPointer) {
        compactIfWorthIt(adding: bytes.count)
        storage.append(contentsOf: bytes)
    }

    /// Appends bytes at the end.
    public mutating func write(_ bytes: some Collection<UInt8>) {
        compactIfWorthIt(adding: bytes.count)
        storage.append(contentsOf: bytes)
    }

    /// Appends the UTF-8 of `string`.
    public mutating func write(string: String) { write(string.utf8) }

    /// The byte at `offset` from the reader index, or `nil` past the end. Moves nothing.
    @inline(__always)
    public func getByte(at offset: Int) -> UInt8? {
        let index = readerIndex + offset
        return index < storage.count ? storage[index] : nil
    }

    /// Offset from the reader index of the first `byte`, searching from `offset`; `nil` if absent.
    public func firstIndex(of byte: UInt8, from offset: Int = 0) -> Int? {
        var index = readerIndex + offset
        while index < storage.count {
            if storage[index] == byte { return index - readerIndex }
            index += 1
        }
        return nil
    }

    /// Reads `count` bytes and moves the reader index; `nil` (and nothing moved) if fewer are buffered.
    public mutating func readBytes(_ count: Int) -> [UInt8]? {
        guard count <= readableBytes else { return nil }
        let bytes = Array(storage[readerIndex..<readerIndex + count])
        readerIndex += count
        return bytes
    }

    /// Returns `count` bytes at `offset` without moving the reader index; `nil` if not buffered.
    public func getBytes(at offset: Int, count: Int) -> ArraySlice<UInt8>? {
        guard offset >= 0, count >= 0, offset + count <= readableBytes else { return nil }
        return storage[(readerIndex + offset)..<(readerIndex + offset + count)]
    }

    /// Skips `count` bytes (at most what is buffered).
    public mutating func moveReaderIndex(forwardBy count: Int) {
        readerIndex = min(storage.count, readerIndex + count)
        if readerIndex == storage.count {
            storage.removeAll(keepingCapacity: storage.capacity <= 1 << 16)
            readerIndex = 0
        }
    }

    /// Drops consumed bytes when they make up most of the storage.
    private mutating func compactIfWorthIt(adding count: Int) {
        if readerIndex > 0, readerIndex >= storage.count / 2, storage.count + count > storage.capacity {
            storage.removeSubrange(0..<readerIndex)
            readerIndex = 0
        }
    }

    public static func == (lhs: ByteBuffer, rhs: ByteBuffer) -> Bool { lhs.readableView == rhs.readableView }
}
