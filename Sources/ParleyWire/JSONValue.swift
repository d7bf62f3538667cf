import Foundation

/// Any JSON value: the payload of custom messages and the custom data of users and
/// conversations, which the server stores and returns without interpreting.
public enum JSONValue: Hashable, Sendable, Codable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number (as a double, like JavaScript).
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// Most levels of nesting accepted from a client.
    public static let maxDepth = 16

    public init(from decoder: any Decoder) throws {
        guard decoder.codingPath.count <= Self.maxDepth + 8 else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "nested too deeply"))
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Levels of nesting (a scalar is 0).
    public var depth: Int {
        switch self {
        case .array(let values): 1 + (values.map(\.depth).max() ?? 0)
        case .object(let values): 1 + (values.values.map(\.depth).max() ?? 0)
        default: 0
        }
    }

    /// The compact encoding with sorted keys: what is stored and what size limits count.
    public func encoded() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// Parses stored text.
    public static func decode(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// This value as `T`, through its JSON text (for answers kept as JSON, off the hot path).
    public func decode<T: Decodable>(as type: T.Type) throws -> T {
        try WireCoding.decoder().decode(T.self, from: try WireCoding.encoder().encode(self))
    }
}
