import Foundation
import ParleyCrypto
import ParleyStore
import ParleyWire

/// An app as the Pusher protocol sees it: its key, the secret it signs with and its numeric id.
package struct ChannelApp: Sendable, Hashable {
    /// The app.
    package var app: AppRef
    /// The app key (Pusher's `key`).
    package var key: String
    /// The app secret (Pusher's `secret`); nil for an app made before secrets were kept for
    /// signing, until its secret is rotated.
    package var secret: String?
    /// The numeric id the Pusher libraries require (Pusher's `app_id`).
    package var pusherID: Int64
}

/// An event the app's backend triggers on a named channel.
package struct ChannelTrigger: Sendable, Hashable {
    /// The channel's name.
    package var channel: String
    /// The event's name.
    package var name: String
    /// The event's data, as given (Pusher's `data` is a string, usually JSON).
    package var data: String
    /// A socket that must not receive it (Pusher's `socket_id`).
    package var excludedSocket: String?

    /// Creates the value; each argument sets the property of the same name.
    package init(channel: String, name: String, data: String, excludedSocket: String?) {
        self.channel = channel
        self.name = name
        self.data = data
        self.excludedSocket = excludedSocket
    }
}

/// A page of a channel's stored events.
package struct ChannelHistory: Sendable, Hashable {
    /// The events after the position asked for, oldest first.
    package var events: [ChannelEvent]
    /// More events follow the last one.
    package var hasMore: Bool
    /// The oldest position the channel still keeps (0: none kept); a client whose position is
    /// older than the one before it missed events that are no longer kept.
    package var oldestKept: Int64
}

/// Named channels: the Pusher protocol's, with their events kept in the one event log
/// (docs/decisions/0016-pusher-channels-on-the-event-log.md). A channel's log is a conversation
/// of kind `pusher` named by the channel; each triggered event is one of its events with a seq
/// and a position, published through the bus after commit like every other change, and only
/// the newest `keep` are kept.
/// Named channels: the Pusher protocol's, with their events in the one event log (decision 0016).
package struct NamedChannels: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Named channels: the Pusher protocol's, with their events in the one event log (decision 0016).
    package var channels: NamedChannels { NamedChannels(core: self) }
}

extension NamedChannels {
    /// The app with this key, for the Pusher protocol; nil if there is none.
    package func app(key: String) async throws -> ChannelApp? {
        guard key.utf8.count <= 64 else { return nil }
        return try await loadChannelApp("public_key = \(key)")
    }

    /// The app with this numeric (Pusher) id; nil if there is none.
    package func app(pusherID: Int64) async throws -> ChannelApp? {
        try await loadChannelApp("pusher_id = \(pusherID)")
    }

    /// Read on every request, never cached: a secret rotated by `apps rotate-secret` (another
    /// process) stops working at once. It is one indexed read beside the request's own work.
    private func loadChannelApp(_ condition: SQL) async throws -> ChannelApp? {
        let sealer = configuration.sealer
        return try await run {
            try await store.read { db in
                try db.fetchOne("SELECT id, public_key, secret, pusher_id FROM app WHERE \(condition)").map { row in
                    ChannelApp(app: AppRef(id: try row.get("id")), key: try row.get("public_key"), secret: try row.get("secret", as: String?.self).map { try Chat.unseal($0, with: sealer) },
                               pusherID: try row.get("pusher_id"))
                }
            }
        }
    }

    /// Stores and publishes events on named channels, all in one transaction: each is appended
    /// to its channel's log (created on its first event), and each log is trimmed to its
    /// newest `keep` events. Returns once they are committed.
    ///
    /// - Returns: the stored events, in the order given.
    @discardableResult
    package func trigger(_ triggers: [ChannelTrigger], app: AppRef, keep: Int) async throws -> [ChannelEvent] {
        guard !triggers.isEmpty else { return [] }
        let now = nowMilliseconds
        let keep = max(1, keep)
        return try await run {
            try await write { tx in
                var stored: [ChannelEvent] = []
                var channels: [String: (key: Int64, publicID: String)] = [:]
                for trigger in triggers {
                    let channel = try channels[trigger.channel] ?? Chat.channelLog(tx, app: app.id, name: trigger.channel, now: now)
                    channels[trigger.channel] = channel
                    var writer = JSONWriter(capacity: trigger.data.utf8.count + 16)
                    writer.string(trigger.data)
                    let dataJSON = String(decoding: writer.bytes, as: UTF8.self)
                    var payload = EventPayload()
                    payload.channelName = trigger.name
                    payload.channelData = dataJSON
                    payload.excludedSocket = trigger.excludedSocket
                    var made: ChannelEvent?
                    let seq = try EventLog.nextSeq(tx, conversation: channel.key)
                    try tx.append(conversation: channel.key, kind: .channelEvent, seq: seq, actor: nil, payload: payload, now: now) { position in
                        let event = ChannelEvent(app: app.id, channel: trigger.channel, name: trigger.name, dataJSON: dataJSON,
                                                 position: position, seq: seq, userID: nil, excludedSocket: trigger.excludedSocket,
                                                 createdAt: now)
                        made = event
                        var appended = AppendedEvent(
                            record: EventRecord(position: position, conversationID: channel.publicID, seq: seq, type: .channelEvent,
                                                actorID: nil, createdAt: now, payload: payload),
                            conversationKey: channel.key, conversationKind: .public, userKey: nil)
                        appended.channelEvent = event
                        return appended
                    }
                    try tx.execute("DELETE FROM event WHERE conversation_id = \(channel.key) AND seq <= \(seq - Int64(keep))")
                    if let made { stored.append(made) }
                }
                return stored
            }
        }
    }

    /// A channel's stored events after `position` (0: from the oldest kept), oldest first.
    package func history(app: AppRef, channel: String, after position: Int64, limit: Int) async throws -> ChannelHistory {
        let limit = min(max(1, limit), 1_000)
        return try await run {
            try await store.read { db in
                guard let key = try db.fetchValue(Int64.self, """
                    SELECT id FROM conversation WHERE app_id = \(app.id) AND kind = 'pusher' AND title = \(channel)
                    """) else { return ChannelHistory(events: [], hasMore: false, oldestKept: 0) }
                let oldest = try db.fetchValue(Int64.self, "SELECT coalesce(min(position), 0) FROM event WHERE conversation_id = \(key)") ?? 0
                let rows = try db.fetchAll("""
                    SELECT position, seq, payload, created_at FROM event
                    WHERE conversation_id = \(key) AND position > \(position) ORDER BY position LIMIT \(limit + 1)
                    """)
                let events = try rows.prefix(limit).map { row in
                    let payload = try Chat.decodeChannelPayload(try row.get("payload", as: String?.self))
                    return ChannelEvent(app: app.id, channel: channel, name: payload.name, dataJSON: payload.dataJSON,
                                        position: try row.get("position"), seq: try row.get("seq"), userID: nil,
                                        excludedSocket: payload.excludedSocket, createdAt: try row.get("created_at"))
                }
                return ChannelHistory(events: events, hasMore: rows.count > limit, oldestKept: oldest)
            }
        }
    }

    /// Hands an event that is not stored (a client event) to every node's channel router.
    package func publishUnstored(_ event: ChannelEvent) {
        bus?.publish([.channel(event)])
    }

    /// Closes every Pusher socket signed in as `userID` in `app`, on every node.
    package func terminate(app: AppRef, userID: String) {
        bus?.publish([.channelUserTerminated(app: app.id, userID: userID)])
    }
}

extension Chat {
    /// The channel's log, created on first use.
    static func channelLog(_ tx: Transaction, app: Int64, name: String, now: Int64) throws -> (key: Int64, publicID: String) {
        if let row = try tx.fetchOne("SELECT id, public_id FROM conversation WHERE app_id = \(app) AND kind = 'pusher' AND title = \(name)") {
            return (try row.get("id"), try row.get("public_id"))
        }
        let publicID = Crypto.randomID(prefix: "ch_")
        guard let key = try tx.fetchValue(Int64.self, """
            INSERT INTO conversation (app_id, public_id, kind, title, title_key, created_by, created_at, shard)
            VALUES (\(app), \(publicID), 'pusher', \(name), \(name), NULL, \(now), \(Int64(Chat.shard(of: publicID, shards: tx.logShards)))) RETURNING id
            """) else { throw ChatError.internalError }
        return (key, publicID)
    }

    /// A stored channel event's name, data (JSON) and excluded socket, from its payload
    /// (``EventPayload``, as every event's).
    static func decodeChannelPayload(_ text: String?) throws -> (name: String, dataJSON: String, excludedSocket: String?) {
        let payload = try EventPayload(stored: text)
        guard let name = payload.channelName, let data = payload.channelData else {
            throw StoreError.decoding("a stored channel event's payload has no name or data")
        }
        return (name, data, payload.excludedSocket)
    }
}
