import Foundation
import ParleyStore
package import ParleyWire

/// Delivery traces (docs/trace.md): each node records the steps of new messages on their
/// way to devices, writes them once a second, and answers "where did this message go?" for
/// the app's backend from every node's steps.
package struct Tracing: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Delivery traces: recording, writing, sweeping and reading them.
    package var tracing: Tracing { Tracing(core: self) }
}

extension Tracing {
    /// Whether this node records traces.
    package var isOn: Bool { core.traceRecorder.isOn }

    /// Writes the steps waiting, in one write; returns how many. Steps a failed write did not
    /// store wait for the next flush.
    @discardableResult
    package func flush() async throws -> Int {
        let rows = core.traceRecorder.take()
        guard !rows.isEmpty else { return 0 }
        let node = core.traceRecorder.node
        do {
            // On PostgreSQL every row in one statement, whatever their number: each statement
            // costs the server an execution of its own, and a step a message is a row a send.
            // The rows travel as one JSON parameter, so the statement has one shape (prepared
            // once, queued in the pipeline) and a missing value is a NULL. SQLite, in process,
            // runs one prepared insert per row, which costs it less than reading JSON.
            try await write { db in
                if db.dialect == .postgres {
                    _ = try db.enqueue(Self.insert(Self.json(rows, node: node)))
                    return
                }
                for row in rows {
                    _ = try db.enqueue("""
                        INSERT INTO delivery_trace (position, conversation_id, step, user_id, session_id, device, devices, node, at, detail)
                        VALUES (\(row.position), \(row.conversation), \(row.step), \(row.user), \(row.session), \(row.device), \(row.devices), \(node), \(row.at), \(row.detail))
                        """)
                }
            }
        } catch {
            core.traceRecorder.putBack(rows)
            throw error
        }
        return rows.count
    }

    /// The rows as a JSON array of objects, a member only for a value that is there.
    static func json(_ rows: [TraceRecorder.Row], node: String) -> String {
        var writer = JSONWriter(capacity: rows.count * 96)
        writer.array { writer in
            for row in rows {
                writer.object { writer in
                    writer.key("position"); writer.integer(row.position)
                    if let conversation = row.conversation { writer.key("conversation_id"); writer.integer(conversation) }
                    writer.key("step"); writer.string(row.step)
                    if let user = row.user { writer.key("user_id"); writer.integer(user) }
                    if let session = row.session { writer.key("session_id"); writer.integer(session) }
                    if let device = row.device { writer.key("device"); writer.string(device) }
                    if let devices = row.devices { writer.key("devices"); writer.string(devices) }
                    writer.key("node"); writer.string(node)
                    writer.key("at"); writer.integer(row.at)
                    if let detail = row.detail { writer.key("detail"); writer.string(detail) }
                }
            }
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// One `INSERT` of every row in `json` (``json(_:node:)``), on PostgreSQL.
    static func insert(_ json: String) -> SQL {
        """
        INSERT INTO delivery_trace (position, conversation_id, step, user_id, session_id, device, devices, node, at, detail)
        SELECT position, conversation_id, step, user_id, session_id, device, devices, node, at, detail
        FROM json_to_recordset(\(json)::json) AS r(position bigint, conversation_id bigint, step text, user_id bigint,
                                                   session_id bigint, device text, devices text, node text, at bigint, detail text)
        """
    }

    /// Removes steps older than the retention; returns how many.
    @discardableResult
    package func sweep() async throws -> Int {
        guard let retention = configuration.traceRetention else { return 0 }
        let before = nowMilliseconds - Chat.milliseconds(retention)
        return try await write { db in try db.execute("DELETE FROM delivery_trace WHERE at < \(before)") }
    }

    /// `GET /v1/server/messages/{id}/trace`: every step recorded for the message, by
    /// recipient, with why no push went where none did.
    package func trace(_ server: ServerApp, message: MessageID) async throws -> MessageTrace {
        let retention = configuration.traceRetention
        let pushOn = core.hooks.contains { $0 is PushOutboxHook }
        return try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("""
                    SELECT m.seq, m.created_at, m.shadow, m.author_id, u.public_id AS author, c.id AS conversation_key,
                           c.public_id AS conversation, c.kind, e.position
                    FROM message m JOIN conversation c ON c.id = m.conversation_id JOIN account u ON u.id = m.author_id
                    JOIN event e ON e.conversation_id = m.conversation_id AND e.seq = m.seq AND e.type = 'message.created'
                    WHERE m.public_id = \(message.rawValue) AND c.app_id = \(server.app.id)
                    """) else { throw ChatError.messageNotFound }
                let position: Int64 = try row.get("position")
                let conversationKey: Int64 = try row.get("conversation_key")
                let author: Int64 = try row.get("author_id")
                let seq: Int64 = try row.get("seq")
                let createdAt: Int64 = try row.get("created_at")
                let steps = try db.fetchAll("""
                    SELECT step, user_id, session_id, device, devices, node, at, detail FROM delivery_trace WHERE position = \(position) ORDER BY at, id
                    """)
                // The message's later events (edits, reactions, pins …), whose webhook attempts it shows too.
                let later = try db.fetchAll("""
                    SELECT e.position FROM event e JOIN message m ON m.id = e.message_id
                    WHERE e.conversation_id = \(conversationKey) AND e.position > \(position) AND m.public_id = \(message.rawValue)
                    """).map { try $0.get("position", as: Int64.self) }
                let laterWebhooks = later.isEmpty ? [] : try db.fetchAll("""
                    SELECT node, at, detail FROM delivery_trace WHERE position IN (\(list: later)) AND step = 'webhook.attempt' ORDER BY at, id
                    """)
                let receipts = try db.fetchAll("""
                    SELECT devices, node, at FROM delivery_trace
                    WHERE conversation_id = \(conversationKey) AND step = 'receipt' AND at >= \(createdAt) ORDER BY at, id
                    """)
                let kind = try row.get("kind", as: String.self)
                let members = kind == "public" ? [] : try db.fetchAll("""
                    SELECT user_id FROM member WHERE conversation_id = \(conversationKey) AND user_id <> \(author)
                    """).map { try $0.get("user_id", as: Int64.self) }
                // Public ids of the users and sessions the steps name.
                var userKeys = Set(members)
                var sessionKeys = Set<Int64>()
                for step in steps {
                    if let user = try step.get("user_id", as: Int64?.self) { userKeys.insert(user) }
                    if let session = try step.get("session_id", as: Int64?.self) { sessionKeys.insert(session) }
                    for entry in Self.entries(try step.get("devices", as: String?.self)) where !entry.isEmpty {
                        userKeys.insert(entry[0])
                        if entry.count >= 2 { sessionKeys.insert(entry[1]) }
                    }
                }
                for receipt in receipts {
                    for entry in Self.entries(try receipt.get("devices", as: String?.self)) where entry.count == 4 && (entry[2] >= seq || entry[3] >= seq) {
                        userKeys.insert(entry[0])
                        sessionKeys.insert(entry[1])
                    }
                }
                userKeys.remove(author)
                let users = try publicIDs(db, table: "account", keys: userKeys)
                let sessions = try publicIDs(db, table: "session", keys: sessionKeys)

                // Attempts name the device; the queued step, its member.
                var deviceUser: [String: Int64] = [:]
                for step in steps where try step.get("step", as: String.self) == "push.queued" {
                    if let device = try step.get("device", as: String?.self), let user = try step.get("user_id", as: Int64?.self) {
                        deviceUser[device] = user
                    }
                }
                var committedOn: String?
                var webhooks: [TraceStep] = []
                var byUser: [Int64: [TraceStep]] = [:]
                var skipped: [Int64: String] = [:]
                for step in steps {
                    let name: String = try step.get("step")
                    let detail = try TraceDetail.read(try step.get("detail", as: String?.self))
                    let node: String = try step.get("node")
                    let at = Date(milliseconds: try step.get("at"))
                    // A node's routing of the message: one row for every device it reached; the
                    // push expansion's: one row per reason for the members it passed over.
                    if let devices = try step.get("devices", as: String?.self) {
                        for entry in Self.entries(devices) where !entry.isEmpty && entry[0] != author {
                            if entry.count == 2 {
                                byUser[entry[0], default: []].append(TraceStep(step: name, at: at, node: node, session: sessions[entry[1]] ?? "ended",
                                                                               reason: detail.reason))
                            } else if name == "push.skipped", let reason = detail.reason {
                                skipped[entry[0]] = reason
                                byUser[entry[0], default: []].append(TraceStep(step: name, at: at, node: node, reason: reason))
                            }
                        }
                        continue
                    }
                    let session = try step.get("session_id", as: Int64?.self).map { sessions[$0] ?? "ended" }
                    let traced = TraceStep(step: name, at: at, node: node, session: session,
                                           device: try step.get("device", as: String?.self), platform: detail.platform, status: detail.status,
                                           reason: detail.reason, providerId: detail.providerId, outcome: detail.outcome, idOnly: detail.idOnly,
                                           endpoint: detail.endpoint, event: detail.event)
                    switch name {
                    case "committed": committedOn = committedOn ?? node
                    case "webhook.attempt": webhooks.append(traced)
                    default:
                        guard let user = try step.get("user_id", as: Int64?.self) ?? (try step.get("device", as: String?.self)).flatMap({ deviceUser[$0] }),
                              user != author else { continue }
                        if name == "push.skipped", let reason = detail.reason { skipped[user] = reason }
                        byUser[user, default: []].append(traced)
                    }
                }
                for attempt in laterWebhooks {
                    let detail = try TraceDetail.read(try attempt.get("detail", as: String?.self))
                    webhooks.append(TraceStep(step: "webhook.attempt", at: Date(milliseconds: try attempt.get("at")), node: try attempt.get("node"),
                                              status: detail.status, reason: detail.reason, outcome: detail.outcome, endpoint: detail.endpoint,
                                              event: detail.event))
                }
                webhooks.sort { $0.at < $1.at }
                // A device's receipt: the first that marked this message delivered, and the first that marked it read.
                var deliveredBy = Set<Int64>(), readBy = Set<Int64>()  // sessions
                for receipt in receipts {
                    let at = Date(milliseconds: try receipt.get("at"))
                    let node: String = try receipt.get("node")
                    for entry in Self.entries(try receipt.get("devices", as: String?.self)) where entry.count == 4 && entry[0] != author {
                        let delivered = entry[2] >= seq && deliveredBy.insert(entry[1]).inserted
                        let read = entry[3] >= seq && readBy.insert(entry[1]).inserted
                        guard delivered || read else { continue }
                        byUser[entry[0], default: []].append(TraceStep(step: "receipt", at: at, node: node, session: sessions[entry[1]] ?? "ended",
                                                                       deliveredSeq: delivered ? entry[2] : nil, readSeq: read ? entry[3] : nil))
                    }
                }
                let recipients = userKeys.sorted().compactMap { user -> TraceRecipient? in
                    guard let id = users[user] else { return nil }
                    let steps = (byUser[user] ?? []).sorted { $0.at < $1.at }
                    let names = Set(steps.map(\.step))
                    let attempts = steps.filter { $0.step == "push.attempt" }
                    // A queued device is pending until an attempt settles it (sent, failed, removed).
                    let queued = Set(steps.filter { $0.step == "push.queued" }.compactMap(\.device))
                    let settled = Set(attempts.filter { $0.outcome != "retry" }.compactMap(\.device))
                    var notPushed = skipped[user]
                    let outcome: String
                    if names.contains("routed") {
                        outcome = "socket"
                    } else if names.contains("replayed") {
                        outcome = "replayed"
                    } else if attempts.contains(where: { $0.outcome == "sent" }) {
                        outcome = "pushed"
                    } else if !queued.subtracting(settled).isEmpty {
                        outcome = "push_pending"
                    } else if !queued.isEmpty || !attempts.isEmpty {
                        outcome = "push_failed"
                    } else if notPushed != nil {
                        outcome = "not_pushed"
                    } else if !pushOn {
                        notPushed = "push_off"
                        outcome = "not_pushed"
                    } else {
                        outcome = "nothing_yet"
                    }
                    return TraceRecipient(userId: UserID(rawValue: id), outcome: outcome, notPushed: notPushed, steps: steps)
                }
                return MessageTrace(messageId: message, conversationId: ConversationID(rawValue: try row.get("conversation")),
                                    authorId: UserID(rawValue: try row.get("author")), seq: seq, position: position,
                                    createdAt: Date(milliseconds: createdAt), committedOn: committedOn,
                                    shadow: try row.get("shadow", as: Int64.self) != 0, recipients: recipients, webhooks: webhooks,
                                    keptUntil: Date(milliseconds: createdAt + Chat.milliseconds(retention ?? .zero)))
            }
        }
    }

    /// A `devices` column's entries: comma-separated, each colon-separated integers.
    static func entries(_ text: String?) -> [[Int64]] {
        guard let text, !text.isEmpty else { return [] }
        return text.split(separator: ",").map { $0.split(separator: ":").compactMap { Int64($0) } }
    }

    /// `id → public_id` of the rows of `table` (account or session) with these keys.
    private func publicIDs(_ db: any Database, table: StaticString, keys: Set<Int64>) throws -> [Int64: String] {
        guard !keys.isEmpty else { return [:] }
        var found: [Int64: String] = [:]
        for row in try db.fetchAll("SELECT id, public_id FROM \(literal: table) WHERE id IN (\(list: Array(keys)))") {
            found[try row.get("id")] = try row.get("public_id")
        }
        return found
    }
}

/// A trace step's `detail` column, read back.
private struct TraceDetail: Decodable {
    var platform: String?
    var status: Int?
    var reason: String?
    var providerId: String?
    var outcome: String?
    var idOnly: Bool?
    var endpoint: String?
    var event: String?
    var deliveredSeq: Int64?
    var readSeq: Int64?

    static func read(_ text: String?) throws -> TraceDetail {
        guard let text, !text.isEmpty else { return TraceDetail() }
        return try JSONDecoder().decode(TraceDetail.self, from: Data(text.utf8))
    }
}

extension Date {
    /// The instant `milliseconds` after 1970.
    init(milliseconds: Int64) { self.init(timeIntervalSince1970: Double(milliseconds) / 1000) }
}
