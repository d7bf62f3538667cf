public import Foundation

/// A person (or an anonymous guest) in one app.
public struct User: Hashable, Codable, Sendable {
    /// Stable id; never reused.
    public var id: UserID
    /// Unique in the app, compared case-insensitively, shown as typed at registration.
    public var username: String
    /// The name shown on message bubbles.
    public var displayName: String
    /// True for guests (no password; signed in with a display name only).
    public var isGuest: Bool
    /// When the account was created.
    public var createdAt: Date
    /// App-defined data (avatar URL, status line, …); at most ``Limits/customDataBytes``.
    public var customData: JSONValue?
    /// The profile photo's thumbnail, a path on the server (`/v1/avatars/a_…`) that needs no
    /// token: MessageKit's avatar view and `<img src>` load it as is. Nil: no photo.
    public var photoURL: String? = nil

    /// Creates the value; each argument sets the property of the same name.
    public init(id: UserID, username: String, displayName: String, isGuest: Bool, createdAt: Date, customData: JSONValue? = nil) {
        self.id = id
        self.username = username
        self.displayName = displayName
        self.isGuest = isGuest
        self.createdAt = createdAt
        self.customData = customData
    }
}

/// A signed-in device: the bearer token is shown once, when the session is created.
public struct Session: Hashable, Codable, Sendable {
    /// Send as `Authorization: Bearer <token>`. Stored on the server only as a hash.
    public var token: String?
    /// Identifies the session in `GET /v1/sessions` without revealing the token.
    public var id: String
    /// The label the client gave (`"Ana's iPhone"`).
    public var device: String
    /// When it was created.
    public var createdAt: Date
    /// After this the token is refused; sign in again.
    public var expiresAt: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(token: String?, id: String, device: String, createdAt: Date, expiresAt: Date) {
        self.token = token
        self.id = id
        self.device = device
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// What registering and signing in return.
public struct SignedIn: Hashable, Codable, Sendable {
    /// The user.
    public var user: User
    /// The new session, with its token.
    public var session: Session
    /// Creates the value; each argument sets the property of the same name.
    public init(user: User, session: Session) {
        self.user = user
        self.session = session
    }
}

/// The four kinds of conversation.
public enum ConversationKind: String, Hashable, Codable, Sendable, CaseIterable {
    /// Exactly two people; found or created idempotently for a pair.
    case direct
    /// Invited members with owner/admin/member roles.
    case group
    /// Listed in the app's channel directory; anyone in the app may join.
    case `public`
    /// Not listed; members are invited by an admin.
    case `private`
}

/// A member's role. Owners and admins manage members and settings and moderate messages.
public enum MemberRole: String, Hashable, Codable, Sendable, CaseIterable, Comparable {
    /// Reads and writes.
    case member
    /// Also adds and removes members, edits settings, deletes others' messages.
    case admin
    /// Also changes roles; every group and channel keeps at least one.
    case owner
    private var rank: Int { self == .owner ? 2 : self == .admin ? 1 : 0 }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }
}

/// A conversation as one member sees it.
public struct Conversation: Hashable, Codable, Sendable {
    /// The stable id the server issued.
    public var id: ConversationID
    /// Direct, group, public or private.
    public var kind: ConversationKind
    /// Groups and channels have one; direct conversations have none.
    public var title: String?
    /// App-defined data; at most ``Limits/customDataBytes``.
    public var customData: JSONValue?
    /// When it was created.
    public var createdAt: Date
    /// The seq of its newest event (message, edit, delete, membership, update).
    public var lastSeq: Int64
    /// The server-wide position of its newest event: orders conversations by activity.
    public var lastPosition: Int64
    /// The newest message (a tombstone if it was deleted); nil when there is none yet.
    public var lastMessage: Message?
    /// How many members it has.
    public var memberCount: Int
    /// The caller's role; nil when the caller is not a member (a public channel seen from outside).
    public var role: MemberRole?
    /// Messages from others after the caller's read watermark (counts saturate at ``Limits/unreadCountCap``).
    public var unreadCount: Int
    /// The caller's watermarks; nil when not a member.
    public var receipt: Receipt?
    /// For direct conversations: the other person.
    public var peer: User?
    /// The caller muted it (no push) until then; 9999-12-31T23:59:59Z for "until unmuted". A
    /// time in the past means it is no longer muted.
    public var mutedUntil: Date?
    /// Slow mode (groups and channels): members who are not owners or admins may post once
    /// per this many seconds; nil when off.
    public var slowModeSeconds: Int? = nil
    /// Messages older than this many days are removed (the conversation's own policy, else
    /// the app's); nil: kept forever.
    public var retentionDays: Int? = nil
    /// A group's or channel's photo (`/v1/avatars/a_…`); for a direct chat, the peer's is in ``peer``.
    public var photoURL: String? = nil
    /// What pushes the caller here (their choice, else the default for the kind); nil when not a member.
    public var notifications: NotificationLevel? = nil
    /// The caller pinned it to the top of their list: pinned conversations come first, by this
    /// rank, lowest first; nil when not pinned.
    public var pinnedRank: Int? = nil
    /// True when the caller archived it: left out of their main list until a new message
    /// arrives (unless they muted it); absent otherwise.
    public var archived: Bool? = nil
    /// True when the caller marked it unread (their read watermark is where it was) until they
    /// read further or clear the mark; absent otherwise.
    public var markedUnread: Bool? = nil
    /// The caller's draft of a message here (not in a thread), as saved last from any of their
    /// devices; nil when there is none, or once the message was sent.
    public var draft: Draft? = nil

    /// The caller's place for it in their own list.
    public var state: ConversationState {
        ConversationState(pinnedRank: pinnedRank, archived: archived == true, markedUnread: markedUnread == true)
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(id: ConversationID, kind: ConversationKind, title: String?, customData: JSONValue?, createdAt: Date,
                lastSeq: Int64, lastPosition: Int64, lastMessage: Message?, memberCount: Int, role: MemberRole?,
                unreadCount: Int, receipt: Receipt?, peer: User?, mutedUntil: Date? = nil) {
        self.mutedUntil = mutedUntil
        self.id = id
        self.kind = kind
        self.title = title
        self.customData = customData
        self.createdAt = createdAt
        self.lastSeq = lastSeq
        self.lastPosition = lastPosition
        self.lastMessage = lastMessage
        self.memberCount = memberCount
        self.role = role
        self.unreadCount = unreadCount
        self.receipt = receipt
        self.peer = peer
    }
}

/// A member of a conversation with their receipt watermarks.
public struct Member: Hashable, Codable, Sendable {
    /// The user.
    public var user: User
    /// The member's role (after the change, for membership events).
    public var role: MemberRole
    /// When they joined.
    public var joinedAt: Date
    /// Their delivered and read watermarks.
    public var receipt: Receipt
    /// A moderator muted them until then: they read but may not post (nil: not muted;
    /// 9999-12-31T23:59:59Z: until unmuted).
    public var mutedUntil: Date? = nil
    /// Creates the value; each argument sets the property of the same name.
    public init(user: User, role: MemberRole, joinedAt: Date, receipt: Receipt) {
        self.user = user
        self.role = role
        self.joinedAt = joinedAt
        self.receipt = receipt
    }
}

/// One member's watermarks in one conversation. Both only move forward, and
/// `readSeq <= deliveredSeq` always (reading implies delivery).
public struct Receipt: Hashable, Codable, Sendable {
    /// Whose watermarks these are.
    public var userID: UserID
    /// Everything up to this seq reached one of the user's devices.
    public var deliveredSeq: Int64
    /// Everything up to this seq was shown to the user.
    public var readSeq: Int64

    enum CodingKeys: String, CodingKey {
        case userID = "userId", deliveredSeq, readSeq
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(userID: UserID, deliveredSeq: Int64, readSeq: Int64) {
        self.userID = userID
        self.deliveredSeq = deliveredSeq
        self.readSeq = readSeq
    }
}

extension Receipt: JSONWritable {
    /// The same bytes as ``WireCoding/encoder()`` (keys sorted), without `Codable`: every
    /// receipt a device sends over the socket is answered with one.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.object { json in
            json.key("deliveredSeq"); json.integer(deliveredSeq)
            json.key("readSeq"); json.integer(readSeq)
            json.key("userId"); json.string(userID.rawValue)
        }
    }
}

/// Where a message stands for its sender. `sending` exists only on the client (the outbox).
public enum DeliveryStatus: String, Hashable, Codable, Sendable {
    /// Stored by the server.
    case sent
    /// Reached every other member (in a group: every one of them).
    case delivered
    /// Read by every other member.
    case read
}

extension DeliveryStatus {
    /// The rule, in one place: a message at `seq` is read once every other member's read
    /// watermark reached it, delivered once every other member's delivered watermark did,
    /// and sent before. The server (history, events), the SDK (live updates) and the web
    /// client (`js/status.js`) all apply it; `Tests/ParleyChatTests/Fixtures/delivery-status.json`
    /// holds the cases each is tested against.
    ///
    /// - Parameters:
    ///   - lowestDelivered: the lowest delivered watermark among the other members.
    ///   - lowestRead: the lowest read watermark among the other members.
    public static func of(seq: Int64, lowestDelivered: Int64, lowestRead: Int64) -> DeliveryStatus {
        seq <= lowestRead ? .read : seq <= lowestDelivered ? .delivered : .sent
    }
    /// How many of a conversation's members have reached each seq: their delivered and read
    /// watermarks, sorted once, so each message's counts are two binary searches. The server
    /// counts `delivery.updated` with it and the SDK a group's progress.
    public struct Counter: Sendable, Hashable {
        private let delivered: [Int64]
        private let read: [Int64]

        /// The watermarks of the members to count.
        public init(_ watermarks: some Sequence<(delivered: Int64, read: Int64)>) {
            var delivered: [Int64] = [], read: [Int64] = []
            for mark in watermarks {
                delivered.append(mark.delivered)
                read.append(mark.read)
            }
            self.delivered = delivered.sorted()
            self.read = read.sorted()
        }

        /// The members counted.
        public var members: Int { delivered.count }

        /// How many have the message at `seq`, and how many have read it; `excluding` is one
        /// counted member's watermarks to leave out (the author's own, for their message).
        public func counts(at seq: Int64, excluding mark: (delivered: Int64, read: Int64)? = nil) -> (delivered: Int, read: Int) {
            (Self.atLeast(seq, in: delivered) - (mark.map { $0.delivered >= seq ? 1 : 0 } ?? 0),
             Self.atLeast(seq, in: read) - (mark.map { $0.read >= seq ? 1 : 0 } ?? 0))
        }

        private static func atLeast(_ value: Int64, in sorted: [Int64]) -> Int {
            var low = 0, high = sorted.count
            while low < high {
                let middle = (low + high) / 2
                if sorted[middle] < value { low = middle + 1 } else { high = middle }
            }
            return sorted.count - low
        }
    }

    /// The same rule from counts, for a public channel whose members' watermarks the author
    /// does not see one by one: read once all `recipients` read it, delivered once all have it.
    public static func of(deliveredCount: Int, readCount: Int, recipients: Int) -> DeliveryStatus {
        guard recipients > 0 else { return .sent }
        return readCount >= recipients ? .read : deliveredCount >= recipients ? .delivered : .sent
    }

}

/// The sender as a bubble shows it (MessageKit's `SenderType`).
public struct Sender: Hashable, Codable, Sendable {
    /// The stable id the server issued.
    public var id: UserID
    /// The username (unique in the app, compared case-insensitively).
    public var username: String
    /// The name shown on message bubbles.
    public var displayName: String
    /// The sender's profile photo (`/v1/avatars/a_…`, no token needed), as it is now.
    public var photoURL: String? = nil
    /// Creates the value; each argument sets the property of the same name.
    public init(id: UserID, username: String, displayName: String) {
        self.id = id
        self.username = username
        self.displayName = displayName
    }
}

/// A message. Maps onto MessageKit's `MessageType`: `id` → `messageId`, `sender`,
/// `sentAt` → `sentDate`, `content` → `kind`.
public struct Message: Hashable, Codable, Sendable {
    /// The stable id the server issued.
    public var id: MessageID
    /// The conversation it belongs to.
    public var conversationID: ConversationID
    /// Its place in the conversation: the seq of the event that created it.
    public var seq: Int64
    /// Who sent it (MessageKit's `sender`).
    public var sender: Sender
    /// The id the sending client chose; a retry with the same id returns this message.
    public var clientID: String
    /// When the server stored it (MessageKit's `sentDate`).
    public var sentAt: Date
    /// Set once the author edits it (Backendless' "updated" time).
    public var editedAt: Date?
    /// Set when deleted; a deleted message keeps its place as a tombstone with no content.
    public var deletedAt: Date?
    /// Nil for a tombstone.
    public var content: MessageContent?
    /// App-defined string pairs; at most ``Limits/metadataEntries``.
    public var metadata: [String: String]?
    /// The message this one answers.
    public var replyTo: MessageID?
    /// For the caller's own messages only: sent, delivered or read.
    public var status: DeliveryStatus?
    /// Each emoji people reacted with and how many chose it, in the order first chosen; nil
    /// when there are none.
    public var reactions: [ReactionCount]? = nil
    /// The emoji the caller reacted with (REST answers only; on the socket, where one frame
    /// goes to every member, the event's `userId` and `emoji` say who changed what).
    public var myReactions: [String]? = nil
    /// The members its text mentions (`@username`), resolved by the server when it was sent
    /// or edited; clients need not parse the text again.
    public var mentions: [Mention]? = nil
    /// When it was pinned; nil when it is not.
    public var pinnedAt: Date? = nil
    /// Who pinned it.
    public var pinnedBy: UserID? = nil
    /// For a reply in a thread: the thread's root message.
    public var threadID: MessageID? = nil
    /// For a reply in a thread: true when it is shown in the conversation too.
    public var alsoInConversation: Bool? = nil
    /// For a thread's root: how many replies it has (nil: none).
    public var replyCount: Int? = nil
    /// For a thread's root: when the latest reply was sent.
    public var lastReplyAt: Date? = nil
    /// Why the server left out what this message says, for this reader only: `blocked` when the
    /// reader blocked its sender. Its place stays (id, seq, sender, time, thread) with no
    /// content, metadata, reactions or mentions; clients draw a placeholder ("message from a
    /// blocked user") there.
    public var hidden: HiddenReason? = nil
    /// A poll's results as the server counted them (nil for every other message).
    public var poll: PollResults? = nil
    /// The options the caller voted for in this poll (REST answers only, as ``myReactions``;
    /// nil when they did not vote).
    public var myVotes: [Int]? = nil
    /// What the first link in the text shows (title, description, site, a thumbnail), as the
    /// server fetched it after the send; nil until then, and for good when there is no link,
    /// the sender asked for none, or the page gave nothing (`message.previewed` announces it).
    public var linkPreview: LinkPreview? = nil

    enum CodingKeys: String, CodingKey {
        case id, conversationID = "conversationId", seq, sender, clientID = "clientId", sentAt, editedAt, deletedAt,
             content, metadata, replyTo, status, reactions, myReactions, mentions, pinnedAt, pinnedBy,
             threadID = "threadId", alsoInConversation, replyCount, lastReplyAt, hidden, poll, myVotes, linkPreview
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(id: MessageID, conversationID: ConversationID, seq: Int64, sender: Sender, clientID: String, sentAt: Date,
                editedAt: Date? = nil, deletedAt: Date? = nil, content: MessageContent?, metadata: [String: String]? = nil,
                replyTo: MessageID? = nil, status: DeliveryStatus? = nil) {
        self.id = id
        self.conversationID = conversationID
        self.seq = seq
        self.sender = sender
        self.clientID = clientID
        self.sentAt = sentAt
        self.editedAt = editedAt
        self.deletedAt = deletedAt
        self.content = content
        self.metadata = metadata
        self.replyTo = replyTo
        self.status = status
    }
}

/// Why a message reaches a reader without its content (``Message/hidden``).
public enum HiddenReason: String, Hashable, Codable, Sendable {
    /// The reader blocked the sender.
    case blocked
}

/// One emoji on a message and how many people reacted with it.
public struct ReactionCount: Hashable, Codable, Sendable {
    /// One emoji (a single grapheme cluster).
    public var emoji: String
    /// How many people reacted with it.
    public var count: Int
    /// Creates the value; each argument sets the property of the same name.
    public init(emoji: String, count: Int) {
        self.emoji = emoji
        self.count = count
    }
}

/// A member a message mentions.
public struct Mention: Hashable, Codable, Sendable {
    /// The member's id.
    public var userID: UserID
    /// The username as it was written after `@` (its stored spelling).
    public var username: String

    enum CodingKeys: String, CodingKey { case userID = "userId", username }

    /// Creates the value; each argument sets the property of the same name.
    public init(userID: UserID, username: String) {
        self.userID = userID
        self.username = username
    }
}

/// A point on Earth (MessageKit's `LocationItem`).
public struct Location: Hashable, Codable, Sendable {
    /// Degrees, -90…90.
    public var latitude: Double
    /// Degrees, -180…180.
    public var longitude: Double
    /// A place name, if the sender gave one.
    public var name: String?
    /// Text sent with the place ("meet me here"); indexed for search.
    public var caption: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(latitude: Double, longitude: Double, name: String? = nil, caption: String? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.name = name
        self.caption = caption
    }
}

/// A stored file a message points at (MessageKit's `MediaItem`, `AudioItem`).
public struct Attachment: Hashable, Codable, Sendable {
    /// The uploaded file's id (from the media API).
    public var attachmentID: String
    /// A preview image's id (videos, large photos).
    public var thumbnailID: String?
    /// The original file name (files).
    public var name: String?
    /// The file's media type, as the sender gave it.
    public var mimeType: String?
    /// The file's size in bytes.
    public var sizeBytes: Int64?
    /// Pixel width (photos, videos).
    public var width: Int?
    /// Pixel height (photos, videos).
    public var height: Int?
    /// Length in seconds (audio, video).
    public var durationSeconds: Double?
    /// Text shown with the media; indexed for search.
    public var caption: String?
    /// Audio only: a voice message (recorded in the app), shown as a player with its
    /// ``waveform`` rather than as a file. Needs ``durationSeconds``.
    public var voice: Bool? = nil
    /// Audio only: the loudness over the recording, at most ``Limits/waveformValues`` values of
    /// 0–255, evenly spaced from start to end (WhatsApp's and Telegram's bars).
    public var waveform: [Int]? = nil

    enum CodingKeys: String, CodingKey {
        case attachmentID = "attachmentId", thumbnailID = "thumbnailId", name, mimeType, sizeBytes, width, height,
             durationSeconds, caption, voice, waveform
    }

    /// Creates the value; each argument sets the property of the same name.
    public init(attachmentID: String, thumbnailID: String? = nil, name: String? = nil, mimeType: String? = nil,
                sizeBytes: Int64? = nil, width: Int? = nil, height: Int? = nil, durationSeconds: Double? = nil, caption: String? = nil) {
        self.attachmentID = attachmentID
        self.thumbnailID = thumbnailID
        self.name = name
        self.mimeType = mimeType
        self.sizeBytes = sizeBytes
        self.width = width
        self.height = height
        self.durationSeconds = durationSeconds
        self.caption = caption
    }
}
