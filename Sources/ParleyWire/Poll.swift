public import Foundation

/// A poll a member asks (``MessageContent/poll(_:)``): the question, its options and how it is
/// answered. The server counts the votes (``PollResults``); no client can write a count.
///
/// ```json
/// {"type":"poll","question":"Lunch?","options":["Pizza","Sushi"],"multipleChoice":false,"anonymous":false}
/// ```
public struct PollContent: Hashable, Codable, Sendable {
    /// What is asked, 1–``Limits/pollQuestion`` characters.
    public var question: String
    /// The answers, ``Limits/pollOptions`` of them, each 1–``Limits/pollOption`` characters and
    /// all different; a vote names them by index, from 0.
    public var options: [String]
    /// A voter may choose several options (false: exactly one).
    public var multipleChoice: Bool
    /// Nobody learns who voted for what, not even the poll's author: events of votes name no
    /// one and the results carry counts only.
    public var anonymous: Bool
    /// When the poll stops taking votes by itself; nil: when its author or a moderator closes it.
    public var closesAt: Date?

    enum CodingKeys: String, CodingKey { case question, options, multipleChoice, anonymous, closesAt }

    /// Creates the value; each argument sets the property of the same name.
    public init(question: String, options: [String], multipleChoice: Bool = false, anonymous: Bool = false, closesAt: Date? = nil) {
        self.question = question
        self.options = options
        self.multipleChoice = multipleChoice
        self.anonymous = anonymous
        self.closesAt = closesAt
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        question = try container.decode(String.self, forKey: .question)
        options = try container.decode([String].self, forKey: .options)
        multipleChoice = try container.decodeIfPresent(Bool.self, forKey: .multipleChoice) ?? false
        anonymous = try container.decodeIfPresent(Bool.self, forKey: .anonymous) ?? false
        closesAt = try WireCoding.decodeDate(container, .closesAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(question, forKey: .question)
        try container.encode(options, forKey: .options)
        try container.encode(multipleChoice, forKey: .multipleChoice)
        try container.encode(anonymous, forKey: .anonymous)
        // As text whatever the encoder's date strategy: the stored content is served as it is.
        try container.encodeIfPresent(closesAt.map(WireCoding.formatDate), forKey: .closesAt)
    }
}

/// A poll's results as the server counted them (``Message/poll``), on every read of the
/// message and in every `poll.voted` and `poll.closed` event.
public struct PollResults: Hashable, Codable, Sendable {
    /// One entry per option, in the options' order.
    public var options: [PollOptionResult]
    /// How many people voted (in a multiple-choice poll, fewer than the votes).
    public var voterCount: Int
    /// When its author or a moderator closed it; a poll whose `closesAt` passed is closed too.
    public var closedAt: Date?

    /// Whether it takes no more votes at `now`.
    public func isClosed(_ content: PollContent, at now: Date = Date()) -> Bool {
        closedAt != nil || content.closesAt.map { $0 <= now } == true
    }

    enum CodingKeys: String, CodingKey { case options, voterCount, closedAt }

    /// Creates the value; each argument sets the property of the same name.
    public init(options: [PollOptionResult], voterCount: Int, closedAt: Date? = nil) {
        self.options = options
        self.voterCount = voterCount
        self.closedAt = closedAt
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        options = try container.decode([PollOptionResult].self, forKey: .options)
        voterCount = try container.decode(Int.self, forKey: .voterCount)
        closedAt = try WireCoding.decodeDate(container, .closedAt)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(options, forKey: .options)
        try container.encode(voterCount, forKey: .voterCount)
        try container.encodeIfPresent(closedAt.map(WireCoding.formatDate), forKey: .closedAt)
    }
}

/// One option's count, and who chose it when the poll is not anonymous.
public struct PollOptionResult: Hashable, Codable, Sendable {
    /// How many chose it.
    public var votes: Int
    /// Who chose it, earliest first, at most ``Limits/pollVotersListed`` (nil in an anonymous poll).
    public var voterIDs: [UserID]?

    enum CodingKeys: String, CodingKey { case votes, voterIDs = "voterIds" }

    /// Creates the value; each argument sets the property of the same name.
    public init(votes: Int, voterIDs: [UserID]? = nil) {
        self.votes = votes
        self.voterIDs = voterIDs
    }
}

/// `PUT …/messages/{id}/poll/vote`: the caller's whole answer, replacing any earlier one.
public struct VoteRequest: Hashable, Codable, Sendable {
    /// The chosen options' indexes: one in a single-choice poll, one or more (all different)
    /// in a multiple-choice one; empty takes the caller's vote back.
    public var options: [Int]

    /// Creates the value; each argument sets the property of the same name.
    public init(options: [Int]) {
        self.options = options
    }
}
