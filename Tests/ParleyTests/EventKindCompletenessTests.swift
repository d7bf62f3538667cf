import Foundation
import Parley
import Testing

/// The kind table is whole (issue 28): every kind ParleyWire declares has a golden frame
/// (`Tests/Fixtures/events`, frozen by EventGoldenTests), reads as the body its rule names,
/// and changes what the SDK's reducers say it changes. The web client is held to the same list
/// in Chromium (Tests/Interop/test_web.py).
struct EventKindCompletenessTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Fixtures/events").standardized

    /// The conversation kinds: every kind but the Pusher adapter's channel events, which never reach a conversation's clients.
    static var conversationKinds: [EventKind] {
        EventKind.rules.filter { $0.value.audience != .channel }.keys.sorted { $0.rawValue < $1.rawValue }
    }

    static func golden(_ kind: EventKind) throws -> ConversationEvent {
        let data = try Data(contentsOf: fixtures.appendingPathComponent("\(kind.rawValue).json"))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            guard let date = formatter.date(from: text) else { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: text)) }
            return date
        }
        return try decoder.decode(ConversationEvent.self, from: data)
    }

    static func shape(of body: EventBody) -> EventShape? {
        switch body {
        case .bare: .bare
        case .message: .message
        case .membership: .membership
        case .conversation: .conversationChange
        case .receipt: .receipt
        case .deliveries: .deliveries
        case .reaction: .reaction
        case .restriction: .restriction
        case .expiry: .expiry
        case .profile: .profile
        case .notifications: .notifications
        case .state: .state
        case .draft: .draft
        case .scheduled: .scheduled
        case .report: .report
        case .unknown: nil
        }
    }

    @Test func everyKindHasAGoldenFrameThatReadsAsItsShape() throws {
        #expect(Self.conversationKinds.count == 28)
        for kind in Self.conversationKinds {
            let event = try Self.golden(kind)
            #expect(event.type == kind)
            #expect(Self.shape(of: event.body) == kind.rule?.shape, "\(kind.rawValue) reads as \(event.body)")
            #expect((event.seq != nil) == kind.rule?.history, "\(kind.rawValue): a seq exactly when it is history")
        }
    }

    @Test func theSDKsReducersDoWhatEachKindSays() throws {
        let created = try Self.golden(.messageCreated)
        let me = UserID(rawValue: "u_9")
        let first = try #require(created.message)
        for kind in Self.conversationKinds {
            let event = try Self.golden(kind)
            let before = [first]
            let after = before.applying(event, me: me)
            switch kind.rule?.shape {
            case .message?, .reaction?:
                #expect(after.count == 1 && after.first?.id == event.message?.id || event.message?.id != first.id, "\(kind.rawValue)")
                if event.message?.id == first.id { #expect(after.first == first.updated(by: event, me: me), "\(kind.rawValue)") }
            case .expiry?:
                let seqs = [Int64](1...20).map { seq in
                    var message = first
                    message.seq = seq
                    return message
                }
                #expect(seqs.applying(event, me: me).map(\.seq) == Array(((event.throughSeq ?? 0) + 1)...20), "messages.expired removes through its seq")
            case .profile?:
                var theirs = first
                theirs.sender.id = try #require(event.userID)
                #expect([theirs].applying(event, me: me).first?.sender.displayName == event.displayName)
            case .conversationChange?, .notifications?, .state?, .draft?:
                let conversation = Conversation(id: event.conversationID, kind: .group, title: "before", customData: nil, createdAt: Date(),
                                                lastSeq: 0, lastPosition: 0, lastMessage: nil, memberCount: 2, role: .member, unreadCount: 0,
                                                receipt: nil, peer: nil, mutedUntil: nil)
                #expect(conversation.updated(by: event) != conversation, "\(kind.rawValue) changes the conversation")
                #expect(after == before)
            default:
                #expect(after == before, "\(kind.rawValue) leaves the messages as they are")
            }
        }
        // A new message lands in seq order; a reply only in its thread does not.
        #expect([Message]().applying(created, me: me) == [first])
    }
}
