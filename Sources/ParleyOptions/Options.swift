import Foundation

/// One command-line option, declared once: its flag, the environment variable that sets it
/// too, the kind of value it takes, its help line (which states the default), and how it sets
/// the settings. The help text, the environment mapping and the parsing all come from the
/// same declarations (``OptionParser``), so they cannot drift apart.
///
/// ```swift
/// let parser = OptionParser<Settings>([
///     .integer("--port", "PARLEY_PORT", in: 0...65535, \.port, help: "Port to listen on (default 8080)."),
///     .toggle("--enable-echo", "PARLEY_ENABLE_ECHO", \.enableEcho, help: "Serve /echo."),
/// ])
/// var settings = Settings()
/// let words = try parser.parse(["--port", "9000"], environment: ProcessInfo.processInfo.environment, into: &settings)
/// ```
package struct Option<Settings> {
    /// `--port`.
    package let flag: String
    /// What the help shows for the value (`<n>`); nil for a switch that takes none.
    package let valueName: String?
    /// The environment variable read when the flag is not given, if any.
    package let environment: String?
    /// One line for `--help`, stating the default.
    package let help: String
    let apply: (inout Settings, String, String) throws -> Void

    /// An option with its own conversion: `apply(&settings, value, source)` throws
    /// ``OptionError`` (or any error, reported with `source`) for a bad value. `source` names
    /// where the value came from ("--port" or "environment value for --port").
    package init(_ flag: String, value valueName: String?, environment: String?, help: String,
                apply: @escaping (inout Settings, _ value: String, _ source: String) throws -> Void) {
        self.flag = flag
        self.valueName = valueName
        self.environment = environment
        self.help = help
        self.apply = apply
    }
}

/// A command-line mistake, saying what to change.
package struct OptionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was wrong.
    package var message: String
    /// Creates the error.
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

extension Option {
    /// A whole number in `range`.
    package static func integer<Value: FixedWidthInteger>(_ flag: String, _ environment: String?, in range: ClosedRange<Value>,
                                                         _ keyPath: WritableKeyPath<Settings, Value>, value: String = "<n>",
                                                         help: String) -> Option {
        Option(flag, value: value, environment: environment, help: help) { settings, text, source in
            settings[keyPath: keyPath] = try Self.number(text, in: range, source: source)
        }
    }

    /// A whole number in `range` for a setting that is nil unless given.
    package static func integer<Value: FixedWidthInteger>(_ flag: String, _ environment: String?, in range: ClosedRange<Value>,
                                                         _ keyPath: WritableKeyPath<Settings, Value?>, value: String = "<n>",
                                                         help: String) -> Option {
        Option(flag, value: value, environment: environment, help: help) { settings, text, source in
            settings[keyPath: keyPath] = try Self.number(text, in: range, source: source)
        }
    }

    /// A whole number of seconds in `range`, as a `Duration`.
    package static func seconds(_ flag: String, _ environment: String?, in range: ClosedRange<Int>,
                               _ keyPath: WritableKeyPath<Settings, Duration>, help: String) -> Option {
        Option(flag, value: "<s>", environment: environment, help: help) { settings, text, source in
            settings[keyPath: keyPath] = .seconds(try Self.number(text, in: range, source: source))
        }
    }

    /// Text; `nonEmpty` refuses "".
    package static func text(_ flag: String, _ environment: String?, _ keyPath: WritableKeyPath<Settings, String>,
                            value: String, nonEmpty: Bool = true, help: String) -> Option {
        Option(flag, value: value, environment: environment, help: help) { settings, text, source in
            guard !nonEmpty || !text.isEmpty else { throw OptionError("\(source) must not be empty") }
            settings[keyPath: keyPath] = text
        }
    }

    /// Optional text.
    package static func text(_ flag: String, _ environment: String?, _ keyPath: WritableKeyPath<Settings, String?>,
                            value: String, help: String) -> Option {
        Option(flag, value: value, environment: environment, help: help) { settings, text, source in
            guard !text.isEmpty else { throw OptionError("\(source) must not be empty") }
            settings[keyPath: keyPath] = text
        }
    }

    /// A switch: the flag alone turns it on; the environment variable takes 1/true/yes or 0/false/no.
    package static func toggle(_ flag: String, _ environment: String?, _ keyPath: WritableKeyPath<Settings, Bool>, help: String) -> Option {
        Option(flag, value: nil, environment: environment, help: help) { settings, text, source in
            switch text.lowercased() {
            case "1", "true", "yes": settings[keyPath: keyPath] = true
            case "0", "false", "no": settings[keyPath: keyPath] = false
            default: throw OptionError("\(source) must be 1/true/yes or 0/false/no")
            }
        }
    }

    /// One of a closed set of names (any case).
    package static func choice<Value: RawRepresentable & CaseIterable>(_ flag: String, _ environment: String?,
                                                                      _ keyPath: WritableKeyPath<Settings, Value>,
                                                                      help: String) -> Option where Value.RawValue == String {
        let names = Value.allCases.map(\.rawValue)
        return Option(flag, value: "<\(names.joined(separator: "|"))>", environment: environment, help: help) { settings, text, source in
            guard let value = Value.allCases.first(where: { $0.rawValue.lowercased() == text.lowercased() }) else {
                throw OptionError("\(source) must be one of \(names.joined(separator: ", ")), not '\(text)'")
            }
            settings[keyPath: keyPath] = value
        }
    }

    /// `text` as a whole number in `range`, for options with their own conversion.
    ///
    /// - Throws: ``OptionError`` naming `source`, the range and the value.
    package static func number<Value: FixedWidthInteger>(_ text: String, in range: ClosedRange<Value>, source: String) throws -> Value {
        guard let number = Value(text), range.contains(number) else {
            throw OptionError("\(source) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return number
    }
}

/// Parses a command line against declared ``Option``s and writes their help.
package struct OptionParser<Settings> {
    /// The options, in help order.
    package let options: [Option<Settings>]
    private let byFlag: [String: Int]

    /// A parser for `options`. Flags and environment variables must be unique: a duplicate is
    /// a programming error and stops the process at once, in every build (the declarations
    /// are the interface outside tools rely on).
    package init(_ options: [Option<Settings>]) {
        self.options = options
        var byFlag: [String: Int] = [:]
        var environments = Set<String>()
        for (index, option) in options.enumerated() {
            precondition(byFlag.updateValue(index, forKey: option.flag) == nil, "option \(option.flag) is declared twice")
            if let environment = option.environment {
                precondition(environments.insert(environment).inserted, "environment variable \(environment) is declared twice")
            }
        }
        self.byFlag = byFlag
    }

    /// The option declared for `flag`.
    package func option(_ flag: String) -> Option<Settings>? { byFlag[flag].map { options[$0] } }

    /// Applies the environment, then the arguments (which win), to `settings`.
    ///
    /// - Parameters:
    ///   - arguments: without the program name. `--flag value` and `--flag=value` both work.
    ///   - stopAt: flags the caller handles itself (`--help`); when one is met, parsing stops
    ///     and it is returned as `stoppedAt`.
    /// - Returns: the words that are not options, in order, and the stop flag met, if any.
    /// - Throws: ``OptionError`` naming the unknown option or bad value and where it came from.
    package func parse(_ arguments: [String], environment: [String: String], into settings: inout Settings,
                      stopAt: Set<String> = []) throws(OptionError) -> (words: [String], stoppedAt: String?) {
        var given: [(Option<Settings>, String, String)] = []
        for option in options {
            if let variable = option.environment, let value = environment[variable] {
                given.append((option, value, "environment value for \(option.flag)"))
            }
        }
        var words: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if stopAt.contains(argument) { return (words, argument) }
            guard argument.hasPrefix("-"), argument != "-" else {
                words.append(argument)
                continue
            }
            var name = argument
            var value: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                value = String(argument[argument.index(after: equals)...])
            }
            guard let option = option(name) else { throw OptionError("unknown option '\(argument)'") }
            if option.valueName == nil {
                given.append((option, value ?? "1", name))
                continue
            }
            if value == nil {
                guard index < arguments.count else { throw OptionError("\(name) needs a value \(option.valueName ?? "")") }
                value = arguments[index]
                index += 1
            }
            given.append((option, value ?? "", name))
        }
        for (option, value, source) in given {
            do {
                try option.apply(&settings, value, source)
            } catch let error as OptionError {
                throw error
            } catch {
                throw OptionError("\(source): \(error)")
            }
        }
        return (words, nil)
    }

    /// One line per option: the flag and value, the help, and the environment variable.
    package func helpLines(flagWidth: Int = 30) -> String {
        options.map { option in
            let flag = option.flag + (option.valueName.map { " " + $0 } ?? "")
            let environment = option.environment.map { "  [\($0)]" } ?? ""
            return "  \(flag.padding(toLength: max(flagWidth, flag.count + 1), withPad: " ", startingAt: 0))\(option.help)\(environment)"
        }.joined(separator: "\n")
    }
}

// Declarations hold closures that write into the settings; they are built and used on one
// thread (a command line is parsed once, at start), so they are deliberately not Sendable.
@available(*, unavailable)
extension Option: Sendable {}

@available(*, unavailable)
extension OptionParser: Sendable {}
