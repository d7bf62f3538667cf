import Foundation
import ParleyWire
import ParleyTesting
import ParleyCrypto
import Testing

/// Golden JSON: what web and mobile clients see must not change by accident.
struct WireTests {
    private func encode(_ value: some Encodable) throws -> String {
        String(decoding: try WireCoding.encoder().encode(value), as: UTF8.self)
    }

    @Test func contentKindsEncodeFlatWithATypeField() throws {
        #expect(try encode(MessageContent.text("hi")) == #"{"text":"hi","type":"text"}"#)
        #expect(try encode(MessageContent.location(Location(latitude: 1.5, longitude: -2, name: "X")))
                == #"{"latitude":1.5,"longitude":-2,"name":"X","type":"location"}"#)
        #expect(try encode(MessageContent.video(Attachment(attachmentID: "a1", thumbnailID: "t1")))
                == #"{"attachmentId":"a1","thumbnailId":"t1","type":"video"}"#)
        #expect(try encode(MessageContent.custom(type: "poll", payload: .object(["q": .string("lunch?")])))
                == #"{"customType":"poll","payload":{"q":"lunch?"},"type":"custom"}"#)
    }

    @Test(arguments: [
        #"{"type":"text","text":"hi"}"#, #"{"type":"markdown","markdown":"**b**"}"#,
        #"{"type":"location","latitude":52.5,"longitude":13.4}"#, #"{"type":"photo","attachmentId":"p"}"#,
        #"{"type":"audio","attachmentId":"a","durationSeconds":2}"#, #"{"type":"file","attachmentId":"f","name":"x.pdf"}"#,
        #"{"type":"custom","customType":"t","payload":[1,"two",null,true,{"k":{}}]}"#,
    ])
    func contentRoundTrips(_ json: String) throws {
        let decoded = try WireCoding.decoder().decode(MessageContent.self, from: Data(json.utf8))
        let again = try WireCoding.decoder().decode(MessageContent.self, from: try WireCoding.encoder().encode(decoded))
        #expect(again == decoded)
    }

    @Test func unknownContentTypesAreRefused() {
        #expect(throws: DecodingError.self) {
            try WireCoding.decoder().decode(MessageContent.self, from: Data(#"{"type":"sticker"}"#.utf8))
        }
    }

    @Test func datesAreUTCWithMilliseconds() throws {
        #expect(WireCoding.formatDate(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(WireCoding.formatDate(Date(timeIntervalSince1970: 1_796_039_816.123)) == "2026-11-30T11:56:56.123Z")
        #expect(WireCoding.formatDate(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
        let parsed = try #require(WireCoding.parseDate("2026-11-30T11:56:56.123Z"))
        #expect(abs(parsed.timeIntervalSince1970 - 1_796_039_816.123) < 0.0005)
        #expect(WireCoding.parseDate("yesterday") == nil)
    }

    @Test func identifiersEncodeAsBareStrings() throws {
        let receipt = Receipt(userID: UserID(rawValue: "u_1"), deliveredSeq: 3, readSeq: 2)
        #expect(try encode(receipt) == #"{"deliveredSeq":3,"readSeq":2,"userId":"u_1"}"#)
    }
}

struct IdentifierTests {
    @Test func timeOrderedIDsSortByTimeAndStayUnique() {
        let earlier = Crypto.timeOrderedID(prefix: "m_", milliseconds: 1_800_000_000_000)
        let later = Crypto.timeOrderedID(prefix: "m_", milliseconds: 1_800_000_000_001)
        let same = (0..<1000).map { _ in Crypto.timeOrderedID(prefix: "m_", milliseconds: 1_800_000_000_000) }
        #expect(earlier < later)
        #expect(earlier.count == 24 && earlier.hasPrefix("m_"))
        #expect(Set(same).count == 1000)
        #expect(Crypto.timeOrderedID(prefix: "", milliseconds: 0) < Crypto.timeOrderedID(prefix: "", milliseconds: Int64(1) << 49))
    }
}

struct JSONWriterTests {
    @Test func writesValidJSONWithCommasEscapesAndNumbers() throws {
        var writer = JSONWriter()
        writer.object { json in
            json.key("a"); json.integer(0)
            json.key("b"); json.integer(-42)
            json.key("c"); json.integer(Int64.min)
            json.key("d"); json.string("quote \" back \\ tab \t nul \u{0} bell \u{7} é")
            json.key("e"); json.array { list in
                list.bool(true)
                list.raw(#"{"x":[1,2]}"#)
                list.object { _ in }
                list.date(milliseconds: 1_796_039_816_123)
            }
        }
        let text = String(decoding: writer.bytes, as: UTF8.self)
        #expect(text == #"{"a":0,"b":-42,"c":-9223372036854775808,"d":"quote \" back \\ tab \t nul \u0000 bell \u0007 é","e":[true,{"x":[1,2]},{},"2026-11-30T11:56:56.123Z"]}"#)
        let parsed = try JSONSerialization.jsonObject(with: Data(writer.bytes)) as? [String: Any]
        #expect(parsed?["d"] as? String == "quote \" back \\ tab \t nul \u{0} bell \u{7} é")
    }
}

struct HandWrittenJSONTests {
    /// A receipt's hand-written answer is byte for byte what the REST encoder writes.
    @Test func aReceiptWritesWhatTheEncoderWrites() throws {
        for receipt in [Receipt(userID: UserID(rawValue: "u_abc"), deliveredSeq: 0, readSeq: 0),
                        Receipt(userID: UserID(rawValue: "u_\"quoted\"é"), deliveredSeq: Int64.max, readSeq: 41)] {
            #expect(receipt.jsonBytes == Array(try WireCoding.encoder().encode(receipt)))
        }
    }
}

/// The sent/delivered/read rule against the cases the web client's `status.js` is tested with.
struct DeliveryStatusRuleTests {
    @Test func theRuleMatchesTheSharedCases() throws {
        let cases = try DeliveryStatusCase.load()
        #expect(cases.count >= 9)
        for item in cases {
            let status = item.others.isEmpty ? DeliveryStatus.sent
                : DeliveryStatus.of(seq: item.seq, lowestDelivered: item.others.map(\.delivered).min() ?? 0,
                                    lowestRead: item.others.map(\.read).min() ?? 0)
            #expect(status.rawValue == item.status, "seq \(item.seq) with \(item.others.map { ($0.delivered, $0.read) })")
        }
    }
}
