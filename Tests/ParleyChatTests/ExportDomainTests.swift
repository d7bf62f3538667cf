import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Exports (issue 19), on both engines: a user's NDJSON has their account, conversations,
/// messages and uploads, across page boundaries, and ends with the counts; a conversation's is
/// for its owners only and has every member and message in order.
struct ExportDomainTests {
    final class Lines: ExportSink, @unchecked Sendable {
        private let lock = NSLock()
        private var bytes: [UInt8] = []
        private(set) var writes = 0
        func write(_ more: [UInt8]) throws { lock.withLock { bytes += more; writes += 1 } }
        var objects: [[String: JSONValue]] {
            lock.withLock {
                String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap {
                    if case .object(let fields)? = try? JSONValue.decode(String($0)) { return fields }
                    return nil
                }
            }
        }
    }

    private func type(_ line: [String: JSONValue]) -> String {
        if case .string(let type)? = line["type"] { return type }
        return ""
    }

    @Test func aUsersExportHasEverythingOfTheirsAcrossPagesAndEndsWithTheCounts() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "g")).0.id
        let total = Chat.exportPage + 7
        for index in 0..<total {
            _ = try await chat.send(alice, to: room, SendMessageRequest(clientID: "a\(index)", content: .text("mine \(index)")))
        }
        _ = try await chat.send(bob, to: room, SendMessageRequest(clientID: "b", content: .text("not hers")))
        let photo = try await harness.upload(alice, kind: .photo)
        // What she wrote and has not sent is hers too: a thread's draft and a scheduled message.
        let root = try await chat.send(bob, to: room, SendMessageRequest(clientID: "r", content: .text("a thread"))).0
        _ = try await chat.inbox.saveDraft(alice, conversation: room, Draft(text: "half a reply", threadID: root.id, updatedAt: harness.clock.now))
        let planned = try await chat.scheduling.schedule(alice, conversation: room, ScheduleMessageRequest(
            sendAt: harness.clock.now.addingTimeInterval(3600), message: SendMessageRequest(clientID: "later", content: .text("tomorrow"))))
        let sink = Lines()
        try await chat.exports.user(alice, into: sink)
        let lines = sink.objects
        #expect(type(lines.first ?? [:]) == "account" && lines.first?["username"] == .string("alice"))
        #expect(lines.filter { type($0) == "conversation" }.count == 1)
        let messages = lines.filter { type($0) == "message" }
        #expect(messages.count == total, "every message of hers, none of his")
        #expect(lines.filter { type($0) == "media" }.map { $0["id"] } == [.string(photo.id)])
        #expect(type(lines.last ?? [:]) == "end")
        let drafts = lines.filter { type($0) == "draft" }
        #expect(drafts.count == 1 && drafts.first?["text"] == .string("half a reply") && drafts.first?["threadId"] == .string(root.id.rawValue))
        #expect(lines.filter { type($0) == "scheduled" }.map { $0["id"] } == [.string(planned.id)])
        #expect(lines.last?["counts"] == .object(["conversations": .number(1), "messages": .number(Double(total)), "media": .number(1),
                                                  "drafts": .number(1), "scheduled": .number(1)]))
        #expect(sink.writes > 3, "written a page at a time")

        let whole = Lines()
        await #expect(throws: ChatError.self) { try await chat.exports.conversation(bob, conversation: room, into: whole) }
        try await chat.exports.conversation(alice, conversation: room, into: whole)
        let conversationLines = whole.objects
        #expect(conversationLines.filter { type($0) == "member" }.count == 2)
        #expect(conversationLines.filter { type($0) == "message" }.count == total + 2, "hers, his, and his thread root")
        #expect(type(conversationLines.last ?? [:]) == "end")
    }
}
