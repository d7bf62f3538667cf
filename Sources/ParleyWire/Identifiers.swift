/// A typed identifier: `Identifier<User>` and `Identifier<Conversation>` cannot be swapped by
/// mistake, yet both encode as a bare JSON string.
public struct Identifier<Tag>: RawRepresentable, Hashable, Codable, Sendable, LosslessStringConvertible, Comparable {
    /// The identifier as the server issued it.
    public var rawValue: String
    /// Wraps a string.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a string.
    public init(_ description: String) { self.init(rawValue: description) }
    public var description: String { rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Identifies a user (`u_…`).
public typealias UserID = Identifier<User>
/// Identifies a conversation (`c_…`).
public typealias ConversationID = Identifier<Conversation>
/// Identifies a message (`m_…`).
public typealias MessageID = Identifier<Message>
