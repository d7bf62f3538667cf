import Foundation
@testable import ParleyChat
import ParleyWire
import Testing

/// The realtime frames as typed values, and event kinds that stay open to the future.
struct FrameTests {
    private func decodeClient(_ json: String) throws -> ClientFrame {
        try WireCoding.decoder().decode(ClientFrame.self, from: Data(json.utf8))
    }

    private func failure(_ json: String) -> ClientFrame.DecodingFailure? {
        do {
            _ = try decodeClient(json)
            return nil
        } catch {
            return error as? ClientFrame.DecodingFailure
        }
    }

    @Test func commandsEncodeFlatAndRoundTrip() throws {
        let frames: [ClientFrame] = [
            .auth(.init(token: "t", position: 41, epoch: "e_x")),
            .send(id: "7", conversationID: ConversationID(rawValue: "c_1"), message: SendMessageRequest(clientID: "a1", content: .text("hi"))),
            .edit(id: "8", conversationID: ConversationID(rawValue: "c_1"), messageID: MessageID(rawValue: "m_1"), content: .text("ho"), metadata: ["k": "v"]),
            .delete(id: "9", conversationID: ConversationID(rawValue: "c_1"), messageIDs: [MessageID(rawValue: "m_1")]),
            .markDelivered(id: "d", conversationID: ConversationID(rawValue: "c_1"), seq: 3),
            .markRead(id: "r", conversationID: ConversationID(rawValue: "c_1"), seq: 3),
            .typing(id: nil, conversationID: ConversationID(rawValue: "c_1"), isTyping: true),
            .typing(id: "x", conversationID: ConversationID(rawValue: "c_1"), isTyping: false),
            .join(id: "j", conversationID: ConversationID(rawValue: "c_2")),
            .leave(id: "l", conversationID: ConversationID(rawValue: "c_2")),
            .presence(id: "p", userIDs: [UserID(rawValue: "u_1")]),
            .ping(id: nil),
            .typing(id: nil, conversationID: ConversationID(rawValue: "c_1"), isTyping: true, threadID: MessageID(rawValue: "m_root")),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for frame in frames {
            let json = try encoder.encode(frame)
            #expect(try WireCoding.decoder().decode(ClientFrame.self, from: json) == frame)
        }
        // The wire shape of docs/protocol.md, unchanged by the typing.
        #expect(String(decoding: try encoder.encode(frames[1]), as: UTF8.self)
                == #"{"conversationId":"c_1","id":"7","message":{"clientId":"a1","content":{"text":"hi","type":"text"}},"type":"message.send"}"#)
        #expect(String(decoding: try encoder.encode(frames[6]), as: UTF8.self) == #"{"conversationId":"c_1","type":"typing.start"}"#)
        #expect(String(decoding: try encoder.encode(frames[12]), as: UTF8.self) == #"{"conversationId":"c_1","threadId":"m_root","type":"typing.start"}"#)
    }

    /// Decision 0026, part 2: the fast reader reads the hot commands as JSONDecoder does, and
    /// leaves everything it is unsure of to JSONDecoder.
    @Test func theFastReaderReadsHotCommandsExactlyAsJSONDecoderDoes() throws {
        func fast(_ json: String) -> ClientFrame? {
            var json = json
            return json.withUTF8 { ClientFrame.fastDecoding($0) }
        }
        // What real clients send: read fast, and equal to JSONDecoder's reading.
        let hot = [
            #"{"type":"message.send","id":"7","conversationId":"c_1","message":{"clientId":"a1","content":{"type":"text","text":"hi"}}}"#,
            #"{"conversationId":"c_1","id":"7","message":{"clientId":"a1","content":{"text":"héllo 👋","type":"text"}},"type":"message.send"}"#,
            #"{"type":"message.send","id":"7","conversationId":"c_1","message":{"clientId":"a1","content":{"type":"markdown","markdown":"*hi*"}}}"#,
            #" { "type" : "receipt.delivered" , "id" : "d" , "conversationId" : "c_1" , "seq" : 41 } "#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":0}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":-3}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":9223372036854775807}"#,
            #"{"type":"typing.start","conversationId":"c_1"}"#,
            #"{"type":"typing.stop","id":"t","conversationId":"c_1"}"#,
            #"{"type":"ping"}"#,
            #"{"type":"ping","id":"p"}"#,
            #"{"type":"message.send","id":"","conversationId":"","message":{"clientId":"","content":{"type":"text","text":""}}}"#,
        ]
        for json in hot {
            let frame = try #require(fast(json), "read fast: \(json)")
            #expect(try decodeClient(json) == frame, "\(json)")
        }
        // Anything unsure goes to JSONDecoder (nil), which accepts or refuses it as it always has.
        let unsure = [
            #"{"type":"message.send","id":"7","conversationId":"c_1","message":{"clientId":"a1","content":{"type":"text","text":"say \"hi\""}}}"#,
            #"{"type":"message.send","id":"7","conversationId":"c_1","message":{"clientId":"a1","content":{"type":"text","text":"hi"},"metadata":{"k":"v"}}}"#,
            #"{"type":"message.send","id":"7","conversationId":"c_1","message":{"clientId":"a1","content":{"type":"location","latitude":1,"longitude":2}}}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":1.0}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":1e2}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":01}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":-0}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":9223372036854775808}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":"1"}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1"}"#,
            #"{"type":"receipt.read","id":"r","id":"s","conversationId":"c_1","seq":1}"#,
            #"{"type":"receipt.read","id":"r","conversationId":"c_1","seq":1,"extra":true}"#,
            #"{"type":"ping","id":null}"#,
            #"{"type":"ping"} x"#,
            #"{"type":"typing.start","conversationId":"c_1","threadId":"m_root"}"#,
            #"{"type":"ping""#,
            #"{"type":"message.edit","id":"8","conversationId":"c_1","messageId":"m","content":{"type":"text","text":"x"}}"#,
            "{\"type\":\"ping\",\"id\":\"a\u{01}b\"}",
            "",
        ]
        for json in unsure {
            #expect(fast(json) == nil, "left to JSONDecoder: \(json)")
        }
        // Bytes that are not UTF-8 inside a string: left to JSONDecoder too.
        var invalid = Array(#"{"type":"ping","id":"x"}"#.utf8)
        invalid[21] = 0xFF
        #expect(invalid.withUnsafeBufferPointer { ClientFrame.fastDecoding($0) } == nil)
    }

    @Test func aFrameThatIsNotACommandSaysWhyAndKeepsItsID() throws {
        let unknown = try #require(failure(#"{"type":"message.sned","id":"4"}"#))
        #expect(unknown.id == "4" && unknown.error.code == "unknown_command" && unknown.error.message.contains("message.send"))
        let missing = try #require(failure(#"{"type":"message.send","id":"5","conversationId":"c_1"}"#))
        #expect(missing.id == "5" && missing.error.code == "invalid_request" && missing.error.message == "message.send needs message")
        let noID = try #require(failure(#"{"type":"receipt.read","conversationId":"c_1","seq":1}"#))
        #expect(noID.id == nil && noID.error.message.contains("needs an id"))
        let wrongType = try #require(failure(#"{"type":"receipt.read","id":"6","conversationId":"c_1","seq":"one"}"#))
        #expect(wrongType.id == "6" && wrongType.error.code == "invalid_request" && wrongType.error.message.contains("'seq' has the wrong type"))
        let badContent = try #require(failure(#"{"type":"message.edit","id":"7","conversationId":"c","messageId":"m","content":{"type":"sticker"}}"#))
        #expect(badContent.id == "7" && badContent.error.code == "invalid_request")
        // Not a command at all: a plain decoding error (the server answers invalid_json).
        #expect(throws: DecodingError.self) { _ = try decodeClient("[1, 2]") }
        #expect(throws: DecodingError.self) { _ = try decodeClient(#"{"id":"1"}"#) }
    }

    @Test func anEventOfAKindThisBuildDoesNotKnowIsKeptWhole() throws {
        let json = #"""
            {"type":"event","event":{"position":9,"conversationId":"c_1","seq":4,"type":"survey.answered","actorId":"u_1",
             "createdAt":"2026-12-01T10:00:00.000Z","messageId":"m_1","emoji":"👍"}}
            """#
        let frame = try WireCoding.decoder().decode(ServerFrame.self, from: Data(json.utf8))
        let event = try #require(frame.event)
        #expect(event.type == EventKind(rawValue: "survey.answered") && !event.type.isKnown)
        #expect(event.position == 9 && event.seq == 4 && event.conversationID.rawValue == "c_1")
        guard case .object(let fields)? = event.unknownPayload else { Issue.record("the payload was not kept"); return }
        #expect(fields["emoji"] == .string("👍") && fields["messageId"] == .string("m_1"))
        // Forwarding the frame (an app's own relay, a log) writes every field back.
        let again = try WireCoding.decoder().decode(ServerFrame.self, from: try WireCoding.encoder().encode(frame))
        #expect(again == frame && again.event?.unknownPayload == event.unknownPayload)
        // Known kinds are unchanged.
        #expect(ConversationEvent.Kind(rawValue: "message.created") == .messageCreated)
        #expect(ConversationEvent.Kind(rawValue: "reaction.added") == .reactionAdded, "known since issue 19")
        #expect(EventKind.rules.keys.allSatisfy { EventKind(rawValue: $0.rawValue) == $0 && $0.isKnown })
    }

    @Test func aFrameTypeThisBuildDoesNotKnowDecodesAsUnknown() throws {
        let frame = try WireCoding.decoder().decode(ServerFrame.self, from: Data(#"{"type":"call.ringing","callId":"x"}"#.utf8))
        guard case .unknown(let type, .object(let fields)) = frame else { Issue.record("got \(frame)"); return }
        #expect(type == "call.ringing" && fields["callId"] == .string("x") && frame.type == nil)
    }

    @Test func theServersFramesDecodeIntoTheirCases() throws {
        let decoder = WireCoding.decoder()
        let ready = try decoder.decode(ServerFrame.self, from: Data(RealtimeFrames.ready(cursor: LogCursor(position: 5), epoch: "e_a", userID: "u_1", heartbeatSeconds: 30)))
        #expect(ready == .ready(.init(position: 5, cursor: LogCursor(position: 5), shards: 1, epoch: "e_a", userID: UserID(rawValue: "u_1"), heartbeatSeconds: 30)))
        let resync = try decoder.decode(ServerFrame.self, from: Data(RealtimeFrames.resync(cursor: LogCursor(position: 7), epoch: "e_b", reason: "why")))
        #expect(resync == .resync(.init(position: 7, cursor: LogCursor(position: 7), epoch: "e_b", reason: "why")))
        // Four shards: `position` (for clients before cursors) is the newest of them.
        let sharded = RealtimeFrames.ready(cursor: try LogCursor(positions: [8, 13, 6, 0]), epoch: "e_a", userID: "u_1", heartbeatSeconds: 30)
        #expect(String(decoding: sharded, as: UTF8.self)
                == #"{"cursor":[8,13,6,0],"epoch":"e_a","heartbeatSeconds":30,"position":13,"shards":4,"type":"ready","userId":"u_1"}"#)
        // From a server before cursors: the one position is the place to resume from.
        let old = try decoder.decode(ServerFrame.self, from: Data(#"{"type":"ready","position":9,"userId":"u_1","heartbeatSeconds":30}"#.utf8))
        guard case .ready(let oldReady) = old else { Issue.record("got \(old)"); return }
        #expect(oldReady.resumePoint == LogCursor(position: 9) && oldReady.shards == nil)
        let error = try decoder.decode(ServerFrame.self, from: Data(RealtimeFrames.error(id: "3", ChatError.notMember)))
        #expect(error == .error(id: "3", ChatError.notMember))
        let typing = try decoder.decode(ServerFrame.self, from: Data(RealtimeFrames.typing(conversationID: "c", userID: "u", typing: true, expiresInMs: 6000)))
        #expect(typing == .typing(.init(conversationID: ConversationID(rawValue: "c"), userID: UserID(rawValue: "u"), isTyping: true, expiresInMs: 6000)))
        let other = try decoder.decode(ServerFrame.self, from: Data(RealtimeFrames.ack(id: "9", result: Array(#"{"deliveredSeq":1}"#.utf8))))
        #expect(other == .ack(id: "9", result: .value(.object(["deliveredSeq": .number(1)]))))
    }
}

@Suite struct LogCursorCodingTests {
    @Test func aCursorIsAnArrayOfPositionsOnTheWire() throws {
        let page = ConversationPage(conversations: [], nextCursor: nil, liveCursor: try LogCursor(positions: [8, 13, 6, 0]))
        let bytes = try WireCoding.encoder().encode(page)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"conversations":[],"liveCursor":[8,13,6,0]}"#)
        #expect(try WireCoding.decoder().decode(ConversationPage.self, from: bytes) == page)
    }
}
