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
            try await write { db in
                var start = 0
                while start < rows.count {
                    let chunk = rows[start..<min(rows.count, start + 200)]
                    var sql: SQL = "INSERT INTO delivery_trace (position, conversation_id, step, user_id, session_id, device, node, at, detail) VALUES "
                    for (index, row) in chunk.enumerated() {
                        if index > 0 { sql = sql + ", " }
                        sql = sql + "(\(row.position), \(row.conversation), \(row.step), \(row.user), \(row.session), \(row.device), \(node), \(row.at), \(row.detail))"
                    }
                    try db.execute(sql)
                    start += chunk.count
                }
            }
        } catch {
            core.traceRecorder.putBack(rows)
            throw error
        }
        return rows.count
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
                    SELECT step, user_id, session_id, device, node, at, detail FROM delivery_trace WHERE position = \(position) ORDER BY at, id
                    """)
                let receipts = try db.fetchAll("""
                    SELECT user_id, session_id, node, at, detail FROM delivery_trace
                    WHERE conversation_id = \(conversationKey) AND step = 'receipt' AND at >= \(createdAt) ORDER BY at, id
                    """)
                let kind = try row.get("kind", as: String.self)
                let members = kind == "public" ? [] : try db.fetchAll("""
                    SELECT user_id FROM member WHERE conversation_id = \(conversationKey) AND user_id <> \(author)
                    """).map { try $0.get("user_id", as: Int64.self) }
                // Public ids of the users and sessions the steps name.
                var userKeys = Set(members)
                var sessionKeys = Set<Int64>()
                for step in steps + receipts {
                    if let user = try step.get("user_id", as: Int64?.self) { userKeys.insert(user) }
                    if let session = try step.get("session_id", as: Int64?.self) { sessionKeys.insert(session) }
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
                    let session = try step.get("session_id", as: Int64?.self).map { sessions[$0] ?? "ended" }
                    let traced = TraceStep(step: name, at: Date(milliseconds: try step.get("at")), node: node, session: session,
                                           device: try step.get("device", as: String?.self), platform: detail.platform, status: detail.status,
                                           reason: detail.reason, providerId: detail.providerId, outcome: detail.outcome, idOnly: detail.idOnly,
                                           endpoint: detail.endpoint)
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
                // A device's receipt: the first that marked this message delivered, and the first that marked it read.
                var marked: Set<String> = []
                for receipt in receipts {
                    guard let user = try receipt.get("user_id", as: Int64?.self), user != author,
                          let sessionKey = try receipt.get("session_id", as: Int64?.self) else { continue }
                    let detail = try TraceDetail.read(try receipt.get("detail", as: String?.self))
                    let session = sessions[sessionKey] ?? "ended"
                    let delivered = (detail.deliveredSeq ?? 0) >= seq && marked.insert("d \(sessionKey)").inserted
                    let read = (detail.readSeq ?? 0) >= seq && marked.insert("r \(sessionKey)").inserted
                    guard delivered || read else { continue }
                    byUser[user, default: []].append(TraceStep(step: "receipt", at: Date(milliseconds: try receipt.get("at")),
                                                               node: try receipt.get("node"), session: session,
                                                               deliveredSeq: delivered ? detail.deliveredSeq : nil,
                                                               readSeq: read ? detail.readSeq : nil))
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
