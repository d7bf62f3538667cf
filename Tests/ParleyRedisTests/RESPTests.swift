import ParleyChat
@testable import ParleyRedis
import Testing

struct RESPTests {
    private func parse(_ text: String) throws -> [RESPValue] {
        var parser = RESPParser()
        parser.append(Array(text.utf8))
        var values: [RESPValue] = []
        while let value = try parser.next() { values.append(value) }
        return values
    }

    @Test func everyReplyTypeParses() throws {
        let values = try parse("+OK\r\n-ERR wrong\r\n:42\r\n:-7\r\n$5\r\nhe\r\no\r\n$-1\r\n*-1\r\n*2\r\n$7\r\nmessage\r\n*1\r\n:1\r\n$0\r\n\r\n")
        #expect(values == [.simple("OK"), .error("ERR wrong"), .integer(42), .integer(-7), .bulk(Array("he\r\no".utf8)), .bulk(nil), .array(nil),
                           .array([.bulk(Array("message".utf8)), .array([.integer(1)])]), .bulk([])])
    }

    @Test func bytesArrivingOneAtATimeMakeTheSameValues() throws {
        let wire = Array("*3\r\n$7\r\nmessage\r\n$3\r\nbus\r\n$4\r\n\u{0}\u{1}\r\n\r\n+PONG\r\n".utf8)
        var parser = RESPParser()
        var values: [RESPValue] = []
        for byte in wire {
            parser.append([byte])
            while let value = try parser.next() { values.append(value) }
        }
        #expect(values == [.array([.bulk(Array("message".utf8)), .bulk(Array("bus".utf8)), .bulk([0, 1, 13, 10])]), .simple("PONG")])
    }

    @Test(arguments: [
        "?1\r\n",                 // unknown type
        ":12a\r\n",               // not a number
        ":\r\n",                  // no digits
        "$3\r\nabcd\r\n",         // bulk not followed by CRLF
        "$-2\r\n",                // negative length
        "*-5\r\n",                // negative count
        "+OK\rX",                 // CR without LF
        "$99999999999999999999\r\n",  // too many digits
        ":" + String(repeating: "1", count: 80) + "\r\n",  // a line past the limit
    ])
    func malformedRepliesAreRefused(_ text: String) {
        #expect(throws: RESPError.self) { _ = try parse(text) }
    }

    @Test func limitsOnSizeCountAndDepth() {
        var parser = RESPParser()
        parser.maxBulk = 10
        parser.append(Array("$11\r\n".utf8))
        #expect(throws: RESPError.self) { _ = try parser.next() }
        var counted = RESPParser()
        counted.maxElements = 2
        counted.append(Array("*3\r\n".utf8))
        #expect(throws: RESPError.self) { _ = try counted.next() }
        var deep = RESPParser()
        deep.append(Array((String(repeating: "*1\r\n", count: 9) + ":1\r\n").utf8))
        #expect(throws: RESPError.self) { _ = try deep.next() }
    }

    @Test func commandsAreArraysOfBulkStrings() {
        #expect(RESPCommand.encode("PUBLISH", "c", "hé") == Array("*3\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n$3\r\nhé\r\n".utf8))
        #expect(RESPCommand.encode([[0, 13, 10]]) == Array("*1\r\n$3\r\n".utf8) + [0, 13, 10, 13, 10])
    }

    @Test func urlsParseAndHideTheirPassword() throws {
        let url = try RedisURL("redis://:s3cret@127.0.0.1:6380")
        #expect(url.host == "127.0.0.1" && url.port == 6380 && url.password == "s3cret" && url.user == nil)
        #expect(!url.description.contains("s3cret"))
        #expect(try RedisURL("redis://cache").port == 6379)
        #expect(throws: RedisError.self) { _ = try RedisURL("rediss://cache:6379") }
        #expect(throws: RedisError.self) { _ = try RedisURL("redis://") }
    }
}

struct BusCodecTests {
    static let everyKind: [Publication] = [
        .event(position: 9, conversation: 3, audience: .members(conversation: 3), joins: 4, leaves: nil, frame: Array("{\"type\":\"event\"}".utf8)),
        .event(position: 10, conversation: 3, audience: .users([1, 2, 3]), joins: nil, leaves: 2, frame: []),
        .ephemeral(audience: .membersExcept(conversation: 3, user: 1), frame: Array("typing".utf8)),
        .signedOut(user: 7, only: nil, except: 12),
        .channel(ChannelEvent(app: 1, channel: "presence-room", name: "client-hi", dataJSON: "{\"a\":\"é\"}", position: nil, seq: nil,
                              userID: "u_1", excludedSocket: "1.2", createdAt: 1_800_000_000_000)),
        .channel(ChannelEvent(app: 1, channel: "news", name: "update", dataJSON: "\"x\"", position: 11, seq: 5, userID: nil,
                              excludedSocket: nil, createdAt: 1)),
        .channelUserTerminated(app: 1, userID: "user-é"),
        .uploadWanted(user: 7, clientID: "photo-1"),
    ]

    @Test func everyPublicationRoundTrips() throws {
        let message = BusCodec.Message(node: "n_1", link: EventLink(previous: 8, last: 11), publications: Self.everyKind)
        let decoded = try BusCodec.decode(BusCodec.encode(message))
        #expect(decoded.node == "n_1" && decoded.link == message.link)
        #expect(BusCodec.encode(decoded) == BusCodec.encode(message))
        let unlinked = try BusCodec.decode(BusCodec.encode(BusCodec.Message(node: "", link: nil, publications: [])))
        #expect(unlinked.link == nil && unlinked.publications.isEmpty)
    }

    @Test func truncatedTrailingOrForgedMessagesAreRefused() {
        let bytes = BusCodec.encode(BusCodec.Message(node: "n_1", link: EventLink(previous: 8, last: 11), publications: Self.everyKind))
        for cut in stride(from: 0, to: bytes.count, by: 7) {
            #expect(throws: BusCodec.DecodingError.self) { _ = try BusCodec.decode(Array(bytes[0..<cut])) }
        }
        #expect(throws: BusCodec.DecodingError.self) { _ = try BusCodec.decode(bytes + [0]) }
        // A count of a billion publications in a 20-byte message is refused before anything is reserved.
        let forged = Array("PB1".utf8) + [0, 0, 0, 0] + [0] + [0x3B, 0x9A, 0xCA, 0x00]
        #expect(throws: BusCodec.DecodingError.self) { _ = try BusCodec.decode(forged) }
        // A link that is not a span.
        let backwards = Array("PB1".utf8) + [0, 0, 0, 0] + [1] + [0, 0, 0, 0, 0, 0, 0, 9] + [0, 0, 0, 0, 0, 0, 0, 9] + [0, 0, 0, 0]
        #expect(throws: BusCodec.DecodingError.self) { _ = try BusCodec.decode(backwards) }
        // A shard that is not one of its log's, or a log of one shard sent as several.
        for (shard, shards): (UInt8, UInt8) in [(4, 4), (0, 1), (0, 65)] {
            let outside = Array("PB1".utf8) + [0, 0, 0, 0] + [2, shard, shards] + [0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 9] + [0, 0, 0, 0]
            #expect(throws: BusCodec.DecodingError.self, "shard \(shard) of \(shards)") { _ = try BusCodec.decode(outside) }
        }
    }

    /// A log of several shards (decision 0026, part 4): the link names its shard; a log of one
    /// shard is sent exactly as before shards (flag 1), so older nodes read it.
    @Test func aShardedLinkRoundTripsAndAOneShardLinkIsUnchanged() throws {
        let sharded = BusCodec.Message(node: "n_1", link: EventLink(shard: 3, shards: 4, previous: 7, last: 11), publications: Self.everyKind)
        let decoded = try BusCodec.decode(BusCodec.encode(sharded))
        #expect(decoded.link == sharded.link && BusCodec.encode(decoded) == BusCodec.encode(sharded))
        let single = BusCodec.encode(BusCodec.Message(node: "n", link: EventLink(previous: 8, last: 11), publications: []))
        #expect(single[3 + 4 + 1] == 1, "flag 1 after the magic and the node's name")
    }

    /// A write to several shards is one part per shard, each with its own events; what has no
    /// position goes with the first.
    @Test func aWriteToSeveralShardsIsCutIntoOnePartPerShard() {
        let links = [EventLink(shard: 1, shards: 4, previous: 1, last: 9), EventLink(shard: 2, shards: 4, previous: 2, last: 6)]
        let event = { (position: Int64) in Publication.event(position: position, conversation: 1, audience: .members(conversation: 1), joins: nil, leaves: nil, frame: []) }
        let parts = EventLink.parts(of: [event(5), event(6), .uploadWanted(user: 1, clientID: "x"), event(9)], links: links)
        #expect(parts.map { $0.link } == links)
        #expect(parts.map { $0.publications.compactMap(\.position) } == [[5, 9], [6]])
        #expect(parts[0].publications.count == 3, "the upload news rides with the first shard's part")
    }
}
