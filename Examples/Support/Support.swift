// What every example shares: where the server is, printing steps, failing loudly, and
// waiting for an event with a timeout (an example must end, never hang).
import Foundation
public import Parley
public import ParleyWire

/// The server and app key: `--server URL --app-key KEY`, else PARLEY_SERVER and PARLEY_APP_KEY.
public func exampleSettings() throws -> (server: String, appKey: String) {
    var arguments = CommandLine.arguments.dropFirst()
    var server = ProcessInfo.processInfo.environment["PARLEY_SERVER"]
    var appKey = ProcessInfo.processInfo.environment["PARLEY_APP_KEY"]
    while let argument = arguments.popFirst() {
        switch argument {
        case "--server": server = arguments.popFirst()
        case "--app-key": appKey = arguments.popFirst()
        default:
            print("usage: \(CommandLine.arguments[0]) --server http://127.0.0.1:8080 --app-key pk_…")
            exit(argument == "--help" || argument == "-h" ? 0 : 2)
        }
    }
    guard let server, let appKey else {
        print("usage: \(CommandLine.arguments[0]) --server http://127.0.0.1:8080 --app-key pk_… (the key parley-server printed)")
        exit(2)
    }
    return (server, appKey)
}

/// Prints one step of the flow.
public func step(_ text: String) { print("• \(text)") }

/// Stops the example with a failure.
public func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("FAILED: \(text)\n".utf8))
    exit(1)
}

/// The first conversation event that matches, within `seconds`.
public func firstEvent(_ events: AsyncStream<ParleyClient.LiveEvent>, within seconds: Double = 15,
                       where predicate: @escaping @Sendable (ConversationEvent) -> Bool) async throws -> ConversationEvent {
    try await withThrowingTaskGroup(of: ConversationEvent?.self) { group in
        group.addTask {
            for await case .event(let event) in events where predicate(event) { return event }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let event = first else { fail("no matching event within \(seconds) s") }
        return event
    }
}

/// The first outgoing update for `clientID` that matches, within `seconds`.
public func firstUpdate(_ updates: AsyncStream<ParleyClient.OutgoingUpdate>, for clientID: String, within seconds: Double = 15,
                        where predicate: @escaping @Sendable (ParleyClient.OutgoingStatus) -> Bool) async throws -> ParleyClient.OutgoingStatus {
    try await withThrowingTaskGroup(of: ParleyClient.OutgoingStatus?.self) { group in
        group.addTask {
            for await update in updates where update.clientID == clientID && predicate(update.status) { return update.status }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let status = first else { fail("no matching status within \(seconds) s") }
        return status
    }
}
