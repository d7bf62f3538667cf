package import Foundation
import ParleyStore
package import ParleyWire
import ParleySync

/// Where an export's NDJSON lines go: appended a page at a time, so an export of any size is
/// never whole in memory (the server writes a temporary file and sends it as the body).
package protocol ExportSink: Sendable {
    /// Appends lines (each a JSON object followed by `\n`).
    func write(_ bytes: [UInt8]) throws
}

/// An ``ExportSink`` writing to a file.
package final class FileExportSink: ExportSink {
    private let handle: LockedValue<FileHandle>

    /// Writes to `handle` (the caller closes it).
    package init(handle: FileHandle) { self.handle = LockedValue(handle) }

    package func write(_ bytes: [UInt8]) throws {
        try handle.withLock { try $0.write(contentsOf: Data(bytes)) }
    }
}

// Exports (docs/api.md, "Export"): NDJSON, one object per line, each with a `type`, written a
// page at a time. A user's: their account, conversations, the messages they wrote and their
// uploads. A conversation's (its owner, or the app): the conversation, its members and every
// message in seq order. The last line is `{"type":"end",…}` with the counts, so a reader knows
// the file is whole.

/// Exports: a user's data and a conversation, as streamed NDJSON (docs/api.md, "Export").
package struct Exports: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Exports: a user's data and a conversation, as streamed NDJSON (docs/api.md, "Export").
    package var exports: Exports { Exports(core: self) }
}

extension Exports {
    /// Everything of the caller's, as NDJSON lines into `sink`.
    package func user(_ caller: Caller, into sink: any ExportSink) async throws {
        let now = nowMilliseconds
        var counts = ["conversations": 0, "messages": 0, "media": 0, "drafts": 0, "scheduled": 0]
        let account = try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("SELECT \(Chat.userColumns) FROM account u WHERE u.id = \(caller.userKey)") else {
                    throw ChatError.userNotFound
                }
                return try Chat.user(row)
            }
        }
        try sink.write(try Chat.line(["type": .string("account"), "exportedAt": .string(WireCoding.formatMilliseconds(now))], object: account))
        // Conversations, messages they wrote (oldest first, tombstones included: they say what
        // was deleted), and their uploads (the list; the files are downloaded with GET /v1/media/{id}).
        counts["conversations"] = try await stream(into: sink) { db, after in
            try db.fetchAll("""
                SELECT conversation_id FROM member WHERE user_id = \(caller.userKey) AND conversation_id > \(after)
                ORDER BY conversation_id LIMIT \(Chat.exportPage)
                """).map { row in
                let key: Int64 = try row.get("conversation_id")
                return (key, try Chat.line(["type": .string("conversation")], object: try Chat.view(db, key: key, caller: caller)))
            }
        }
        counts["messages"] = try await stream(into: sink) { db, after in
            try db.fetchAll("""
                SELECT \(Chat.messageColumns) \(Chat.messageJoins) WHERE m.author_id = \(caller.userKey) AND m.id > \(after)
                ORDER BY m.id LIMIT \(Chat.exportPage)
                """).map { (try $0.get("m_key"), Chat.line(type: "message", record: try Chat.record($0, caller: caller.userKey))) }
        }
        counts["media"] = try await stream(into: sink) { db, after in
            try db.fetchAll("""
                SELECT id, public_id, kind, mime_type, name, size_bytes, width, height, created_at FROM attachment
                WHERE owner_id = \(caller.userKey) AND id > \(after) ORDER BY id LIMIT \(Chat.exportPage)
                """).map { row in
                let media = MediaListing(id: try row.get("public_id"), kind: try row.get("kind"), mimeType: try row.get("mime_type"),
                                         name: try row.get("name"), sizeBytes: try row.get("size_bytes"), width: try row.get("width"),
                                         height: try row.get("height"), createdAt: WireCoding.formatMilliseconds(try row.get("created_at")))
                return (try row.get("id"), try Chat.line(["type": .string("media")], object: media))
            }
        }
        // Drafts (a conversation's own are in its line above; threads' here) and scheduled
        // messages, in every state: what the user wrote and has not sent is theirs too.
        counts["drafts"] = try await stream(into: sink) { db, written in
            let rows = try db.fetchAll("""
                SELECT d.text, d.client_id, d.updated_at, c.public_id AS conversation_public_id, r.public_id AS root_public_id
                FROM draft d JOIN conversation c ON c.id = d.conversation_id LEFT JOIN message r ON r.id = d.thread_key
                WHERE d.user_id = \(caller.userKey) AND d.text != '' ORDER BY d.conversation_id, d.thread_key
                LIMIT \(Chat.exportPage) OFFSET \(written)
                """)
            // Keyed by how many were written before it: the next page starts after them.
            return try rows.enumerated().map { index, row in
                let draft = Draft(text: try row.get("text"), threadID: try row.get("root_public_id", as: String?.self).map(MessageID.init(rawValue:)),
                                  clientID: try row.get("client_id"), updatedAt: Chat.date(try row.get("updated_at")))
                return (written + Int64(index) + 1,
                        try Chat.line(["type": .string("draft"), "conversationId": .string(try row.get("conversation_public_id"))], object: draft))
            }
        }
        counts["scheduled"] = try await stream(into: sink) { db, after in
            try db.fetchAll("""
                SELECT s.*, c.public_id AS conversation_public_id FROM scheduled_message s JOIN conversation c ON c.id = s.conversation_id
                WHERE s.user_id = \(caller.userKey) AND s.id > \(after) ORDER BY s.id LIMIT \(Chat.exportPage)
                """).map { (try $0.get("id"), try Chat.line(["type": .string("scheduled")], object: try Scheduling.scheduled($0))) }
        }
        try sink.write(try Chat.end(counts))
    }

    /// A conversation, its members and every message, as NDJSON lines into `sink`: for its
    /// owners, or the app (``Caller/actsAsApp``). Others' shadow messages are left out for an
    /// owner, as everywhere.
    ///
    /// - Throws: 403 for anyone but an owner or the app.
    package func conversation(_ caller: Caller, conversation id: ConversationID, into sink: any ExportSink) async throws {
        let (access, conversation) = try await run {
            try await store.read { db in
                let access = try Chat.access(db, caller: caller, id: id, for: .export)
                return (access, try Chat.view(db, key: access.key, caller: caller))
            }
        }
        var counts = ["members": 0, "messages": 0]
        try sink.write(try Chat.line(["type": .string("conversation"), "exportedAt": .string(WireCoding.formatMilliseconds(nowMilliseconds))],
                                     object: conversation))
        counts["members"] = try await stream(into: sink) { db, after in
            try db.fetchAll("""
                SELECT user_id FROM member WHERE conversation_id = \(access.key) AND user_id > \(after) ORDER BY user_id LIMIT \(Chat.exportPage)
                """).map { row in
                let user: Int64 = try row.get("user_id")
                return (user, try Chat.line(["type": .string("member")], object: try Chat.member(db, conversation: access.key, user: user)))
            }
        }
        let visible: SQL = access.asApp ? "1 = 1" : Chat.visible(to: caller.userKey)
        counts["messages"] = try await stream(into: sink) { db, after in
            let hiding = access.asApp ? [] : try Chat.blockedKeys(db, viewer: caller.userKey)
            return try db.fetchAll("""
                SELECT \(Chat.messageColumns) \(Chat.messageJoins) WHERE m.conversation_id = \(access.key) AND m.seq > \(after) AND \(visible)
                ORDER BY m.seq LIMIT \(Chat.exportPage)
                """).map { row in
                // An owner who blocked someone exports that person's messages as stubs, as they read them.
                let record = try Chat.record(row, caller: caller.userKey, hiding: hiding)
                return (record.seq, Chat.line(type: "message", record: record))
            }
        }
        try sink.write(try Chat.end(counts))
    }
}

extension Exports {
    /// Streams rows a page at a time into `sink`: `page(db, after)` reads at most
    /// ``Chat/exportPage`` rows whose key is above `after`, in key order, and gives each row's
    /// key and line. Stops at a short page; returns how many rows were written.
    private func stream(into sink: any ExportSink,
                        page: @escaping @Sendable (any Database, Int64) throws -> [(key: Int64, line: [UInt8])]) async throws -> Int {
        var after: Int64 = 0
        var written = 0
        while true {
            let cursor = after
            let rows = try await run { try await store.read { db in try page(db, cursor) } }
            try sink.write(rows.flatMap(\.line))
            written += rows.count
            guard let last = rows.last?.key, rows.count == Chat.exportPage else { return written }
            after = last
        }
    }
}

extension Chat {
    /// Rows per page read while exporting.
    static let exportPage = 500

    /// One line: `object`'s JSON with `fields` merged in, sorted keys.
    static func line(_ fields: [String: JSONValue], object: some Encodable) throws -> [UInt8] {
        guard case .object(var merged) = try JSONValue.decode(String(decoding: try WireCoding.encoder().encode(object), as: UTF8.self)) else {
            throw ChatError.internalError
        }
        for (key, value) in fields { merged[key] = value }
        return Array(try JSONValue.object(merged).encoded().utf8) + [UInt8(ascii: "\n")]
    }

    /// A message line, written from the stored record without a decode.
    static func line(type: String, record: MessageRecord) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.object { json in
            json.key("message"); record.writeJSON(into: &json)
            json.key("type"); json.string(type)
        }
        return writer.bytes + [UInt8(ascii: "\n")]
    }

    static func end(_ counts: [String: Int]) throws -> [UInt8] {
        Array(try JSONValue.object(["type": .string("end"), "counts": .object(counts.mapValues { .number(Double($0)) })]).encoded().utf8)
            + [UInt8(ascii: "\n")]
    }
}

/// An upload as an export lists it.
struct MediaListing: Encodable {
    var id: String
    var kind: String
    var mimeType: String
    var name: String?
    var sizeBytes: Int64
    var width: Int64?
    var height: Int64?
    var createdAt: String
}
