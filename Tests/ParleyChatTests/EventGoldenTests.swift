import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// The JSON of every kind of event, frozen (issue 28): a scripted conversation makes one event
/// of each kind through the real domain, and each is written as the feed, the socket's replay
/// and its live frames write it (`EventRecord`), with ids renamed in order of appearance.
/// `Tests/Fixtures/events/<kind>.json` holds what the build wrote when the fixture was made;
/// the bytes must not change, and the SDK's `ConversationEvent` must read each and write it
/// back byte for byte. Make missing fixtures with `PARLEY_RECORD_GOLDEN=1`.
struct EventGoldenTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/events").standardized

    /// Each id (`c_…`, `u_…`, `m_…`, `a_…`, `lp_…`) becomes `<prefix>_<n>` by order of appearance, so
    /// random ids compare.
    static func normalized(_ json: String, names: inout [String: String]) -> String {
        var result = ""
        var rest = Substring(json)
        let pattern = /(c|u|m|a|rp|lp)_[A-Za-z0-9]{8,}/
        while let match = rest.firstMatch(of: pattern) {
            result += rest[..<match.range.lowerBound]
            let id = String(rest[match.range])
            let prefix = String(match.output.1)
            if names[id] == nil { names[id] = "\(prefix)_\(names.values.filter { $0.hasPrefix(prefix + "_") }.count + 1)" }
            result += names[id] ?? id
            rest = rest[match.range.upperBound...]
        }
        return result + rest
    }

    /// One event of every kind, as the feed of the member who sees it holds it.
    static func scriptedEvents() async throws -> [EventRecord] {
        // One shard whatever the run's: the golden files pin positions 1, 2, 3 … too.
        let harness = try await ChatHarness.make {
            $0.deliveryUpdateInterval = .seconds(3600)
            $0.logShards = 1
        }
        defer { harness.tearDown() }
        let chat = harness.chat
        let ana = try await harness.register("ana").caller
        let bob = try await harness.register("bob").caller
        let carol = try await harness.register("carol").caller
        let server = try await chat.backend.authenticateApp(secret: try #require(try await chat.backend.rotateSecret(app: "test", grace: .zero).secret))
        let room = try await chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob"], title: "Golden")).0.id
        let first = try await chat.send(ana, to: room, SendMessageRequest(clientID: "g1", content: .text("hello @bob"))).0
        _ = try await chat.edit(ana, conversation: room, message: first.id, EditMessageRequest(content: .text("hello again @bob")))
        _ = try await chat.annotations.react(bob, conversation: room, message: first.id, emoji: "👍")
        _ = try await chat.annotations.unreact(bob, conversation: room, message: first.id, emoji: "👍")
        _ = try await chat.annotations.pin(bob, conversation: room, message: first.id)
        _ = try await chat.annotations.unpin(bob, conversation: room, message: first.id)
        _ = try await chat.updateReceipt(bob, conversation: room, ReceiptUpdate(deliveredSeq: first.seq, readSeq: first.seq))
        _ = try await chat.updateConversation(ana, id: room, UpdateConversationRequest(title: "Golden hour", customData: .object(["n": .number(1)]),
                                                                                     slowModeSeconds: 5, retentionDays: 30))
        _ = try await chat.addMembers(ana, id: room, AddMembersRequest(usernames: ["carol"]))
        _ = try await chat.updateMember(ana, id: room, user: carol.userID, UpdateMemberRequest(role: .admin))
        _ = try await chat.updateMember(ana, id: room, user: carol.userID, UpdateMemberRequest(role: .member))
        _ = try await chat.moderation.muteMember(ana, conversation: room, user: carol.userID, MuteMemberRequest(until: harness.clock.now.addingTimeInterval(60)))
        _ = try await chat.moderation.unmuteMember(ana, conversation: room, user: carol.userID)
        _ = try await chat.moderation.ban(ana, conversation: room, BanRequest(userID: carol.userID, until: harness.clock.now.addingTimeInterval(60), reason: "spam"))
        try await chat.moderation.unban(ana, conversation: room, user: carol.userID)
        let reply = try await chat.send(bob, to: room, SendMessageRequest(clientID: "g2", content: .text("in a thread"), threadID: first.id)).0
        _ = try await chat.delete(bob, conversation: room, messages: [reply.id])
        _ = try await chat.notifications.setLevel(bob, conversation: room, NotificationsRequest(level: .mentions))
        _ = try await chat.updateProfile(ana, UpdateProfileRequest(displayName: "Ana G."))
        // A public channel's delivery counts reach the author.
        let channel = try await chat.createConversation(ana, CreateConversationRequest(kind: .public, title: "Golden channel")).0.id
        _ = try await chat.join(bob, id: channel)
        let said = try await chat.send(ana, to: channel, SendMessageRequest(clientID: "g3", content: .text("to the channel"))).0
        _ = try await chat.updateReceipt(bob, conversation: channel, ReceiptUpdate(deliveredSeq: said.seq, readSeq: nil))
        _ = try await chat.flushDeliveries()
        _ = try await chat.updateConversation(ana, id: channel, UpdateConversationRequest(retentionDays: 0))  // one sweep, on any engine
        // Retention removes what is older than the app's policy, and the events of what it
        // removes: read them first.
        var seen: [String: EventRecord] = [:]
        func read() async throws {
            for viewer in [ana, bob] {
                for record in try await chat.feed(viewer, after: chat.cursor(through: 0), limit: 200).records where seen[record.type.rawValue] == nil {
                    seen[record.type.rawValue] = record
                }
            }
        }
        try await read()
        _ = try await chat.updateConversation(ana, id: room, UpdateConversationRequest(retentionDays: -1))
        _ = try await chat.retention.setPolicy(server, RetentionPolicy(days: 1))
        harness.clock.advance(by: 2 * 86_400)
        _ = try await chat.retention.sweep()
        // Bob reports Ana's message in the channel (kept: no retention there): its owner, Ana, hears of it.
        _ = try await chat.moderation.report(bob, conversation: channel, message: said.id, ReportRequest(reason: .spam, note: "golden"))
        // Bob pins the channel and marks it unread: only his devices hear it.
        _ = try await chat.inbox.setState(bob, conversation: channel, ConversationStateRequest(pinned: true, markedUnread: true))
        // And starts a reply there, on one device: his others show it.
        _ = try await chat.inbox.saveDraft(bob, conversation: channel, Draft(text: "I think", clientID: "g4", updatedAt: harness.clock.now))
        // And schedules a message for tomorrow.
        _ = try await chat.scheduling.schedule(bob, conversation: channel, ScheduleMessageRequest(
            sendAt: harness.clock.now.addingTimeInterval(86_400), message: SendMessageRequest(clientID: "g5", content: .text("good morning"))))
        // Ana asks the channel a poll; Bob votes, and Ana closes it.
        let poll = try await chat.send(ana, to: channel, SendMessageRequest(clientID: "g6", content: .poll(PollContent(
            question: "Lunch?", options: ["Pizza", "Sushi"])))).0
        _ = try await chat.polls.vote(bob, conversation: channel, message: poll.id, options: [1])
        _ = try await chat.polls.close(ana, conversation: channel, message: poll.id)
        // A link in the channel, and the preview worker's write with what its fetch found.
        _ = try await chat.send(ana, to: channel, SendMessageRequest(clientID: "g7", content: .text("see https://example.com/post")))
        for job in try await chat.linkPreviews.claim(holder: "golden") {
            let found = LinkPreview(url: job.url, title: "A post", description: "About chat", siteName: "Example")
            try await chat.linkPreviews.finish(job, holder: "golden", fetched: CachedLinkPreview(
                preview: found, thumbnail: (String(repeating: "ab", count: 32), 512, 268), fetchedAt: 1_000))
        }
        try await read()
        return seen.values.sorted { $0.position < $1.position }
    }

    static func json(_ record: EventRecord) -> String {
        var writer = JSONWriter(capacity: 512)
        record.writeJSON(into: &writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// `/metrics`' send → delivered reads a frame's time without decoding it: the time of
    /// every new message (a thread reply, a poll, a link among them), and of nothing else.
    @Test func sendToDeliveredReadsTheTimeOfNewMessagesFramesOnly() async throws {
        let records = try await Self.scriptedEvents()
        #expect(records.contains { $0.type == .messageCreated })
        for record in records {
            let read = EventRecord.messageSentAt(frame: record.frame)
            #expect(read == (record.type == .messageCreated ? record.createdAt : nil), "\(record.type.rawValue)")
        }
        // Every message.created the script stored, not only the first of the kind.
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let ana = try await harness.register("ana").caller
        let bob = try await harness.register("bob").caller
        let room = try await harness.chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob"], title: "t")).0.id
        for text in ["plain", "https://example.com/x", "\"quoted\" \\ and \u{1F44B}", String(repeating: "long ", count: 500)] {
            _ = try await harness.chat.send(ana, to: room, SendMessageRequest(clientID: UUID().uuidString, content: .text(text)))
        }
        for record in try await harness.chat.feed(bob, after: harness.chat.cursor(through: 0), limit: 100).records where record.type == .messageCreated {
            #expect(EventRecord.messageSentAt(frame: record.frame) == record.createdAt)
        }
    }

    @Test func theFrameTimeReaderInvertsTheWritersDatesAndRefusesAnythingElse() {
        for milliseconds: Int64 in [0, 1, 951_782_400_000, 1_709_164_800_123, 1_796_515_199_999, 4_102_444_800_000, 253_402_300_799_999] {
            var writer = JSONWriter(capacity: 32)
            writer.date(milliseconds: milliseconds)
            let quoted = writer.bytes
            #expect(EventRecord.milliseconds(iso: quoted[1..<(quoted.count - 1)]) == milliseconds)
        }
        for bad in ["2026-12-06T17:00:00.000", "2026-13-06T17:00:00.000Z", "2026-12-06 17:00:00.000Z", "2026-12-06T17:00:0x.000Z", "2026-12-06T25:00:00.000Z"] {
            #expect(EventRecord.milliseconds(iso: ArraySlice(Array(bad.utf8))) == nil, "\(bad)")
        }
        #expect(EventRecord.messageSentAt(frame: Array(#"{"type":"message.created"},"type":"event"}"#.utf8)) == nil)
        #expect(EventRecord.messageSentAt(frame: []) == nil)
    }

    @Test func everyKindIsWrittenAsItWasAndTheSDKReadsItBackWhole() async throws {
        let records = try await Self.scriptedEvents()
        let record = ProcessInfo.processInfo.environment["PARLEY_RECORD_GOLDEN"] == "1"
        var names: [String: String] = [:]
        for event in records {
            let written = Self.normalized(Self.json(event), names: &names)
            let file = Self.fixtures.appendingPathComponent("\(event.type.rawValue).json")
            if record, !FileManager.default.fileExists(atPath: file.path) {
                try FileManager.default.createDirectory(at: Self.fixtures, withIntermediateDirectories: true)
                try (written + "\n").write(to: file, atomically: true, encoding: .utf8)
            }
            let golden = try String(contentsOf: file, encoding: .utf8).trimmingCharacters(in: .newlines)
            #expect(written == golden, "\(event.type.rawValue) is written differently from \(file.lastPathComponent)")
            // The SDK reads it and writes it back to the same bytes.
            let decoded = try WireCoding.decoder().decode(ConversationEvent.self, from: Data(Self.json(event).utf8))
            let again = String(decoding: try WireCoding.encoder().encode(decoded), as: UTF8.self)
            #expect(again == Self.json(event), "\(event.type.rawValue) \(again) VS \(Self.json(event))")
        }
        let made = Set(records.map(\.type.rawValue))
        let kept = Set(try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path).map { String($0.dropLast(5)) })
        #expect(made == kept, "a kind with a fixture was not made, or the reverse: \(made.symmetricDifference(kept))")
    }
}
