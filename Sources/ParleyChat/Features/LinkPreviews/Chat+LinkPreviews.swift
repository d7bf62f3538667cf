import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

// Link previews (docs/link-previews.md): a send whose text has a link leaves a job in the
// outbox (`link-preview` rows, in the same write, pipelined: the send never waits for a
// fetch); a node's preview worker claims the job, reads the page through the outbound address check (or the
// app's cache of it), and writes the preview onto the message row, announced with
// `message.previewed` (a position, no seq: readers' unread counts do not move).

/// Link previews: the jobs a send leaves, the app's cache of fetched pages, and the write that
/// puts a preview on its message.
package struct LinkPreviews: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Link previews: the jobs a send leaves, the app's cache of fetched pages, and the write
    /// that puts a preview on its message.
    package var linkPreviews: LinkPreviews { LinkPreviews(core: self) }

    /// The link a new message should be previewed by, when this node previews links and the
    /// sender did not ask for none.
    func linkToPreview(_ content: MessageContent, request previewLinks: Bool?) -> String? {
        guard configuration.linkPreviews, previewLinks != false else { return nil }
        return LinkPreview.firstLink(in: content)
    }

    /// Leaves the job of previewing `link` for message `key` in the outbox — unless the app has
    /// previews off — pipelined with the send (no wait of its own). Whether the job still
    /// stands when it is claimed (the message not deleted or edited to another link, the app's
    /// previews still on) is checked then.
    static func enqueuePreview(_ tx: Transaction, message key: Int64, app: Int64, link: String, now: Int64) throws {
        let payload = [UInt8](try JSONEncoder().encode(LinkPreviewJob.Payload(message: key, app: app, url: link)))
        _ = try tx.enqueue("""
            INSERT INTO outbox (kind, payload, due_at, created_at)
            SELECT \(LinkPreviews.outboxKind), \(payload), \(now), \(now) FROM app WHERE id = \(app) AND link_previews = 1
            """)
    }
}

/// A message waiting for its preview: a row of the outbox.
package struct LinkPreviewJob: Sendable, Hashable {
    /// What the send wrote in the outbox row.
    struct Payload: Codable {
        var message: Int64
        var app: Int64
        var url: String
    }

    /// The outbox row.
    package var id: Int64
    /// The message's row.
    package var message: Int64
    /// Its app's row.
    package var app: Int64
    /// The link to preview.
    package var url: String
    /// Tries before this one.
    package var attempts: Int
}

/// What the app's cache holds for a link.
package struct CachedLinkPreview: Sendable, Hashable {
    /// The preview without its image's path (nil: the page gave nothing to show).
    package var preview: LinkPreview?
    /// The thumbnail's blob and size, when it had one.
    package var thumbnail: (blob: String, width: Int, height: Int)?
    /// When it was fetched (milliseconds since 1970).
    package var fetchedAt: Int64

    /// Creates the value; each argument sets the property of the same name.
    package init(preview: LinkPreview?, thumbnail: (blob: String, width: Int, height: Int)? = nil, fetchedAt: Int64) {
        self.preview = preview
        self.thumbnail = thumbnail
        self.fetchedAt = fetchedAt
    }

    package static func == (a: Self, b: Self) -> Bool {
        a.preview == b.preview && a.thumbnail?.blob == b.thumbnail?.blob && a.fetchedAt == b.fetchedAt
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(preview)
        hasher.combine(thumbnail?.blob)
        hasher.combine(fetchedAt)
    }
}

extension LinkPreviews {
    /// Tries a job gets before it is dropped (the message keeps no preview).
    package static let maxAttempts = 3
    /// The outbox's kind for link-preview jobs (`/metrics`' outbox depths show it).
    package static let outboxKind = "link-preview"

    // MARK: - The app's switch

    /// Whether the app's messages get previews.
    package func settings(_ server: ServerApp) async throws -> LinkPreviewSettings {
        try await run {
            try await store.read { db in
                LinkPreviewSettings(enabled: (try db.fetchValue(Int64.self, "SELECT link_previews FROM app WHERE id = \(server.app.id)") ?? 1) != 0)
            }
        }
    }

    /// Turns the app's previews on or off (messages already previewed keep theirs; waiting
    /// jobs are dropped when claimed while off).
    package func setSettings(_ server: ServerApp, _ settings: LinkPreviewSettings) async throws -> LinkPreviewSettings {
        try await setEnabled(app: server.app.id, settings.enabled)
        return settings
    }

    /// `parley-server apps link-previews <app> on|off`: the same switch by the app's name or key.
    ///
    /// - Throws: 404 `not_found` for an app that does not exist.
    package func setEnabled(appNamed name: String, _ enabled: Bool) async throws {
        let app = try await run {
            try await store.read { db in
                try db.fetchValue(Int64.self, "SELECT id FROM app WHERE name = \(name) OR public_key = \(name)")
            }
        }
        guard let app else { throw ChatError.appNotFound }
        try await setEnabled(app: app, enabled)
    }

    private func setEnabled(app: Int64, _ enabled: Bool) async throws {
        try await run {
            try await store.write { db in
                try db.execute("UPDATE app SET link_previews = \(enabled ? 1 : 0) WHERE id = \(app)")
            }
        }
    }

    // MARK: - Jobs

    /// Claims up to `limit` waiting jobs for `holder` until `lease` from now (``Chat/claimOutbox(kind:holder:limit:lease:)``:
    /// nodes sharing a database take different ones; a node that dies holding some leaves them
    /// to be claimed again after the lease). Jobs that no longer stand — the message deleted,
    /// edited to another link or opted out, its app's previews off — are removed here, unworked.
    package func claim(holder: String, limit: Int = 8, lease: Duration = .seconds(30)) async throws -> [LinkPreviewJob] {
        let items = try await core.claimOutbox(kind: Self.outboxKind, holder: holder, limit: limit, lease: lease)
        guard !items.isEmpty else { return [] }
        let decoder = JSONDecoder()
        let jobs: [LinkPreviewJob?] = items.map { item in
            (try? decoder.decode(LinkPreviewJob.Payload.self, from: Data(item.payload))).map {
                LinkPreviewJob(id: item.id, message: $0.message, app: $0.app, url: $0.url, attempts: item.attempts)
            }
        }
        let standing: Set<Int64> = try await run {
            try await store.read { db in
                let messages = jobs.compactMap { $0?.message }
                guard !messages.isEmpty else { return [] }
                let rows = try db.fetchAll("""
                    SELECT m.id, m.content FROM message m JOIN conversation c ON c.id = m.conversation_id JOIN app a ON a.id = c.app_id
                    WHERE m.id IN (\(list: messages)) AND m.deleted_at IS NULL AND m.link_preview_off = 0 AND m.shadow = 0 AND a.link_previews = 1
                    """)
                return Set(try rows.compactMap { row -> Int64? in
                    guard let text = try row.get("content", as: String?.self),
                          let content = try? decoder.decode(MessageContent.self, from: Data(text.utf8)),
                          let link = LinkPreview.firstLink(in: content) else { return nil }
                    let key: Int64 = try row.get("id")
                    return jobs.contains { $0?.message == key && $0?.url == link } ? key : nil
                })
            }
        }
        let live = jobs.compactMap { $0 }.filter { standing.contains($0.message) }
        let stale = items.map(\.id).filter { id in !live.contains { $0.id == id } }
        try await core.finishOutbox(stale, holder: holder)
        return live
    }

    /// A job whose write failed for a reason that may pass (the store): tried again after
    /// `delay`, or dropped after ``maxAttempts``.
    package func retry(_ job: LinkPreviewJob, holder: String, after delay: Duration) async throws {
        if job.attempts + 1 >= Self.maxAttempts {
            try await core.finishOutbox([job.id], holder: holder)
        } else {
            try await core.retryOutbox(job.id, holder: holder, after: delay)
        }
    }

    // MARK: - The cache

    /// The app's cached preview of `url`, when it was fetched after `freshAfter` (ms since 1970).
    package func cached(app: Int64, url: String, freshAfter: Int64) async throws -> CachedLinkPreview? {
        try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("""
                    SELECT preview, thumb_blob, fetched_at FROM link_preview WHERE app_id = \(app) AND url = \(url) AND fetched_at > \(freshAfter)
                    """) else { return nil }
                return try Self.cachedPreview(row)
            }
        }
    }

    /// The blob of a preview's thumbnail by its public id (`GET /v1/previews/{id}`).
    package func thumbnail(publicID: String) async throws -> String? {
        guard (8...64).contains(publicID.utf8.count) else { return nil }
        return try await run {
            try await store.read { db in
                try db.fetchValue(String.self, "SELECT thumb_blob FROM link_preview WHERE public_id = \(publicID)")
            }
        }
    }

    // MARK: - Finishing a job

    /// Finishes `job`: records what the fetch found in the app's cache (`fetched`; nil when
    /// the cache's copy was used), then — if the message still exists, still links to the
    /// job's URL and its sender did not turn previews off — puts the preview on it and
    /// announces it with `message.previewed`. Returns whether the message got a preview.
    @discardableResult
    package func finish(_ job: LinkPreviewJob, holder: String, fetched: CachedLinkPreview?) async throws -> Bool {
        let now = nowMilliseconds
        return try await run {
            try await write { tx in
                // Still ours: a node that took the job over after our lease ran out finishes it.
                guard try tx.execute("DELETE FROM outbox WHERE id = \(job.id) AND claimed_by = \(holder)") == 1 else { return false }
                let entry: (key: Int64, publicID: String, cached: CachedLinkPreview)
                if let fetched {
                    let stored = try Self.store(tx, app: job.app, url: job.url, fetched, now: now)
                    entry = (stored.key, stored.publicID, fetched)
                } else {
                    guard let row = try tx.fetchOne("""
                        SELECT id, public_id, preview, thumb_blob, fetched_at FROM link_preview WHERE app_id = \(job.app) AND url = \(job.url)
                        """) else { return false }
                    try tx.execute("UPDATE link_preview SET used_at = \(now) WHERE app_id = \(job.app) AND url = \(job.url)")
                    entry = (try row.get("id"), try row.get("public_id"), try Self.cachedPreview(row))
                }
                guard var preview = entry.cached.preview else { return false }
                if let thumbnail = entry.cached.thumbnail {
                    preview.image = LinkPreviewImage(url: "/v1/previews/\(entry.publicID)", width: thumbnail.width, height: thumbnail.height)
                }
                let lock: SQL = tx.dialect == .postgres ? " FOR UPDATE" : ""
                guard let row = try tx.fetchOne("""
                    SELECT conversation_id, content, deleted_at, link_preview_off, shadow, thread_root, in_conversation FROM message WHERE id = \(job.message)
                    """ + lock),
                    try row.get("deleted_at", as: Int64?.self) == nil, try row.get("link_preview_off", as: Int64.self) == 0,
                    try row.get("shadow", as: Int64.self) == 0,
                    let contentJSON = try row.get("content", as: String?.self),
                    let content = try? JSONDecoder().decode(MessageContent.self, from: Data(contentJSON.utf8)),
                    LinkPreview.firstLink(in: content) == job.url else { return false }
                preview.url = job.url
                try tx.execute("""
                    UPDATE message SET link_preview = \(try Chat.canonicalJSON(preview)), link_preview_key = \(entry.key) WHERE id = \(job.message)
                    """)
                try tx.append(conversation: try row.get("conversation_id"), kind: .messagePreviewed, actor: nil, message: job.message, now: now)
                return true
            }
        }
    }

    /// Writes a fetched page into the app's cache (replacing an older copy, whose thumbnail
    /// becomes garbage unless something else uses it); the entry's row and public id.
    static func store(_ tx: Transaction, app: Int64, url: String, _ fetched: CachedLinkPreview, now: Int64) throws -> (key: Int64, publicID: String) {
        // The thumbnail's size is kept with the preview; its path is the entry's, added when read.
        var stored = fetched.preview
        if let thumbnail = fetched.thumbnail { stored?.image = LinkPreviewImage(url: "", width: thumbnail.width, height: thumbnail.height) }
        let previewJSON = try stored.map { try Chat.canonicalJSON($0) }
        if let blob = fetched.thumbnail?.blob {
            // A thumbnail the collector is removing right now (the same bytes were someone's
            // garbage): this job tries again once it is gone; one only marked is taken back.
            if try tx.fetchOne("SELECT 1 FROM blob_garbage WHERE blob = \(blob) AND deleting IS NOT NULL") != nil {
                throw ChatError.storeUnavailable
            }
            try tx.execute("DELETE FROM blob_garbage WHERE blob = \(blob)")
        }
        let old = try tx.fetchOne("SELECT id, public_id, thumb_blob FROM link_preview WHERE app_id = \(app) AND url = \(url)")
        if let old {
            let publicID: String = try old.get("public_id")
            try tx.execute("""
                UPDATE link_preview SET preview = \(previewJSON), thumb_blob = \(fetched.thumbnail?.blob), fetched_at = \(fetched.fetchedAt),
                used_at = \(now) WHERE app_id = \(app) AND url = \(url)
                """)
            if let oldBlob = try old.get("thumb_blob", as: String?.self), oldBlob != fetched.thumbnail?.blob {
                try Chat.markGarbage(tx, [oldBlob], now: now)
            }
            return (try old.get("id"), publicID)
        }
        let publicID = Crypto.randomID(prefix: "lp_", length: 22)
        guard let key = try tx.fetchValue(Int64.self, """
            INSERT INTO link_preview (app_id, url, public_id, preview, thumb_blob, fetched_at, used_at)
            VALUES (\(app), \(url), \(publicID), \(previewJSON), \(fetched.thumbnail?.blob), \(fetched.fetchedAt), \(now)) RETURNING id
            """) else { throw ChatError.internalError }
        return (key, publicID)
    }

    /// Forgets cache entries no message shows that were last used more than a day ago (at most
    /// `limit`); the thumbnails they held, for ``Chat/markGarbage(_:_:now:)``.
    static func collect(_ db: any Database, now: Int64, limit: Int) throws -> Set<String> {
        let rows = try db.fetchAll("""
            SELECT lp.id, lp.thumb_blob FROM link_preview lp
            WHERE lp.used_at < \(now - 86_400_000) AND NOT EXISTS (SELECT 1 FROM message m WHERE m.link_preview_key = lp.id)
            LIMIT \(limit)
            """)
        guard !rows.isEmpty else { return [] }
        let keys: [Int64] = try rows.map { try $0.get("id") }
        try db.execute("DELETE FROM link_preview WHERE id IN (\(list: keys))")
        return Set(try rows.compactMap { try $0.get("thumb_blob", as: String?.self) })
    }

    static func cachedPreview(_ row: Row) throws -> CachedLinkPreview {
        let preview = try row.get("preview", as: String?.self).map { try JSONDecoder().decode(LinkPreview.self, from: Data($0.utf8)) }
        var thumbnail: (blob: String, width: Int, height: Int)?
        if let blob = try row.get("thumb_blob", as: String?.self), let image = preview?.image {
            thumbnail = (blob, image.width, image.height)
        }
        var bare = preview
        bare?.image = nil
        return CachedLinkPreview(preview: bare, thumbnail: thumbnail, fetchedAt: try row.get("fetched_at"))
    }
}
