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
        var counts = ["conversations": 0, "messages": 0, "media": 0]
        let account = try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("SELECT \(Chat.userColumns) FROM account u WHERE u.id = \(caller.userKey)") else {
                    throw ChatError.userNotFound
                }
                return try Chat.user(row)
            }
        }
        try sink.write(try Chat.line(["type": .string("account"), "exportedAt": .string(WireCoding.formatMilliseconds(now))], object: account))
        // Conversations, a page at a time by key.
        var after: Int64 = 0
        while true {
            let cursor = after
            let page = try await run {
                try await store.read { db -> [(Int64, Conversation)] in
                    try db.fetchAll("""
                        SELECT conversation_id FROM member WHERE user_id = \(caller.userKey) AND conversation_id > \(cursor)
                        ORDER BY conversation_id LIMIT \(Chat.exportPage)
                        """).map { row in
                        let key: Int64 = try row.get("conversation_id")
                        return (key, try Chat.view(db, key: key, caller: caller))
                    }
                }
            }
            for (_, conversation) in page { try sink.write(try Chat.line(["type": .string("conversation")], object: conversation)) }
            counts["conversations", default: 0] += page.count
            guard let last = page.last?.0, page.count == Chat.exportPage else { break }
            after = last
        }
        // Messages they wrote, oldest first (tombstones included: they say what was deleted).
        after = 0
        while true {
            let cursor = after
            let page = try await run {
                try await store.read { db -> [(Int64, MessageRecord)] in
                    try db.fetchAll("""
                        SELECT \(Chat.messageColumns) \(Chat.messageJoins) WHERE m.author_id = \(caller.userKey) AND m.id > \(cursor)
                        ORDER BY m.id LIMIT \(Chat.exportPage)
                        """).map { (try $0.get("m_key"), try Chat.record($0, caller: caller.userKey)) }
                }
            }
            var bytes: [UInt8] = []
            for (_, record) in page { bytes += Chat.line(type: "message", record: record) }
            try sink.write(bytes)
            counts["messages", default: 0] += page.count
            guard let last = page.last?.0, page.count == Chat.exportPage else { break }
            after = last
        }
        // Their uploads (the list; the files are downloaded with GET /v1/media/{id}).
        after = 0
        while true {
            let cursor = after
            let page = try await run {
                try await store.read { db -> [(Int64, MediaListing)] in
                    try db.fetchAll("""
                        SELECT id, public_id, kind, mime_type, name, size_bytes, width, height, created_at FROM attachment
                        WHERE owner_id = \(caller.userKey) AND id > \(cursor) ORDER BY id LIMIT \(Chat.exportPage)
                        """).map { row in
                        (try row.get("id"), MediaListing(id: try row.get("public_id"), kind: try row.get("kind"), mimeType: try row.get("mime_type"),
                                                         name: try row.get("name"), sizeBytes: try row.get("size_bytes"), width: try row.get("width"),
                                                         height: try row.get("height"), createdAt: WireCoding.formatMilliseconds(try row.get("created_at"))))
                    }
                }
            }
            for (_, media) in page { try sink.write(try Chat.line(["type": .string("media")], object: media)) }
            counts["media", default: 0] += page.count
            guard let last = page.last?.0, page.count == Chat.exportPage else { break }
            after = last
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
        var offset = 0
        while true {
            let skip = offset
            let page = try await run {
                try await store.read { db -> [Member] in
                    try db.fetchAll("""
                        SELECT user_id FROM member WHERE conversation_id = \(access.key) ORDER BY user_id LIMIT \(Chat.exportPage) OFFSET \(skip)
                        """).map { try Chat.member(db, conversation: access.key, user: try $0.get("user_id")) }
                }
            }
            for member in page { try sink.write(try Chat.line(["type": .string("member")], object: member)) }
            counts["members", default: 0] += page.count
            guard page.count == Chat.exportPage else { break }
            offset += page.count
        }
        let visible: SQL = access.asApp ? "1 = 1" : Chat.visible(to: caller.userKey)
        var after: Int64 = 0
        while true {
            let cursor = after
            let page = try await run {
                try await store.read { db -> [MessageRecord] in
                    try db.fetchAll("""
                        SELECT \(Chat.messageColumns) \(Chat.messageJoins) WHERE m.conversation_id = \(access.key) AND m.seq > \(cursor) AND \(visible)
                        ORDER BY m.seq LIMIT \(Chat.exportPage)
                        """).map { try Chat.record($0, caller: caller.userKey) }
                }
            }
            var bytes: [UInt8] = []
            for record in page { bytes += Chat.line(type: "message", record: record) }
            try sink.write(bytes)
            counts["messages", default: 0] += page.count
            guard let last = page.last?.seq, page.count == Chat.exportPage else { break }
            after = last
        }
        try sink.write(try Chat.end(counts))
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
