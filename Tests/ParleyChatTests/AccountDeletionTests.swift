import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyWire
import Testing

/// Deleting an account (`DELETE /v1/me`, App Store guideline 5.1.1(v)), on both engines.
struct AccountDeletionTests {
    private func count(_ harness: ChatHarness, _ sql: SQL) async throws -> Int {
        try await harness.store.read { db in try db.fetchValue(Int.self, sql) ?? -1 }
    }

    @Test func aUserDeletesTheirAccountWithThePassword_andEraseLeavesOnlyTombstones() async throws {
        let harness = try await ChatHarness.make(hooks: [WebhookHook()], configure: { $0.webhooksAllowPrivate = true })
        defer { harness.tearDown() }
        let chat = harness.chat
        let server = try await chat.backend.authenticateApp(secret: try await chat.createApp(name: "backend").secret ?? "")
        _ = try await chat.webhooks.create(server, CreateWebhookRequest(url: "http://127.0.0.1:9/h", events: [.userDeleted]))
        func register(_ name: String) async throws -> (Caller, String) {
            let signedIn = try await chat.register(RegisterRequest(username: name, password: "correct horse battery"), app: server.app, address: "10.0.0.9")
            let token = signedIn.session.token ?? ""
            return (try await chat.authenticate(token: token, app: server.app), token)
        }
        let (ana, anaToken) = try await register("ana")
        let (bob, _) = try await register("bob")
        let group = try await chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob"], title: "g")).0.id
        let direct = try await chat.createConversation(bob, CreateConversationRequest(kind: .direct, members: ["ana"])).0.id
        var said: [MessageID] = []
        for index in 0..<3 {
            said.append(try await chat.send(ana, to: group, SendMessageRequest(clientID: "g\(index)", content: .text("zebra crossing \(index)"))).0.id)
        }
        said.append(try await chat.send(ana, to: direct, SendMessageRequest(clientID: "d", content: .text("zebra in private"))).0.id)
        _ = try await chat.send(bob, to: group, SendMessageRequest(clientID: "b", content: .text("zebra from bob")))
        _ = try await chat.notifications.register(ana, RegisterDeviceRequest(platform: .apns, token: String(repeating: "ab", count: 32)))
        #expect(try await chat.search(bob, query: "zebra", conversation: nil, limit: nil).messages.count == 5)
        let position = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0

        // Nothing happens without the password, or with a wrong one.
        await #expect(throws: ChatError.self) { try await chat.deleteAccount(ana, DeleteAccountRequest(erase: true), address: "10.0.0.1") }
        await #expect(throws: ChatError.wrongCredentials) {
            try await chat.deleteAccount(ana, DeleteAccountRequest(password: "wrong horse battery", erase: true), address: "10.0.0.1")
        }
        #expect(try await chat.authenticate(token: anaToken, app: server.app).userKey == ana.userKey)

        try await chat.deleteAccount(ana, DeleteAccountRequest(password: "correct horse battery", erase: true), address: "10.0.0.1")

        // Signed out, no push devices, the username free, the face and names gone.
        await #expect(throws: ChatError.unauthenticated) { try await chat.authenticate(token: anaToken, app: server.app) }
        #expect(try await count(harness, "SELECT count(*) FROM push_device WHERE user_id = \(ana.userKey)") == 0)
        #expect(try await count(harness, "SELECT count(*) FROM session WHERE user_id = \(ana.userKey)") == 0)
        await #expect(throws: ChatError.wrongCredentials) {
            try await chat.signIn(SignInRequest(username: "ana", password: "correct horse battery", device: "d"), app: server.app, address: "10.0.0.2")
        }
        let (newAna, _) = try await register("ana")
        #expect(newAna.userKey != ana.userKey, "the username is free for someone new")

        // Bob sees tombstones by "Deleted user", and finds nothing of hers.
        let history = try await chat.history(bob, id: group, HistoryQuery()).page().messages
        let hers = history.filter { said.contains($0.id) }
        #expect(hers.count == 3 && hers.allSatisfy { $0.deletedAt != nil && $0.content == nil && $0.sender.displayName == "Deleted user" })
        #expect(try await chat.search(bob, query: "zebra", conversation: nil, limit: nil).messages.map(\.content) == [.text("zebra from bob")])
        let events = try await chat.feed(bob, after: chat.cursor(through: position), limit: 200).page().events
        #expect(events.filter { $0.type == .messageDeleted }.count == 4)
        #expect(events.contains { $0.type == .memberRemoved && $0.conversationID == group })
        #expect(try await chat.conversation(bob, id: direct).kind == .direct, "bob keeps the direct conversation")

        // The app's backend hears it, once, with the old username.
        let batch = try #require(try await chat.webhooks.claim(holder: "a", lanes: 1, perLane: 10, lease: .seconds(60)).first)
        #expect(batch.deliveries.map(\.type) == ["user.deleted"])
        let notice = try JSONValue.decode(String(decoding: batch.deliveries[0].data, as: UTF8.self))
        guard case .object(let data) = notice else { Issue.record("not an object"); return }
        #expect(data["username"] == .string("ana") && data["id"] == .string(ana.userID.rawValue) && data["erased"] == .bool(true)
                && data["deletedBy"] == .string("user"))
    }

    @Test func anAccountWithoutAPasswordNeedsARecentSession_butAGuestOnlyItsOwn() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let server = try await chat.backend.authenticateApp(secret: try await chat.createApp(name: "backend").secret ?? "")
        _ = try await chat.backend.upsertUser(server, UpsertUserRequest(username: "byo"))
        let issued = try await chat.backend.issueSession(server, username: "byo", IssueSessionRequest())
        let byo = try await chat.authenticate(token: issued.session.token ?? "", app: server.app)
        harness.clock.advance(by: 11 * 60)
        await #expect(throws: ChatError.recentSignInRequired) { try await chat.deleteAccount(byo, DeleteAccountRequest(), address: "10.0.0.1") }
        let fresh = try await chat.backend.issueSession(server, username: "byo", IssueSessionRequest())
        let again = try await chat.authenticate(token: fresh.session.token ?? "", app: server.app)
        try await chat.deleteAccount(again, DeleteAccountRequest(), address: "10.0.0.1")
        await #expect(throws: ChatError.userNotFound) { try await chat.backend.user(server, username: "byo") }

        let guest = try await chat.signInAsGuest(GuestSignInRequest(displayName: "Visitor", device: "web"), app: harness.app, address: "10.0.0.3")
        let caller = try await chat.authenticate(token: guest.session.token ?? "", app: harness.app)
        harness.clock.advance(by: 3600)
        try await chat.deleteAccount(caller, DeleteAccountRequest(), address: "10.0.0.3")
        await #expect(throws: ChatError.unauthenticated) { try await chat.authenticate(token: guest.session.token ?? "", app: harness.app) }
    }

    @Test func erasingMoreMessagesThanOneBatchLeavesNone() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let (ana, _) = try await harness.register("ana")
        _ = try await harness.register("bob")
        let group = try await chat.createConversation(ana, CreateConversationRequest(kind: .group, members: ["bob"], title: "g")).0.id
        for index in 0..<(Chat.eraseBatch + 7) {
            _ = try await chat.send(ana, to: group, SendMessageRequest(clientID: "m\(index)", content: .text("line \(index)")))
        }
        try await chat.deleteAccount(ana, DeleteAccountRequest(password: "correct horse battery", erase: true), address: "10.0.0.1")
        #expect(try await count(harness, "SELECT count(*) FROM message WHERE author_id = \(ana.userKey) AND content IS NOT NULL") == 0)
        #expect(try await count(harness, "SELECT count(*) FROM message WHERE author_id = \(ana.userKey) AND deleted_at IS NOT NULL")
                == Chat.eraseBatch + 7)
    }
}
