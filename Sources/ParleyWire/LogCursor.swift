/// Where a device stands in a server's event log: for each of the log's shards, the newest
/// position it has (docs/protocol.md, "Resuming"; docs/decisions/0026, part 4).
///
/// A server's log has `S` shards, fixed when its database was created. A position belongs to
/// shard `position % S`, and within a shard positions arrive in increasing order, so a device
/// that keeps the highest position it processed of each shard can resume with no gap and no
/// duplicate. With one shard (SQLite, and every database made before shards) a cursor is one
/// integer, today's `position`.
///
/// On the wire it is a JSON array of `S` integers: `[1041]`, `[1040, 1037, 1042, 1039]`.
public struct LogCursor: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The most shards a server's log can have (a cursor with more is not one of ours).
    public static let maximumShards = 64

    /// The newest position of each shard, by shard (0 for none yet).
    public private(set) var positions: [Int64]

    /// A cursor at the start of a log of `shards` shards (nothing processed).
    public init(shards: Int) {
        positions = Array(repeating: 0, count: max(1, min(shards, Self.maximumShards)))
    }

    /// A cursor of these positions, one per shard.
    /// - Throws: ``ChatError`` when it cannot be a cursor: no positions, more than
    ///   ``maximumShards``, a negative one, or one that is not of its shard.
    public init(positions: [Int64]) throws {
        guard !positions.isEmpty, positions.count <= Self.maximumShards else {
            throw ChatError.invalid("a cursor has 1 to \(Self.maximumShards) positions, one per shard of the server's log; this one has \(positions.count)")
        }
        let shards = Int64(positions.count)
        for (shard, position) in positions.enumerated() {
            guard position >= 0 else { throw ChatError.invalid("cursor position \(position) is negative") }
            guard position == 0 || position % shards == Int64(shard) else {
                throw ChatError.invalid("cursor position \(position) is not of shard \(shard) of \(shards) (a position belongs to shard position % shards)")
            }
        }
        self.positions = positions
    }

    /// The one-shard cursor of a position (what a client before shards keeps).
    public init(position: Int64) {
        positions = [max(0, position)]
    }

    /// How many shards the log has.
    public var shards: Int { positions.count }

    /// The shard a position belongs to.
    public func shard(of position: Int64) -> Int {
        Int(position % Int64(positions.count))
    }

    /// The newest position of a shard.
    public subscript(shard: Int) -> Int64 { positions[shard] }

    /// Whether the device has `position` already (it is at or below its shard's newest).
    public func includes(_ position: Int64) -> Bool {
        position <= positions[shard(of: position)]
    }

    /// The highest position of any shard (the only one with a single shard).
    public var newest: Int64 { positions.max() ?? 0 }

    /// Takes `position` as processed; false when the cursor had it already.
    @discardableResult
    public mutating func advance(to position: Int64) -> Bool {
        let shard = shard(of: position)
        guard position > positions[shard] else { return false }
        positions[shard] = position
        return true
    }

    /// Takes every position of `other` (a cursor of the same log) as processed.
    public mutating func advance(to other: LogCursor) {
        guard other.shards == shards else { return }
        for shard in positions.indices where other.positions[shard] > positions[shard] { positions[shard] = other.positions[shard] }
    }

    /// Whether this cursor is at or past `other` in every shard.
    public func covers(_ other: LogCursor) -> Bool {
        other.shards == shards && positions.indices.allSatisfy { positions[$0] >= other.positions[$0] }
    }

    public var description: String { "[" + positions.map(String.init).joined(separator: ",") + "]" }

    public init(from decoder: any Decoder) throws {
        try self.init(positions: try decoder.singleValueContainer().decode([Int64].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(positions)
    }
}
