import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Attachments in the domain: who may refer to them and download them, what a message says
/// about them, and when they become garbage.
struct MediaDomainTests {
    func room(_ harness: ChatHarness, _ owner: Caller, _ members: [String]) async throws -> Conversation {
        try await harness.chat.createConversation(owner, CreateConversationRequest(kind: .group, members: members)).0
    }

    @Test func oneHolderAtATimeClaimsAnUnfinishedUploadUntilItsLeaseRunsOut() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let chat = harness.chat
        let user = alice.userKey
        #expect(try await chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-a/1", lease: .seconds(10)))
        #expect(try await !chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-b/1", lease: .seconds(10)), "held by a")
        #expect(try await chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-a/1", lease: .seconds(10)), "a renews its own")
        #expect(try await chat.attachments.claimUpload(user: bob.userKey, clientID: "video", holder: "node-b/2", lease: .seconds(10)),
                "another account's upload of the same id is another upload")
        try await chat.attachments.releaseUpload(user: user, clientID: "video", holder: "node-b/1")  // not b's: nothing happens
        #expect(try await !chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-b/1", lease: .seconds(10)))
        try await chat.attachments.releaseUpload(user: user, clientID: "video", holder: "node-a/1")
        #expect(try await chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-b/1", lease: .seconds(10)))
        harness.clock.advance(by: 9.9)
        #expect(try await !chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-a/2", lease: .seconds(10)), "b's lease lasts")
        // b's lease runs out without renewal (b's node died): a may take it.
        harness.clock.advance(by: 0.2)
        #expect(try await chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-a/2", lease: .seconds(10)))
        try await chat.attachments.clearUploadClaims()
        #expect(try await chat.attachments.claimUpload(user: user, clientID: "video", holder: "node-c/1", lease: .seconds(10)))
    }

    @Test func aMessageCarriesWhatTheServerVerifiedNotWhatTheClientClaims() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        _ = try await harness.register("bob")
        let conversation = try await room(harness, alice, ["bob"])
        let photo = try await harness.upload(alice, kind: .photo, width: 4032, height: 3024, sizeBytes: 2_345_678)
        let lie = Attachment(attachmentID: photo.id, mimeType: "image/png", sizeBytes: 1, width: 1, height: 1, caption: "view")
        let (message, _) = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(clientID: "p", content: .photo(lie)))
        #expect(message.content == .photo(Attachment(attachmentID: photo.id, mimeType: "image/jpeg", sizeBytes: 2_345_678,
                                                     width: 4032, height: 3024, caption: "view")))
        // A retry with the same client content is the same send, not a conflict.
        let (retry, created) = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(clientID: "p", content: .photo(lie)))
        #expect(!created && retry.id == message.id)
    }

    @Test func unknownForeignOrWrongKindAttachmentsAreRefusedAndNothingIsSent() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (carol, _) = try await harness.register("carol")
        let conversation = try await room(harness, alice, ["bob"])
        let bobsPrivate = try await harness.upload(bob, kind: .photo)
        let audio = try await harness.upload(alice, kind: .audio)
        let cases: [(MessageContent, String)] = [
            (.photo(Attachment(attachmentID: "a_nothing")), "attachment_not_found"),
            (.photo(Attachment(attachmentID: bobsPrivate.id)), "attachment_not_found"),  // not shared with alice anywhere
            (.photo(Attachment(attachmentID: audio.id)), "invalid_request"),
            (.video(Attachment(attachmentID: audio.id)), "invalid_request"),
            (.file(Attachment(attachmentID: audio.id)), "invalid_request"),               // no name at upload or in the message
        ]
        for (content, code) in cases {
            await #expect(throws: ChatError.self) {
                do {
                    _ = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(clientID: UUID().uuidString, content: content))
                } catch let error as ChatError {
                    #expect(error.code == code, "\(content)")
                    throw error
                }
            }
        }
        await #expect(throws: ChatError.self) { _ = try await harness.chat.attachments.attachment(carol, id: audio.id) }
        #expect(try await harness.chat.history(alice, id: conversation.id, HistoryQuery()).records.isEmpty)
        // A video's thumbnail must be a photo.
        let video = try await harness.upload(alice, kind: .video)
        await #expect(throws: ChatError.self) {
            _ = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(
                clientID: "v", content: .video(Attachment(attachmentID: video.id, thumbnailID: audio.id))))
        }
    }

    @Test func membersDownloadAndForwardWhatTheirConversationsShow() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (bob, _) = try await harness.register("bob")
        let (carol, _) = try await harness.register("carol")
        let conversation = try await room(harness, alice, ["bob"])
        let file = try await harness.upload(alice, kind: .file, name: "plan.pdf")
        await #expect(throws: ChatError.self) { _ = try await harness.chat.attachments.attachment(bob, id: file.id) }
        let (message, _) = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(
            clientID: "f", content: .file(Attachment(attachmentID: file.id))))
        #expect(try await harness.chat.attachments.attachment(bob, id: file.id).info.name == "plan.pdf")
        await #expect(throws: ChatError.self) { _ = try await harness.chat.attachments.attachment(carol, id: file.id) }
        // Bob forwards it to Carol: now she may see it too.
        let direct = try await harness.chat.createConversation(bob, CreateConversationRequest(kind: .direct, members: ["carol"])).0
        _ = try await harness.chat.send(bob, to: direct.id, SendMessageRequest(clientID: "fw", content: .file(Attachment(attachmentID: file.id))))
        #expect(try await harness.chat.attachments.attachment(carol, id: file.id).info.id == file.id)
        // Deleting Alice's message leaves Bob's forward: still visible to Bob and Carol.
        _ = try await harness.chat.delete(alice, conversation: conversation.id, messages: [message.id])
        #expect(try await harness.chat.attachments.attachment(bob, id: file.id).info.id == file.id)
        #expect(try await harness.chat.attachments.collect(policy: Chat.MediaPolicy()).isEmpty)
    }

    @Test func anyoneInTheAppSeesAPublicChannelsMedia() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let (dan, _) = try await harness.register("dan")
        let channel = try await harness.chat.createConversation(alice, CreateConversationRequest(kind: .public, title: "photos")).0
        let photo = try await harness.upload(alice, kind: .photo)
        _ = try await harness.chat.send(alice, to: channel.id, SendMessageRequest(clientID: "p", content: .photo(Attachment(attachmentID: photo.id))))
        #expect(try await harness.chat.attachments.attachment(dan, id: photo.id).thumbnailBlob != nil)
    }

    @Test func deletingOrReplacingReleasesAndTheCollectorFreesOnlyUnusedBlobs() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        _ = try await harness.register("bob")
        let conversation = try await room(harness, alice, ["bob"])
        let first = try await harness.upload(alice, kind: .photo, seed: "first")
        let twin = try await harness.upload(alice, kind: .photo, seed: "first")  // the same bytes again: one blob
        let second = try await harness.upload(alice, kind: .photo, seed: "second")
        let (message, _) = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(
            clientID: "m", content: .photo(Attachment(attachmentID: first.id))))
        _ = try await harness.chat.send(alice, to: conversation.id, SendMessageRequest(
            clientID: "t", content: .photo(Attachment(attachmentID: twin.id))))
        _ = try await harness.chat.edit(alice, conversation: conversation.id, message: message.id,
                                        EditMessageRequest(content: .photo(Attachment(attachmentID: second.id))))
        // `first` is released, but its blobs are the twin's too: nothing to remove yet.
        #expect(try await harness.chat.attachments.collect(policy: Chat.MediaPolicy()).isEmpty)
        await #expect(throws: ChatError.self) { _ = try await harness.chat.attachments.attachment(signedID: first.id) }
        let stored = try await harness.chat.attachments.attachment(signedID: second.id)
        _ = try await harness.chat.delete(alice, conversation: conversation.id, messages: [message.id])
        let garbage = try await harness.chat.attachments.collect(policy: Chat.MediaPolicy())
        #expect(Set(garbage) == Set([stored.blob, stored.thumbnailBlob].compactMap { $0 }))
        try await harness.chat.attachments.forgetGarbage(garbage)
        #expect(try await harness.chat.attachments.collect(policy: Chat.MediaPolicy()).isEmpty)
        #expect(try await harness.chat.attachments.attachment(signedID: twin.id).info.id == twin.id)
    }

    @Test func uploadsNoMessageUsesAreCollectedAfterTheirLifetime() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let orphan = try await harness.upload(alice, kind: .audio, seed: "o")
        var policy = Chat.MediaPolicy()
        policy.orphanLifetime = 3600
        #expect(try await harness.chat.attachments.collect(policy: policy).isEmpty)
        harness.clock.advance(by: 3601)
        let stored = try await harness.chat.attachments.attachment(signedID: orphan.id)
        #expect(try await harness.chat.attachments.collect(policy: policy) == [stored.blob])
        // The collector is removing the file now (on another node, say): the same bytes
        // uploaded meanwhile are refused, retryably, and nothing is recorded …
        await #expect(throws: ChatError.fileBeingCollected) { _ = try await harness.upload(alice, kind: .audio, seed: "o") }
        #expect(try await harness.chat.attachments.collect(policy: policy).isEmpty, "a blob being removed is not handed out twice")
        // … until it says the file is gone; then the upload stores it afresh.
        try await harness.chat.attachments.forgetGarbage([stored.blob])
        _ = try await harness.upload(alice, kind: .audio, seed: "o")
        try await harness.chat.attachments.markGarbage([stored.blob])  // in use: not marked
        #expect(try await harness.chat.attachments.collect(policy: policy).isEmpty)
    }

    @Test func theSameBytesUploadedBeforeTheCollectorChoseThemStopBeingGarbage() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let first = try await harness.upload(alice, kind: .audio, seed: "again")
        let blob = try await harness.chat.attachments.attachment(signedID: first.id).blob
        try await harness.chat.attachments.markGarbage([blob])  // in use: not marked
        var policy = Chat.MediaPolicy()
        policy.orphanLifetime = 3600
        harness.clock.advance(by: 3601)
        // The orphan is forgotten and its blob becomes garbage; an upload of the same bytes
        // recorded before the collector's next pass takes it back.
        #expect(try await harness.chat.attachments.collect(policy: policy) == [blob])
        try await harness.chat.attachments.forgetGarbage([blob])
        _ = try await harness.upload(alice, kind: .audio, seed: "again")
        #expect(try await harness.chat.attachments.collect(policy: policy).isEmpty)
    }

    @Test func aCollectorThatDiedMidwayHasItsBlobsTakenAgainAfterAMinute() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        let orphan = try await harness.upload(alice, kind: .file, seed: "dies")
        var policy = Chat.MediaPolicy()
        policy.orphanLifetime = 0
        harness.clock.advance(by: 1)
        let blob = try await harness.chat.attachments.attachment(signedID: orphan.id).blob
        #expect(try await harness.chat.attachments.collect(policy: policy) == [blob])
        // That collector never says the files are gone.
        harness.clock.advance(by: 30)
        #expect(try await harness.chat.attachments.collect(policy: policy).isEmpty, "still being removed")
        harness.clock.advance(by: 31)
        #expect(try await harness.chat.attachments.collect(policy: policy) == [blob], "taken again")
        try await harness.chat.attachments.forgetGarbage([blob])
        #expect(try await harness.chat.attachments.collect(policy: policy).isEmpty)
    }

    @Test func quotasCountEveryUploadAndRetriesReturnTheFirst() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let (alice, _) = try await harness.register("alice")
        var policy = Chat.MediaPolicy()
        policy.quotaBytes = 2_500
        let upload = NewAttachment(kind: .file, mimeType: "application/pdf", sizeBytes: 1_000, name: "a.pdf",
                                   blob: String(repeating: "a", count: 64), clientID: "up-1")
        let (first, created) = try await harness.chat.attachments.record(alice, upload, policy: policy)
        let (again, createdAgain) = try await harness.chat.attachments.record(alice, upload, policy: policy)
        #expect(created && !createdAgain && first == again)
        #expect(try await harness.chat.attachments.existingUpload(alice, clientID: "up-1") == first)
        _ = try await harness.upload(alice, kind: .file, sizeBytes: 1_000, policy: policy)
        do {
            _ = try await harness.upload(alice, kind: .file, sizeBytes: 1_000, policy: policy)
            Issue.record("the quota was not enforced")
        } catch let error as ChatError {
            #expect(error.code == "quota_exceeded" && error.status == 403)
        }
        #expect(try await harness.chat.attachments.usage(alice) == 2_000)
    }

    @Test func theSigningKeyIsMadeOnceAndKept() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let key = try await harness.chat.attachments.signingKey()
        #expect(key.count == 32)
        #expect(try await harness.chat.attachments.signingKey() == key)
    }
}
