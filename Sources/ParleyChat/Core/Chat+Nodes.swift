import ParleyStore
package import ParleyWire

/// What a bus between nodes reads from the database: the newest committed position of each
/// shard, and the events of a span of one shard's positions as publications, to fill a gap
/// that a lost or late message left (docs/decisions/0018-positions-across-nodes.md; shards:
/// 0026, part 4). The database is the truth; the bus only carries news of it.
extension Chat {
    /// The events of `shard` after `after` up to `upTo`, oldest first, as the publications
    /// their writes made (messages as they are now). At most `limit` events.
    ///
    /// - Returns: the publications and the position they cover up to: `upTo` when every event
    ///   of the span was read, else the last one read.
    package func publications(shard: Int, after: Int64, upTo: Int64, limit: Int) async throws -> (publications: [Publication], through: Int64) {
        guard upTo > after else { return ([], after) }
        let limit = max(1, limit)
        let shards = logShards
        let inShard: SQL = shards > 1 ? SQL(stringLiteral: "AND e.position % \(shards) = \(shard)") : ""
        return try await run {
            try await store.read { db in
                // Named channels' logs (kind 'pusher') are not conversations: read apart.
                let rows = try db.fetchAll("""
                    SELECT \(Chat.eventColumns) FROM event e \(Chat.eventJoins)
                    WHERE e.position > \(after) AND e.position <= \(upTo) \(inShard) AND c.kind <> 'pusher' ORDER BY e.position LIMIT \(limit)
                    """)
                let channelRows = try db.fetchAll("""
                    SELECT e.position, e.seq, e.payload, e.created_at, c.app_id, c.title FROM event e JOIN conversation c ON c.id = e.conversation_id
                    WHERE e.position > \(after) AND e.position <= \(upTo) \(inShard) AND c.kind = 'pusher' ORDER BY e.position LIMIT \(limit)
                    """)
                var byPosition: [(Int64, Publication)] = try Chat.storedEvents(db, rows[...], viewer: nil).map { ($0.record.position, $0.publication) }
                for row in channelRows {
                    let payload = try Chat.decodeChannelPayload(try row.get("payload", as: String?.self))
                    let position: Int64 = try row.get("position")
                    byPosition.append((position, .channel(ChannelEvent(
                        app: try row.get("app_id"), channel: try row.get("title", as: String?.self) ?? "", name: payload.name,
                        dataJSON: payload.dataJSON, position: position, seq: try row.get("seq"), userID: nil,
                        excludedSocket: payload.excludedSocket, createdAt: try row.get("created_at")))))
                }
                byPosition.sort { $0.0 < $1.0 }
                // Two reads of up to `limit` each: keep the first `limit` positions, and say how
                // far that covers.
                let kept = byPosition.prefix(limit)
                let complete = rows.count < limit && channelRows.count < limit && byPosition.count <= limit
                let through = complete ? upTo : (kept.last?.0 ?? upTo)
                return (kept.map(\.1), through)
            }
        }
    }
}

/// What a bus between nodes reads from the database to order what it receives and to fill
/// gaps. ``Chat`` is one.
package protocol BusSource: Sendable {
    /// The committed-up-to position of each shard.
    func committedCursor() async throws -> LogCursor
    /// The events of `shard` after `after` up to `upTo` as publications, at most `limit`, and
    /// the position they cover up to.
    func publications(shard: Int, after: Int64, upTo: Int64, limit: Int) async throws -> (publications: [Publication], through: Int64)
}

extension Chat: BusSource {}
