import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyWire
import Testing

/// Search that filters (issue 33, item 7), on both engines: by sender, time, content type,
/// attachment and thread, with or without words, paged by cursor; bad filters are typed errors.
struct SearchDomainTests {
    @Test func filtersKeepOnlyWhatTheySayAndPagesFollowTheCursor() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        let bob = try await harness.register("bob").caller
        let room = try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: "trip")).0.id
        func send(_ caller: Caller, _ content: MessageContent, thread: MessageID? = nil) async throws -> Message {
            try await chat.send(caller, to: room, SendMessageRequest(clientID: UUID().uuidString, content: content, threadID: thread)).0
        }
        let early = try await send(alice, .text("beach plans for june"))
        harness.clock.advance(by: 3600)
        let middle = harness.clock.now
        let bobs = try await send(bob, .text("beach towels packed"))
        let photo = try await harness.upload(bob, kind: .photo)
        let shot = try await send(bob, .photo(Attachment(attachmentID: photo.id, caption: "the beach at dawn")))
        let reply = try await send(alice, .text("beach is lovely"), thread: bobs.id)
        func ids(_ query: String, _ filters: SearchFilters, cursor: String? = nil, limit: Int? = nil) async throws -> [MessageID] {
            try await chat.search(alice, query: query, conversation: nil, filters: filters, cursor: cursor, limit: limit).messages.map(\.id)
        }

        #expect(Set(try await ids("beach", SearchFilters())) == [early.id, bobs.id, shot.id, reply.id])
        #expect(Set(try await ids("beach", SearchFilters(from: "BOB"))) == [bobs.id, shot.id], "a username, in any case")
        #expect(try await ids("beach", SearchFilters(from: "nobody")).isEmpty)
        #expect(try await ids("beach", SearchFilters(before: middle)) == [early.id])
        #expect(Set(try await ids("beach", SearchFilters(after: middle))) == [bobs.id, shot.id, reply.id])
        #expect(try await ids("beach", SearchFilters(kind: "photo")) == [shot.id])
        #expect(try await ids("beach", SearchFilters(hasAttachment: true)) == [shot.id])
        #expect(Set(try await ids("beach", SearchFilters(hasAttachment: false))) == [early.id, bobs.id, reply.id])
        #expect(try await ids("beach", SearchFilters(threadID: bobs.id)) == [reply.id])
        #expect(try await ids("beach", SearchFilters(from: "alice", after: middle)) == [reply.id], "every filter holds")
        // No words: every message that passes the filters, newest first.
        #expect(try await ids("", SearchFilters(from: "bob")) == [shot.id, bobs.id])

        // Pages: the cursor goes on where the last page stopped; together they are the whole.
        let first = try await chat.search(alice, query: "beach", conversation: nil, filters: SearchFilters(), cursor: nil, limit: 3)
        #expect(first.messages.count == 3 && first.nextCursor == "o3")
        let second = try await chat.search(alice, query: "beach", conversation: nil, filters: SearchFilters(), cursor: first.nextCursor, limit: 3)
        #expect(second.messages.count == 1 && second.nextCursor == nil)
        #expect(Set((first.messages + second.messages).map(\.id)) == [early.id, bobs.id, shot.id, reply.id])

        // Refused, each naming what is wrong.
        for (query, filters, cursor) in [("", SearchFilters(), nil), ("beach", SearchFilters(kind: "sticker"), nil),
                                         ("beach", SearchFilters(), "page2"), ("beach", SearchFilters(), "o99999")] as [(String, SearchFilters, String?)] {
            #expect(await code { _ = try await chat.search(alice, query: query, conversation: nil, filters: filters, cursor: cursor, limit: nil) }
                    == "invalid_request")
        }
    }
}

/// Conversations filtered by their custom data (issue 33, item 7), on both engines.
struct ConversationFieldTests {
    @Test func theListKeepsConversationsWhoseCustomDataHasEachFieldAndFollowsChanges() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let alice = try await harness.register("alice").caller
        _ = try await harness.register("bob")
        func create(_ title: String, _ data: JSONValue) async throws -> ConversationID {
            try await chat.createConversation(alice, CreateConversationRequest(kind: .group, members: ["bob"], title: title, customData: data)).0.id
        }
        let red = try await create("red", .object(["team": .string("red"), "level": .number(3), "vip": .bool(true), "tags": .array([.string("x")])]))
        let blue = try await create("blue", .object(["team": .string("blue"), "level": .number(3)]))
        _ = try await create("none", .object([:]))
        func titles(_ fields: [String: String]) async throws -> [String] {
            try await chat.listConversations(alice, limit: nil, before: nil, fields: fields).conversations.compactMap(\.title).sorted()
        }
        #expect(try await titles(["team": "red"]) == ["red"])
        #expect(try await titles(["level": "3"]) == ["blue", "red"], "a number matches its text")
        #expect(try await titles(["level": "3", "vip": "true"]) == ["red"], "every field holds")
        #expect(try await titles(["tags": "x"]).isEmpty, "arrays are not filterable")
        #expect(try await titles(["team": "green"]).isEmpty)
        // A change of custom data moves the conversation between filters.
        _ = try await chat.updateConversation(alice, id: blue, UpdateConversationRequest(customData: .object(["team": .string("red")])))
        #expect(try await titles(["team": "red"]) == ["blue", "red"])
        #expect(try await titles(["level": "3"]) == ["red"], "the old fields went with the old data")
        _ = red
        #expect(await code { _ = try await chat.listConversations(alice, limit: nil, before: nil, fields: ["a": "1", "b": "1", "c": "1", "d": "1", "e": "1"]) }
                == "invalid_request")
    }
}
