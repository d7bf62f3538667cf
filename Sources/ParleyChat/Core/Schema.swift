import Foundation
import ParleyCrypto
package import ParleyStore
import ParleyWire

/// The database schema, as named forward-only migrations. Never edit a shipped migration:
/// add a new one. Constraints live in the schema ("trust SQLite more than yourself"), so a
/// bug in the domain code cannot store a second message with the same seq.
///
/// Users live in `account`, not `user`: `user` is a reserved word in PostgreSQL, and the
/// schema should carry over to the engine a later issue adds without quoting.
///
/// Internal keys are integers (small indexes, cheap joins); the API only ever shows the
/// public ids. User and conversation ids (`u_…`, `c_…`) are random, so they reveal nothing
/// about counts or order. Message ids (`m_…`) start with their creation time (like ULIDs,
/// which `sentAt` shows anyway), so their unique index grows at its right edge and a group
/// commit of many sends touches a few index pages rather than one page per message.
package enum Schema: Sendable {
    /// The migrations of `dialect`'s schema, in order. Each engine has its own list (types,
    /// full-text search and partial indexes differ); they describe the same tables and
    /// constraints, and the domain's SQL reads both.
    ///
    /// - Throws: ``StoreError/cannotOpen(_:)`` for a dialect with no schema in this build.
    package static func migrator(for dialect: SQLDialect) throws -> Migrator {
        switch dialect {
        case .sqlite: sqlite
        case .postgres: postgres
        }
    }

    /// SQLite's migrations.
    package static var sqlite: Migrator {
        var migrator = Migrator()
        migrator.register("0001 apps, users, sessions") { db in
            try db.execute("""
                CREATE TABLE app (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    public_key TEXT NOT NULL UNIQUE,
                    secret_hash BLOB NOT NULL,
                    created_at INTEGER NOT NULL)
                """)
            try db.execute("""
                CREATE TABLE account (
                    id INTEGER PRIMARY KEY,
                    app_id INTEGER NOT NULL REFERENCES app(id),
                    public_id TEXT NOT NULL UNIQUE,
                    username TEXT NOT NULL,
                    username_key TEXT NOT NULL,
                    display_name TEXT NOT NULL,
                    display_key TEXT NOT NULL,
                    password_hash TEXT,
                    is_guest INTEGER NOT NULL CHECK (is_guest IN (0, 1)),
                    custom_data TEXT,
                    created_at INTEGER NOT NULL,
                    UNIQUE (app_id, username_key))
                """)
            try db.execute("CREATE INDEX account_display ON account (app_id, display_key)")
            try db.execute("CREATE INDEX account_created ON account (app_id, created_at)")
            try db.execute("""
                CREATE TABLE session (
                    id INTEGER PRIMARY KEY,
                    public_id TEXT NOT NULL UNIQUE,
                    token_hash BLOB NOT NULL UNIQUE,
                    user_id INTEGER NOT NULL REFERENCES account(id),
                    device TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL)
                """)
            try db.execute("CREATE INDEX session_user ON session (user_id, created_at)")
        }
        migrator.register("0002 conversations, members, messages, events") { db in
            try db.execute("""
                CREATE TABLE conversation (
                    id INTEGER PRIMARY KEY,
                    app_id INTEGER NOT NULL REFERENCES app(id),
                    public_id TEXT NOT NULL UNIQUE,
                    kind TEXT NOT NULL CHECK (kind IN ('direct', 'group', 'public', 'private')),
                    title TEXT,
                    title_key TEXT,
                    custom_data TEXT,
                    direct_key TEXT,
                    created_by INTEGER NOT NULL REFERENCES account(id),
                    created_at INTEGER NOT NULL,
                    last_seq INTEGER NOT NULL DEFAULT 0,
                    last_position INTEGER NOT NULL DEFAULT 0,
                    last_message_id INTEGER,
                    member_count INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (app_id, direct_key))
                """)
            try db.execute("CREATE INDEX conversation_channels ON conversation (app_id, kind, title_key)")
            try db.execute("""
                CREATE TABLE member (
                    conversation_id INTEGER NOT NULL REFERENCES conversation(id),
                    user_id INTEGER NOT NULL REFERENCES account(id),
                    role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
                    joined_at INTEGER NOT NULL,
                    delivered_seq INTEGER NOT NULL DEFAULT 0,
                    read_seq INTEGER NOT NULL DEFAULT 0 CHECK (read_seq <= delivered_seq),
                    PRIMARY KEY (conversation_id, user_id)) WITHOUT ROWID
                """)
            try db.execute("CREATE INDEX member_user ON member (user_id, conversation_id)")
            try db.execute("""
                CREATE TABLE message (
                    id INTEGER PRIMARY KEY,
                    public_id TEXT NOT NULL UNIQUE,
                    conversation_id INTEGER NOT NULL REFERENCES conversation(id),
                    seq INTEGER NOT NULL,
                    author_id INTEGER NOT NULL REFERENCES account(id),
                    client_id TEXT NOT NULL,
                    content TEXT,
                    metadata TEXT,
                    reply_to TEXT,
                    created_at INTEGER NOT NULL,
                    edited_at INTEGER,
                    deleted_at INTEGER,
                    UNIQUE (conversation_id, seq),
                    UNIQUE (author_id, client_id))
                """)
            // position: the rowid, so one more than the largest so far (sqlite.org/autoinc.html).
            // Events are never deleted, so a position is never reused; a future retention
            // policy must keep the newest row (or this becomes AUTOINCREMENT, which costs an
            // extra write per event).
            try db.execute("""
                CREATE TABLE event (
                    position INTEGER PRIMARY KEY,
                    conversation_id INTEGER NOT NULL REFERENCES conversation(id),
                    seq INTEGER NOT NULL,
                    type TEXT NOT NULL,
                    actor_id INTEGER REFERENCES account(id),
                    message_id INTEGER REFERENCES message(id),
                    user_id INTEGER REFERENCES account(id),
                    role TEXT,
                    payload TEXT,
                    created_at INTEGER NOT NULL,
                    UNIQUE (conversation_id, seq))
                """)
        }
        migrator.register("0003 full-text search") { db in
            // Contentless: the text lives in `message` once; the index holds only tokens.
            // Deleting an entry needs its old text, which the domain always has at hand.
            try db.execute("""
                CREATE VIRTUAL TABLE message_fts USING fts5 (body, content = '', tokenize = 'unicode61 remove_diacritics 2')
                """)
        }
        migrator.register("0004 events by conversation and position") { db in
            // The cross-conversation feed reads each of a user's conversations from a position on,
            // and finds the conversations a user was removed from.
            try db.execute("CREATE INDEX event_by_position ON event (conversation_id, position)")
            try db.execute("CREATE INDEX event_removals ON event (user_id, position) WHERE type = 'member.removed'")
        }
        migrator.register("0005 realtime: receipt events, join positions, last seen") { db in
            // Receipt changes become events (a device that was away learns that its messages
            // were read), ordered by position like every other change but outside the
            // conversation's history: they take no seq, so reading cannot make a conversation
            // unread again (docs/decisions/0009-receipts-are-events-without-seq.md). SQLite
            // cannot drop a NOT NULL, so the table is rebuilt; positions are kept as they were.
            try db.execute("""
                CREATE TABLE event_new (
                    position INTEGER PRIMARY KEY,
                    conversation_id INTEGER NOT NULL REFERENCES conversation(id),
                    seq INTEGER,
                    type TEXT NOT NULL,
                    actor_id INTEGER REFERENCES account(id),
                    message_id INTEGER REFERENCES message(id),
                    user_id INTEGER REFERENCES account(id),
                    role TEXT,
                    payload TEXT,
                    created_at INTEGER NOT NULL,
                    UNIQUE (conversation_id, seq),
                    CHECK ((seq IS NULL) = (type = 'receipt.updated')))
                """)
            try db.execute("INSERT INTO event_new SELECT * FROM event")
            try db.execute("DROP TABLE event")
            try db.execute("ALTER TABLE event_new RENAME TO event")
            try db.execute("CREATE INDEX event_by_position ON event (conversation_id, position)")
            try db.execute("CREATE INDEX event_removals ON event (user_id, position) WHERE type = 'member.removed'")
            // A past membership's first visible event: the member.added before its removal.
            try db.execute("""
                CREATE INDEX event_joins ON event (user_id, conversation_id, position) WHERE type = 'member.added'
                """)
            // The position of the member.added event that made a member: a member receives a
            // conversation's events from there on, live and when catching up alike. Members from
            // before this migration see the whole log (0).
            try db.execute("ALTER TABLE member ADD COLUMN joined_position INTEGER NOT NULL DEFAULT 0")
            // When the user was last connected (presence: "offline, last seen …").
            try db.execute("ALTER TABLE account ADD COLUMN last_seen_at INTEGER")
        }
        migrator.register("0006 media") { db in
            // An upload. Its bytes live in the blob store under `blob` (the SHA-256 of the
            // bytes, so the same bytes are stored once); a photo's server-made thumbnail under
            // `thumb_blob`. `refs` counts the messages that point at it; one that no message
            // points at any more (`released_at`), or never did after a day, is collected.
            try db.execute("""
                CREATE TABLE attachment (
                    id INTEGER PRIMARY KEY,
                    public_id TEXT NOT NULL UNIQUE,
                    app_id INTEGER NOT NULL REFERENCES app(id),
                    owner_id INTEGER NOT NULL REFERENCES account(id),
                    client_id TEXT,
                    kind TEXT NOT NULL CHECK (kind IN ('photo', 'video', 'audio', 'file')),
                    mime_type TEXT NOT NULL,
                    name TEXT,
                    size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
                    blob TEXT NOT NULL,
                    width INTEGER,
                    height INTEGER,
                    thumb_blob TEXT,
                    thumb_width INTEGER,
                    thumb_height INTEGER,
                    thumb_size INTEGER,
                    refs INTEGER NOT NULL DEFAULT 0 CHECK (refs >= 0),
                    released_at INTEGER,
                    created_at INTEGER NOT NULL,
                    UNIQUE (owner_id, client_id))
                """)
            try db.execute("CREATE INDEX attachment_blob ON attachment (blob)")
            try db.execute("CREATE INDEX attachment_thumb_blob ON attachment (thumb_blob) WHERE thumb_blob IS NOT NULL")
            try db.execute("CREATE INDEX attachment_owner ON attachment (owner_id)")
            try db.execute("CREATE INDEX attachment_unreferenced ON attachment (created_at) WHERE refs = 0")
            try db.execute("""
                CREATE TABLE message_attachment (
                    message_id INTEGER NOT NULL REFERENCES message(id),
                    attachment_id INTEGER NOT NULL REFERENCES attachment(id),
                    PRIMARY KEY (message_id, attachment_id)) WITHOUT ROWID
                """)
            try db.execute("CREATE INDEX message_attachment_by_attachment ON message_attachment (attachment_id, message_id)")
            // Blobs no attachment points at, to be removed from the blob store; a row goes once
            // the file is gone, so a crash in between only leaves work for the next pass.
            try db.execute("CREATE TABLE blob_garbage (blob TEXT PRIMARY KEY, since INTEGER NOT NULL) WITHOUT ROWID")
            // Server secrets kept with the data (the media URL signing key), so every node of
            // a cluster agrees on them.
            try db.execute("CREATE TABLE setting (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID")
        }
        migrator.register("0007 the event log's epoch") { db in
            // Names this database's history of positions (docs/decisions/0014-positions-and-epochs.md).
            // A restore from a backup replaces it, so a device that remembers a position of the
            // history it came from resyncs instead of resuming into a different one.
            try db.execute("""
                INSERT INTO setting (name, value) VALUES (\(EventLog.epochSetting), \(Array(Crypto.randomID(prefix: "e_", length: 16).utf8)))
                """)
        }
        migrator.register("0008 channels for the Pusher protocol, app secrets for signing, delivery counts") { db in
            // The Pusher protocol signs with the app secret itself (HMAC-SHA256), so the server
            // keeps it (docs/decisions/0016-pusher-channels-on-the-event-log.md). Apps made
            // before this keep only a hash: their Pusher HTTP API and private channels answer
            // "rotate the secret" until `apps rotate-secret`.
            try db.execute("ALTER TABLE app ADD COLUMN secret TEXT")
            // The numeric app id the Pusher libraries require; random, so it says nothing of counts.
            try db.execute("ALTER TABLE app ADD COLUMN pusher_id INTEGER")
            for row in try db.fetchAll("SELECT id FROM app ORDER BY id") {
                let id: Int64 = try row.get("id")
                try db.execute("UPDATE app SET pusher_id = \(try Schema.freshPusherID(db)) WHERE id = \(id)")
            }
            try db.execute("CREATE UNIQUE INDEX app_pusher_id ON app (pusher_id)")
            // A Pusher channel is a conversation of kind 'pusher' named by `title` (its channel
            // name, unique per app): its events are rows of the one event log, with a seq and a
            // position like every other change. It has no members and no creator, so the kind's
            // CHECK widens and created_by's NOT NULL becomes a CHECK that only a channel log may
            // lack a creator. Rebuilding the table would DROP a parent of member, message and
            // event inside a transaction, which SQLite's foreign-key counting refuses at COMMIT;
            // these changes leave every stored row valid and the file's format as it is, so they
            // are made in place, as SQLite documents for relaxing CHECK and NOT NULL constraints
            // (sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema Changes").
            let original: String = try db.fetchValue(String.self, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'conversation'") ?? ""
            let changed = original
                .replacingOccurrences(of: "kind TEXT NOT NULL CHECK (kind IN ('direct', 'group', 'public', 'private'))",
                                      with: "kind TEXT NOT NULL CHECK (kind IN ('direct', 'group', 'public', 'private', 'pusher'))")
                .replacingOccurrences(of: "created_by INTEGER NOT NULL REFERENCES account(id)",
                                      with: "created_by INTEGER REFERENCES account(id) CHECK ((created_by IS NULL) = (kind = 'pusher'))")
            guard changed.contains("'private', 'pusher'))"), changed.contains("CHECK ((created_by IS NULL) = (kind = 'pusher'))") else {
                throw StoreError.decoding("the conversation table is not as migration 0007 left it; this database cannot be upgraded in place")
            }
            // `delivery.updated` (an author's delivery counts in a public channel) takes no seq,
            // like `receipt.updated` (decision 0009): the event table's CHECK names both.
            let events: String = try db.fetchValue(String.self, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'event'") ?? ""
            let eventsChanged = events.replacingOccurrences(of: "CHECK ((seq IS NULL) = (type = 'receipt.updated'))",
                                                            with: "CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated')))")
            guard eventsChanged != events else {
                throw StoreError.decoding("the event table is not as migration 0005 left it; this database cannot be upgraded in place")
            }
            let version = try db.fetchValue(Int64.self, "PRAGMA schema_version") ?? 0
            try db.execute("PRAGMA writable_schema = ON")
            try db.execute("UPDATE sqlite_schema SET sql = \(changed) WHERE type = 'table' AND name = 'conversation'")
            try db.execute("UPDATE sqlite_schema SET sql = \(eventsChanged) WHERE type = 'table' AND name = 'event'")
            try db.execute(SQL(stringLiteral: "PRAGMA schema_version = \(version + 1)"))
            try db.execute("PRAGMA writable_schema = OFF")
            guard try db.fetchValue(String.self, "PRAGMA integrity_check") == "ok" else {
                throw StoreError.decoding("the database failed its integrity check after migration 0008; restore it from a backup")
            }
            try db.execute("CREATE UNIQUE INDEX conversation_pusher_channel ON conversation (app_id, title) WHERE kind = 'pusher'")
        }
        registerBoth(&migrator, .sqlite)
        return migrator
    }

    /// PostgreSQL's migrations. The first is SQLite's 0001–0008 as one schema (PostgreSQL
    /// came after them); from 0009 on both lists take the same ones (``registerBoth(_:_:)``).
    ///
    /// Keys are `bigint` identities (SQLite's integers are 64-bit), bytes are `bytea`, and an
    /// event's position is an identity too: positions are handed out in commit order because
    /// every write first takes the event log's lock (docs/decisions/0018-positions-across-nodes.md).
    /// Full-text search is a `tsvector` table with a GIN index (``FullTextSearch``).
    package static var postgres: Migrator {
        var migrator = Migrator()
        migrator.register("0001 the schema of SQLite's 0001-0008") { db in
            try db.execute("""
                CREATE TABLE app (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    name text NOT NULL UNIQUE,
                    public_key text NOT NULL UNIQUE,
                    secret_hash bytea NOT NULL,
                    created_at bigint NOT NULL,
                    secret text,
                    pusher_id bigint UNIQUE)
                """)
            try db.execute("""
                CREATE TABLE account (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    app_id bigint NOT NULL REFERENCES app(id),
                    public_id text NOT NULL UNIQUE,
                    username text NOT NULL,
                    username_key text NOT NULL,
                    display_name text NOT NULL,
                    display_key text NOT NULL,
                    password_hash text,
                    is_guest bigint NOT NULL CHECK (is_guest IN (0, 1)),
                    custom_data text,
                    created_at bigint NOT NULL,
                    last_seen_at bigint,
                    UNIQUE (app_id, username_key))
                """)
            try db.execute("CREATE INDEX account_display ON account (app_id, display_key)")
            try db.execute("CREATE INDEX account_created ON account (app_id, created_at)")
            try db.execute("""
                CREATE TABLE session (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    public_id text NOT NULL UNIQUE,
                    token_hash bytea NOT NULL UNIQUE,
                    user_id bigint NOT NULL REFERENCES account(id),
                    device text NOT NULL,
                    created_at bigint NOT NULL,
                    expires_at bigint NOT NULL)
                """)
            try db.execute("CREATE INDEX session_by_user ON session (user_id, created_at)")
            try db.execute("""
                CREATE TABLE conversation (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    app_id bigint NOT NULL REFERENCES app(id),
                    public_id text NOT NULL UNIQUE,
                    kind text NOT NULL CHECK (kind IN ('direct', 'group', 'public', 'private', 'pusher')),
                    title text,
                    title_key text,
                    custom_data text,
                    direct_key text,
                    created_by bigint REFERENCES account(id) CHECK ((created_by IS NULL) = (kind = 'pusher')),
                    created_at bigint NOT NULL,
                    last_seq bigint NOT NULL DEFAULT 0,
                    last_position bigint NOT NULL DEFAULT 0,
                    last_message_id bigint,
                    member_count bigint NOT NULL DEFAULT 0,
                    UNIQUE (app_id, direct_key))
                """)
            try db.execute("CREATE INDEX conversation_channels ON conversation (app_id, kind, title_key)")
            try db.execute("CREATE UNIQUE INDEX conversation_pusher_channel ON conversation (app_id, title) WHERE kind = 'pusher'")
            try db.execute("""
                CREATE TABLE member (
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    user_id bigint NOT NULL REFERENCES account(id),
                    role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
                    joined_at bigint NOT NULL,
                    delivered_seq bigint NOT NULL DEFAULT 0,
                    read_seq bigint NOT NULL DEFAULT 0 CHECK (read_seq <= delivered_seq),
                    joined_position bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (conversation_id, user_id))
                """)
            try db.execute("CREATE INDEX member_user ON member (user_id, conversation_id)")
            try db.execute("""
                CREATE TABLE message (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    public_id text NOT NULL UNIQUE,
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    seq bigint NOT NULL,
                    author_id bigint NOT NULL REFERENCES account(id),
                    client_id text NOT NULL,
                    content text,
                    metadata text,
                    reply_to text,
                    created_at bigint NOT NULL,
                    edited_at bigint,
                    deleted_at bigint,
                    UNIQUE (conversation_id, seq),
                    UNIQUE (author_id, client_id))
                """)
            try db.execute("""
                CREATE TABLE event (
                    position bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    seq bigint,
                    type text NOT NULL,
                    actor_id bigint REFERENCES account(id),
                    message_id bigint REFERENCES message(id),
                    user_id bigint REFERENCES account(id),
                    role text,
                    payload text,
                    created_at bigint NOT NULL,
                    UNIQUE (conversation_id, seq),
                    CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated'))))
                """)
            try db.execute("CREATE INDEX event_by_position ON event (conversation_id, position)")
            try db.execute("CREATE INDEX event_removals ON event (user_id, position) WHERE type = 'member.removed'")
            try db.execute("CREATE INDEX event_joins ON event (user_id, conversation_id, position) WHERE type = 'member.added'")
            try db.execute("""
                CREATE TABLE message_search (
                    message_id bigint PRIMARY KEY REFERENCES message(id),
                    body tsvector NOT NULL)
                """)
            try db.execute("CREATE INDEX message_search_body ON message_search USING gin (body)")
            try db.execute("""
                CREATE TABLE attachment (
                    id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                    public_id text NOT NULL UNIQUE,
                    app_id bigint NOT NULL REFERENCES app(id),
                    owner_id bigint NOT NULL REFERENCES account(id),
                    client_id text,
                    kind text NOT NULL CHECK (kind IN ('photo', 'video', 'audio', 'file')),
                    mime_type text NOT NULL,
                    name text,
                    size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
                    blob text NOT NULL,
                    width bigint,
                    height bigint,
                    thumb_blob text,
                    thumb_width bigint,
                    thumb_height bigint,
                    thumb_size bigint,
                    refs bigint NOT NULL DEFAULT 0 CHECK (refs >= 0),
                    released_at bigint,
                    created_at bigint NOT NULL,
                    UNIQUE (owner_id, client_id))
                """)
            try db.execute("CREATE INDEX attachment_blob ON attachment (blob)")
            try db.execute("CREATE INDEX attachment_thumb_blob ON attachment (thumb_blob) WHERE thumb_blob IS NOT NULL")
            try db.execute("CREATE INDEX attachment_owner ON attachment (owner_id)")
            try db.execute("CREATE INDEX attachment_unreferenced ON attachment (created_at) WHERE refs = 0")
            try db.execute("""
                CREATE TABLE message_attachment (
                    message_id bigint NOT NULL REFERENCES message(id),
                    attachment_id bigint NOT NULL REFERENCES attachment(id),
                    PRIMARY KEY (message_id, attachment_id))
                """)
            try db.execute("CREATE INDEX message_attachment_by_attachment ON message_attachment (attachment_id, message_id)")
            try db.execute("CREATE TABLE blob_garbage (blob text PRIMARY KEY, since bigint NOT NULL)")
            try db.execute("CREATE TABLE setting (name text PRIMARY KEY, value bytea NOT NULL)")
            try db.execute("""
                INSERT INTO setting (name, value) VALUES (\(EventLog.epochSetting), \(Array(Crypto.randomID(prefix: "e_", length: 16).utf8)))
                """)
        }
        registerBoth(&migrator, .postgres)
        return migrator
    }

    /// The migrations from 0009 on, which both engines share but for the types of keys and
    /// bytes: each engine's list calls this, so a change is written once.
    static func registerBoth(_ migrator: inout Migrator, _ dialect: SQLDialect) {
        let key = dialect == .postgres ? "bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" : "INTEGER PRIMARY KEY"
        let bytes = dialect == .postgres ? "bytea" : "BLOB"
        migrator.register("0009 claims on unfinished uploads, garbage blobs being removed") { db in
            // Which request is receiving an unfinished upload now, for as long as its lease
            // lasts (renewed while bytes arrive): with several nodes on one media directory a
            // continuation on another node takes the upload over from the holder, and never
            // writes the same file at once (docs/operations.md, "Several nodes").
            try db.execute("""
                CREATE TABLE upload_claim (
                    user_id bigint NOT NULL REFERENCES account(id),
                    client_id text NOT NULL,
                    holder text NOT NULL,
                    expires_at bigint NOT NULL,
                    PRIMARY KEY (user_id, client_id))
                """)
            // When a collector began removing a garbage blob's file: an upload of the same
            // bytes on another node waits until it is done (docs/media.md, "Storage and collection").
            try db.execute("ALTER TABLE blob_garbage ADD COLUMN deleting bigint")
        }
        migrator.register("0010 outboxes") { db in
            // Work that follows a committed change and leaves the server (push notifications,
            // webhook deliveries): a row written in the change's own transaction, claimed by one
            // node at a time for a lease, removed once done (docs/decisions/0018, "Outboxes").
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE outbox (
                    id \(key),
                    kind text NOT NULL,
                    payload \(bytes) NOT NULL,
                    attempts bigint NOT NULL DEFAULT 0,
                    due_at bigint NOT NULL,
                    claimed_by text,
                    claimed_until bigint,
                    failed_at bigint,
                    created_at bigint NOT NULL)
                """))
            try db.execute("CREATE INDEX outbox_due ON outbox (kind, due_at) WHERE failed_at IS NULL")
        }
        migrator.register("0011 devices for push, mutes") { db in
            // A device's push token, registered by one session (removed with it: signing out,
            // a password change ending other sessions, expiry). A token belongs to one account
            // at a time: registering it again moves it (docs/push.md).
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE push_device (
                    id \(key),
                    public_id text NOT NULL UNIQUE,
                    app_id bigint NOT NULL REFERENCES app(id),
                    user_id bigint NOT NULL REFERENCES account(id),
                    session_id bigint NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                    platform text NOT NULL CHECK (platform IN ('apns', 'fcm')),
                    token text NOT NULL,
                    environment text NOT NULL CHECK (environment IN ('production', 'sandbox')),
                    created_at bigint NOT NULL,
                    updated_at bigint NOT NULL,
                    UNIQUE (app_id, platform, token))
                """))
            try db.execute("CREATE INDEX push_device_user ON push_device (user_id)")
            try db.execute("CREATE INDEX push_device_session ON push_device (session_id)")
            // A member's mute: no push for this conversation until then (milliseconds; the
            // largest bigint for "until unmuted"), except mentions of them.
            try db.execute("ALTER TABLE member ADD COLUMN muted_until bigint")
            // What a push says: the message (`full`), or only that there is one (`id-only`: the
            // app's notification extension fetches it; no text leaves the server).
            try db.execute("ALTER TABLE app ADD COLUMN push_content text NOT NULL DEFAULT 'full' CHECK (push_content IN ('full', 'id-only'))")
        }
        migrator.register("0012 the server API and webhooks") { db in
            // The secret before the last rotation, still accepted until `previous_secret_until`
            // (milliseconds), so a backend rolls over without downtime (docs/server-api.md).
            try db.execute(SQL(stringLiteral: "ALTER TABLE app ADD COLUMN previous_secret_hash \(bytes)"))
            try db.execute("ALTER TABLE app ADD COLUMN previous_secret text")
            try db.execute("ALTER TABLE app ADD COLUMN previous_secret_until bigint")
            // A deactivated account cannot sign in or be given a session; its sessions are gone.
            try db.execute("ALTER TABLE account ADD COLUMN deactivated_at bigint")
            // A deleted account keeps its row (its messages keep their author) without names.
            try db.execute("ALTER TABLE account ADD COLUMN deleted_at bigint")
            // The app's own sender of system messages, one per app; never listed or signed in.
            try db.execute("ALTER TABLE account ADD COLUMN is_system bigint NOT NULL DEFAULT 0")
            // A backend's webhook endpoint: where, which events, the secret deliveries are
            // signed with, and whether it is paused (docs/webhooks.md).
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE webhook_endpoint (
                    id \(key),
                    public_id text NOT NULL UNIQUE,
                    app_id bigint NOT NULL REFERENCES app(id),
                    url text NOT NULL,
                    events text NOT NULL,
                    format text NOT NULL CHECK (format IN ('parley', 'pusher')),
                    secret text NOT NULL,
                    description text,
                    failing_since bigint,
                    last_error text,
                    paused_at bigint,
                    paused_reason text,
                    created_at bigint NOT NULL,
                    updated_at bigint NOT NULL)
                """))
            try db.execute("CREATE INDEX webhook_endpoint_app ON webhook_endpoint (app_id)")
            // Rows of one lane (a webhook endpoint) are worked on in order, one at a time, found
            // by this one index (head, backlog, failures); rows without a lane by `outbox_due`,
            // which lane rows stay out of (each index is a cost on the send path).
            try db.execute("ALTER TABLE outbox ADD COLUMN lane bigint")
            try db.execute("CREATE INDEX outbox_lane ON outbox (lane, id) WHERE lane IS NOT NULL")
            try db.execute("DROP INDEX outbox_due")
            try db.execute("CREATE INDEX outbox_due ON outbox (kind, due_at) WHERE failed_at IS NULL AND lane IS NULL")
            // A webhook delivery's own id (`whd_…`, Parley-Webhook-Id): row ids may be reused
            // on SQLite once the newest rows are gone, a delivery id never is.
            try db.execute("ALTER TABLE outbox ADD COLUMN ref text")
        }
        migrator.register("0013 reactions, mentions and pins") { db in
            // What a history page shows is kept on the message, so reading a page costs no
            // join: the counts per emoji (JSON, in the order first chosen), the resolved
            // mentions (JSON) and the pin (docs/decisions/0021-annotations-without-seq.md).
            try db.execute("ALTER TABLE message ADD COLUMN reactions text")
            try db.execute("ALTER TABLE message ADD COLUMN mentions text")
            try db.execute("ALTER TABLE message ADD COLUMN pinned_at bigint")
            try db.execute("ALTER TABLE message ADD COLUMN pinned_by text")
            try db.execute("CREATE INDEX message_pinned ON message (conversation_id, pinned_at) WHERE pinned_at IS NOT NULL")
            // Reactions and pins take no seq, like receipts (decision 0021): the event table's
            // CHECK names them too. Widening a CHECK leaves every stored row valid, so SQLite's
            // is changed in place as in 0008; PostgreSQL's is replaced.
            let before = "CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated')))"
            let after = """
                CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated', 'reaction.added', 'reaction.removed', \
                'message.pinned', 'message.unpinned')))
                """
            try Schema.widenEventSeqCheck(db, dialect, from: before, to: after, migration: "0013")
            // One row per person and emoji: uniqueness, "mine" (by message and user) and "who"
            // (by message and emoji, oldest first).
            try db.execute("""
                CREATE TABLE reaction (
                    message_id bigint NOT NULL REFERENCES message(id),
                    user_id bigint NOT NULL REFERENCES account(id),
                    emoji text NOT NULL,
                    created_at bigint NOT NULL,
                    PRIMARY KEY (message_id, user_id, emoji))
                """)
            try db.execute("CREATE INDEX reaction_who ON reaction (message_id, emoji, created_at, user_id)")
            // "Mentions of me", newest first.
            try db.execute("""
                CREATE TABLE mention (
                    user_id bigint NOT NULL REFERENCES account(id),
                    message_id bigint NOT NULL REFERENCES message(id),
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    PRIMARY KEY (user_id, message_id))
                """)
        }
        migrator.register("0014 threads") { db in
            // A reply in a thread names its root (key for the index, public id for the page, so
            // a history row needs no join); `in_conversation` is 1 for every message outside a
            // thread and for replies also shown in the conversation. A root keeps its reply
            // count and latest reply time (docs/api.md, "Threads").
            try db.execute("ALTER TABLE message ADD COLUMN thread_id bigint REFERENCES message(id)")
            try db.execute("ALTER TABLE message ADD COLUMN thread_root text")
            try db.execute("ALTER TABLE message ADD COLUMN in_conversation bigint NOT NULL DEFAULT 1")
            try db.execute("ALTER TABLE message ADD COLUMN reply_count bigint NOT NULL DEFAULT 0")
            try db.execute("ALTER TABLE message ADD COLUMN last_reply_at bigint")
            try db.execute("CREATE INDEX message_thread ON message (thread_id, seq) WHERE thread_id IS NOT NULL")
            try db.execute("CREATE INDEX message_threads_by_activity ON message (conversation_id, last_reply_at) WHERE reply_count > 0")
            // Each member's read watermark per thread: the seq of the last reply they read.
            try db.execute("""
                CREATE TABLE thread_read (
                    user_id bigint NOT NULL REFERENCES account(id),
                    root_id bigint NOT NULL REFERENCES message(id),
                    read_seq bigint NOT NULL,
                    PRIMARY KEY (user_id, root_id))
                """)
        }
        migrator.register("0015 moderation") { db in
            // Slow mode, a moderator's mute of a member and when they last posted (docs/api.md,
            // "Moderation"); a shadow ban on the account; a message only its author sees.
            try db.execute("ALTER TABLE conversation ADD COLUMN slow_mode_seconds bigint NOT NULL DEFAULT 0")
            try db.execute("ALTER TABLE member ADD COLUMN posting_muted_until bigint")
            try db.execute("ALTER TABLE member ADD COLUMN last_posted_at bigint")
            try db.execute("ALTER TABLE account ADD COLUMN shadow_banned_at bigint")
            try db.execute("ALTER TABLE message ADD COLUMN shadow bigint NOT NULL DEFAULT 0")
            try db.execute("""
                CREATE TABLE ban (
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    user_id bigint NOT NULL REFERENCES account(id),
                    actor_id bigint REFERENCES account(id),
                    reason text,
                    until bigint,
                    created_at bigint NOT NULL,
                    PRIMARY KEY (conversation_id, user_id))
                """)
            try db.execute("""
                CREATE TABLE block (
                    blocker_id bigint NOT NULL REFERENCES account(id),
                    blocked_id bigint NOT NULL REFERENCES account(id),
                    created_at bigint NOT NULL,
                    PRIMARY KEY (blocker_id, blocked_id))
                """)
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE report (
                    id \(key),
                    public_id text NOT NULL UNIQUE,
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    message_id bigint NOT NULL REFERENCES message(id),
                    reporter_id bigint NOT NULL REFERENCES account(id),
                    reason text NOT NULL,
                    note text,
                    created_at bigint NOT NULL,
                    resolved_by bigint REFERENCES account(id),
                    resolved_at bigint,
                    resolution text,
                    resolution_note text,
                    UNIQUE (message_id, reporter_id))
                """))
            try db.execute("CREATE INDEX report_queue ON report (conversation_id, resolved_at, id)")
        }
        migrator.register("0016 retention") { db in
            // Keep messages N days: the app's policy, and a conversation's own (0: forever), which
            // wins when set. The sweep finds old messages by this index (docs/api.md, "Retention").
            try db.execute("ALTER TABLE app ADD COLUMN retention_days bigint")
            try db.execute("ALTER TABLE conversation ADD COLUMN retention_days bigint")
            try db.execute("CREATE INDEX message_by_age ON message (conversation_id, created_at)")
        }
        migrator.register("0017 profile and conversation photos") { db in
            // A photo upload in use as a face: its key (it counts as a reference, so the media
            // collector keeps it) and its public id, read with every sender without a join.
            try db.execute("ALTER TABLE account ADD COLUMN photo_id bigint REFERENCES attachment(id)")
            try db.execute("ALTER TABLE account ADD COLUMN photo_public text")
            try db.execute("ALTER TABLE conversation ADD COLUMN photo_id bigint REFERENCES attachment(id)")
            try db.execute("ALTER TABLE conversation ADD COLUMN photo_public text")
            try db.execute("CREATE INDEX account_photo ON account (photo_public) WHERE photo_public IS NOT NULL")
            try db.execute("CREATE INDEX conversation_photo ON conversation (photo_public) WHERE photo_public IS NOT NULL")
            // A profile change (`user.updated`) takes no seq either: the CHECK names it too.
            let before = """
                CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated', 'reaction.added', 'reaction.removed', \
                'message.pinned', 'message.unpinned')))
                """
            let after = """
                CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated', 'reaction.added', 'reaction.removed', \
                'message.pinned', 'message.unpinned', 'user.updated')))
                """
            try Schema.widenEventSeqCheck(db, dialect, from: before, to: after, migration: "0017")
        }
        migrator.register("0018 mutes reach the member's other devices") { db in
            // A member's own notification change (`notifications.updated`) takes no seq and reaches only their devices.
            let before = """
                CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated', 'reaction.added', 'reaction.removed', \
                'message.pinned', 'message.unpinned', 'user.updated')))
                """
            let after = """
                CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated', 'reaction.added', 'reaction.removed', \
                'message.pinned', 'message.unpinned', 'user.updated', 'notifications.updated')))
                """
            try Schema.widenEventSeqCheck(db, dialect, from: before, to: after, migration: "0018")
        }
        migrator.register("0019 notification levels") { db in
            // What pushes a member: 'all', 'mentions', or NULL for the conversation's default. A
            // public channel's message looks up its members who chose 'all' by this index.
            try db.execute("ALTER TABLE member ADD COLUMN push_level text CHECK (push_level IN ('all', 'mentions'))")
            try db.execute("CREATE INDEX member_push_all ON member (conversation_id) WHERE push_level = 'all'")
        }
        migrator.register("0020 an event's one recipient, and no list of kinds in the schema") { db in
            // Who alone receives an event, when its kind's audience is one person or it is
            // about a shadow message: the live publication, the replay and feed, webhooks and
            // push all read this column (docs/decisions/0022). The backfill names the kinds of
            // this migration's time; later kinds set the column when they are appended.
            try db.execute(dialect == .postgres ? "ALTER TABLE event ADD COLUMN recipient_id bigint REFERENCES account(id)"
                                                : "ALTER TABLE event ADD COLUMN recipient_id INTEGER REFERENCES account(id)")
            try db.execute("UPDATE event SET recipient_id = user_id WHERE type IN ('delivery.updated', 'notifications.updated')")
            try db.execute("""
                UPDATE event SET recipient_id = user_id
                WHERE type = 'receipt.updated' AND conversation_id IN (SELECT id FROM conversation WHERE kind = 'public')
                """)
            try db.execute("""
                UPDATE event SET recipient_id = (SELECT author_id FROM message m WHERE m.id = event.message_id)
                WHERE message_id IN (SELECT id FROM message WHERE shadow = 1)
                """)
            // Which kinds take a seq is EventKind's rule now, not a CHECK that needs a migration
            // per kind: what stays is that a seq, when there is one, counts from 1.
            let before = """
                CHECK ((seq IS NULL) = (type IN ('receipt.updated', 'delivery.updated', 'reaction.added', 'reaction.removed', \
                'message.pinned', 'message.unpinned', 'user.updated', 'notifications.updated')))
                """
            try Schema.widenEventSeqCheck(db, dialect, from: before, to: "CHECK (seq IS NULL OR seq >= 1)", migration: "0020")
        }
        migrator.register("0021 content filter") { db in
            // An app's blocklists (words and regexes as JSON lists) and its before-send hook
            // (docs/trust-and-safety.md); the hook's secret is sealed like webhook secrets.
            try db.execute("""
                CREATE TABLE blocklist (
                    app_id bigint NOT NULL REFERENCES app(id),
                    name text NOT NULL,
                    mode text NOT NULL CHECK (mode IN ('reject', 'mask')),
                    reason text,
                    words text NOT NULL,
                    regexes text NOT NULL,
                    updated_at bigint NOT NULL,
                    PRIMARY KEY (app_id, name))
                """)
            try db.execute("""
                CREATE TABLE before_send_hook (
                    app_id bigint PRIMARY KEY REFERENCES app(id),
                    url text NOT NULL,
                    secret text NOT NULL,
                    timeout_ms bigint NOT NULL,
                    on_failure text NOT NULL CHECK (on_failure IN ('accept', 'reject')),
                    server_api bigint NOT NULL,
                    updated_at bigint NOT NULL)
                """)
        }
        migrator.register("0022 sign in with the app's own tokens") { db in
            // How an app's JWTs are checked (docs/trust-and-safety.md): its HS256 key (sealed),
            // its key set (given, or last fetched from its URL), issuer and audience; and the
            // `sub` an account was made for.
            try db.execute("""
                CREATE TABLE jwt_settings (
                    app_id bigint PRIMARY KEY REFERENCES app(id),
                    hs256_key text,
                    jwks text,
                    jwks_url text,
                    issuer text,
                    audience text,
                    updated_at bigint NOT NULL)
                """)
            try db.execute("ALTER TABLE account ADD COLUMN external_id text")
            try db.execute("CREATE UNIQUE INDEX account_external ON account (app_id, external_id) WHERE external_id IS NOT NULL")
        }
        migrator.register("0023 conversation fields") { db in
            // A conversation's custom data's top-level strings, numbers and booleans, as text,
            // for an indexed equality filter (`GET /v1/conversations?customData.team=red`),
            // filled from the conversations already there.
            try db.execute("""
                CREATE TABLE conversation_field (
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    name text NOT NULL,
                    value text NOT NULL,
                    PRIMARY KEY (conversation_id, name))
                """)
            try db.execute("CREATE INDEX conversation_field_lookup ON conversation_field (name, value)")
            var after: Int64 = 0
            while true {
                let rows = try db.fetchAll("""
                    SELECT id, custom_data FROM conversation WHERE id > \(after) AND custom_data IS NOT NULL ORDER BY id LIMIT 500
                    """)
                guard let last = rows.last else { break }
                for row in rows {
                    let data = try row.get("custom_data", as: String?.self).flatMap { try? JSONValue.decode($0) }
                    try Chat.writeFields(db, conversation: try row.get("id"), customData: data)
                }
                after = try last.get("id")
            }
        }
        migrator.register("0024 each member's place for a conversation") { db in
            // Pinned (a rank, lowest first), archived (the conversation's last seq then: it is
            // archived until a message past it arrives, unless muted) and marked unread (the
            // read watermark then: marked until the watermark moves past it). Read, never
            // written, by a send: the two seqs make the rules need no write on the hot path.
            try db.execute("ALTER TABLE member ADD COLUMN pinned_rank bigint")
            try db.execute("ALTER TABLE member ADD COLUMN archived_seq bigint")
            try db.execute("ALTER TABLE member ADD COLUMN unread_mark_seq bigint")
            try db.execute("CREATE INDEX member_pinned ON member (user_id, pinned_rank) WHERE pinned_rank IS NOT NULL")
        }
        migrator.register("0025 drafts") { db in
            // One draft per user, conversation and thread (thread_key: the root message's id, 0
            // for the conversation itself); text "" is a cleared one, kept so that an older save
            // cannot bring it back. updated_at is the device's time, never later than the
            // server's. A draft whose client_id a message of its user carries was sent: reads
            // leave it out, so a send writes nothing for drafts.
            try db.execute("""
                CREATE TABLE draft (
                    user_id bigint NOT NULL REFERENCES account(id),
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    thread_key bigint NOT NULL,
                    text text NOT NULL,
                    client_id text,
                    updated_at bigint NOT NULL,
                    PRIMARY KEY (user_id, conversation_id, thread_key))
                """)
        }
        migrator.register("0026 scheduled messages") { db in
            // A message its author scheduled: the send request as JSON, sent as a normal send
            // (idempotent by its client id) by whichever node claims it first once due.
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE scheduled_message (
                    id \(key),
                    public_id text NOT NULL UNIQUE,
                    user_id bigint NOT NULL REFERENCES account(id),
                    conversation_id bigint NOT NULL REFERENCES conversation(id),
                    client_id text NOT NULL,
                    request text NOT NULL,
                    send_at bigint NOT NULL,
                    status text NOT NULL CHECK (status IN ('scheduled', 'sent', 'failed', 'cancelled')),
                    error text,
                    message_public_id text,
                    claimed_by text,
                    claimed_until bigint,
                    created_at bigint NOT NULL,
                    updated_at bigint NOT NULL)
                """))
            try db.execute("CREATE INDEX scheduled_due ON scheduled_message (send_at) WHERE status = 'scheduled'")
            try db.execute("CREATE INDEX scheduled_user ON scheduled_message (user_id, client_id)")
        }
        migrator.register("0027 an event's further recipients") { db in
            // A receipt in a group goes to its member and to the authors whose messages it
            // passed (decision 0028): the member is the event's recipient_id, the authors are
            // here, so the feed replays it to exactly the devices the live socket reached.
            // Receipts written before this migration keep recipient_id NULL: every member's.
            try db.execute("""
                CREATE TABLE event_recipient (
                    position bigint NOT NULL REFERENCES event(position) ON DELETE CASCADE,
                    user_id bigint NOT NULL REFERENCES account(id),
                    PRIMARY KEY (position, user_id))
                """)
        }
        migrator.register("0028 polls") { db in
            // A poll's results live on its message (poll: canonical JSON, rewritten by each
            // vote, so a history page reads no votes); the votes themselves, one row per
            // voter and option, are what the counts are made from.
            try db.execute("ALTER TABLE message ADD COLUMN poll text")
            try db.execute("""
                CREATE TABLE poll_vote (
                    message_id bigint NOT NULL REFERENCES message(id) ON DELETE CASCADE,
                    user_id bigint NOT NULL REFERENCES account(id),
                    option_index integer NOT NULL,
                    created_at bigint NOT NULL,
                    PRIMARY KEY (message_id, user_id, option_index))
                """)
        }
        migrator.register("0029 link previews") { db in
            // A message's preview is canonical JSON on its row (as a poll's results are, so a
            // history page reads nothing more); link_preview_off remembers a sender's "no
            // preview" for later edits. Fetched pages are cached per app and URL (one fetch
            // for every message with the same link). A message waiting for its preview is a
            // `link-preview` row of the outbox.
            try db.execute("ALTER TABLE message ADD COLUMN link_preview text")
            try db.execute("ALTER TABLE message ADD COLUMN link_preview_off integer NOT NULL DEFAULT 0")
            // Which cache entry's picture the preview shows: an entry no message shows is
            // collected a day after its last use (with its thumbnail).
            try db.execute("ALTER TABLE message ADD COLUMN link_preview_key bigint")
            try db.execute("ALTER TABLE app ADD COLUMN link_previews integer NOT NULL DEFAULT 1")
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE link_preview (
                    id \(key),
                    app_id bigint NOT NULL REFERENCES app(id) ON DELETE CASCADE,
                    url text NOT NULL,
                    public_id text NOT NULL UNIQUE,
                    preview text,
                    thumb_blob text,
                    fetched_at bigint NOT NULL,
                    used_at bigint NOT NULL,
                    UNIQUE (app_id, url))
                """))
            try db.execute("CREATE INDEX link_preview_thumb ON link_preview (thumb_blob) WHERE thumb_blob IS NOT NULL")
            try db.execute("CREATE INDEX link_preview_unused ON link_preview (used_at)")
            try db.execute("CREATE INDEX message_link_preview ON message (link_preview_key) WHERE link_preview_key IS NOT NULL")
        }
        migrator.register("0030 delivery traces") { db in
            // What happened to each new message on its way to devices, kept for the trace's
            // retention (docs/trace.md): `position` is the message's `message.created` event;
            // `step` is routed / replayed (a socket on `node`), push.queued / push.attempt /
            // push.removed (a push device, `device`), push.skipped (why a member was not
            // pushed), webhook.attempt, committed (the node that stored it). A node's routing
            // of one message is one row whatever the room's size: `devices` lists
            // `<user>:<session>` of every device reached. A receipt write is one row per
            // conversation (position 0): `devices` lists `<user>:<session>:<delivered>:<read>`
            // of each device that moved its member's marks. The push expansion's reasons are one
            // row per reason, `devices` listing its members (`<user>`). No foreign keys: a trace outlives the sessions and
            // devices it names, and the sweep removes it whole.
            try db.execute(SQL(stringLiteral: """
                CREATE TABLE delivery_trace (
                    id \(key),
                    position bigint NOT NULL,
                    conversation_id bigint,
                    step text NOT NULL,
                    user_id bigint,
                    session_id bigint,
                    device text,
                    devices text,
                    node text NOT NULL,
                    at bigint NOT NULL,
                    detail text)
                """))
            try db.execute("CREATE INDEX delivery_trace_position ON delivery_trace (position)")
            try db.execute("CREATE INDEX delivery_trace_at ON delivery_trace (at)")
            try db.execute("CREATE INDEX delivery_trace_receipts ON delivery_trace (conversation_id, at) WHERE conversation_id IS NOT NULL")
        }
        migrator.register("0031 log shards") { db in
            // A conversation's shard of the event log (docs/decisions/0026, part 4), fixed when
            // it is made: 0 in a log of one shard, which every database before this one is.
            try db.execute("ALTER TABLE conversation ADD COLUMN shard INTEGER NOT NULL DEFAULT 0")
            if db.dialect == .postgres {
                // The counter of a log of several shards, whose positions are n × shards + shard;
                // a log of one shard keeps the event table's own identity.
                try db.execute("CREATE SEQUENCE log_counter")
            }
        }
        migrator.register("0032 no foreign-key checks on the send path against rows never deleted") { db in
            // PostgreSQL runs a foreign key's check as a query of its own that also locks the
            // parent row, per inserted row: four of a send's six were against its conversation
            // and its author, which the send read in the same transaction and whose rows are
            // never deleted (a deleted account keeps its row, emptied: docs/api.md, "Deleting
            // your account"). Those four go; the checks against a message (which retention
            // deletes) stay. SQLite's checks are an index lookup each, without a lock,
            // and stay (docs/decisions/0026, part 5).
            guard db.dialect == .postgres else { return }
            try Schema.dropForeignKeys(db, Schema.sendPathKeysToParentsNeverDeleted, migration: "0032")
        }
        migrator.register("0033 no foreign-key checks on the receipt path against accounts") { db in
            // The same for a receipt (docs/decisions/0026, part 5): its event names the member
            // twice (the subject, and the one who alone receives it) and each further recipient
            // is a row naming an account: three to four checks per receipt, each a query that
            // locks an account's row, against rows never deleted. The recipients' key to their
            // event stays (retention deletes events, and the rows go with them).
            guard db.dialect == .postgres else { return }
            try Schema.dropForeignKeys(db, Schema.receiptPathKeysToAccounts, migration: "0033")
        }
        migrator.register("0034 the one-column CHECKs of rows every send and receipt writes, as domains") { db in
            // PostgreSQL evaluates every CHECK of a table on every row a statement inserts or
            // updates, whichever columns changed, and parses each one's stored expression again
            // for every statement (docs/decisions/0026, part 5): a receipt's update of the
            // member's marks checked its role and notification level. A domain's CHECK runs only
            // when a value of it is written, and its expression is parsed once per backend. The
            // table CHECK goes first, so changing the column's type to a domain over the same
            // type rewrites nothing; adding the domain's CHECK then checks every stored value.
            guard db.dialect == .postgres else { return }
            for check in Schema.checksAsDomains {
                let name = try db.fetchValue(String.self, """
                    SELECT c.conname FROM pg_constraint c
                    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                    WHERE c.conrelid = \(check.table)::regclass AND c.contype = 'c' AND cardinality(c.conkey) = 1
                      AND a.attname = \(check.column)
                    """)
                guard let name else {
                    throw StoreError.decoding("\(check.table).\(check.column) has no CHECK before migration 0034; this database cannot be upgraded in place")
                }
                try db.execute(SQL(stringLiteral: "ALTER TABLE \(check.table) DROP CONSTRAINT \"\(name.replacingOccurrences(of: "\"", with: ""))\""))
                try db.execute(SQL(stringLiteral: "CREATE DOMAIN \(check.domain) AS \(check.type)"))
                try db.execute(SQL(stringLiteral: "ALTER TABLE \(check.table) ALTER COLUMN \(check.column) TYPE \(check.domain)"))
                try db.execute(SQL(stringLiteral: "ALTER DOMAIN \(check.domain) ADD CONSTRAINT \(check.domain)_values CHECK (\(check.check))"))
            }
        }
    }

    /// Drops the foreign key of each column (PostgreSQL), or throws naming the first column
    /// without one: a database without it was not made by Parley's migrations, and nothing of
    /// `migration` is kept (the migration's transaction rolls back).
    static func dropForeignKeys(_ db: any Database, _ columns: [(table: String, column: String)], migration: String) throws {
        for (table, column) in columns {
            let name = try db.fetchValue(String.self, """
                SELECT c.conname FROM pg_constraint c
                JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                WHERE c.conrelid = \(table)::regclass AND c.contype = 'f' AND a.attname = \(column)
                """)
            guard let name else {
                throw StoreError.decoding("\(table).\(column) has no foreign key before migration \(migration); this database cannot be upgraded in place")
            }
            try db.execute(SQL(stringLiteral: "ALTER TABLE \(table) DROP CONSTRAINT \"\(name.replacingOccurrences(of: "\"", with: ""))\""))
        }
    }

    /// The columns of the send's rows whose foreign keys PostgreSQL no longer checks
    /// (migration 0032): each names a conversation or an account, neither of which is ever
    /// deleted while the server runs.
    package static let sendPathKeysToParentsNeverDeleted: [(table: String, column: String)] = [
        ("message", "conversation_id"), ("message", "author_id"), ("event", "conversation_id"), ("event", "actor_id"),
    ]

    /// The one-column CHECKs that are domains on PostgreSQL (migration 0034): the column, the
    /// domain, its type and its CHECK of `VALUE`, which is the table CHECK it replaced. A later
    /// migration that widens one changes the domain's CHECK (`ALTER DOMAIN`), not the table.
    package static let checksAsDomains: [(table: String, column: String, domain: String, type: String, check: String)] = [
        ("conversation", "kind", "conversation_kind", "text", "VALUE IN ('direct', 'group', 'public', 'private', 'pusher')"),
        ("member", "role", "member_role", "text", "VALUE IN ('owner', 'admin', 'member')"),
        ("member", "push_level", "member_push_level", "text", "VALUE IN ('all', 'mentions')"),
        ("event", "seq", "event_seq", "bigint", "VALUE >= 1"),
    ]

    /// The columns of a receipt's rows whose foreign keys PostgreSQL no longer checks
    /// (migration 0033): each names an account, which is never deleted while the server runs.
    package static let receiptPathKeysToAccounts: [(table: String, column: String)] = [
        ("event", "user_id"), ("event", "recipient_id"), ("event_recipient", "user_id"),
    ]

    /// Widens the event table's CHECK of which kinds take no seq (`from` → `to`). Widening a
    /// CHECK leaves every stored row valid, so SQLite's table definition is changed in place
    /// (as migration 0008 does, sqlite.org/lang_altertable.html); PostgreSQL's constraint is
    /// replaced by one named `event_seq_kinds`.
    static func widenEventSeqCheck(_ db: any Database, _ dialect: SQLDialect, from before: String, to after: String, migration: String) throws {
        guard dialect == .sqlite else {
            let name = try db.fetchValue(String.self, """
                SELECT conname FROM pg_constraint WHERE conrelid = 'event'::regclass AND contype = 'c'
                AND pg_get_constraintdef(oid) LIKE '%receipt.updated%'
                """)
            guard let name else {
                throw StoreError.decoding("the event table has no seq CHECK before migration \(migration); this database cannot be upgraded in place")
            }
            try db.execute(SQL(stringLiteral: "ALTER TABLE event DROP CONSTRAINT \"\(name.replacingOccurrences(of: "\"", with: ""))\""))
            try db.execute(SQL(stringLiteral: "ALTER TABLE event ADD CONSTRAINT event_seq_kinds " + after))
            return
        }
        let events: String = try db.fetchValue(String.self, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'event'") ?? ""
        let changed = events.replacingOccurrences(of: before, with: after)
        guard changed != events else {
            throw StoreError.decoding("the event table is not as the migration before \(migration) left it; this database cannot be upgraded in place")
        }
        let version = try db.fetchValue(Int64.self, "PRAGMA schema_version") ?? 0
        try db.execute("PRAGMA writable_schema = ON")
        try db.execute("UPDATE sqlite_schema SET sql = \(changed) WHERE type = 'table' AND name = 'event'")
        try db.execute(SQL(stringLiteral: "PRAGMA schema_version = \(version + 1)"))
        try db.execute("PRAGMA writable_schema = OFF")
        guard try db.fetchValue(String.self, "PRAGMA integrity_check") == "ok" else {
            throw StoreError.decoding("the database failed its integrity check after migration \(migration); restore it from a backup")
        }
    }

    /// A numeric Pusher app id no app has yet (9 digits).
    static func freshPusherID(_ db: any Database) throws -> Int64 {
        while true {
            let candidate = Int64.random(in: 100_000_000...999_999_999)
            if try db.fetchOne("SELECT 1 FROM app WHERE pusher_id = \(candidate)") == nil { return candidate }
        }
    }
}
