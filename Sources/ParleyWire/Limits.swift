/// Every size and count the server enforces. The SDK checks the same numbers before it
/// sends, so a user learns of a mistake without a round trip. docs/limits.md explains each.
public enum Limits: Sendable {
    /// Username length in characters; letters, digits, `.`, `_`, `-`, starting with a letter or digit
    /// (or an e-mail address: ``emailUsernameMax``).
    public static let username = 3...32
    /// A username may instead be an e-mail address (`local@domain.tld`) of at most this many characters.
    public static let emailUsernameMax = 254
    /// Password length in UTF-8 bytes.
    public static let passwordBytes = 8...256
    /// Display name length in characters, after trimming spaces.
    public static let displayName = 1...64
    /// Device label length in characters.
    public static let deviceMax = 64
    /// Client id length: 1…64 characters from `A-Z a-z 0-9 - _ . :`.
    public static let clientID = 1...64
    /// Text and Markdown messages, in characters (Unicode scalars); so at most 40,000 UTF-8 bytes.
    public static let textCharacters = 1...10_000
    /// A custom message's type name, and its payload's encoded size.
    public static let customType = 1...64
    /// A custom message's payload, encoded, in bytes.
    public static let customPayloadBytes = 16_384
    /// Metadata: entries, key length, value length.
    public static let metadataEntries = 32
    /// Metadata key length in bytes.
    public static let metadataKey = 1...64
    /// Metadata value length in bytes.
    public static let metadataValue = 1_024
    /// App-defined data on users and conversations, encoded.
    public static let customDataBytes = 8_192
    /// Conversation titles.
    public static let title = 1...128
    /// Attachment ids, names, captions, MIME types.
    public static let attachmentID = 1...128
    /// Attachment names, captions and MIME types, in characters.
    public static let attachmentText = 1_000
    /// Members of a group or private channel (public channels: ``channelMembers``).
    public static let groupMembers = 1_000
    /// Members of a public channel.
    public static let channelMembers = 100_000
    /// Names in one resolve, send-to-users or add-members request; ids in one bulk delete.
    public static let namesPerRequest = 100
    /// Page sizes: history and events, user search, conversations.
    public static let historyPage = 1...200
    /// Page size of directory searches (and member and receipt lists).
    public static let userPage = 1...100
    /// Page size of conversation and channel lists.
    public static let conversationPage = 1...100
    /// The deepest offset a directory search pages to.
    public static let maxOffset = 10_000
    /// Search query length.
    public static let searchQuery = 1...256
    /// Unread counts stop counting here (the client shows "9999+").
    public static let unreadCountCap = 9_999
    /// Sessions one user may hold; the oldest is signed out past it.
    public static let sessionsPerUser = 50
    /// Devices one user may register for push (a session has one per platform).
    public static let pushDevicesPerUser = 50
    /// A reaction's emoji, in UTF-8 bytes (the longest family and flag sequences are ~30).
    public static let emojiBytes = 64
    /// Different emoji one message may carry (Slack's figure).
    public static let emojiPerMessage = 50
    /// Reactions one person may put on one message.
    public static let reactionsPerUser = 20
    /// A poll's question length in characters.
    public static let pollQuestion = 1...300
    /// How many options a poll offers.
    public static let pollOptions = 2...10
    /// One option's length in characters.
    public static let pollOption = 1...100
    /// How far ahead a poll's `closesAt` may be, in seconds (a year).
    public static let pollOpenSeconds = 366 * 86_400
    /// How many voters a non-anonymous poll's results name per option (the earliest).
    public static let pollVotersListed = 50
    /// Mentions resolved in one message; more `@names` are left as text.
    public static let mentionsPerMessage = 50
    /// Conversations told of one profile change (`user.updated`), most recently active first.
    public static let profileAnnouncements = 500
    /// Values in a voice message's waveform (``Attachment/waveform``), each 0–255.
    public static let waveformValues = 128
    /// People one user may block.
    public static let blocksPerUser = 1_000
    /// Conversations one user may pin to the top of their list.
    public static let pinnedConversations = 50
    /// Messages one user may have scheduled and not yet sent.
    public static let scheduledPerUser = 100
    /// Pinned messages in one conversation.
    public static let pinsPerConversation = 100
    /// An APNs device token, in hex digits (32 bytes today; Apple says the length may grow).
    public static let apnsTokenHex = 64...200
    /// An FCM registration token, in characters.
    public static let fcmTokenBytes = 32...4_096
}
