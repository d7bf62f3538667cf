import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Moderation (issue 19), on both engines: bans with expiry, moderators' mutes, slow mode,
/// shadow bans, blocks and reports — who may, what each side sees, and the events with their actor.
struct ModerationDomainTests {
    private func text(_ chat: Chat, _ caller: Caller, _ room: ConversationID, _ text: String) async throws -> Message {
        try await chat.send(caller, to: room, SendMessageRequest(clientID: UUID().uuidString, content: .text(text))).0
    }

    @Test func aBanRemovesAtOnceKeepsOutUntilItEndsAndOnlyModeratorsBan() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let owner = try await harness.register("owner").caller
        let admin = try await harness.register("admin").caller
        let bob = try await harness.register("bob").caller
        let channel = try await chat.createConversation(owner, CreateConversationRequest(kind: .public, title: "town")).0.id
        for person in [admin, bob] { _ = try await chat.join(person, id: channel) }
        _ = try await chat.updateMember(owner, id: channel, user: admin.userID, UpdateMemberRequest(role: .admin))
        #expect(await code { _ = try await chat.moderation.ban(bob, conversation: channel, BanRequest(userID: admin.userID)) } == "forbidden")
        #expect(await code { _ = try await chat.moderation.ban(admin, conversation: channel, BanRequest(userID: owner.userID)) } == "forbidden")
        let position = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        let ban = try await chat.moderation.ban(admin, conversation: channel, BanRequest(userID: bob.userID, until: harness.clock.now.addingTimeInterval(60),
                                                                               reason: "spam links"))
        #expect(ban.user.id == bob.userID && ban.bannedBy == admin.userID && ban.reason == "spam links")
        // Bob's devices get the ban, then the removal, and nothing of the channel after it.
        let seen = try await chat.feed(bob, after: chat.cursor(through: position), limit: 100).page().events
        #expect(seen.map(\.type) == [.memberBanned, .memberRemoved] && seen.first?.actorID == admin.userID && seen.first?.reason == "spam links")
        #expect(seen.first?.until != nil)
        _ = try await text(chat, owner, channel, "after the ban")
        #expect(try await chat.feed(bob, after: chat.cursor(through: seen.last?.position ?? 0), limit: 100).records.isEmpty)
        #expect(await code { _ = try await chat.join(bob, id: channel) } == "user_banned")
        #expect(await code { _ = try await chat.addMembers(owner, id: channel, AddMembersRequest(usernames: ["bob"])) } == "user_banned")
        #expect(try await chat.moderation.bans(owner, conversation: channel).bans.map(\.user.username) == ["bob"])
        #expect(await code { _ = try await chat.moderation.bans(bob, conversation: channel) } == "user_banned", "nor does he read the channel")
        #expect(await code { _ = try await chat.history(bob, id: channel, HistoryQuery()) } == "user_banned")
        // It ends by itself …
        harness.clock.advance(by: 61)
        _ = try await chat.join(bob, id: channel)
        // … or when lifted.
        _ = try await chat.moderation.ban(owner, conversation: channel, BanRequest(userID: bob.userID))
        try await chat.moderation.unban(owner, conversation: channel, user: bob.userID)
        _ = try await chat.join(bob, id: channel)
        let events = try await chat.feed(owner, after: chat.cursor(through: 0), limit: 200).page().events.map(\.type)
        #expect(events.contains(.memberUnbanned))
    }

    @Test func aMutedMemberReadsButCannotPostAndSlowModeSpacesPosts() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let owner = try await harness.register("owner").caller
        let bob = try await harness.register("bob").caller
        let room = try await chat.createConversation(owner, CreateConversationRequest(kind: .group, members: ["bob"], title: "g")).0.id
        let muted = try await chat.moderation.muteMember(owner, conversation: room, user: bob.userID, MuteMemberRequest(until: harness.clock.now.addingTimeInterval(30)))
        #expect(muted.mutedUntil != nil)
        #expect(await code { _ = try await text(chat, bob, room, "let me talk") } == "member_muted")
        _ = try await text(chat, owner, room, "you can read this")
        #expect(try await chat.history(bob, id: room, HistoryQuery()).page().messages.last?.content == .text("you can read this"))
        harness.clock.advance(by: 31)
        _ = try await text(chat, bob, room, "back")
        _ = try await chat.moderation.muteMember(owner, conversation: room, user: bob.userID, MuteMemberRequest())
        #expect(await code { _ = try await text(chat, bob, room, "again?") } == "member_muted")
        #expect(try await chat.moderation.unmuteMember(owner, conversation: room, user: bob.userID).mutedUntil == nil)
        #expect(await code { _ = try await chat.moderation.muteMember(bob, conversation: room, user: owner.userID, MuteMemberRequest()) } == "forbidden")
        let kinds = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).page().events.map(\.type)
        #expect(kinds.filter { $0 == .memberMuted }.count == 2 && kinds.contains(.memberUnmuted))

        // Slow mode: one message per 10 s for members; owners are exempt; the event says it.
        let updated = try await chat.updateConversation(owner, id: room, UpdateConversationRequest(slowModeSeconds: 10))
        #expect(updated.slowModeSeconds == 10)
        #expect(try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).page().events.last?.slowModeSeconds == 10)
        harness.clock.advance(by: 11)
        _ = try await text(chat, bob, room, "one")
        harness.clock.advance(by: 4)
        do {
            _ = try await text(chat, bob, room, "two")
            Issue.record("slow mode let a second message through")
        } catch let error as ChatError {
            #expect(error.code == "rate_limited" && error.retryAfterSeconds == 6)
        }
        _ = try await text(chat, owner, room, "owners are exempt")
        _ = try await text(chat, owner, room, "twice")
        harness.clock.advance(by: 6)
        _ = try await text(chat, bob, room, "two")
        #expect(await code { _ = try await chat.updateConversation(owner, id: room, UpdateConversationRequest(slowModeSeconds: 3601)) } == "invalid_request")
        #expect(await code { _ = try await chat.updateConversation(bob, id: room, UpdateConversationRequest(slowModeSeconds: 0)) } == "forbidden")
    }

    @Test func aShadowBannedUsersAndABlockedUsersMessagesReachOnlyThemselves() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let mallory = try await harness.register("mallory").caller
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob", "mallory"], title: "g")).0.id
        let server = try await chat.backend.authenticateApp(secret: try #require(try await chat.backend.rotateSecret(app: "test", grace: .zero).secret))
        let position = try await chat.feed(bob, after: chat.cursor(through: 0), limit: 200).records.last?.position ?? 0
        try await chat.moderation.setShadowBan(server, username: "mallory", banned: true)
        let hidden = try await text(chat, mallory, room, "buy cheap stuff @bob")
        #expect(hidden.mentions == nil, "a shadow message mentions nobody")
        #expect(try await chat.history(mallory, id: room, HistoryQuery()).page().messages.map(\.id).contains(hidden.id), "she sees it")
        #expect(try await chat.history(bob, id: room, HistoryQuery()).page().messages.map(\.id).contains(hidden.id) == false)
        #expect(try await chat.feed(bob, after: chat.cursor(through: position), limit: 100).records.isEmpty)
        #expect(try await chat.feed(mallory, after: chat.cursor(through: position), limit: 100).records.map(\.message?.id) == [hidden.id.rawValue])
        #expect(await code { _ = try await chat.message(bob, conversation: room, message: hidden.id) } == "message_not_found")
        #expect(try await chat.conversation(bob, id: room).unreadCount == 0)
        #expect(try await chat.annotations.mentions(bob, before: nil, limit: nil).messages.isEmpty)
        try await chat.moderation.setShadowBan(server, username: "mallory", banned: false)
        let seen = try await text(chat, mallory, room, "sorry")
        #expect(try await chat.history(bob, id: room, HistoryQuery()).page().messages.last?.id == seen.id)

        // Blocks: in a direct chat, the blocker gets nothing from the blocked person.
        let direct = try await chat.createConversation(alice, CreateConversationRequest(kind: .direct, members: ["bob"])).0.id
        try await chat.moderation.block(bob, user: alice.userID)
        try await chat.moderation.block(bob, user: alice.userID)
        #expect(try await chat.moderation.blocks(bob).users.map(\.username) == ["alice"])
        let unseen = try await text(chat, alice, direct, "hello?")
        #expect(try await chat.history(alice, id: direct, HistoryQuery()).page().messages.last?.id == unseen.id)
        #expect(try await chat.history(bob, id: direct, HistoryQuery()).page().messages.contains { $0.id == unseen.id } == false)
        _ = try await text(chat, bob, direct, "bob can still write")
        try await chat.moderation.unblock(bob, user: alice.userID)
        let later = try await text(chat, alice, direct, "now?")
        #expect(try await chat.history(bob, id: direct, HistoryQuery()).page().messages.last?.id == later.id)
        #expect(await code { try await chat.moderation.block(bob, user: bob.userID) } == "invalid_request")
    }

    @Test func reportsQueueForModeratorsAndAResolutionActsAndIsRecorded() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let owner = try await harness.register("owner").caller
        let bob = try await harness.register("bob").caller
        let carol = try await harness.register("carol").caller
        let channel = try await chat.createConversation(owner, CreateConversationRequest(kind: .public, title: "town")).0.id
        for person in [bob, carol] { _ = try await chat.join(person, id: channel) }
        let rude = try await text(chat, bob, channel, "you are all idiots")
        let report = try await chat.moderation.report(carol, conversation: channel, message: rude.id, ReportRequest(reason: .abuse, note: "insults"))
        #expect(report.id.hasPrefix("rp_") && report.state == "open" && report.reporter.id == carol.userID)
        #expect(await code { _ = try await chat.moderation.report(carol, conversation: channel, message: rude.id, ReportRequest(reason: .spam)) } == "conflict")
        #expect(await code { _ = try await chat.moderation.report(carol, conversation: channel, message: rude.id, ReportRequest(reason: .other, note: String(repeating: "x", count: 1001))) }
                == "invalid_request")
        _ = try await chat.moderation.report(owner, conversation: channel, message: rude.id, ReportRequest(reason: .abuse))
        #expect(await code { _ = try await chat.moderation.reports(carol, conversation: channel, resolved: false, after: nil, limit: nil) } == "forbidden")
        let queue = try await chat.moderation.reports(owner, conversation: channel, resolved: false, after: nil, limit: 1)
        #expect(queue.reports.map(\.id) == [report.id] && queue.hasMore)
        let resolved = try await chat.moderation.resolveReport(owner, conversation: channel, report: report.id,
                                                    ResolveReportRequest(resolution: .authorBanned, note: "third time"))
        #expect(resolved.state == "resolved" && resolved.resolution == .authorBanned && resolved.resolvedBy == owner.userID)
        #expect(resolved.message.deletedAt != nil, "the message was deleted")
        #expect(try await chat.moderation.reports(owner, conversation: channel, resolved: false, after: nil, limit: nil).reports.isEmpty,
                "both reports of the message were settled")
        #expect(await code { _ = try await chat.join(bob, id: channel) } == "user_banned")
        #expect(await code { _ = try await chat.moderation.resolveReport(owner, conversation: channel, report: report.id, ResolveReportRequest(resolution: .dismissed)) }
                == "conflict")
        #expect(await code { _ = try await chat.moderation.resolveReport(owner, conversation: channel, report: "rp_nope", ResolveReportRequest(resolution: .dismissed)) }
                == "report_not_found")
    }
}
