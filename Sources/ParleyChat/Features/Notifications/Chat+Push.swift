import Foundation
package import ParleyStore
package import ParleyWire

/// One push to one device, as ``Chat/expandPush(_:holder:)`` wrote it into the provider's
/// outbox: everything the sender needs, so sending reads nothing more.
package struct PushNotice: Codable, Sendable, Hashable {
    /// The device's id (`d_…`), removed when the provider says the token is dead.
    package var deviceID: String
    /// APNs or FCM.
    package var platform: PushPlatform
    /// The device token.
    package var token: String
    /// The APNs environment.
    package var environment: PushEnvironment
    /// The conversation (`thread-id`, and Parley's own key).
    package var conversationID: String
    /// The message (`apns-collapse-id`, and Parley's own key).
    package var messageID: String
    /// The message's seq in its conversation.
    package var seq: Int64
    /// The message's position in the event log.
    package var position: Int64
    /// Direct: the sender's display name; groups and channels: the conversation's title;
    /// empty in id-only mode.
    package var title: String
    /// Groups and channels: the sender's display name.
    package var subtitle: String?
    /// The text, or "📷 Photo", "📍 Location", …; nil in id-only mode.
    package var body: String?
    /// The member's unread messages across their conversations.
    package var badge: Int
    /// When the message was sent (milliseconds since 1970).
    package var sentAt: Int64
}

/// The push outbox's rows: one per new message in a conversation where some other member
/// has a device, written in the message's own transaction. Installed when push is on.
package struct PushOutboxHook: TransactionHook {
    /// How long a device that is connected has to confirm delivery before the member is
    /// pushed anyway.
    package let confirmationWindow: Duration
    /// Told when each write's rows may fall due, once it commits: the expander reads then,
    /// not several times a second (``DueWatch``).
    package let watch: DueWatch

    /// A hook whose rows fall due `confirmationWindow` after their message.
    package init(confirmationWindow: Duration, watch: DueWatch = DueWatch()) {
        self.confirmationWindow = confirmationWindow
        self.watch = watch
    }

    /// The outbox kind of the per-message rows.
    package static let kind = "push"

    package func didAppend(_ events: [AppendedEvent], in db: any Database) throws {
        var earliest: Int64?
        defer {
            if let earliest, let transaction = db as? Transaction {
                let watch = watch
                transaction.onCommit { watch.noteDue(Chat.date(earliest)) }
            }
        }
        for event in events where event.record.type.rule?.push == true && event.recipient == nil {
            // Public channels push the members a message mentions and those who asked for every
            // message; Pusher channels never.
            guard let message = event.record.message,
                  [.direct, .group, .private, .public].contains(event.conversationKind) else { continue }
            let source = PushSource(conversation: event.conversationKey, message: message.id, seq: message.seq, position: event.record.position)
            let payload = source.encoded
            let due = event.record.createdAt + Chat.milliseconds(confirmationWindow)
            // One statement: the row, only when another member who may be pushed has a device
            // (in a public channel, a mentioned one or one who chose "all", by its own index).
            let someone: SQL
            if event.conversationKind == .public {
                let chose: SQL = """
                    SELECT 1 FROM member mb JOIN push_device d ON d.user_id = mb.user_id
                    WHERE mb.conversation_id = \(event.conversationKey) AND mb.push_level = 'all'
                      AND mb.user_id != (SELECT author_id FROM message WHERE public_id = \(message.id))
                    """
                someone = message.mentionsJSON == nil ? chose : """
                    SELECT 1 FROM mention mn JOIN push_device d ON d.user_id = mn.user_id
                    WHERE mn.message_id = (SELECT id FROM message WHERE public_id = \(message.id))
                    UNION ALL \(chose)
                    """
            } else {
                someone = """
                    SELECT 1 FROM member mb JOIN push_device d ON d.user_id = mb.user_id
                    WHERE mb.conversation_id = \(event.conversationKey)
                      AND mb.user_id != (SELECT author_id FROM message WHERE public_id = \(message.id))
                    """
            }
            try db.enqueue("""
                INSERT INTO outbox (kind, payload, due_at, created_at)
                SELECT \(Self.kind), \(payload), \(due), \(event.record.createdAt) WHERE EXISTS (\(someone))
                """)
            earliest = min(earliest ?? due, due)
        }
    }
}

/// What a push row names: the message, found again when it is expanded. Written as
/// `<conversation> <seq> <position> <message id>` (JSONEncoder costs more than the rest of the
/// hook on the send path).
struct PushSource {
    var conversation: Int64
    var message: String
    var seq: Int64
    var position: Int64

    var encoded: [UInt8] { Array("\(conversation) \(seq) \(position) \(message)".utf8) }

    init(conversation: Int64, message: String, seq: Int64, position: Int64) {
        self.conversation = conversation
        self.message = message
        self.seq = seq
        self.position = position
    }

    init?(_ bytes: [UInt8]) {
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ", maxSplits: 3)
        guard parts.count == 4, let conversation = Int64(parts[0]), let seq = Int64(parts[1]), let position = Int64(parts[2]) else { return nil }
        self.init(conversation: conversation, message: String(parts[3]), seq: seq, position: position)
    }
}

/// What reaches a member's phone: devices registered for push, the push outbox's notices, and each member's mute and level (docs/push.md).
package struct Notifications: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// What reaches a member's phone: devices registered for push, the push outbox's notices, and each member's mute and level (docs/push.md).
    package var notifications: Notifications { Notifications(core: self) }
}

extension Notifications {
    /// Expands messages' push rows into one row per device in the providers' outboxes
    /// (`push-apns`, `push-fcm`), and removes them, in one transaction; returns how many. A device is pushed when its
    /// member is not the sender, has not muted the conversation, and has not confirmed delivery
    /// of the message (no socket took it within the window). A message deleted meanwhile
    /// pushes nothing.
    package func expand(_ items: [OutboxItem], holder: String) async throws -> Int {
        let now = nowMilliseconds
        let sources = items.compactMap { PushSource($0.payload) }
        let recorder = core.traceRecorder
        let (total, traced) = try await run {
            try await store.write { db -> (Int, [TraceRecorder.Row]) in
                var total = 0
                var badges: [Int64: Int] = [:]
                var traced: [TraceRecorder.Row]? = recorder.isOn ? [] : nil
                for source in sources { total += try Chat.expand(db, source, now: now, badges: &badges, traced: &traced) }
                try db.execute("DELETE FROM outbox WHERE id IN (\(list: items.map(\.id))) AND claimed_by = \(holder)")
                return (total, traced ?? [])
            }
        }
        recorder.record(traced)
        return total
    }

    /// Removes a device the provider said is gone (410, `Unregistered`, `BadDeviceToken`, …).
    package func removeDeadDevice(id: String) async throws {
        try await run { try await store.write { db in _ = try db.execute("DELETE FROM push_device WHERE public_id = \(id)") } }
    }

    /// Sets what an app's pushes say (`parley-server apps push-content`), the app named by its
    /// name or public key: `full` or `id-only`.
    package func setPushContent(app name: String, idOnly: Bool) async throws {
        try await run {
            try await store.write { db in
                guard try db.execute("UPDATE app SET push_content = \(idOnly ? "id-only" : "full") WHERE name = \(name) OR public_key = \(name)") == 1 else {
                    throw ChatError.appNotFound
                }
            }
        }
    }
}

extension Chat {
    /// One message's devices to push, written to the providers' outboxes.
    static func expand(_ db: any Database, _ source: PushSource, now: Int64, badges: inout [Int64: Int],
                       traced: inout [TraceRecorder.Row]?) throws -> Int {
        guard let row = try db.fetchOne("""
            SELECT m.id, m.thread_id, m.in_conversation, m.author_id, m.created_at, m.deleted_at, m.content, u.display_name, c.kind, c.title, c.public_id AS conversation_id,
                   a.push_content
            FROM message m JOIN account u ON u.id = m.author_id JOIN conversation c ON c.id = m.conversation_id JOIN app a ON a.id = c.app_id
            WHERE m.public_id = \(source.message)
            """), try row.get("deleted_at", as: Int64?.self) == nil else { return 0 }
        let author: Int64 = try row.get("author_id")
        let kind = try stored(try row.get("kind"), as: ConversationKind.self)
        let sender: String = try row.get("display_name")
        let idOnly = try row.get("push_content", as: String.self) == "id-only"
        let content = try? JSONDecoder().decode(MessageContent.self, from: Data((try row.get("content", as: String.self)).utf8))
        let title = kind == .direct ? sender : (try row.get("title", as: String?.self) ?? sender)
        let messageKey: Int64 = try row.get("id")
        // A reply in a thread only reaches the thread's participants: the root's author and
        // everyone who replied (and, below, whoever it mentions).
        var audience: SQL = ""
        var threadOnlyRoot: Int64?
        if let root = try row.get("thread_id", as: Int64?.self), try row.get("in_conversation", as: Int64.self) == 0 {
            threadOnlyRoot = root
            audience = "AND (mn.user_id IS NOT NULL OR mb.user_id IN (SELECT author_id FROM message WHERE id = \(root) OR thread_id = \(root)))"
        }
        // A mentioned member is pushed even when they muted the conversation or chose mentions
        // only; anyone else when they chose every message (or it is the default: all but public
        // channels, where only members who chose it are, Slack's and Matrix's rule) and have not
        // muted it.
        let unmuted: SQL = "(mb.muted_until IS NULL OR mb.muted_until <= \(now))"
        // Nobody is pushed a message by someone they blocked, mentioned or not (decision 0027).
        let notBlocking: SQL = "NOT EXISTS (SELECT 1 FROM block bl WHERE bl.blocker_id = mb.user_id AND bl.blocked_id = \(author))"
        let devices = try kind == .public
            ? db.fetchAll("""
                SELECT d.id, d.public_id, d.platform, d.token, d.environment, d.user_id
                FROM mention mn JOIN member mb ON mb.conversation_id = \(source.conversation) AND mb.user_id = mn.user_id
                JOIN push_device d ON d.user_id = mb.user_id
                WHERE mn.message_id = \(messageKey) AND mb.delivered_seq < \(source.seq) AND \(notBlocking)
                UNION
                SELECT d.id, d.public_id, d.platform, d.token, d.environment, d.user_id
                FROM member mb JOIN push_device d ON d.user_id = mb.user_id
                LEFT JOIN mention mn ON mn.user_id = mb.user_id AND mn.message_id = \(messageKey)
                WHERE mb.conversation_id = \(source.conversation) AND mb.push_level = 'all' AND mb.user_id != \(author)
                  AND mb.delivered_seq < \(source.seq) AND \(unmuted) AND \(notBlocking) \(audience)
                ORDER BY 1
                """)
            : db.fetchAll("""
                SELECT d.public_id, d.platform, d.token, d.environment, d.user_id
                FROM member mb JOIN push_device d ON d.user_id = mb.user_id
                LEFT JOIN mention mn ON mn.user_id = mb.user_id AND mn.message_id = \(messageKey)
                WHERE mb.conversation_id = \(source.conversation) AND mb.user_id != \(author) AND mb.delivered_seq < \(source.seq)
                  AND (mn.user_id IS NOT NULL OR (\(unmuted) AND (mb.push_level IS NULL OR mb.push_level = 'all'))) AND \(notBlocking) \(audience)
                ORDER BY d.id
                """)
        if traced != nil {
            traced? += try skippedMembers(db, source, message: messageKey, author: author, public: kind == .public,
                                          threadRoot: threadOnlyRoot,
                                          pushed: Set(try devices.map { try $0.get("user_id", as: Int64.self) }), now: now)
        }
        var count = 0
        for device in devices {
            let user: Int64 = try device.get("user_id")
            if badges[user] == nil { badges[user] = try unreadAcrossConversations(db, user: user) }
            guard let platform = PushPlatform(rawValue: try device.get("platform")),
                  let environment = PushEnvironment(rawValue: try device.get("environment")) else { continue }
            let notice = PushNotice(deviceID: try device.get("public_id"), platform: platform, token: try device.get("token"),
                                    environment: environment, conversationID: try row.get("conversation_id"), messageID: source.message,
                                    seq: source.seq, position: source.position, title: idOnly ? "" : title,
                                    subtitle: kind == .direct || idOnly ? nil : sender, body: idOnly ? nil : pushBody(content),
                                    badge: badges[user] ?? 0, sentAt: try row.get("created_at"))
            try Outbox.add(db, kind: "push-" + platform.rawValue, payload: Array(try JSONEncoder().encode(notice)), now: now)
            traced?.append(TraceRecorder.Row(position: source.position, step: "push.queued", user: user, device: notice.deviceID, at: now,
                                             detail: TraceRecorder.detail(platform: platform.rawValue, idOnly: idOnly ? true : nil)))
            count += 1
        }
        return count
    }

    /// The trace's `push.skipped` steps (docs/trace.md): each member the expansion passed
    /// over, and why, in the order the expansion's rules apply. In a public channel only the
    /// members it could have pushed (mentioned, or who chose every message) are named.
    static func skippedMembers(_ db: any Database, _ source: PushSource, message: Int64, author: Int64, public: Bool,
                               threadRoot: Int64?, pushed: Set<Int64>, now: Int64) throws -> [TraceRecorder.Row] {
        let candidates: SQL = `public` ? "AND (mn.user_id IS NOT NULL OR mb.push_level = 'all')" : ""
        let members = try db.fetchAll("""
            SELECT mb.user_id, mb.delivered_seq, mb.muted_until, mb.push_level, mn.user_id AS mentioned,
                   (SELECT 1 FROM block bl WHERE bl.blocker_id = mb.user_id AND bl.blocked_id = \(author)) AS blocking,
                   (SELECT 1 FROM push_device d WHERE d.user_id = mb.user_id LIMIT 1) AS has_device
            FROM member mb LEFT JOIN mention mn ON mn.user_id = mb.user_id AND mn.message_id = \(message)
            WHERE mb.conversation_id = \(source.conversation) AND mb.user_id <> \(author) \(candidates)
            """)
        var participants: Set<Int64>?
        if let threadRoot {
            participants = Set(try db.fetchAll("SELECT DISTINCT author_id FROM message WHERE id = \(threadRoot) OR thread_id = \(threadRoot)")
                .map { try $0.get("author_id", as: Int64.self) })
        }
        var skipped: [String: [Int64]] = [:]
        for member in members {
            let user: Int64 = try member.get("user_id")
            guard !pushed.contains(user) else { continue }
            let mentioned = try member.get("mentioned", as: Int64?.self) != nil
            let reason: String
            if try member.get("blocking", as: Int64?.self) != nil {
                reason = "blocked"
            } else if let participants, !mentioned, !participants.contains(user) {
                reason = "thread_not_followed"
            } else if try member.get("delivered_seq", as: Int64.self) >= source.seq {
                reason = "delivered"
            } else if !mentioned, let until = try member.get("muted_until", as: Int64?.self), until > now {
                reason = "muted"
            } else if !mentioned, try member.get("push_level", as: String?.self) == "mentions" || (`public` && (try member.get("push_level", as: String?.self)) != "all") {
                reason = "mentions_only"
            } else if try member.get("has_device", as: Int64?.self) == nil {
                reason = "no_device"
            } else {
                continue
            }
            skipped[reason, default: []].append(user)
        }
        // One row per reason, naming its members: a large group costs a few rows, not one per member.
        return skipped.sorted { $0.key < $1.key }.map { reason, users in
            TraceRecorder.Row(position: source.position, step: "push.skipped", devices: users.map(String.init).joined(separator: ","), at: now,
                              detail: TraceRecorder.detail(reason: reason))
        }
    }

    /// What a push says of a message: its text (cut at 180 characters), or its kind.
    static func pushBody(_ content: MessageContent?) -> String {
        switch content {
        case .text(let text)?, .markdown(let text)?, .system(let text)?: text.count > 180 ? String(text.prefix(179)) + "…" : text
        case .photo?: "📷 Photo"
        case .video?: "🎥 Video"
        case .audio(let media)?: media.voice == true ? "🎤 Voice message" : "🎤 Audio"
        case .file(let file)?: "📎 " + (file.name ?? "File")
        case .location?: "📍 Location"
        case .poll(let poll)?: "📊 " + (poll.question.count > 178 ? String(poll.question.prefix(177)) + "…" : poll.question)
        case .custom?, nil: "New message"
        }
    }

    /// A member's unread messages across every conversation (the badge), capped.
    static func unreadAcrossConversations(_ db: any Database, user: Int64) throws -> Int {
        try db.fetchValue(Int.self, """
            SELECT count(*) FROM (SELECT 1 FROM member mb JOIN message m ON m.conversation_id = mb.conversation_id
            WHERE mb.user_id = \(user) AND m.seq > mb.read_seq AND m.author_id != \(user) AND m.deleted_at IS NULL AND m.in_conversation = 1 AND m.shadow = 0
              AND \(notBlockedBy(user))
            LIMIT \(Limits.unreadCountCap)) AS unread
            """) ?? 0
    }
}

extension Chat {
    /// The watch the push hook tells when each message's row may fall due (nil: push is off).
    package var pushRowsDue: DueWatch? {
        hooks.lazy.compactMap { ($0 as? PushOutboxHook)?.watch }.first
    }
}
