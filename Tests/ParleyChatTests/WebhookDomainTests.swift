import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// The server API's domain and the webhook lanes, on both engines; on PostgreSQL also two
/// nodes claiming lanes at once.
struct WebhookDomainTests {
    /// A harness with webhooks on, and a backend of its own app.
    private func backend() async throws -> (ChatHarness, ServerApp) {
        let harness = try await ChatHarness.make(hooks: [WebhookHook()], configure: { $0.webhooksAllowPrivate = true })
        let credentials = try await harness.chat.createApp(name: "backend")
        return (harness, try await harness.chat.backend.authenticateApp(secret: credentials.secret ?? ""))
    }

    private func group(_ chat: Chat, _ server: ServerApp, _ names: [String]) async throws -> ConversationID {
        for name in names { _ = try await chat.backend.upsertUser(server, UpsertUserRequest(username: name)) }
        return try await chat.backend.createConversation(server, ServerCreateConversationRequest(kind: .group, title: "t", members: names)).0.id
    }

    private func send(_ chat: Chat, _ server: ServerApp, _ conversation: ConversationID, from: String, _ text: String) async throws -> Message {
        let sender = try await chat.backend.actingUser(server, username: from)
        return try await chat.send(sender, to: conversation, SendMessageRequest(clientID: UUID().uuidString, content: .text(text))).0
    }

    @Test func aLaneIsDeliveredInOrderAndItsHeadHoldsBackTheRest() async throws {
        let (harness, server) = try await backend()
        defer { harness.tearDown() }
        let chat = harness.chat
        let hook = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/h", events: [WebhookEventType(.messageCreated)]))
        let conversation = try await group(chat, server, ["ann", "ben"])
        var sent: [String] = []
        for index in 0..<5 { sent.append(try await send(chat, server, conversation, from: "ann", "m\(index)").id.rawValue) }
        let batches = try await chat.webhooks.claim(holder: "a", lanes: 4, perLane: 3, lease: .seconds(60))
        #expect(batches.count == 1 && batches[0].endpointID == hook.id)
        #expect(batches[0].deliveries.count == 3)
        #expect(try await chat.webhooks.claim(holder: "b", lanes: 4, perLane: 3, lease: .seconds(60)).isEmpty, "one worker per lane")
        // The head fails: it is retried later, and nothing behind it goes out meanwhile.
        let head = batches[0].deliveries[0]
        try await chat.webhooks.failed(head, lane: batches[0].lane, holder: "a", error: "HTTP 500", after: .seconds(5))
        #expect(try await chat.webhooks.claim(holder: "b", lanes: 4, perLane: 10, lease: .seconds(60)).isEmpty)
        #expect(try await chat.webhooks.nextDue() == harness.clock.now.addingTimeInterval(5))
        var state = try await chat.webhooks.endpoint(server, id: hook.id)
        #expect(state.failingSince != nil && state.lastError == "HTTP 500" && state.pending == 5)
        harness.clock.advance(by: 5)
        let again = try await chat.webhooks.claim(holder: "b", lanes: 4, perLane: 10, lease: .seconds(60))
        #expect(again.first?.deliveries.first?.id == head.id, "the same delivery, the same id")
        #expect(again.first?.deliveries.first?.item.attempts == 1 && again.first?.deliveries.count == 5)
        try await chat.webhooks.delivered(again[0].deliveries, lane: again[0].lane, holder: "b")
        state = try await chat.webhooks.endpoint(server, id: hook.id)
        #expect(state.pending == 0 && state.failingSince == nil)
        let order = again[0].deliveries.compactMap { delivery -> String? in
            guard case .object(let event)? = try? JSONValue.decode(String(decoding: delivery.data, as: UTF8.self)),
                  case .object(let message)? = event["message"], case .string(let id)? = message["id"] else { return nil }
            return id
        }
        #expect(order == sent)
    }

    @Test func aDeliveryThisNodeCouldNotAttemptIsPostponedWithoutCountingAgainstTheReceiver() async throws {
        let (harness, server) = try await backend()
        defer { harness.tearDown() }
        let chat = harness.chat
        let hook = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/h", events: [WebhookEventType(.messageCreated)]))
        let conversation = try await group(chat, server, ["eve", "fay"])
        _ = try await send(chat, server, conversation, from: "eve", "one")
        _ = try await send(chat, server, conversation, from: "eve", "two")
        let batch = try #require(try await chat.webhooks.claim(holder: "a", lanes: 1, perLane: 10, lease: .seconds(60)).first)
        try await chat.webhooks.postpone(batch.deliveries[0], lane: batch.lane, holder: "a", after: .seconds(1))
        #expect(try await chat.webhooks.claim(holder: "b", lanes: 1, perLane: 10, lease: .seconds(60)).isEmpty, "its head is not due yet")
        #expect(try await chat.webhooks.nextDue() == harness.clock.now.addingTimeInterval(1))
        let state = try await chat.webhooks.endpoint(server, id: hook.id)
        #expect(state.failingSince == nil && state.lastError == nil, "the receiver did nothing wrong")
        harness.clock.advance(by: 1)
        let again = try #require(try await chat.webhooks.claim(holder: "b", lanes: 1, perLane: 10, lease: .seconds(60)).first,
                                 "the claim was let go: another worker takes the lane")
        #expect(again.deliveries.map(\.id) == batch.deliveries.map(\.id))
        #expect(again.deliveries.allSatisfy { $0.item.attempts == 0 }, "no attempt counted")
    }

    @Test func aDeliveryOutOfAttemptsPausesItsEndpointUntilResumedAndReplayed() async throws {
        let (harness, server) = try await backend()
        defer { harness.tearDown() }
        let chat = harness.chat
        let hook = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/h", events: [WebhookEventType(.messageCreated), .userCreated]))
        let conversation = try await group(chat, server, ["cat", "dan"])
        _ = try await send(chat, server, conversation, from: "cat", "one")
        let batch = try #require(try await chat.webhooks.claim(holder: "a", lanes: 1, perLane: 10, lease: .seconds(60)).first)
        #expect(batch.deliveries.map(\.type) == ["user.created", "user.created", "message.created"])
        try await chat.webhooks.failed(batch.deliveries[0], lane: batch.lane, holder: "a", error: "timeout", after: nil)
        let paused = try await chat.webhooks.endpoint(server, id: hook.id)
        #expect(paused.pausedAt != nil && paused.failed == 1 && paused.pending == 2)
        #expect(try await chat.webhooks.claim(holder: "a", lanes: 1, perLane: 10, lease: .seconds(60)).isEmpty, "a paused endpoint is not tried")
        #expect(try await chat.webhooks.nextDue() == nil)
        let failed = try await chat.webhooks.deliveries(server, id: hook.id, failed: true, after: nil, limit: nil)
        #expect(failed.deliveries.map(\.id) == [batch.deliveries[0].id])
        #expect(try await chat.webhooks.replay(server, id: hook.id, delivery: failed.deliveries[0].id).replayed == 1)
        _ = try await chat.webhooks.update(server, id: hook.id, UpdateWebhookRequest(paused: false))
        let resumed = try #require(try await chat.webhooks.claim(holder: "a", lanes: 1, perLane: 10, lease: .seconds(60)).first)
        #expect(resumed.deliveries.map(\.id) == batch.deliveries.map(\.id), "the replayed one first, then the rest, in order")
        #expect(resumed.deliveries[0].item.attempts == 0)
    }

    @Test func onlyEndpointsThatHearAnEventGetIt_andAnotherAppsNever() async throws {
        let (harness, server) = try await backend()
        defer { harness.tearDown() }
        let chat = harness.chat
        let other = try await chat.backend.authenticateApp(secret: try await chat.createApp(name: "other").secret ?? "")
        let mine = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/a", events: [WebhookEventType(.messageEdited)]))
        _ = try await chat.webhooks.create(other, CreateWebhookRequest(url: "http://127.0.0.1:9/b", events: [WebhookEventType(.messageCreated), .userCreated]))
        let conversation = try await group(chat, server, ["eve", "fay"])
        _ = try await send(chat, server, conversation, from: "eve", "hello")
        let rows = try await harness.store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM outbox WHERE kind = 'webhook'") }
        #expect(rows == 0, "no endpoint of this app hears message.created; the other app's hears nothing of this one")
        await #expect(throws: ChatError.webhookNotFound) { try await chat.webhooks.endpoint(other, id: mine.id) }
        await #expect(throws: ChatError.webhookNotFound) { try await chat.webhooks.replay(other, id: mine.id, delivery: nil) }
    }

    @Test(.enabled(if: TestEngine.isPostgres, "two nodes need PostgreSQL (SQLite has one)"))
    func nodesClaimingLanesAtOnceNeverShareOne() async throws {
        let (harness, server) = try await backend()
        defer { harness.tearDown() }
        let other = try #require(try await harness.anotherNode())
        defer { other.store.close() }
        let chat = harness.chat
        for index in 0..<6 { _ = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/\(index)", events: [.userCreated])) }
        for index in 0..<20 { _ = try await chat.backend.upsertUser(server, UpsertUserRequest(username: "user\(index)")) }
        let nodes = [("a", chat), ("b", other.chat)]
        let delivered = try await withThrowingTaskGroup(of: [(Int64, String)].self) { group in
            for (name, node) in nodes {
                for worker in 0..<3 {
                    group.addTask {
                        var mine: [(Int64, String)] = []
                        var idle = 0
                        while idle < 3 {
                            let batches = try await node.webhooks.claim(holder: "\(name)/\(worker)", lanes: 1, perLane: 4, lease: .seconds(60))
                            if batches.isEmpty { idle += 1; try await Task.sleep(for: .milliseconds(5)); continue }
                            idle = 0
                            for batch in batches {
                                mine += batch.deliveries.map { (batch.lane, $0.id) }
                                try await node.webhooks.delivered(batch.deliveries, lane: batch.lane, holder: "\(name)/\(worker)")
                            }
                        }
                        return mine
                    }
                }
            }
            return try await group.reduce(into: [(Int64, String)]()) { $0 += $1 }
        }
        #expect(delivered.count == 120 && Set(delivered.map(\.1)).count == 120, "every delivery once")
        let remaining = try await harness.store.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM outbox WHERE kind = 'webhook'") }
        #expect(remaining == 0)
    }

    @Test func theServerAPIsUsersSessionsAndSystemMessages() async throws {
        let (harness, server) = try await backend()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (created, isNew) = try await chat.backend.upsertUser(server, UpsertUserRequest(username: "gus", displayName: "Gus"))
        #expect(isNew && created.user.displayName == "Gus")
        let (updated, again) = try await chat.backend.upsertUser(server, UpsertUserRequest(username: "GUS", customData: .object(["a": .number(1)])))
        #expect(!again && updated.user.id == created.user.id && updated.user.displayName == "Gus")
        let session = try await chat.backend.issueSession(server, username: "gus", IssueSessionRequest(expiresInSeconds: 600))
        let caller = try await chat.authenticate(token: session.session.token ?? "", app: server.app)
        #expect(caller.userID == created.user.id)
        await #expect(throws: ChatError.invalidAppSecret) { try await chat.backend.authenticateApp(secret: "sk_wrong_wrong_wrong") }
        _ = try await chat.backend.setDeactivated(server, username: "gus", true)
        await #expect(throws: ChatError.unauthenticated) { try await chat.authenticate(token: session.session.token ?? "", app: server.app) }
        await #expect(throws: ChatError.userDeactivated) { try await chat.backend.issueSession(server, username: "gus", IssueSessionRequest()) }
        _ = try await chat.backend.setDeactivated(server, username: "gus", false)
        let conversation = try await group(chat, server, ["hal"])
        let notice = try await chat.send(server.caller, to: conversation, SendMessageRequest(clientID: "n1", content: .system("welcome"))).0
        #expect(notice.content == .system("welcome") && notice.sender.username == "$system")
        let hal = try await chat.backend.actingUser(server, username: "hal")
        await #expect {
            try await chat.send(hal, to: conversation, SendMessageRequest(clientID: "n2", content: .system("fake")))
        } throws: { ($0 as? ChatError)?.code == "forbidden" }
        // Rotation: the old secret works for the grace period only.
        let old = try await chat.createApp(name: "rotating")
        _ = try await chat.backend.rotateSecret(app: "rotating", grace: .seconds(60))
        _ = try await chat.backend.authenticateApp(secret: old.secret ?? "")
        harness.clock.advance(by: 61)
        await #expect(throws: ChatError.invalidAppSecret) { try await chat.backend.authenticateApp(secret: old.secret ?? "") }
    }
}
