import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Delivery traces on both engines (docs/trace.md): steps written once and read back per
/// recipient, why no push went, the sweep, and a recorder that cannot grow without bound.
struct TraceDomainTests {
    private static func server(_ harness: ChatHarness) async throws -> ServerApp {
        let secret = try #require(try await harness.chat.backend.rotateSecret(app: "test", grace: .zero).secret)
        return try await harness.chat.backend.authenticateApp(secret: secret)
    }

    @Test func aSendsStepsAreWrittenOnceAndReadBackPerRecipientUntilTheSweep() async throws {
        let harness = try await ChatHarness.make(bus: InProcessBus(), hooks: [PushOutboxHook(confirmationWindow: .zero)]) {
            $0.nodeName = "node-1"
        }
        defer { harness.tearDown() }
        let chat = harness.chat
        let server = try await Self.server(harness)
        let ana = try await harness.register("ana").caller
        let bob = try await harness.register("bob").caller
        let cy = try await harness.register("cyd").caller
        let room = try await chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob", "cyd"], title: "t")).0.id
        _ = try await chat.notifications.register(bob, RegisterDeviceRequest(platform: .apns, token: String(repeating: "ab", count: 32)))
        _ = try await chat.notifications.mute(cy, conversation: room, MuteRequest())
        let (message, _) = try await chat.send(ana, to: room, SendMessageRequest(clientID: "t1", content: .text("hello")))
        // Bob's device marks it delivered and read (one receipt write, traced per session).
        _ = try await chat.updateReceipt(bob, conversation: room, ReceiptUpdate(deliveredSeq: message.seq, readSeq: message.seq))
        // The push worker's expansion: Bob's device queued, Cy skipped (muted).
        let rows = try await chat.claimOutbox(kind: PushOutboxHook.kind, holder: "x", limit: 10, lease: .seconds(30))
        #expect(try await chat.notifications.expand(rows, holder: "x") == 0, "Bob's receipt came first: delivered, not pushed")
        #expect(try await chat.tracing.flush() > 0)
        #expect(try await chat.tracing.flush() == 0, "written once")

        let trace = try await chat.tracing.trace(server, message: message.id)
        #expect(trace.committedOn == "node-1" && trace.seq == message.seq && trace.authorId == ana.userID && !trace.shadow)
        #expect(Set(trace.recipients.map(\.userId)) == [bob.userID, cy.userID])
        let bobs = try #require(trace.recipients.first { $0.userId == bob.userID })
        #expect(bobs.notPushed == "delivered" && bobs.outcome == "not_pushed")
        let receipt = try #require(bobs.steps.first { $0.step == "receipt" })
        #expect(receipt.deliveredSeq == message.seq && receipt.readSeq == message.seq && receipt.node == "node-1")
        let cys = try #require(trace.recipients.first { $0.userId == cy.userID })
        #expect(cys.notPushed == "muted" && cys.steps.map(\.step) == ["push.skipped"])
        // Another app's backend sees nothing of it.
        _ = try await chat.createApp(name: "other")
        let otherServer = try await chat.backend.authenticateApp(secret: try #require(try await chat.backend.rotateSecret(app: "other", grace: .zero).secret))
        #expect(await code { _ = try await chat.tracing.trace(otherServer, message: message.id) } == "message_not_found")

        // A day and an hour later the sweep removes every step; the message stays.
        harness.clock.advance(by: 25 * 3600)
        #expect(try await chat.tracing.sweep() > 0)
        let swept = try await chat.tracing.trace(server, message: message.id)
        #expect(swept.committedOn == nil && swept.recipients.allSatisfy { $0.steps.isEmpty })
    }

    /// The fan-out's step: one row per message and node naming each device it reached, the
    /// first ones of a large audience, counting the rest.
    @Test func theFanoutNamesEachDeviceItReachedUpToItsCap() async throws {
        let bus = InProcessBus()
        let harness = try await ChatHarness.make(bus: bus) { $0.nodeName = "node-f" }
        defer { harness.tearDown() }
        let fanout = Fanout<[UInt8]>(chat: harness.chat, bus: bus, presenceGrace: .seconds(60), tracedDevicesPerMessage: 2) { $0 }
        let server = try await Self.server(harness)
        let (ana, _) = try await harness.register("ana")
        var members: [Caller] = []
        for name in ["bob", "cyd", "dee"] { members.append(try await harness.register(name).caller) }
        let probes = members.map { RealtimeDomainTests.Probe($0) }
        for probe in probes { try await fanout.attach(probe.subscriber) }
        let room = try await harness.chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob", "cyd", "dee"])).0.id
        let (message, _) = try await harness.chat.send(ana, to: room, SendMessageRequest(clientID: "t", content: .text("hi")))
        for probe in probes { _ = try await probe.nextEvent { $0.type == .messageCreated } }
        _ = try await harness.chat.tracing.flush()
        let trace = try await harness.chat.tracing.trace(server, message: message.id)
        let routed = trace.recipients.flatMap { recipient in recipient.steps.filter { $0.step == "routed" }.map { (recipient.userId, $0) } }
        #expect(routed.count == 2, "the first two of three devices are named")
        #expect(routed.allSatisfy { $0.1.node == "node-f" && $0.1.session?.hasPrefix("s_") == true })
        #expect(routed.allSatisfy { $0.1.reason?.hasPrefix("3 devices reached on this node") == true })
        #expect(Set(routed.map(\.0)).isSubset(of: Set(members.map(\.userID))))
        #expect(trace.recipients.filter { $0.outcome == "socket" }.count == 2)
    }

    @Test func aFlushWritesEveryRowInOneStatementAsRecordedMissingValuesAndAwkwardTextIncluded() async throws {
        let harness = try await ChatHarness.make { $0.nodeName = "node \"quoted\" \\ é" }
        defer { harness.tearDown() }
        let recorder = harness.chat.traceRecorder
        let awkward = "quote \" backslash \\ newline \n tab \t emoji 👋 nul-free ' apostrophe"
        var rows: [TraceRecorder.Row] = []
        for index in 0..<150 {
            let step = index % 2 == 0 ? "committed" : "routed"
            rows.append(TraceRecorder.Row(position: Int64(index + 1), step: step, at: Int64(1_000 + index)))
        }
        rows.append(TraceRecorder.Row(position: 7, conversation: 42, step: "receipt", user: 3, session: 4, device: "apns:\(awkward)",
                                      devices: "1:2,3:4:5:6", at: 2_000, detail: awkward))
        recorder.record(rows)
        #expect(try await harness.chat.tracing.flush() == rows.count)
        let stored = try await harness.store.read { db in
            try db.fetchAll("""
                SELECT position, conversation_id, step, user_id, session_id, device, devices, node, at, detail FROM delivery_trace ORDER BY id
                """).map { (row: Row) throws -> TraceRecorder.Row in
                let position: Int64 = try row.get("position")
                let conversation: Int64? = try row.get("conversation_id")
                let step: String = try row.get("step")
                let user: Int64? = try row.get("user_id")
                let session: Int64? = try row.get("session_id")
                let device: String? = try row.get("device")
                let devices: String? = try row.get("devices")
                let at: Int64 = try row.get("at")
                let detail: String? = try row.get("detail")
                return TraceRecorder.Row(position: position, conversation: conversation, step: step, user: user, session: session,
                                         device: device, devices: devices, at: at, detail: detail)
            }
        }
        #expect(stored == rows, "every row back as recorded, in order")
        let nodes = try await harness.store.read { db in try db.fetchAll("SELECT DISTINCT node FROM delivery_trace").map { try $0.get("node", as: String.self) } }
        #expect(nodes == ["node \"quoted\" \\ é"])
    }

    @Test func withTracingOffNothingIsRecorded() async throws {
        let harness = try await ChatHarness.make(bus: InProcessBus()) { $0.traceRetention = nil }
        defer { harness.tearDown() }
        let (ann, _, room) = try await harness.twoInAGroup()
        _ = try await harness.chat.send(ann, to: room, SendMessageRequest(clientID: "t1", content: .text("x")))
        #expect(!harness.chat.tracing.isOn)
        #expect(try await harness.chat.tracing.flush() == 0)
        #expect(try await harness.chat.tracing.sweep() == 0)
    }

    @Test func theRecorderDropsPastItsCapacityAndCountsWhatItDropped() {
        let recorder = TraceRecorder(isOn: true, node: "n", capacity: 3)
        recorder.record((1...2).map { TraceRecorder.Row(position: $0, step: "routed", at: 0) })
        recorder.record((3...5).map { TraceRecorder.Row(position: $0, step: "routed", at: 0) })
        #expect(recorder.dropped == 2)
        let taken = recorder.take()
        #expect(taken.map(\.position) == [1, 2, 3])
        recorder.record(TraceRecorder.Row(position: 9, step: "routed", at: 0))
        recorder.putBack(taken)
        #expect(recorder.take().map(\.position) == [1, 2, 9], "a failed write's steps go first, as room allows")
        #expect(recorder.dropped == 3)
        let off = TraceRecorder(isOn: false, node: "n")
        off.record(TraceRecorder.Row(position: 1, step: "routed", at: 0))
        #expect(off.take().isEmpty)
    }
}
