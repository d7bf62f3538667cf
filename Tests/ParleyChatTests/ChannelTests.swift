import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyStoreSQLite
import ParleyTesting
import ParleyWire
import Testing

/// Named channels (the Pusher protocol's) on the one event log, and migration 0008 that made
/// room for them (docs/decisions/0016-pusher-channels-on-the-event-log.md).
struct ChannelTests {
    /// A bus that keeps every channel event published.
    final class ChannelRecorder: Bus, @unchecked Sendable {
        private let lock = NSLock()
        private var events: [ChannelEvent] = []
        var published: [ChannelEvent] { lock.withLock { events } }
        func publish(_ publications: [Publication]) {
            lock.withLock { for case .channel(let event) in publications { events.append(event) } }
        }
        func subscribe(_ receiver: @escaping @Sendable ([Publication]) -> Void) {}
    }

    @Test func triggeredEventsAreStoredWithPositionsPublishedAfterCommitAndTrimmedToTheNewest() async throws {
        let bus = ChannelRecorder()
        let harness = try await ChatHarness.make(bus: bus)
        defer { harness.tearDown() }
        let chat = harness.chat
        for round in 1...7 {
            try await chat.channels.trigger([ChannelTrigger(channel: "room", name: "m", data: "\(round)", excludedSocket: nil),
                                    ChannelTrigger(channel: "other", name: "m", data: "o\(round)", excludedSocket: round == 7 ? "1.2" : nil)],
                                   app: harness.app, keep: 3)
        }
        let published = bus.published
        #expect(published.count == 14)
        #expect(published.map(\.position) == published.map(\.position).sorted { ($0 ?? 0) < ($1 ?? 0) })
        #expect(published.filter { $0.channel == "room" }.map(\.seq) == (1...7).map { Int64?(Int64($0)) })
        #expect(published.first?.dataJSON == #""1""#)  // Pusher's data is a string: stored as its JSON

        let room = try await chat.channels.history(app: harness.app, channel: "room", after: 0, limit: 100)
        #expect(room.events.map(\.dataJSON) == [#""5""#, #""6""#, #""7""#])
        #expect(room.events.map(\.seq) == [5, 6, 7])
        #expect(room.oldestKept == room.events.first?.position)
        let other = try await chat.channels.history(app: harness.app, channel: "other", after: 0, limit: 100)
        #expect(other.events.last?.excludedSocket == "1.2")
        let after = try await chat.channels.history(app: harness.app, channel: "room", after: room.events[0].position ?? 0, limit: 1)
        #expect(after.events.map(\.dataJSON) == [#""6""#] && after.hasMore)
        let none = try await chat.channels.history(app: harness.app, channel: "never-used", after: 0, limit: 10)
        #expect(none.events.isEmpty && none.oldestKept == 0)

        // A channel's log is invisible to the native API: its id names no conversation anyone can open.
        let (ana, _) = try await harness.register("ana")
        let publicID: String = try await harness.store.read { db in
            try db.fetchValue(String.self, "SELECT public_id FROM conversation WHERE kind = 'pusher' AND title = 'room'") ?? ""
        }
        await #expect(throws: ChatError.conversationNotFound) {
            _ = try await chat.conversation(ana, id: ConversationID(rawValue: publicID))
        }
        // Another app's channel of the same name is another log.
        let otherApp = try await chat.app(publicKey: try await chat.createApp(name: "other").publicKey)
        let empty = try await chat.channels.history(app: otherApp, channel: "room", after: 0, limit: 10)
        #expect(empty.events.isEmpty)
    }

    @Test func appsHaveANumericPusherIDAndKeepTheirSecretForSigning() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let created = try await harness.chat.createApp(name: "shop")
        let found = try #require(try await harness.chat.channels.app(key: created.publicKey))
        #expect(found.secret == created.secret && (100_000_000...999_999_999).contains(found.pusherID))
        #expect(try await harness.chat.channels.app(pusherID: found.pusherID)?.key == created.publicKey)
        let rotated = try await harness.chat.backend.rotateSecret(app: "shop")
        #expect(rotated.pusherID == found.pusherID)
        #expect(try await harness.chat.channels.app(pusherID: found.pusherID)?.secret == rotated.secret)
        #expect(try await harness.chat.channels.app(key: "pk_nobody") == nil)
    }

    /// A database written before migration 0008 (apps with a hashed secret only, conversations,
    /// members, messages and events) keeps every row, and every foreign key still holds once
    /// the conversation table is rebuilt.
    @Test func migration0008KeepsAnOlderDatabaseWhole() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-0008-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteStore(path: directory + "/parley.sqlite")
        defer { store.close() }
        var older = Migrator()
        for migration in Schema.sqlite.migrations.prefix(7) { older.register(migration.name, migration.apply) }
        try await older.migrate(store)
        try await store.write { db in
            try db.execute("INSERT INTO app (id, name, public_key, secret_hash, created_at) VALUES (1, 'default', 'pk_old', x'00', 1)")
            try db.execute("""
                INSERT INTO account (id, app_id, public_id, username, username_key, display_name, display_key, is_guest, created_at)
                VALUES (1, 1, 'u_1', 'ana', 'ana', 'Ana', 'ana', 0, 1), (2, 1, 'u_2', 'bob', 'bob', 'Bob', 'bob', 0, 1)
                """)
            try db.execute("""
                INSERT INTO conversation (id, app_id, public_id, kind, direct_key, created_by, created_at, last_seq, member_count)
                VALUES (1, 1, 'c_1', 'direct', '1:2', 1, 1, 3, 2)
                """)
            try db.execute("INSERT INTO member (conversation_id, user_id, role, joined_at) VALUES (1, 1, 'member', 1), (1, 2, 'member', 1)")
            try db.execute("INSERT INTO message (id, public_id, conversation_id, seq, author_id, client_id, content, created_at) VALUES (1, 'm_1', 1, 3, 1, 'x', '{}', 1)")
            try db.execute("""
                INSERT INTO event (conversation_id, seq, type, actor_id, user_id, created_at) VALUES
                (1, 1, 'member.added', 1, 1, 1), (1, 2, 'member.added', 1, 2, 1)
                """)
            try db.execute("INSERT INTO event (conversation_id, seq, type, actor_id, message_id, created_at) VALUES (1, 3, 'message.created', 1, 1, 1)")
        }
        let chat = Chat(store: store)
        try await chat.migrate()
        let checks: [Int] = try await store.read { db in
            [try db.fetchAll("PRAGMA foreign_key_check").count,
             try db.fetchValue(String.self, "PRAGMA integrity_check") == "ok" ? 1 : 0,
             try db.fetchValue(Int.self, "SELECT count(*) FROM conversation WHERE public_id = 'c_1' AND kind = 'direct' AND last_seq = 3") ?? -1,
             try db.fetchValue(Int.self, "SELECT count(*) FROM member") ?? -1,
             try db.fetchValue(Int.self, "SELECT count(*) FROM event WHERE conversation_id = 1") ?? -1,
             try db.fetchValue(Int.self, "SELECT count(*) FROM message WHERE conversation_id = 1") ?? -1]
        }
        // No foreign key broken, the file intact, and every row where it was.
        #expect(checks == [0, 1, 1, 2, 3, 1])
        // The old app got a Pusher id; having only a hash, it has no secret to sign with yet.
        let app = try #require(try await chat.channels.app(key: "pk_old"))
        #expect(app.secret == nil && app.pusherID > 0)
        // The rebuilt table still enforces what it did: a conversation needs a creator unless it is a channel log.
        await #expect(throws: (any Error).self) {
            try await store.write { db in
                try db.execute("INSERT INTO conversation (app_id, public_id, kind, created_by, created_at) VALUES (1, 'c_2', 'group', NULL, 1)")
            }
        }
        await #expect(throws: (any Error).self) {
            try await store.write { db in
                try db.execute("INSERT INTO member (conversation_id, user_id, role, joined_at) VALUES (99, 1, 'member', 1)")
            }
        }
    }
}
