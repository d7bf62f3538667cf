package import Foundation
import ParleyCrypto
package import ParleyStore
package import ParleyWire
import ParleySync

/// Webhook deliveries in the outbox (docs/webhooks.md, decisions/0020-webhooks-in-order-per-endpoint.md).
///
/// A delivery is an `outbox` row of kind `webhook` in the *lane* of its endpoint, written in
/// the transaction of the change it reports. A lane's rows are delivered one at a time in
/// row order: only the lane's oldest unfinished row (its head) is ever tried, so a receiver
/// sees an endpoint's events in the order they happened, a retry holding back what follows.
/// A row's payload is `<type>\n<milliseconds>\n<data JSON>`; its body is written when it is
/// sent, with the row's id as the delivery id, so every attempt sends the same bytes.
package enum Webhooks: Sendable {
    /// The outbox kind.
    package static let kind = "webhook"

    /// Adds a delivery of `type` with `data` to every endpoint of `app` in `format` that hears
    /// it (Parley's events, or for Pusher-format endpoints one entry of Pusher's `events`
    /// list). Call inside the change's transaction.
    ///
    /// - Returns: whether a delivery was written (the caller wakes the workers after commit:
    ///   ``Chat/signal()``).
    @discardableResult
    package static func enqueue(_ db: any Database, app: Int64, format: WebhookFormat = .parley, type: String, data: [UInt8], now: Int64) throws -> Bool {
        let endpoints = try db.fetchAll("SELECT id, events FROM webhook_endpoint WHERE app_id = \(app) AND format = \(format.rawValue)")
        guard !endpoints.isEmpty else { return false }
        let payload = Self.payload(type: type, createdAt: now, data: data)
        var wrote = false
        for endpoint in endpoints where Self.hears(try endpoint.get("events"), type) {
            try add(db, lane: try endpoint.get("id"), payload: payload, now: now)
            wrote = true
        }
        return wrote
    }

    static func add(_ db: any Database, lane: Int64, payload: [UInt8], now: Int64) throws {
        let ref = Crypto.randomID(prefix: "whd_", length: 20)
        try db.enqueue("""
            INSERT INTO outbox (kind, lane, ref, payload, due_at, created_at) VALUES (\(kind), \(lane), \(ref), \(payload), \(now), \(now))
            """)
    }

    /// Writes a delivery of `payload` for every Parley-format endpoint of the conversation's
    /// app that hears `type`, in one statement that needs no answer (so on PostgreSQL it is
    /// queued with the write's other statements, and a write without endpoints reads nothing
    /// to learn it). Each delivery's id is the event's random part and the endpoint's key.
    ///
    /// - Returns: the deliveries written, when the engine ran the statement at once.
    static func addForEndpoints(_ db: any Database, conversation: Int64, type: String, payload: [UInt8], now: Int64) throws -> Int? {
        let ref = Crypto.randomID(prefix: "whd_", length: 16)
        return try db.enqueue("""
            INSERT INTO outbox (kind, lane, ref, payload, due_at, created_at)
            SELECT \(kind), w.id, \(ref) || w.id, \(payload), \(now), \(now)
            FROM conversation c JOIN webhook_endpoint w ON w.app_id = c.app_id
            WHERE c.id = \(conversation) AND w.format = 'parley' AND ',' || w.events || ',' LIKE \(Self.listPattern(type)) ESCAPE '\\'
            ORDER BY w.id
            """)
    }

    /// A LIKE pattern that finds `item` in a comma-separated list wrapped in commas.
    static func listPattern(_ item: String) -> String {
        var escaped = ""
        for character in item {
            if character == "%" || character == "_" || character == "\\" { escaped.append("\\") }
            escaped.append(character)
        }
        return "%," + escaped + ",%"
    }

    static func hears(_ events: String, _ type: String) -> Bool {
        events.split(separator: ",").contains { $0 == type }
    }

    static func payload(type: String, createdAt: Int64, data: [UInt8]) -> [UInt8] {
        Array("\(type)\n\(createdAt)\n".utf8) + data
    }

    /// A value's JSON as the API writes it.
    static func json(_ value: some Encodable) throws -> [UInt8] {
        Array(try WireCoding.encoder().encode(value))
    }
}

/// One delivery, split out of its row.
package struct WebhookMessage: Sendable, Hashable {
    /// The row.
    package var item: OutboxItem
    /// `whd_…`: the `Parley-Webhook-Id`, the same on every attempt and never reused.
    package var id: String
    /// The event type.
    package var type: String
    /// When the event happened (milliseconds).
    package var createdAt: Int64
    /// The event's data, as JSON.
    package var data: [UInt8]
    /// The position of the log's event the data was read from (the delivery trace's key).
    package var eventPosition: Int64?

    /// The log position the data is read from, when the row names one (`@<position>`).
    var position: Int64? {
        guard data.first == UInt8(ascii: "@") else { return nil }
        return Int64(String(decoding: data.dropFirst(), as: UTF8.self))
    }

    init?(_ item: OutboxItem, ref: String?) {
        guard let ref else { return nil }
        id = ref
        let bytes = item.payload
        guard let first = bytes.firstIndex(of: 10), let second = bytes[(first + 1)...].firstIndex(of: 10),
              let createdAt = Int64(String(decoding: bytes[(first + 1)..<second], as: UTF8.self)) else { return nil }
        self.item = item
        type = String(decoding: bytes[..<first], as: UTF8.self)
        self.createdAt = createdAt
        data = Array(bytes[(second + 1)...])
    }

    /// The Parley-format body: `{"createdAt","data","id","type"}`.
    package var body: [UInt8] {
        var writer = JSONWriter(capacity: data.count + 128)
        writer.object { json in
            json.key("createdAt"); json.date(milliseconds: createdAt)
            json.key("data"); json.raw(String(decoding: data, as: UTF8.self))
            json.key("id"); json.string(id)
            json.key("type"); json.string(type)
        }
        return writer.bytes
    }

    /// The Pusher-format body: `{"time_ms":…,"events":[<event>]}`, `time_ms` the time of
    /// sending (Pusher's libraries refuse a webhook more than five minutes old).
    package func pusherBody(now: Int64) -> [UInt8] {
        Array("{\"time_ms\":\(now),\"events\":[".utf8) + data + Array("]}".utf8)
    }
}

/// An endpoint's lane as a worker claimed it: where to send, how to sign, and its rows in order.
package struct WebhookBatch: Sendable {
    /// The endpoint's internal key (the lane).
    package var lane: Int64
    /// `wh_…`.
    package var endpointID: String
    /// Where to POST.
    package var url: String
    /// The endpoint's signing secret (Parley format).
    package var secret: String
    /// The format.
    package var format: WebhookFormat
    /// The app's public key and secret (Pusher format signs with them).
    package var appKey: String
    /// The app's secret (Pusher format); nil for an app created before secrets were kept.
    package var appSecret: String?
    /// The lane's rows, oldest first; the first is the lane's head.
    package var deliveries: [WebhookMessage]
}

/// Wakes the webhook workers when deliveries were written, once they are committed (so an
/// idle worker neither polls the database after every write nor looks before the rows exist).
package final class WebhookSignal: Sendable {
    /// What the workers wait on: told of each write's deliveries, read once a second for all
    /// of them (other nodes' deliveries, retries).
    package let watch = DueWatch()

    /// A signal nobody waits on yet.
    package init() {}
}

/// Events appended by a write, turned into webhook deliveries in its transaction: one
/// statement finds the endpoints of the write's conversations' apps, and rows are written
/// only when one hears the event. Installed on every server.
package struct WebhookHook: TransactionHook {
    /// Signalled after a write that added deliveries commits.
    package let signal: WebhookSignal

    /// A hook that signals `signal`.
    package init(signal: WebhookSignal = WebhookSignal()) {
        self.signal = signal
    }

    package func didAppend(_ events: [AppendedEvent], in db: any Database) throws {
        // What the kind's rule lets webhooks hear, and only what everyone may see.
        let relevant = events.filter(\.reachesWebhooks)
        guard !relevant.isEmpty else { return }
        var wrote = false
        let transaction = db as? Transaction
        for event in relevant where transaction?.hasWebhooks(conversation: event.conversationKey) != false {
            // The event is in the log already: the row names its position, and the data is read
            // back when the delivery is claimed (half the bytes a send writes, not twice them).
            let type = event.record.type.rawValue
            let payload = Webhooks.payload(type: type, createdAt: event.record.createdAt, data: Array("@\(event.record.position)".utf8))
            let changed = try Webhooks.addForEndpoints(db, conversation: event.conversationKey, type: type, payload: payload,
                                                        now: event.record.createdAt)
            // Sent without waiting (PostgreSQL), the count is unknown: wake the workers anyway.
            if changed ?? 1 > 0 { wrote = true }
        }
        if wrote, let transaction, let first = relevant.first {
            let watch = signal.watch
            let due = Chat.date(first.record.createdAt)
            transaction.onCommit { watch.noteDue(due) }
        }
    }
}

/// Webhooks: an app's endpoints, their deliveries in order per endpoint, retries, pauses and replays (docs/webhooks.md).
package struct AppWebhooks: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Webhooks: an app's endpoints, their deliveries in order per endpoint, retries, pauses and replays (docs/webhooks.md).
    package var webhooks: AppWebhooks { AppWebhooks(core: self) }
}

extension AppWebhooks {
    /// Wakes this node's webhook workers: deliveries were just committed outside the event
    /// write path (a new user, Pusher happenings).
    func signal() {
        webhookHook?.signal.watch.noteDue(core.now)
    }

    /// The webhook hook this domain runs, if any.
    package var webhookHook: WebhookHook? {
        core.hooks.lazy.compactMap { $0 as? WebhookHook }.first
    }

    // MARK: - Endpoints

    /// Registers an endpoint; the answer carries its signing secret, shown this once.
    ///
    /// - Throws: 400 for a URL that is not http(s), too long, carries credentials, or names a
    ///   private address (unless allowed); no events or the wrong format's events; 409
    ///   `too_many_webhooks`.
    package func create(_ server: ServerApp, _ request: CreateWebhookRequest) async throws -> WebhookEndpoint {
        let format = request.format ?? .parley
        let url = try Validate.webhookURL(request.url, allowPrivate: configuration.webhooksAllowPrivate)
        let events = try Validate.webhookEvents(request.events, format: format)
        let description = try request.description.map { try Validate.webhookDescription($0) }
        let publicID = Crypto.randomID(prefix: "wh_", length: 16)
        let secret = "whsec_" + Crypto.randomToken()
        let sealed = seal(secret)
        let now = nowMilliseconds
        let app = server.app.id
        let limit = configuration.webhooksPerApp
        return try await run {
            try await store.write { db in
                let count = try db.fetchValue(Int.self, "SELECT count(*) FROM webhook_endpoint WHERE app_id = \(app)") ?? 0
                guard count < limit else { throw ChatError.tooManyWebhooks(limit: limit) }
                try db.execute("""
                    INSERT INTO webhook_endpoint (public_id, app_id, url, events, format, secret, description, created_at, updated_at)
                    VALUES (\(publicID), \(app), \(url), \(events), \(format.rawValue), \(sealed), \(description), \(now), \(now))
                    """)
                var endpoint = try Chat.webhook(db, app: app, id: publicID)
                endpoint.secret = secret
                endpoint.standardWebhooksSecret = StandardWebhooks.librarySecret(secret)
                return endpoint
            }
        }
    }

    /// The app's endpoints, oldest first (without secrets).
    package func list(_ server: ServerApp) async throws -> WebhookEndpointList {
        try await run {
            try await store.read { db in
                let ids: [String] = try db.fetchAll("SELECT public_id FROM webhook_endpoint WHERE app_id = \(server.app.id) ORDER BY id")
                    .map { try $0.get("public_id") }
                return WebhookEndpointList(webhooks: try ids.map { try Chat.webhook(db, app: server.app.id, id: $0) })
            }
        }
    }

    /// One endpoint.
    package func endpoint(_ server: ServerApp, id: String) async throws -> WebhookEndpoint {
        try await run { try await store.read { db in try Chat.webhook(db, app: server.app.id, id: id) } }
    }

    /// Changes an endpoint's URL, events or note, or pauses or resumes it. Resuming clears
    /// the failure record; waiting deliveries then go out in order.
    package func update(_ server: ServerApp, id: String, _ request: UpdateWebhookRequest) async throws -> WebhookEndpoint {
        let url = try request.url.map { try Validate.webhookURL($0, allowPrivate: configuration.webhooksAllowPrivate) }
        let description = try request.description.map { try Validate.webhookDescription($0) }
        let now = nowMilliseconds
        let app = server.app.id
        return try await run {
            try await store.write { db in
                let current = try Chat.webhook(db, app: app, id: id)
                let events = try request.events.map { try Validate.webhookEvents($0, format: current.format) }
                if let url { try db.execute("UPDATE webhook_endpoint SET url = \(url) WHERE public_id = \(id)") }
                if let events { try db.execute("UPDATE webhook_endpoint SET events = \(events) WHERE public_id = \(id)") }
                if let description { try db.execute("UPDATE webhook_endpoint SET description = \(description) WHERE public_id = \(id)") }
                switch request.paused {
                case true?:
                    try db.execute("""
                        UPDATE webhook_endpoint SET paused_at = coalesce(paused_at, \(now)), paused_reason = 'paused by the app'
                        WHERE public_id = \(id)
                        """)
                case false?:
                    try db.execute("""
                        UPDATE webhook_endpoint SET paused_at = NULL, paused_reason = NULL, failing_since = NULL WHERE public_id = \(id)
                        """)
                case nil: break
                }
                try db.execute("UPDATE webhook_endpoint SET updated_at = \(now) WHERE public_id = \(id)")
                return try Chat.webhook(db, app: app, id: id)
            }
        }
    }

    /// Replaces an endpoint's signing secret (answered once).
    package func rotateSecret(_ server: ServerApp, id: String) async throws -> WebhookEndpoint {
        let secret = "whsec_" + Crypto.randomToken()
        let sealed = seal(secret)
        return try await run {
            try await store.write { db in
                _ = try Chat.webhook(db, app: server.app.id, id: id)
                try db.execute("UPDATE webhook_endpoint SET secret = \(sealed) WHERE public_id = \(id)")
                var endpoint = try Chat.webhook(db, app: server.app.id, id: id)
                endpoint.secret = secret
                endpoint.standardWebhooksSecret = StandardWebhooks.librarySecret(secret)
                return endpoint
            }
        }
    }

    /// Removes an endpoint and every delivery waiting for it.
    package func delete(_ server: ServerApp, id: String) async throws {
        try await run {
            try await store.write { db in
                let lane = try Chat.webhookLane(db, app: server.app.id, id: id)
                try db.execute("DELETE FROM outbox WHERE lane IS NOT NULL AND lane = \(lane)")
                try db.execute("DELETE FROM webhook_endpoint WHERE id = \(lane)")
            }
        }
    }

    /// An endpoint's deliveries, oldest first: `failed` ones (given up on) or `pending` ones.
    package func deliveries(_ server: ServerApp, id: String, failed: Bool, after: String?, limit: Int?) async throws -> WebhookDeliveryList {
        let limit = try Validate.limit(limit, in: 1...500, default: 100)
        if let after, !after.hasPrefix("whd_") || after.utf8.count > 64 { throw ChatError.invalid("after must be a delivery id (whd_…)") }
        return try await run {
            try await store.read { db in
                let lane = try Chat.webhookLane(db, app: server.app.id, id: id)
                let start = try after.map { ref -> Int64 in
                    guard let row = try db.fetchValue(Int64.self, "SELECT id FROM outbox WHERE lane = \(lane) AND ref = \(ref)") else {
                        throw ChatError.invalid("after names no delivery of this endpoint")
                    }
                    return row
                } ?? 0
                let state: SQL = failed ? "failed_at IS NOT NULL" : "failed_at IS NULL"
                let rows = try db.fetchAll("""
                    SELECT id, kind, ref, payload, attempts, created_at, due_at, failed_at FROM outbox
                    WHERE lane IS NOT NULL AND lane = \(lane) AND id > \(start) AND 
                    """ + state + " ORDER BY id LIMIT \(limit + 1)")
                let deliveries = try rows.prefix(limit).compactMap { row -> WebhookDelivery? in
                    let item = try Chat.outboxItem(row)
                    guard let message = WebhookMessage(item, ref: try row.get("ref", as: String?.self)) else { return nil }
                    let failedAt = try row.get("failed_at", as: Int64?.self)
                    return WebhookDelivery(id: message.id, type: message.type, createdAt: Chat.date(message.createdAt), attempts: item.attempts,
                                           dueAt: failedAt == nil ? Chat.date(try row.get("due_at")) : nil, failedAt: failedAt.map(Chat.date))
                }
                return WebhookDeliveryList(deliveries: deliveries, hasMore: rows.count > limit)
            }
        }
    }

    /// Puts failed deliveries back in line (one, or every one of the endpoint), due now with
    /// their attempts reset; they go out in their original order among the waiting ones.
    package func replay(_ server: ServerApp, id: String, delivery: String?) async throws -> ReplayResult {
        let now = nowMilliseconds
        if let delivery, !delivery.hasPrefix("whd_") || delivery.utf8.count > 64 { throw ChatError.deliveryNotFound }
        let row = delivery
        return try await run {
            try await store.write { db in
                let lane = try Chat.webhookLane(db, app: server.app.id, id: id)
                let only: SQL = row.map { " AND ref = \($0)" } ?? ""
                let count = try db.execute("""
                    UPDATE outbox SET failed_at = NULL, attempts = 0, due_at = \(now), claimed_by = NULL, claimed_until = NULL
                    WHERE lane IS NOT NULL AND lane = \(lane) AND failed_at IS NOT NULL
                    """ + only)
                if row != nil, count == 0 { throw ChatError.deliveryNotFound }
                return ReplayResult(replayed: count)
            }
        }
    }

    // MARK: - Delivering

    /// Claims up to `lanes` endpoints whose head delivery is due, each with up to `perLane` of
    /// its rows in order, for `holder` until `lease` from now. An endpoint is worked on by one
    /// worker at a time (on PostgreSQL its claim takes a transaction-scoped advisory lock on
    /// the lane, so two nodes never take one lane at once); paused endpoints are skipped.
    package func claim(holder: String, lanes: Int, perLane: Int, lease: Duration) async throws -> [WebhookBatch] {
        let sealer = configuration.sealer
        let now = nowMilliseconds
        let until = now + Chat.milliseconds(lease)
        return try await run {
            try await store.write { db in
                var batches: [WebhookBatch] = []
                for head in try Chat.webhookHeads(db, now: now, limit: lanes * 2) where batches.count < lanes {
                    if db.dialect == .postgres {
                        let locked = try db.fetchValue(Int64.self, """
                            SELECT CASE WHEN pg_try_advisory_xact_lock(20000, CAST(\(head) AS integer)) THEN 1 ELSE 0 END
                            """) ?? 0
                        guard locked == 1 else { continue }
                    }
                    // Read again under the lock: another node may have claimed it meanwhile.
                    let rows = try db.fetchAll("""
                        SELECT id, kind, ref, payload, attempts, created_at, due_at, claimed_until FROM outbox
                        WHERE lane IS NOT NULL AND lane = \(head) AND failed_at IS NULL ORDER BY id LIMIT \(perLane)
                        """)
                    guard let first = rows.first, try first.get("due_at", as: Int64.self) <= now,
                          (try first.get("claimed_until", as: Int64?.self) ?? 0) < now,
                          let endpoint = try db.fetchOne("""
                            SELECT w.public_id, w.url, w.secret, w.format, a.public_key, a.secret AS app_secret
                            FROM webhook_endpoint w JOIN app a ON a.id = w.app_id WHERE w.id = \(head) AND w.paused_at IS NULL
                            """) else { continue }
                    let due = try rows.prefix { try $0.get("due_at", as: Int64.self) <= now }
                    let items = try due.map(Chat.outboxItem)
                    let messages = try Chat.withEventData(db, try due.map { WebhookMessage(try Chat.outboxItem($0), ref: try $0.get("ref", as: String?.self)) })
                    try db.execute("UPDATE outbox SET claimed_by = \(holder), claimed_until = \(until) WHERE id IN (\(list: items.map(\.id)))")
                    batches.append(WebhookBatch(lane: head, endpointID: try endpoint.get("public_id"), url: try endpoint.get("url"),
                                                secret: try Chat.unseal(try endpoint.get("secret"), with: sealer),
                                                format: WebhookFormat(rawValue: try endpoint.get("format")) ?? .parley,
                                                appKey: try endpoint.get("public_key"), appSecret: try endpoint.get("app_secret", as: String?.self).map { try Chat.unseal($0, with: sealer) },
                                                deliveries: messages.compactMap { $0 }))
                    // A row that cannot be read is not held back behind: drop it.
                    let unreadable = zip(items, messages).filter { $0.1 == nil }.map(\.0.id)
                    if !unreadable.isEmpty { try db.execute("DELETE FROM outbox WHERE id IN (\(list: unreadable))") }
                }
                return batches
            }
        }
    }

    /// When the next endpoint's head delivery falls due (nil: nothing waits), for a worker to
    /// sleep until then. Held heads, paused endpoints and rows behind a head do not count.
    package func nextDue() async throws -> Date? {
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                try db.fetchValue(Int64.self, "SELECT h.due_at " + Chat.laneHeads(now: now) + " ORDER BY h.due_at LIMIT 1").map(Chat.date)
            }
        }
    }

    /// Deliveries the receiver took (2xx), in one write: removed, the endpoint marked healthy,
    /// and the rest of the lane's claim renewed for `lease` (a worker that dies mid-lane holds it
    /// up only that long; what it delivered and had not recorded is delivered again).
    package func delivered(_ deliveries: [WebhookMessage], lane: Int64, holder: String, lease: Duration = .seconds(15)) async throws {
        guard !deliveries.isEmpty else { return }
        let until = nowMilliseconds + Chat.milliseconds(lease)
        try await run {
            try await store.write { db in
                try db.execute("DELETE FROM outbox WHERE id IN (\(list: deliveries.map(\.item.id))) AND claimed_by = \(holder)")
                try db.execute("""
                    UPDATE outbox SET claimed_until = \(until) WHERE lane IS NOT NULL AND lane = \(lane) AND claimed_by = \(holder)
                    """)
                try db.execute("""
                    UPDATE webhook_endpoint SET failing_since = NULL, last_error = NULL WHERE id = \(lane) AND failing_since IS NOT NULL
                    """)
            }
        }
    }

    /// A delivery that failed: tried again `after` from now, or (`after` nil: out of attempts)
    /// kept as failed and its endpoint paused; the rest of the lane's claim is let go.
    package func failed(_ delivery: WebhookMessage, lane: Int64, holder: String, error: String, after: Duration?) async throws {
        let now = nowMilliseconds
        let reason = String(error.prefix(300))
        try await run {
            try await store.write { db in
                if let after {
                    try db.execute("""
                        UPDATE outbox SET attempts = attempts + 1, due_at = \(now + Chat.milliseconds(after)), claimed_by = NULL, claimed_until = NULL
                        WHERE id = \(delivery.item.id) AND claimed_by = \(holder)
                        """)
                } else {
                    try db.execute("""
                        UPDATE outbox SET attempts = attempts + 1, failed_at = \(now), claimed_by = NULL, claimed_until = NULL
                        WHERE id = \(delivery.item.id) AND claimed_by = \(holder)
                        """)
                    let why = "delivery \(delivery.id) failed for the whole retry window (last: \(reason)); resume with PATCH {\"paused\": false}"
                    try db.execute("UPDATE webhook_endpoint SET paused_at = \(now), paused_reason = \(why) WHERE id = \(lane)")
                }
                try db.execute("""
                    UPDATE webhook_endpoint SET failing_since = coalesce(failing_since, \(now)), last_error = \(reason) WHERE id = \(lane)
                    """)
                try db.execute("""
                    UPDATE outbox SET claimed_by = NULL, claimed_until = NULL WHERE lane IS NOT NULL AND lane = \(lane) AND claimed_by = \(holder)
                    """)
            }
        }
    }

    /// A delivery this node could not even attempt (it had no file descriptor for a socket):
    /// due again `after` from now, its attempts and its endpoint's health untouched (the
    /// receiver did nothing wrong), and the rest of the lane's claim let go.
    package func postpone(_ delivery: WebhookMessage, lane: Int64, holder: String, after: Duration) async throws {
        let due = nowMilliseconds + Chat.milliseconds(after)
        try await run {
            try await store.write { db in
                try db.execute("UPDATE outbox SET due_at = \(due) WHERE id = \(delivery.item.id) AND claimed_by = \(holder)")
                try db.execute("""
                    UPDATE outbox SET claimed_by = NULL, claimed_until = NULL WHERE lane IS NOT NULL AND lane = \(lane) AND claimed_by = \(holder)
                    """)
            }
        }
    }

    /// Endpoints paused and deliveries failed, across apps (for `/metrics`).
    package func health() async throws -> (paused: Int, failing: Int, failedDeliveries: Int, pending: Int) {
        try await run {
            try await store.read { db in
                (try db.fetchValue(Int.self, "SELECT count(*) FROM webhook_endpoint WHERE paused_at IS NOT NULL") ?? 0,
                 try db.fetchValue(Int.self, "SELECT count(*) FROM webhook_endpoint WHERE failing_since IS NOT NULL") ?? 0,
                 try db.fetchValue(Int.self, "SELECT count(*) FROM outbox WHERE lane IS NOT NULL AND failed_at IS NOT NULL") ?? 0,
                 try db.fetchValue(Int.self, "SELECT count(*) FROM outbox WHERE lane IS NOT NULL AND failed_at IS NULL") ?? 0)
            }
        }
    }
}

extension Chat {

    // MARK: - Inside a transaction

    /// Lanes whose head (oldest unfinished row) is due and unheld, oldest due first.
    static func webhookHeads(_ db: any Database, now: Int64, limit: Int) throws -> [Int64] {
        try db.fetchAll("SELECT w.id AS lane " + laneHeads(now: now) + " AND h.due_at <= \(now) ORDER BY h.due_at, h.id LIMIT \(limit)")
            .map { try $0.get("lane") }
    }

    /// `FROM … WHERE …` of every unpaused endpoint (`w`) with its head (`h`) unheld: one index
    /// step per endpoint (`outbox_lane`), however long its backlog.
    static func laneHeads(now: Int64) -> SQL {
        """
        FROM webhook_endpoint w
        JOIN outbox h ON h.id = (SELECT o.id FROM outbox o WHERE o.lane = w.id AND o.failed_at IS NULL ORDER BY o.id LIMIT 1)
        WHERE w.paused_at IS NULL AND (h.claimed_until IS NULL OR h.claimed_until < \(now))
        """
    }

    /// Deliveries whose data names an event of the log (`@<position>`) with the event's JSON
    /// read back, as the feed shows it now (a message edited or deleted since shows so). An
    /// event no longer in the log leaves its delivery out (nil).
    static func withEventData(_ db: any Database, _ messages: [WebhookMessage?]) throws -> [WebhookMessage?] {
        let positions = messages.compactMap { $0?.position }
        guard !positions.isEmpty else { return messages }
        let rows = try db.fetchAll("SELECT \(eventColumns) FROM event e \(eventJoins) WHERE e.position IN (\(list: positions))")
        var json: [Int64: [UInt8]] = [:]
        for event in try storedEvents(db, rows[...], viewer: nil) { json[event.record.position] = event.eventJSON }
        return messages.map { message in
            guard var message, let position = message.position else { return message }
            guard let data = json[position] else { return nil }
            message.data = data
            message.eventPosition = position
            return message
        }
    }

    static func outboxItem(_ row: Row) throws -> OutboxItem {
        OutboxItem(id: try row.get("id"), kind: try row.get("kind"), payload: try row.get("payload"),
                   attempts: Int(try row.get("attempts", as: Int64.self)), createdAt: Chat.date(try row.get("created_at")))
    }

    static func webhookLane(_ db: any Database, app: Int64, id: String) throws -> Int64 {
        guard id.utf8.count <= 64,
              let lane = try db.fetchValue(Int64.self, "SELECT id FROM webhook_endpoint WHERE app_id = \(app) AND public_id = \(id)") else {
            throw ChatError.webhookNotFound
        }
        return lane
    }

    static func webhook(_ db: any Database, app: Int64, id: String) throws -> WebhookEndpoint {
        guard id.utf8.count <= 64, let row = try db.fetchOne("""
            SELECT w.id, w.public_id, w.url, w.events, w.format, w.description, w.created_at, w.failing_since, w.last_error, w.paused_at,
                   w.paused_reason,
                   (SELECT count(*) FROM outbox o WHERE o.lane = w.id AND o.failed_at IS NULL) AS pending,
                   (SELECT count(*) FROM outbox o WHERE o.lane = w.id AND o.failed_at IS NOT NULL) AS failed
            FROM webhook_endpoint w WHERE w.app_id = \(app) AND w.public_id = \(id)
            """) else { throw ChatError.webhookNotFound }
        return WebhookEndpoint(
            id: try row.get("public_id"), url: try row.get("url"),
            events: try row.get("events", as: String.self).split(separator: ",").compactMap { WebhookEventType(rawValue: String($0)) },
            format: WebhookFormat(rawValue: try row.get("format")) ?? .parley, description: try row.get("description", as: String?.self),
            secret: nil, createdAt: date(try row.get("created_at")), failingSince: try row.get("failing_since", as: Int64?.self).map(date),
            lastError: try row.get("last_error", as: String?.self), pausedAt: try row.get("paused_at", as: Int64?.self).map(date),
            pausedReason: try row.get("paused_reason", as: String?.self), pending: Int(try row.get("pending", as: Int64.self)),
            failed: Int(try row.get("failed", as: Int64.self)))
    }
}

extension Validate {
    /// An http(s) URL of at most 2,048 bytes, without credentials or a fragment, whose host
    /// (when it is an address) is public unless private addresses are allowed. Names that
    /// resolve to private addresses are refused when a delivery connects.
    static func webhookURL(_ text: String, allowPrivate: Bool) throws -> String {
        guard (1...2048).contains(text.utf8.count), let components = URLComponents(string: text),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.host, !host.isEmpty else {
            throw ChatError.invalid("url must be an http:// or https:// URL of at most 2048 bytes")
        }
        guard components.user == nil, components.password == nil else { throw ChatError.invalid("url must not carry a user or password") }
        guard components.fragment == nil else { throw ChatError.invalid("url must not have a #fragment") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) else {
            throw ChatError.invalid("url must not contain spaces or control characters")
        }
        if !allowPrivate {
            let lowered = host.lowercased()
            if lowered == "localhost" || lowered.hasSuffix(".localhost") {
                throw ChatError.invalid("url names this machine (\(host)); webhooks reach public addresses only unless the server runs with --webhooks-allow-private")
            }
            if let bytes = AddressPolicy.literal(host),
               bytes.count == 4 ? AddressPolicy.isPrivate(ipv4: bytes) : AddressPolicy.isPrivate(ipv6: bytes) {
                throw ChatError.invalid("url names a private address (\(host)); webhooks reach public addresses only unless the server runs with --webhooks-allow-private")
            }
        }
        return text
    }

    /// A non-empty list of the format's event types, stored comma-separated.
    static func webhookEvents(_ events: [WebhookEventType], format: WebhookFormat) throws -> String {
        guard !events.isEmpty else { throw ChatError.invalid("events must name at least one event type") }
        let wrong = events.filter { $0.isPusher != (format == .pusher) }
        guard wrong.isEmpty else {
            let allowed = WebhookEventType.allCases.filter { $0.isPusher == (format == .pusher) }.map(\.rawValue)
            let hint = format == .parley ? " (Pusher's events need \"format\": \"pusher\")" : " (Parley's events need \"format\": \"parley\")"
            throw ChatError.invalid("a \(format.rawValue)-format endpoint hears \(allowed.joined(separator: ", ")); not \(wrong.map(\.rawValue).joined(separator: ", "))"
                                    + hint)
        }
        var seen = Set<WebhookEventType>()
        return events.filter { seen.insert($0).inserted }.map(\.rawValue).joined(separator: ",")
    }

    static func webhookDescription(_ text: String) throws -> String {
        guard text.unicodeScalars.count <= 200 else { throw ChatError.invalid("description must be at most 200 characters") }
        return text
    }
}

/// A Pusher-protocol happening for Pusher-format endpoints: its `name` (`channel_occupied`,
/// `member_added`, …) and the entry of Pusher's `events` list, as JSON.
package struct PusherWebhookEvent: Sendable, Hashable {
    /// The event's name.
    package var name: String
    /// `{"name":…,"channel":…,…}`.
    package var json: [UInt8]

    /// An event with its fields (strings), written in Pusher's shape.
    package init(name: String, channel: String, fields: [(String, String)] = []) {
        self.name = name
        var writer = JSONWriter(capacity: 128)
        writer.object { object in
            object.key("name"); object.string(name)
            object.key("channel"); object.string(channel)
            for (key, value) in fields {
                object.key(text: key)
                object.string(value)
            }
        }
        json = writer.bytes
    }
}

extension AppWebhooks {
    /// Writes Pusher-format deliveries for an app's Pusher happenings (channels occupied and
    /// vacated, presence members, client events). Apps without a Pusher-format endpoint cost
    /// a cached lookup (refreshed every 2 s: a new endpoint hears events within that).
    package func pusherFormat(app: Int64, _ events: [PusherWebhookEvent]) async {
        guard !events.isEmpty else { return }
        let now = nowMilliseconds
        let known = core.pusherEndpoints.withLock { $0[app] }
        if let known, known.checkedAt > now - 2000, !known.exists { return }
        let exists: Bool? = try? await run {
            try await store.write { db in
                let count = try db.fetchValue(Int.self, "SELECT count(*) FROM webhook_endpoint WHERE app_id = \(app) AND format = 'pusher'") ?? 0
                guard count > 0 else { return false }
                for event in events { try Webhooks.enqueue(db, app: app, format: .pusher, type: event.name, data: event.json, now: now) }
                return true
            }
        }
        if let exists { core.pusherEndpoints.withLock { $0[app] = (exists, now) } }
        if exists == true { signal() }
    }
}

/// The Standard Webhooks signature (standardwebhooks.com) beside Parley's own: `webhook-id`,
/// `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`,
/// whose key is the random bytes of the endpoint's `whsec_…` secret, so any receiver can check a
/// delivery with the `standardwebhooks` or `svix` libraries as they are.
package enum StandardWebhooks: Sendable {
    /// The HMAC key of a `whsec_…` secret (its URL-safe base64 decoded); nil for another form.
    package static func key(secret: String) -> [UInt8]? {
        guard secret.hasPrefix("whsec_") else { return nil }
        return base64URLDecoded(String(secret.dropFirst(6))).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The secret as the libraries take it: `whsec_` and the key in standard base64.
    package static func librarySecret(_ secret: String) -> String? {
        key(secret: secret).map { "whsec_" + Data($0).base64EncodedString() }
    }

    /// The `webhook-signature` header's value.
    package static func signature(key: [UInt8], id: String, timestamp: Int64, body: [UInt8]) -> String {
        "v1," + Data(Crypto.hmacSHA256(key: key, message: Array("\(id).\(timestamp).".utf8) + body)).base64EncodedString()
    }
}
