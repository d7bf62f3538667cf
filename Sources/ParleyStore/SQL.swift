/// SQL text whose interpolations are bound as parameters, never spliced into the text.
///
/// ```swift
/// let rows = try db.fetchAll("SELECT id FROM account WHERE app_id = \(appID) AND username_key = \(key)")
/// ```
///
/// An engine renders each bound value as its own placeholder (`?` for SQLite, `$n` for
/// PostgreSQL), so no value can change the statement. Text that must be spliced (a column
/// name chosen from a fixed list) goes through ``SQL/Interpolation/appendInterpolation(literal:)``.
package struct SQL: ExpressibleByStringInterpolation, Sendable, Hashable, CustomStringConvertible {
    /// A piece of the statement.
    package enum Part: Sendable, Hashable {
        /// Statement text, written as is.
        case text(String)
        /// A value bound to a placeholder.
        case bind(DatabaseValue)
    }

    /// The pieces, in order.
    package private(set) var parts: [Part]

    /// A statement with no parameters.
    package init(stringLiteral text: String) { parts = [.text(text)] }

    /// A statement built by interpolation.
    package init(stringInterpolation: Interpolation) { parts = stringInterpolation.parts }

    /// Builds interpolated statements.
    package struct Interpolation: StringInterpolationProtocol, Sendable {
        var parts: [Part] = []
        package init(literalCapacity: Int, interpolationCount: Int) { parts.reserveCapacity(interpolationCount * 2 + 1) }
        package mutating func appendLiteral(_ text: String) { parts.append(.text(text)) }
        /// Binds a value as a parameter.
        package mutating func appendInterpolation(_ value: some DatabaseValueConvertible) {
            parts.append(.bind(value.databaseValue))
        }
        /// Binds an optional value (`nil` binds NULL).
        package mutating func appendInterpolation<T: DatabaseValueConvertible>(_ value: T?) {
            parts.append(.bind(value?.databaseValue ?? .null))
        }
        /// Binds each value of a non-empty list, comma-separated: `IN (\(list: ids))`.
        package mutating func appendInterpolation(list values: [some DatabaseValueConvertible]) {
            precondition(!values.isEmpty, "an SQL list needs at least one value")
            for (index, value) in values.enumerated() {
                if index > 0 { parts.append(.text(", ")) }
                parts.append(.bind(value.databaseValue))
            }
        }
        /// Splices another statement, keeping its bindings bound.
        package mutating func appendInterpolation(_ sql: SQL) { parts += sql.parts }
        /// Splices trusted text (a column name from a fixed list). Never pass user input.
        package mutating func appendInterpolation(literal text: StaticString) {
            parts.append(.text(text.description))
        }
    }

    /// Appends another statement.
    package static func + (lhs: SQL, rhs: SQL) -> SQL {
        var joined = lhs
        joined.parts += rhs.parts
        return joined
    }

    /// The text with `placeholder(n)` (1-based) for each binding, and the bindings in order.
    package func rendered(placeholder: (Int) -> String) -> (text: String, bindings: [DatabaseValue]) {
        var text = ""
        var bindings: [DatabaseValue] = []
        for part in parts {
            switch part {
            case .text(let piece): text += piece
            case .bind(let value):
                bindings.append(value)
                text += placeholder(bindings.count)
            }
        }
        return (text, bindings)
    }

    /// The statement with `?` placeholders; bound values are not shown (they may be private).
    package var description: String { rendered { _ in "?" }.text }
}
