import Foundation

/// An `application/x-www-form-urlencoded` body (WHATWG URL, "application/x-www-form-urlencoded
/// parsing"), strictly: every `%` starts two hex digits, names and values are UTF-8, a name
/// appears once. Alamofire and HTML forms send request bodies this way by default, so the
/// flat JSON bodies (sign-up, sign-in, a guest) also arrive like this (docs/api.md, "Form bodies").
public struct FormBody: Sendable, Hashable {
    /// The most fields one body may carry.
    public static let maxFields = 64

    /// The fields by name.
    public var fields: [String: String]

    /// Parses `bytes`.
    ///
    /// - Throws: ``FormBodyError`` naming what is wrong.
    public init(parsing bytes: [UInt8]) throws(FormBodyError) {
        var fields: [String: String] = [:]
        for piece in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = piece.firstIndex(of: UInt8(ascii: "="))
            let name = try Self.decode(piece[..<(equals ?? piece.endIndex)])
            var value = ""
            if let equals { value = try Self.decode(piece[(equals + 1)...]) }
            guard !name.isEmpty else { throw .emptyName }
            guard fields[name] == nil else { throw .repeatedField(name) }
            guard fields.count < Self.maxFields else { throw .tooManyFields(Self.maxFields) }
            fields[name] = value
        }
        self.fields = fields
    }

    /// Decodes `T` from the fields: strings as they are, numbers and booleans (`true`/`false`,
    /// `1`/`0`) from their text, a missing field as nil. A field that needs nesting (an object
    /// or an array) cannot come from a form.
    ///
    /// - Throws: ``FormBodyError``, or the `DecodingError` of a missing field.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try T(from: FormDecoder(fields: fields, codingPath: []))
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) throws(FormBodyError) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "+"):
                out.append(UInt8(ascii: " "))
                index += 1
            case UInt8(ascii: "%"):
                guard index + 2 < bytes.endIndex, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else {
                    throw .badPercentEncoding
                }
                out.append(high << 4 | low)
                index += 3
            default:
                out.append(byte)
                index += 1
            }
        }
        guard let text = String(validating: out, as: UTF8.self) else { throw .notUTF8 }
        return text
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Why a form body was refused.
public enum FormBodyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A `%` not followed by two hex digits.
    case badPercentEncoding
    /// A name or value that is not UTF-8 once decoded.
    case notUTF8
    /// `=value` with no name.
    case emptyName
    /// The same name twice.
    case repeatedField(String)
    /// More fields than ``FormBody/maxFields``.
    case tooManyFields(Int)
    /// A field whose value is not of the type the request needs.
    case wrongType(field: String, expected: String)
    /// A field that needs an object or an array.
    case nested(field: String)

    public var description: String {
        switch self {
        case .badPercentEncoding: "the form body has a '%' not followed by two hex digits"
        case .notUTF8: "the form body is not UTF-8 once decoded"
        case .emptyName: "the form body has a field with no name"
        case .repeatedField(let name): "the form body names field '\(name)' twice"
        case .tooManyFields(let limit): "the form body has more than \(limit) fields"
        case .wrongType(let field, let expected): "form field '\(field)' is not \(expected)"
        case .nested(let field): "field '\(field)' is an object or a list, which a form body cannot carry: send this body as application/json"
        }
    }
}

/// Decodes one flat object from form fields.
private struct FormDecoder: Decoder {
    let fields: [String: String]
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard codingPath.isEmpty else { throw FormBodyError.nested(field: codingPath.map(\.stringValue).joined(separator: ".")) }
        return KeyedDecodingContainer(FormContainer<Key>(fields: fields, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw FormBodyError.nested(field: codingPath.map(\.stringValue).joined(separator: "."))
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw FormBodyError.nested(field: codingPath.map(\.stringValue).joined(separator: "."))
    }
}

private struct FormContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let fields: [String: String]
    let codingPath: [any CodingKey]
    var allKeys: [Key] { fields.keys.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { fields[key.stringValue] != nil }
    func decodeNil(forKey key: Key) throws -> Bool { fields[key.stringValue] == nil }

    private func text(_ key: Key) throws -> String {
        guard let text = fields[key.stringValue] else {
            throw DecodingError.keyNotFound(key, DecodingError.Context(codingPath: codingPath, debugDescription: "missing"))
        }
        return text
    }

    private func number<T: LosslessStringConvertible>(_ key: Key, _ name: String) throws -> T {
        guard let value = T(try text(key)) else { throw FormBodyError.wrongType(field: key.stringValue, expected: name) }
        return value
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String { try text(key) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        switch try text(key) {
        case "true", "1": true
        case "false", "0": false
        default: throw FormBodyError.wrongType(field: key.stringValue, expected: "true, false, 1 or 0")
        }
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try number(key, "a whole number") }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try number(key, "a whole number") }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try number(key, "a whole number") }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try number(key, "a whole number") }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try number(key, "a whole number") }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try number(key, "a whole number") }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try number(key, "a whole number") }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try number(key, "a whole number") }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try number(key, "a whole number") }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try number(key, "a whole number") }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        let value: Double = try number(key, "a number")
        guard value.isFinite else { throw FormBodyError.wrongType(field: key.stringValue, expected: "a finite number") }
        return value
    }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // A type that decodes from one string (an id, an enum of names) gets the text, as a
        // JSON string would give it; anything else needs nesting.
        let text = try text(key)
        guard let json = try? JSONEncoder().encode(text), let value = try? JSONDecoder().decode(T.self, from: json) else {
            throw FormBodyError.nested(field: key.stringValue)
        }
        return value
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw FormBodyError.nested(field: key.stringValue)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw FormBodyError.nested(field: key.stringValue) }
    func superDecoder() throws -> any Decoder { throw FormBodyError.nested(field: "super") }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw FormBodyError.nested(field: key.stringValue) }
}
