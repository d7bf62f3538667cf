public import Foundation

// An app's content filter (docs/trust-and-safety.md): blocklists checked before a message is
// written, and a before-send hook its backend answers.

/// What a blocklist does with a message that matches it.
public enum BlocklistMode: String, Hashable, Sendable, Codable {
    /// Refuse the message: 422 `content_rejected`, nothing written.
    case reject
    /// Replace each match with `*` (one per character) and write the rest.
    case mask
}

/// `PUT /v1/server/blocklists/{name}`: an app's blocklist, whole (it replaces the one of that name).
public struct SetBlocklistRequest: Hashable, Codable, Sendable {
    /// Words and phrases, matched whole and ignoring case (`"bad word"` matches "Bad  word!").
    public var words: [String]?
    /// Regular expressions (RE2's syntax without back-references or look-around; ignoring
    /// case), matched anywhere in the text.
    public var regexes: [String]?
    /// What a match does.
    public var mode: BlocklistMode
    /// Shown to the sender of a refused message (default: "this message contains words this app does not allow").
    public var reason: String?
    /// Creates the value; each argument sets the property of the same name.
    public init(words: [String]? = nil, regexes: [String]? = nil, mode: BlocklistMode, reason: String? = nil) {
        self.words = words
        self.regexes = regexes
        self.mode = mode
        self.reason = reason
    }
}

/// One of an app's blocklists.
public struct Blocklist: Hashable, Codable, Sendable {
    /// Its name (letters, digits, `-` and `_`).
    public var name: String
    /// Words and phrases.
    public var words: [String]
    /// Regular expressions.
    public var regexes: [String]
    /// What a match does.
    public var mode: BlocklistMode
    /// Shown to the sender of a refused message.
    public var reason: String?
    /// When it was last set.
    public var updatedAt: Date
    /// Creates the value; each argument sets the property of the same name.
    public init(name: String, words: [String], regexes: [String], mode: BlocklistMode, reason: String?, updatedAt: Date) {
        self.name = name
        self.words = words
        self.regexes = regexes
        self.mode = mode
        self.reason = reason
        self.updatedAt = updatedAt
    }
}

/// `GET /v1/server/blocklists`.
public struct BlocklistList: Hashable, Codable, Sendable {
    /// The app's blocklists, by name.
    public var blocklists: [Blocklist]
    /// Creates the value.
    public init(blocklists: [Blocklist]) { self.blocklists = blocklists }
}

/// What the app wants when its before-send hook cannot be asked (down, slow, a bad answer).
public enum HookFailurePolicy: String, Hashable, Sendable, Codable {
    /// Write the message as if the hook had accepted it (fail open).
    case accept
    /// Refuse the message with 422 `content_rejected` (fail closed).
    case reject
}

/// `PUT /v1/server/before-send`: the app's before-send hook.
public struct SetBeforeSendHookRequest: Hashable, Codable, Sendable {
    /// Where each message is posted before it is written (`http` or `https`; public addresses
    /// unless the operator allows private ones).
    public var url: String
    /// How long the hook has to answer, 100–2000 ms (default 1500).
    public var timeoutMilliseconds: Int?
    /// What happens when it does not answer in time or answers something else (default `accept`).
    public var onFailure: HookFailurePolicy?
    /// Whether messages the app's own backend sends through the server API are asked about too (default false).
    public var serverAPI: Bool?
    /// Creates the value; each argument sets the property of the same name.
    public init(url: String, timeoutMilliseconds: Int? = nil, onFailure: HookFailurePolicy? = nil, serverAPI: Bool? = nil) {
        self.url = url
        self.timeoutMilliseconds = timeoutMilliseconds
        self.onFailure = onFailure
        self.serverAPI = serverAPI
    }
}

/// The app's before-send hook, as `GET /v1/server/before-send` shows it.
public struct BeforeSendHook: Hashable, Codable, Sendable {
    /// Where messages are posted.
    public var url: String
    /// How long it has to answer.
    public var timeoutMilliseconds: Int
    /// What a failure does.
    public var onFailure: HookFailurePolicy
    /// Whether the server API's messages are asked about.
    public var serverAPI: Bool
    /// The signing secret (`whsec_…`): only in the answer that set the hook.
    public var secret: String?
    /// When it was set.
    public var updatedAt: Date
    /// Creates the value; each argument sets the property of the same name.
    public init(url: String, timeoutMilliseconds: Int, onFailure: HookFailurePolicy, serverAPI: Bool, secret: String?, updatedAt: Date) {
        self.url = url
        self.timeoutMilliseconds = timeoutMilliseconds
        self.onFailure = onFailure
        self.serverAPI = serverAPI
        self.secret = secret
        self.updatedAt = updatedAt
    }
}

/// What the before-send hook is asked: the message as it would be written.
public struct BeforeSendQuestion: Hashable, Codable, Sendable {
    /// `message.send` or `message.edit`.
    public var type: String
    /// The conversation.
    public var conversationID: ConversationID
    /// The sender.
    public var user: Sender
    /// The sender's id for the message, for a send.
    public var clientID: String?
    /// The message being edited, for an edit.
    public var messageID: MessageID?
    /// What it says.
    public var content: MessageContent
    enum CodingKeys: String, CodingKey {
        case type, conversationID = "conversationId", user, clientID = "clientId", messageID = "messageId", content
    }
    /// Creates the value; each argument sets the property of the same name.
    public init(type: String, conversationID: ConversationID, user: Sender, clientID: String?, messageID: MessageID?, content: MessageContent) {
        self.type = type
        self.conversationID = conversationID
        self.user = user
        self.clientID = clientID
        self.messageID = messageID
        self.content = content
    }
}

/// The before-send hook's answer: `{"action":"accept"}`, `{"action":"reject","reason":"…"}`
/// or `{"action":"replace","content":{…}}`.
public struct BeforeSendAnswer: Hashable, Codable, Sendable {
    /// The decision.
    public enum Action: String, Hashable, Codable, Sendable {
        /// Write it as it is.
        case accept
        /// Refuse it; `reason` is shown to the sender.
        case reject
        /// Write `content` instead.
        case replace
    }
    /// The decision.
    public var action: Action
    /// Why it was refused (shown to the sender; at most 256 bytes).
    public var reason: String?
    /// The content to write instead (`replace`).
    public var content: MessageContent?
    /// Creates the value; each argument sets the property of the same name.
    public init(action: Action, reason: String? = nil, content: MessageContent? = nil) {
        self.action = action
        self.reason = reason
        self.content = content
    }
}
