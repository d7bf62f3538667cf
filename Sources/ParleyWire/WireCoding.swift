public import Foundation

/// The JSON conventions of the API: ISO 8601 dates with milliseconds in UTC, sorted keys.
public enum WireCoding: Sendable {
    /// An encoder for API bodies.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(formatDate(date))
        }
        return encoder
    }

    /// A decoder for API bodies (accepts dates with or without fractional seconds).
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseDate(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO 8601 date")
            }
            return date
        }
        return decoder
    }

    /// `2026-11-30T11:36:56.123Z`, computed without a formatter (this runs for every message).
    public static func formatDate(_ date: Date) -> String {
        formatMilliseconds(Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// `2026-11-30T11:36:56.123Z` from milliseconds since 1970.
    public static func formatMilliseconds(_ milliseconds: Int64) -> String {
        var writer = JSONWriter(capacity: 32)
        writer.date(milliseconds: milliseconds)
        return String(decoding: writer.bytes.dropFirst().dropLast(), as: UTF8.self)
    }

    /// The calendar date (proleptic Gregorian, UTC) and time of day of an instant.
    static func civil(_ milliseconds: Int64) -> (year: Int64, month: Int64, day: Int64, millisecondOfDay: Int64) {
        var days = milliseconds / 86_400_000
        var rest = milliseconds % 86_400_000
        if rest < 0 {
            rest += 86_400_000
            days -= 1
        }
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day, rest)
    }

    /// An optional ISO 8601 date field of a request, whatever the decoder's date strategy
    /// (the server's request decoder reads dates only where a type asks, as here).
    public static func decodeDate<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> Date? {
        guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
        // Years 1970–9999: what the API's dates are, and where writing and reading agree.
        guard let date = parseDate(text), date.timeIntervalSince1970 >= 0, date.timeIntervalSince1970 < 253_402_300_800 else {
            throw DecodingError.dataCorruptedError(forKey: key, in: container,
                                                   debugDescription: "\(key.stringValue) is not an ISO 8601 date between 1970 and 9999")
        }
        return date
    }

    /// Parses ISO 8601 with or without fractional seconds.
    public static func parseDate(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return date }
        return try? Date(text, strategy: Date.ISO8601FormatStyle())
    }
}
