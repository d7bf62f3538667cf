import ParleyWire

/// The bytes a bus between nodes carries: one message per published batch, naming the node
/// that sent it and the batch's ``EventLink``. Binary, length-prefixed, big-endian; decoding
/// is strict (every length checked against what is left, every tag known, nothing after the
/// end), because a message comes off a network.
///
/// ```
/// "PB1" node:string link count:u32 publication*
/// link        = 0 | 1 previous:i64 last:i64 (a log of one shard)
///             | 2 shard:u8 shards:u8 previous:i64 last:i64 (a log of several)
/// publication = 1 position:i64 conversation:i64 audience joins:opt-i64 leaves:opt-i64 frame:bytes
///             | 2 audience frame:bytes
///             | 3 user:i64 only:opt-i64 except:opt-i64
///             | 4 app:i64 channel:string name:string data:string position:opt-i64 seq:opt-i64
///                 user:opt-string excluded:opt-string createdAt:i64
///             | 5 app:i64 user:string
///             | 6 user:i64 clientId:string
///             | 7 user:i64 count:u32 blocked:string*
/// audience    = 1 conversation:i64 | 2 conversation:i64 user:i64 | 3 count:u32 user:i64*
/// string, bytes = length:u32 then the bytes; opt-x = 0 | 1 x
/// ```
package enum BusCodec: Sendable {
    /// One message: who sent it, the batch and its link.
    package struct Message: Sendable {
        /// The sending node's id.
        package var node: String
        /// The batch's place in the event log (nil for typing, presence, sign-outs).
        package var link: EventLink?
        /// The batch.
        package var publications: [Publication]

        /// Creates the value; each argument sets the property of the same name.
        package init(node: String, link: EventLink?, publications: [Publication]) {
            self.node = node
            self.link = link
            self.publications = publications
        }
    }

    /// Why a message could not be decoded.
    package struct DecodingError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What was wrong, and where.
        package var description: String
    }

    private static let magic: [UInt8] = Array("PB1".utf8)
    /// The most publications one message may carry, and users one audience may name.
    static let maxCount = 1 << 20

    /// The message's bytes.
    package static func encode(_ message: Message) -> [UInt8] {
        var out = magic
        out.reserveCapacity(256)
        string(message.node, &out)
        if let link = message.link, link.shards > 1 {
            out.append(2)
            out.append(UInt8(clamping: link.shard))
            out.append(UInt8(clamping: link.shards))
            integer(link.previous, &out)
            integer(link.last, &out)
        } else if let link = message.link {
            out.append(1)
            integer(link.previous, &out)
            integer(link.last, &out)
        } else {
            out.append(0)
        }
        length(message.publications.count, &out)
        for publication in message.publications {
            switch publication {
            case .event(let position, let conversation, let audience, let joins, let leaves, let frame):
                out.append(1)
                integer(position, &out)
                integer(conversation, &out)
                self.audience(audience, &out)
                optional(joins, &out)
                optional(leaves, &out)
                bytes(frame, &out)
            case .ephemeral(let audience, let frame):
                out.append(2)
                self.audience(audience, &out)
                bytes(frame, &out)
            case .signedOut(let user, let only, let except):
                out.append(3)
                integer(user, &out)
                optional(only, &out)
                optional(except, &out)
            case .channel(let event):
                out.append(4)
                integer(event.app, &out)
                string(event.channel, &out)
                string(event.name, &out)
                string(event.dataJSON, &out)
                optional(event.position, &out)
                optional(event.seq, &out)
                optionalString(event.userID, &out)
                optionalString(event.excludedSocket, &out)
                integer(event.createdAt, &out)
            case .channelUserTerminated(let app, let userID):
                out.append(5)
                integer(app, &out)
                string(userID, &out)
            case .uploadWanted(let user, let clientID):
                out.append(6)
                integer(user, &out)
                string(clientID, &out)
            case .blocksChanged(let user, let blocked):
                out.append(7)
                integer(user, &out)
                length(blocked.count, &out)
                for id in blocked { string(id, &out) }
            }
        }
        return out
    }

    /// The message in `bytes`.
    ///
    /// - Throws: ``DecodingError`` naming what is wrong; nothing is decoded from a bad message.
    package static func decode(_ bytes: [UInt8]) throws(DecodingError) -> Message {
        var reader = Reader(bytes: bytes)
        guard try reader.take(3) == magic[...] else { throw DecodingError(description: "not a Parley bus message (no PB1 header)") }
        let node = try reader.string()
        let link: EventLink?
        switch try reader.byte() {
        case 0: link = nil
        case 1:
            let previous = try reader.integer()
            let last = try reader.integer()
            guard previous >= 0, last > previous else { throw DecodingError(description: "link \(previous)…\(last) is not a span of positions") }
            link = EventLink(previous: previous, last: last)
        case 2:
            let shard = Int(try reader.byte())
            let shards = Int(try reader.byte())
            guard (2...LogCursor.maximumShards).contains(shards), shard < shards else {
                throw DecodingError(description: "link of shard \(shard) of \(shards) is not a shard of a log of 2 to \(LogCursor.maximumShards)")
            }
            let previous = try reader.integer()
            let last = try reader.integer()
            guard previous >= 0, last > previous else { throw DecodingError(description: "link \(previous)…\(last) is not a span of positions") }
            link = EventLink(shard: shard, shards: shards, previous: previous, last: last)
        case let other: throw DecodingError(description: "link flag \(other) is not 0, 1 or 2")
        }
        let count = try reader.count(minimumBytesEach: 1)
        var publications: [Publication] = []
        publications.reserveCapacity(count)
        for _ in 0..<count {
            switch try reader.byte() {
            case 1:
                let position = try reader.integer()
                let conversation = try reader.integer()
                let audience = try reader.audience()
                let joins = try reader.optional()
                let leaves = try reader.optional()
                publications.append(.event(position: position, conversation: conversation, audience: audience, joins: joins, leaves: leaves,
                                           frame: try reader.bytes()))
            case 2:
                let audience = try reader.audience()
                publications.append(.ephemeral(audience: audience, frame: try reader.bytes()))
            case 3:
                let user = try reader.integer()
                let only = try reader.optional()
                publications.append(.signedOut(user: user, only: only, except: try reader.optional()))
            case 4:
                let app = try reader.integer()
                let channel = try reader.string()
                let name = try reader.string()
                let data = try reader.string()
                let position = try reader.optional()
                let seq = try reader.optional()
                let userID = try reader.optionalString()
                let excluded = try reader.optionalString()
                publications.append(.channel(ChannelEvent(app: app, channel: channel, name: name, dataJSON: data, position: position, seq: seq,
                                                          userID: userID, excludedSocket: excluded, createdAt: try reader.integer())))
            case 5:
                let app = try reader.integer()
                publications.append(.channelUserTerminated(app: app, userID: try reader.string()))
            case 6:
                let user = try reader.integer()
                publications.append(.uploadWanted(user: user, clientID: try reader.string()))
            case 7:
                let user = try reader.integer()
                let count = try reader.count(minimumBytesEach: 4)
                var blocked: [String] = []
                blocked.reserveCapacity(count)
                for _ in 0..<count { blocked.append(try reader.string()) }
                publications.append(.blocksChanged(user: user, blocked: blocked))
            case let tag: throw DecodingError(description: "unknown publication tag \(tag) at byte \(reader.offset - 1)")
            }
        }
        guard reader.isAtEnd else { throw DecodingError(description: "\(bytes.count - reader.offset) bytes after the last publication") }
        return Message(node: node, link: link, publications: publications)
    }

    // MARK: - Writing

    private static func integer(_ value: Int64, _ out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }

    private static func length(_ value: Int, _ out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).bigEndian) { out.append(contentsOf: $0) }
    }

    private static func bytes(_ value: [UInt8], _ out: inout [UInt8]) {
        length(value.count, &out)
        out.append(contentsOf: value)
    }

    private static func string(_ value: String, _ out: inout [UInt8]) {
        length(value.utf8.count, &out)
        out.append(contentsOf: value.utf8)
    }

    private static func optional(_ value: Int64?, _ out: inout [UInt8]) {
        guard let value else { return out.append(0) }
        out.append(1)
        integer(value, &out)
    }

    private static func optionalString(_ value: String?, _ out: inout [UInt8]) {
        guard let value else { return out.append(0) }
        out.append(1)
        string(value, &out)
    }

    private static func audience(_ audience: Audience, _ out: inout [UInt8]) {
        switch audience {
        case .members(let conversation):
            out.append(1)
            integer(conversation, &out)
        case .membersExcept(let conversation, let user):
            out.append(2)
            integer(conversation, &out)
            integer(user, &out)
        case .users(let users):
            out.append(3)
            length(users.count, &out)
            for user in users { integer(user, &out) }
        }
    }

    // MARK: - Reading

    private struct Reader {
        let input: [UInt8]
        var offset = 0

        init(bytes: [UInt8]) { input = bytes }

        var isAtEnd: Bool { offset == input.count }

        mutating func take(_ count: Int) throws(DecodingError) -> ArraySlice<UInt8> {
            guard count >= 0, input.count - offset >= count else {
                throw DecodingError(description: "message ends at byte \(input.count), \(count) more were expected at byte \(offset)")
            }
            defer { offset += count }
            return input[offset..<(offset + count)]
        }

        mutating func byte() throws(DecodingError) -> UInt8 {
            try take(1).first ?? 0
        }

        mutating func integer() throws(DecodingError) -> Int64 {
            try take(8).reduce(0) { $0 << 8 | Int64($1) }
        }

        mutating func length() throws(DecodingError) -> Int {
            Int(try take(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        }

        /// A count of items of at least `minimumBytesEach`, checked against what is left so a
        /// forged count cannot make the decoder reserve memory for items that are not there.
        mutating func count(minimumBytesEach: Int) throws(DecodingError) -> Int {
            let count = try length()
            guard count <= BusCodec.maxCount, count * minimumBytesEach <= input.count - offset else {
                throw DecodingError(description: "count \(count) at byte \(offset - 4) is more than the message holds")
            }
            return count
        }

        mutating func bytes() throws(DecodingError) -> [UInt8] {
            Array(try take(try length()))
        }

        mutating func string() throws(DecodingError) -> String {
            let raw = try take(try length())
            guard let text = String(validating: raw, as: UTF8.self) else {
                throw DecodingError(description: "a string at byte \(offset - raw.count) is not UTF-8")
            }
            return text
        }

        mutating func optional() throws(DecodingError) -> Int64? {
            switch try byte() {
            case 0: return nil
            case 1: return try integer()
            case let flag: throw DecodingError(description: "optional flag \(flag) at byte \(offset - 1) is neither 0 nor 1")
            }
        }

        mutating func optionalString() throws(DecodingError) -> String? {
            switch try byte() {
            case 0: return nil
            case 1: return try string()
            case let flag: throw DecodingError(description: "optional flag \(flag) at byte \(offset - 1) is neither 0 nor 1")
            }
        }

        mutating func audience() throws(DecodingError) -> Audience {
            switch try byte() {
            case 1: return .members(conversation: try integer())
            case 2:
                let conversation = try integer()
                return .membersExcept(conversation: conversation, user: try integer())
            case 3:
                let count = try count(minimumBytesEach: 8)
                var users: [Int64] = []
                users.reserveCapacity(count)
                for _ in 0..<count { users.append(try integer()) }
                return .users(users)
            case let tag: throw DecodingError(description: "unknown audience tag \(tag) at byte \(offset - 1)")
            }
        }
    }
}
