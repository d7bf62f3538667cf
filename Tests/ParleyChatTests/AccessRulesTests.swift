import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Who may do what (docs/access.md, issue 27): the one table, the page that documents it, and
/// the three paths that once decided on their own — each test fails on the build before the
/// rules were decided in one place. Domain tests run on both engines.
struct AccessRulesTests {
    // MARK: - The table

    @Test func docsAccessMdShowsTheTableTheCodeDecidesBy() throws {
        let page = try String(contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/access.md").standardized.path, encoding: .utf8)
        let begin = "<!-- access-table:begin -->\n", end = "\n<!-- access-table:end -->"
        let start = try #require(page.range(of: begin)), stop = try #require(page.range(of: end))
        let documented = String(page[start.upperBound..<stop.lowerBound])
        #expect(documented == AccessRules.markdownTable(),
                "docs/access.md's table differs from AccessRules; paste AccessRules.markdownTable() between the markers:\n\(AccessRules.markdownTable())")
    }

    @Test(arguments: ConversationKind.allCases)
    func nobodyOutsideAPublicChannelLearnsItExists(_ kind: ConversationKind) {
        for action in ConversationAction.allCases {
            let outsider = AccessRules.decide(action, in: kind, as: .outsider)
            let banned = AccessRules.decide(action, in: kind, as: .banned)
            if kind == .public {
                #expect(banned == .banned, "\(action): a ban holds for everything")
                #expect(outsider == ([.see, .read, .join].contains(action) ? .allow : .notMember), "\(action)")
            } else {
                #expect(outsider == .notFound && banned == .notFound, "\(action) in a \(kind.rawValue) conversation")
            }
        }
    }

    @Test(arguments: ConversationKind.allCases)
    func everyMemberReadsAndPostsAndOnlyModeratorsModerate(_ kind: ConversationKind) {
        for standing: Standing in [.app, .owner, .admin, .member] {
            for action: ConversationAction in [.see, .read, .post, .react, .report, .keepOwnState, .editOwnMessage, .deleteOwnMessage] {
                #expect(AccessRules.decide(action, in: kind, as: standing) == .allow, "\(standing) \(action) in \(kind)")
            }
            let moderates = kind == .direct ? false : standing != .member
            #expect((AccessRules.decide(.moderate, in: kind, as: standing) == .allow) == moderates, "\(standing) in \(kind)")
        }
        #expect(AccessRules.decide(.deleteOthersMessage, in: kind, as: .app) == .allow, "the app's backend deletes anything")
        #expect(AccessRules.decide(.editOthersMessage, in: kind, as: .owner) != .allow, "nobody edits another's words")
    }

    @Test func ranksOrderWhoActsOnWhom() {
        #expect(AccessRules.outranks(.owner, .owner) && AccessRules.outranks(.app, .owner))
        #expect(AccessRules.outranks(.admin, .member) && !AccessRules.outranks(.admin, .admin))
        #expect(!AccessRules.outranks(.member, .member) && !AccessRules.outranks(.outsider, .member))
    }

    // MARK: - The three defects of issue 27

    @Test func neitherPersonOfADirectChatSetsItsRetention() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ana = try await harness.register("ana").caller
        _ = try await harness.register("bob")
        let direct = try await chat.createConversation(ana, CreateConversationRequest(kind: .direct, members: ["bob"])).0
        let before = try await chat.feed(ana, after: chat.cursor(through: 0), limit: 200).records.count
        for days in [1, 0, -1] {
            #expect(await code { _ = try await chat.updateConversation(ana, id: direct.id, UpdateConversationRequest(retentionDays: days)) }
                    == "invalid_request", "retentionDays \(days)")
        }
        #expect(try await chat.conversation(ana, id: direct.id).retentionDays == nil)
        #expect(try await chat.feed(ana, after: chat.cursor(through: 0), limit: 200).records.count == before, "a refusal appends no event")
        // Custom data stays theirs; the app's backend, which owns the policy, may set one.
        _ = try await chat.updateConversation(ana, id: direct.id, UpdateConversationRequest(customData: .object(["pinned": .bool(true)])))
        let server = try await chat.backend.authenticateApp(secret: try #require(try await chat.backend.rotateSecret(app: "test", grace: .zero).secret))
        #expect(try await chat.updateConversation(server.caller, id: direct.id, UpdateConversationRequest(retentionDays: 7)).retentionDays == 7)
    }

    @Test func aBannedUserSeesNeitherTheChannelNorItsLastMessageInTheDirectory() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let owner = try await harness.register("owner").caller
        let bob = try await harness.register("bob").caller
        let carol = try await harness.register("carol").caller
        let channel = try await chat.createConversation(owner, CreateConversationRequest(kind: .public, title: "Town square")).0.id
        _ = try await chat.createConversation(owner, CreateConversationRequest(kind: .public, title: "Town hall"))
        _ = try await chat.join(bob, id: channel)
        _ = try await chat.moderation.ban(owner, conversation: channel, BanRequest(userID: bob.userID, until: harness.clock.now.addingTimeInterval(600)))
        let photo = try await harness.upload(owner, kind: .photo)
        _ = try await chat.send(owner, to: channel, SendMessageRequest(clientID: "p1", content: .photo(Attachment(attachmentID: photo.id,
                                                                                                                  caption: "after the ban"))))
        let shown = try await chat.listChannels(bob, query: "town", limit: 10, offset: nil).channels
        #expect(shown.map(\.title) == ["Town hall"], "the channel Bob is banned from is not listed to him")
        #expect(!shown.contains { $0.lastMessage != nil })
        #expect(await code { _ = try await chat.conversation(bob, id: channel) } == "user_banned")
        // Paging still steps over it without skipping or repeating another.
        let first = try await chat.listChannels(bob, query: "town", limit: 1, offset: nil)
        #expect(first.channels.map(\.title) == ["Town hall"] && first.nextOffset == nil)
        let carolSees = try await chat.listChannels(carol, query: "town", limit: 1, offset: nil)
        #expect(carolSees.channels.map(\.title) == ["Town hall"] && carolSees.nextOffset == 1)
        let next = try await chat.listChannels(carol, query: "town", limit: 1, offset: carolSees.nextOffset)
        #expect(next.channels.first?.lastMessage?.content != nil, "an outsider who is not banned reads a public channel")
        // When the ban ends, the channel is Bob's to see again.
        harness.clock.advance(by: 601)
        #expect(try await chat.listChannels(bob, query: "town", limit: 10, offset: nil).channels.count == 2)
    }

    @Test func aBannedUserDownloadsNoneOfTheChannelsAttachments() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let owner = try await harness.register("owner").caller
        let bob = try await harness.register("bob").caller
        let carol = try await harness.register("carol").caller
        let channel = try await chat.createConversation(owner, CreateConversationRequest(kind: .public, title: "pics")).0.id
        _ = try await chat.join(bob, id: channel)
        let before = try await harness.upload(owner, kind: .photo)
        _ = try await chat.send(owner, to: channel, SendMessageRequest(clientID: "b", content: .photo(Attachment(attachmentID: before.id))))
        #expect(try await chat.attachments.attachment(bob, id: before.id).info.id == before.id)
        _ = try await chat.moderation.ban(owner, conversation: channel, BanRequest(userID: bob.userID, until: harness.clock.now.addingTimeInterval(600)))
        let after = try await harness.upload(owner, kind: .photo)
        _ = try await chat.send(owner, to: channel, SendMessageRequest(clientID: "a", content: .photo(Attachment(attachmentID: after.id))))
        for id in [before.id, after.id] {
            #expect(await code { _ = try await chat.attachments.attachment(bob, id: id) } == "attachment_not_found", "banned: \(id)")
            #expect(try await chat.attachments.attachment(carol, id: id).info.id == id, "an outsider reads a public channel's files")
        }
        // Nor can he forward one he can no longer read.
        let group = try await chat.createConversation(bob, CreateConversationRequest(kind: .group, members: ["carol"], title: "g")).0.id
        #expect(await code {
            _ = try await chat.send(bob, to: group, SendMessageRequest(clientID: "f", content: .photo(Attachment(attachmentID: after.id))))
        } == "attachment_not_found")
        harness.clock.advance(by: 601)
        #expect(try await chat.attachments.attachment(bob, id: after.id).info.id == after.id, "the ban ended")
    }

    @Test func aShadowMessagesAttachmentIsItsAuthorsAlone() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let ana = try await harness.register("ana").caller
        let bob = try await harness.register("bob").caller
        let direct = try await chat.createConversation(bob, CreateConversationRequest(kind: .direct, members: ["ana"])).0.id
        try await chat.moderation.block(ana, user: bob.userID)
        let photo = try await harness.upload(bob, kind: .photo)
        _ = try await chat.send(bob, to: direct, SendMessageRequest(clientID: "s", content: .photo(Attachment(attachmentID: photo.id))))
        #expect(await code { _ = try await chat.attachments.attachment(ana, id: photo.id) } == "attachment_not_found")
        #expect(try await chat.attachments.attachment(bob, id: photo.id).info.id == photo.id)
    }
}
