package import Foundation
import ParleyCrypto
import ParleyStore
package import ParleyWire

/// An upload about to be recorded: what the server verified about the bytes it stored.
package struct NewAttachment: Sendable {
    /// What it was uploaded as.
    package var kind: MediaKind
    /// The verified media type.
    package var mimeType: String
    /// Stored size in bytes.
    package var sizeBytes: Int64
    /// The sanitised file name, if one was given.
    package var name: String?
    /// Displayed pixel size (photos).
    package var width: Int?
    /// Displayed pixel height (photos).
    package var height: Int?
    /// The blob store key of the bytes.
    package var blob: String
    /// A photo's thumbnail: blob key and size.
    package var thumbnail: (blob: String, info: MediaThumbnail)?
    /// The client's id for this upload, so a retry returns the first upload.
    package var clientID: String?

    /// Creates the value; each argument sets the property of the same name.
    package init(kind: MediaKind, mimeType: String, sizeBytes: Int64, name: String? = nil, width: Int? = nil, height: Int? = nil,
                blob: String, thumbnail: (blob: String, info: MediaThumbnail)? = nil, clientID: String? = nil) {
        self.kind = kind
        self.mimeType = mimeType
        self.sizeBytes = sizeBytes
        self.name = name
        self.width = width
        self.height = height
        self.blob = blob
        self.thumbnail = thumbnail
        self.clientID = clientID
    }
}

/// A stored attachment as the download path needs it.
package struct StoredAttachment: Sendable, Hashable {
    /// What clients see.
    package var info: MediaInfo
    /// The blob store key of the original.
    package var blob: String
    /// The blob store key of the thumbnail, if any.
    package var thumbnailBlob: String?
}

/// Attachments: uploads as the domain records them, who may download them, their references and collection, and profile and conversation photos (docs/media.md).
package struct Attachments: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// Attachments: uploads as the domain records them, who may download them, their references and collection, and profile and conversation photos (docs/media.md).
    package var attachments: Attachments { Attachments(core: self) }
}

extension Attachments {
    // MARK: - Uploads

    /// The caller's earlier upload with this client id, if any (an upload retried after a
    /// lost answer).
    package func existingUpload(_ caller: Caller, clientID: String) async throws -> MediaInfo? {
        try Validate.clientID(clientID)
        return try await run {
            try await store.read { db in
                try db.fetchOne("SELECT \(Chat.attachmentColumns) FROM attachment a WHERE a.owner_id = \(caller.userKey) AND a.client_id = \(clientID)")
                    .map { try Chat.storedAttachment($0).info }
            }
        }
    }

    /// Bytes of uploads the caller holds.
    package func usage(_ caller: Caller) async throws -> Int64 {
        try await run { try await store.read { db in try Chat.usage(db, owner: caller.userKey) } }
    }

    /// Records an upload whose bytes are in the blob store. A retry with the same client id
    /// returns the first upload (`created` false). The blobs it names stop being garbage.
    ///
    /// - Throws: 403 `quota_exceeded` past `policy.quotaBytes` (nothing recorded).
    package func record(_ caller: Caller, _ upload: NewAttachment, policy: Chat.MediaPolicy) async throws -> (MediaInfo, created: Bool) {
        if let clientID = upload.clientID { try Validate.clientID(clientID) }
        let now = nowMilliseconds
        let publicID = Crypto.randomID(prefix: "a_", length: 24)
        return try await run {
            try await store.write { db in
                if let clientID = upload.clientID, let row = try db.fetchOne("""
                    SELECT \(Chat.attachmentColumns) FROM attachment a WHERE a.owner_id = \(caller.userKey) AND a.client_id = \(clientID)
                    """) {
                    return (try Chat.storedAttachment(row).info, false)
                }
                let blobs = [upload.blob] + (upload.thumbnail.map { [$0.blob] } ?? [])
                // A collector (on another node) is removing a file with these bytes now.
                if try db.fetchOne("SELECT 1 FROM blob_garbage WHERE blob IN (\(list: blobs)) AND deleting IS NOT NULL") != nil {
                    throw ChatError.fileBeingCollected
                }
                let used = try Chat.usage(db, owner: caller.userKey)
                let adding = upload.sizeBytes + (upload.thumbnail?.info.sizeBytes ?? 0)
                guard used + adding <= policy.quotaBytes else { throw ChatError.quotaExceeded(usedBytes: used, quotaBytes: policy.quotaBytes) }
                try db.execute("""
                    INSERT INTO attachment (public_id, app_id, owner_id, client_id, kind, mime_type, name, size_bytes, blob, width, height,
                                            thumb_blob, thumb_width, thumb_height, thumb_size, created_at)
                    VALUES (\(publicID), \(caller.appID), \(caller.userKey), \(upload.clientID), \(upload.kind.rawValue), \(upload.mimeType),
                            \(upload.name), \(upload.sizeBytes), \(upload.blob), \(upload.width), \(upload.height), \(upload.thumbnail?.blob),
                            \(upload.thumbnail?.info.width), \(upload.thumbnail?.info.height), \(upload.thumbnail?.info.sizeBytes), \(now))
                    """)
                try db.execute("DELETE FROM blob_garbage WHERE blob IN (\(list: blobs))")
                let info = MediaInfo(id: publicID, kind: upload.kind, mimeType: upload.mimeType, sizeBytes: upload.sizeBytes, name: upload.name,
                                     width: upload.width, height: upload.height, thumbnail: upload.thumbnail?.info, createdAt: Chat.date(now))
                return (info, true)
            }
        }
    }

    /// An attachment the caller may download: their own upload, or one a message shows in a
    /// conversation they may read (docs/access.md; not one they are banned from).
    ///
    /// - Throws: 404 `attachment_not_found` otherwise, whether or not it exists.
    package func attachment(_ caller: Caller, id: String) async throws -> StoredAttachment {
        guard Limits.attachmentID.contains(id.utf8.count) else { throw ChatError.attachmentNotFound }
        let now = nowMilliseconds
        return try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("""
                    SELECT \(Chat.attachmentColumns) FROM attachment a WHERE a.public_id = \(id) AND a.app_id = \(caller.appID)
                    """),
                    try row.get("a_owner_key", as: Int64.self) == caller.userKey
                        || Chat.canRead(db, attachment: try row.get("a_key"), caller: caller, now: now)
                else { throw ChatError.attachmentNotFound }
                return try Chat.storedAttachment(row)
            }
        }
    }

    /// An attachment by id alone, for a download whose signed URL was already verified.
    package func attachment(signedID id: String) async throws -> StoredAttachment {
        guard Limits.attachmentID.contains(id.utf8.count) else { throw ChatError.attachmentNotFound }
        return try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("SELECT \(Chat.attachmentColumns) FROM attachment a WHERE a.public_id = \(id)") else {
                    throw ChatError.attachmentNotFound
                }
                return try Chat.storedAttachment(row)
            }
        }
    }

    /// The key that signs download URLs: 32 random bytes made on first use and kept in the
    /// database, so every node of a cluster signs and verifies alike.
    package func signingKey() async throws -> [UInt8] {
        try await run {
            if let key = try await store.read({ db in try db.fetchValue([UInt8].self, "SELECT value FROM setting WHERE name = 'media_signing_key'") }) {
                return key
            }
            let fresh = Crypto.randomBytes(32)
            return try await store.write { db in
                try db.execute("INSERT INTO setting (name, value) VALUES ('media_signing_key', \(fresh)) ON CONFLICT (name) DO NOTHING")
                return try db.fetchValue([UInt8].self, "SELECT value FROM setting WHERE name = 'media_signing_key'") ?? fresh
            }
        }
    }

    // MARK: - Collection

    /// Forgets uploads no message refers to — released by a delete or an edit, or never sent
    /// and older than `policy.orphanLifetime` — and returns blob keys no attachment uses any
    /// more (at most `limit`), for the caller to remove from the blob store and then pass to
    /// ``forgetGarbage(_:)``.
    package func collect(policy: Chat.MediaPolicy, limit: Int = 500) async throws -> [String] {
        let orphanBefore = nowMilliseconds - Int64(policy.orphanLifetime * 1000)
        let now = nowMilliseconds
        return try await run {
            try await store.write { db in
                let rows = try db.fetchAll("""
                    SELECT id, blob, thumb_blob FROM attachment WHERE refs = 0 AND (released_at IS NOT NULL OR created_at < \(orphanBefore))
                    LIMIT \(limit)
                    """)
                var candidates = Set<String>()
                for row in rows {
                    try db.execute("DELETE FROM attachment WHERE id = \(try row.get("id", as: Int64.self))")
                    candidates.insert(try row.get("blob"))
                    if let thumb = try row.get("thumb_blob", as: String?.self) { candidates.insert(thumb) }
                }
                // Link previews' cached pages no message shows, with their thumbnails.
                candidates.formUnion(try LinkPreviews.collect(db, now: now, limit: limit))
                try Chat.markGarbage(db, candidates, now: now)
                // Marked as being removed in this transaction: an upload of the same bytes
                // (on another node) waits until ``forgetGarbage(_:)`` says the files are gone.
                // A mark a minute old is a collector that died midway: taken again.
                let garbage: [String] = try db.fetchAll("""
                    SELECT blob FROM blob_garbage WHERE deleting IS NULL OR deleting < \(now - 60_000) ORDER BY since LIMIT \(limit)
                    """).map { try $0.get("blob") }
                if !garbage.isEmpty { try db.execute("UPDATE blob_garbage SET deleting = \(now) WHERE blob IN (\(list: garbage))") }
                return garbage
            }
        }
    }

    /// Marks blobs as garbage unless an attachment uses them (an upload that stored its bytes
    /// and then failed to be recorded).
    package func markGarbage(_ blobs: [String]) async throws {
        let now = nowMilliseconds
        try await run { try await store.write { db in try Chat.markGarbage(db, Set(blobs), now: now) } }
    }

    /// Forgets garbage blobs that were removed from the blob store.
    package func forgetGarbage(_ blobs: [String]) async throws {
        guard !blobs.isEmpty else { return }
        try await run { try await store.write { db in _ = try db.execute("DELETE FROM blob_garbage WHERE blob IN (\(list: blobs))") } }
    }

    // MARK: - Claims on unfinished uploads

    /// Claims `user`'s unfinished upload `clientID` for `holder` until `lease` from now, or
    /// renews the claim `holder` has: true when it is `holder`'s now, false while another
    /// holder's lease lasts. Nodes sharing a media directory use this so one request at a time
    /// writes an upload's bytes; leases are wall-clock milliseconds, so nodes' clocks must
    /// agree to well within a lease (NTP does).
    package func claimUpload(user: Int64, clientID: String, holder: String, lease: Duration) async throws -> Bool {
        let now = nowMilliseconds
        let expires = now + Chat.milliseconds(lease)
        return try await run {
            try await store.write { db in
                try db.execute("""
                    INSERT INTO upload_claim (user_id, client_id, holder, expires_at) VALUES (\(user), \(clientID), \(holder), \(expires))
                    ON CONFLICT (user_id, client_id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                    WHERE upload_claim.holder = excluded.holder OR upload_claim.expires_at < \(now)
                    """) == 1
            }
        }
    }

    /// Ends `holder`'s claim (nothing when another holds it now).
    package func releaseUpload(user: Int64, clientID: String, holder: String) async throws {
        try await run {
            try await store.write { db in
                _ = try db.execute("DELETE FROM upload_claim WHERE user_id = \(user) AND client_id = \(clientID) AND holder = \(holder)")
            }
        }
    }

    /// Forgets every claim: at the start of a lone node (SQLite), whose earlier run's requests
    /// are all gone.
    package func clearUploadClaims() async throws {
        try await run { try await store.write { db in _ = try db.execute("DELETE FROM upload_claim") } }
    }
}

extension Chat {
    /// The media settings of a server.
    package struct MediaPolicy: Sendable, Hashable {
        /// Bytes of uploads one account may hold (counting uploads not yet collected). Default: 1 GiB.
        package var quotaBytes: Int64 = 1 << 30
        /// How long an upload no message refers to is kept. Default: 24 hours.
        package var orphanLifetime: TimeInterval = 86_400

        /// The defaults.
        package init() {}
    }

    // MARK: - Inside a transaction

    static let attachmentColumns: SQL = """
        a.id AS a_key, a.owner_id AS a_owner_key, a.public_id AS a_public_id, a.kind AS a_kind, a.mime_type AS a_mime_type,
        a.size_bytes AS a_size_bytes, a.name AS a_name, a.width AS a_width, a.height AS a_height, a.thumb_blob AS a_thumb_blob,
        a.thumb_width AS a_thumb_width, a.thumb_height AS a_thumb_height, a.thumb_size AS a_thumb_size, a.created_at AS a_created_at,
        a.blob AS a_blob
        """

    static func storedAttachment(_ row: Row) throws -> StoredAttachment {
        var thumbnail: MediaThumbnail?
        if let width = try row.get("a_thumb_width", as: Int?.self), let height = try row.get("a_thumb_height", as: Int?.self),
           let size = try row.get("a_thumb_size", as: Int64?.self) {
            thumbnail = MediaThumbnail(width: width, height: height, sizeBytes: size)
        }
        let info = MediaInfo(id: try row.get("a_public_id"), kind: try stored(try row.get("a_kind"), as: MediaKind.self),
                             mimeType: try row.get("a_mime_type"), sizeBytes: try row.get("a_size_bytes"),
                             name: try row.get("a_name", as: String?.self), width: try row.get("a_width", as: Int?.self),
                             height: try row.get("a_height", as: Int?.self), thumbnail: thumbnail,
                             createdAt: Chat.date(try row.get("a_created_at")))
        return StoredAttachment(info: info, blob: try row.get("a_blob"), thumbnailBlob: try row.get("a_thumb_blob", as: String?.self))
    }

    static func usage(_ db: any Database, owner: Int64) throws -> Int64 {
        try db.fetchValue(Int64.self, "SELECT coalesce(sum(size_bytes + coalesce(thumb_size, 0)), 0) FROM attachment WHERE owner_id = \(owner)") ?? 0
    }

    /// Whether a message that shows the attachment is one the caller may read: not deleted,
    /// not someone else's shadow message, in a conversation where docs/access.md lets them
    /// `read` (which is where bans take it away).
    static func canRead(_ db: any Database, attachment: Int64, caller: Caller, now: Int64) throws -> Bool {
        // One row per distinct standing, however many messages show the file.
        let places = try db.fetchAll("""
            SELECT DISTINCT c.kind, mb.role, b.user_id AS ban_user, b.until AS ban_until
            FROM message_attachment ma JOIN message m ON m.id = ma.message_id JOIN conversation c ON c.id = m.conversation_id
            LEFT JOIN member mb ON mb.conversation_id = c.id AND mb.user_id = \(caller.userKey)
            LEFT JOIN ban b ON b.conversation_id = c.id AND b.user_id = \(caller.userKey)
            WHERE ma.attachment_id = \(attachment) AND m.deleted_at IS NULL AND \(visible(to: caller.userKey)) AND c.kind <> 'pusher'
            """)
        return try places.contains { place in
            let kind = try stored(try place.get("kind"), as: ConversationKind.self)
            return AccessRules.decide(.read, in: kind, as: try standing(place, caller: caller, now: now)) == .allow
        }
    }

    static func markGarbage(_ db: any Database, _ blobs: Set<String>, now: Int64) throws {
        for blob in blobs where try db.fetchOne("""
            SELECT 1 FROM attachment WHERE blob = \(blob) UNION ALL SELECT 1 FROM attachment WHERE thumb_blob = \(blob)
            UNION ALL SELECT 1 FROM link_preview WHERE thumb_blob = \(blob) LIMIT 1
            """) == nil {
            try db.execute("INSERT INTO blob_garbage (blob, since) VALUES (\(blob), \(now)) ON CONFLICT (blob) DO NOTHING")
        }
    }

    /// Checks the attachments a message's content names and fills in what the server knows
    /// about them (type, size, a photo's dimensions, a file's name), so no client can claim a
    /// 1 KB file is a 4K video. Returns the attachments' keys.
    ///
    /// Each must exist in the caller's app, be the caller's own upload or one they can read
    /// (forwarding), and be of the message's kind: `photo`, `video` (its `thumbnailId` a
    /// photo), `audio`; a `file` message may carry any upload.
    static func bindMedia(_ db: any Database, caller: Caller, prepared: inout PreparedMessage) throws -> [Int64] {
        func resolve(_ id: String, as kinds: Set<MediaKind>, field: String) throws -> (key: Int64, info: MediaInfo) {
            guard let row = try db.fetchOne("""
                SELECT \(attachmentColumns) FROM attachment a WHERE a.public_id = \(id) AND a.app_id = \(caller.appID)
                """) else { throw ChatError.attachmentNotFound }
            let key: Int64 = try row.get("a_key")
            guard try row.get("a_owner_key", as: Int64.self) == caller.userKey || canRead(db, attachment: key, caller: caller, now: nowWallClock) else {
                throw ChatError.attachmentNotFound
            }
            let info = try storedAttachment(row).info
            guard kinds.contains(info.kind) else {
                throw ChatError.invalid("\(field) is a \(info.kind.rawValue) upload; upload it as \(kinds.map(\.rawValue).sorted().joined(separator: " or "))")
            }
            return (key, info)
        }
        var media: Attachment
        let kinds: Set<MediaKind>
        switch prepared.value {
        case .photo(let value): media = value; kinds = [.photo]
        case .video(let value): media = value; kinds = [.video]
        case .audio(let value): media = value; kinds = [.audio]
        case .file(let value): media = value; kinds = Set(MediaKind.allCases)
        case .text, .markdown, .location, .poll, .custom, .system: return []
        }
        let (key, info) = try resolve(media.attachmentID, as: kinds, field: "attachmentId")
        var keys = [key]
        media.mimeType = info.mimeType
        media.sizeBytes = info.sizeBytes
        if info.kind == .photo {
            media.width = info.width
            media.height = info.height
        }
        media.name = media.name ?? info.name
        if let thumbnailID = media.thumbnailID {
            guard case .video = prepared.value else { throw ChatError.invalid("only a video message takes a thumbnailId") }
            let thumbnail = try resolve(thumbnailID, as: [.photo], field: "thumbnailId")
            if thumbnail.key != key { keys.append(thumbnail.key) }
        }
        switch prepared.value {
        case .photo: try prepared.replace(.photo(media))
        case .video: try prepared.replace(.video(media))
        case .audio: try prepared.replace(.audio(media))
        case .file:
            guard media.name != nil else { throw ChatError.invalid("a file message needs a name: give one at upload (?name=) or in the message") }
            try prepared.replace(.file(media))
        case .text, .markdown, .location, .poll, .custom, .system: break
        }
        return keys
    }

    /// Points a message at exactly `keys`, releasing attachments it no longer refers to.
    static func setMedia(_ db: any Database, message: Int64, keys: [Int64], now: Int64) throws {
        let old: [Int64] = try db.fetchAll("SELECT attachment_id FROM message_attachment WHERE message_id = \(message)").map { try $0.get("attachment_id") }
        let removed = old.filter { !keys.contains($0) }
        for key in removed {
            try db.execute("DELETE FROM message_attachment WHERE message_id = \(message) AND attachment_id = \(key)")
            try db.execute("""
                UPDATE attachment SET refs = refs - 1, released_at = CASE WHEN refs = 1 THEN \(now) ELSE released_at END WHERE id = \(key)
                """)
        }
        for key in keys where !old.contains(key) {
            try db.execute("INSERT INTO message_attachment (message_id, attachment_id) VALUES (\(message), \(key))")
            try db.execute("UPDATE attachment SET refs = refs + 1, released_at = NULL WHERE id = \(key)")
        }
    }
}
