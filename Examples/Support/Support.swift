// What every example shares: where the server is, printing steps, failing loudly, and
// waiting for an event with a timeout (an example must end, never hang).
import Foundation
public import Parley
public import ParleyWire

/// The server and app key: `--server URL --app-key KEY`, else PARLEY_SERVER and PARLEY_APP_KEY.
/// Also starts a watchdog: an example that has not finished within a minute fails.
public func exampleSettings() throws -> (server: String, appKey: String) {
    Task.detached {
        try await Task.sleep(for: .seconds(60))
        fail("the flow did not finish within 60 s")
    }
    var arguments = CommandLine.arguments.dropFirst()
    var server = ProcessInfo.processInfo.environment["PARLEY_SERVER"]
    var appKey = ProcessInfo.processInfo.environment["PARLEY_APP_KEY"]
    while let argument = arguments.popFirst() {
        switch argument {
        case "--server": server = arguments.popFirst()
        case "--app-key": appKey = arguments.popFirst()
        case "--app-secret": _ = arguments.popFirst()  // read by exampleAppSecret()
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

/// The app secret, for an example that acts as the app's backend too: `--app-secret KEY`, else
/// PARLEY_APP_SECRET.
public func exampleAppSecret() -> String? {
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() { if argument == "--app-secret" { return arguments.popFirst() } }
    return ProcessInfo.processInfo.environment["PARLEY_APP_SECRET"]
}

/// Connects each client and waits until all are online. A client with no saved cursor
/// starts live from the moment it is attached, so a flow that sends and expects others to
/// see it live waits for this first (later reconnects resume from the saved cursor).
public func connectAll(_ clients: [ParleyClient], within seconds: Double = 15) async throws {
    for client in clients {
        let states = await client.connectionStates()
        await client.connect()
        _ = try await firstPicked(states, within: seconds) { $0 == .online ? true : nil }
    }
}

/// Prints one step of the flow.
public func step(_ text: String) { print("• \(text)") }

/// Stops the example with a failure.
public func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("FAILED: \(text)\n".utf8))
    exit(1)
}

/// The first element of `stream` that `pick` turns into a value, within `seconds`.
func firstPicked<Element: Sendable, Value: Sendable>(_ stream: AsyncStream<Element>, within seconds: Double,
                                                     _ pick: @escaping @Sendable (Element) -> Value?) async throws -> Value {
    try await withThrowingTaskGroup(of: Value?.self) { group in
        group.addTask {
            for await element in stream { if let value = pick(element) { return value } }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { fail("nothing matching arrived within \(seconds) s") }
        return value
    }
}

/// The first conversation event that matches, within `seconds`.
public func firstEvent(_ events: AsyncStream<ParleyClient.LiveEvent>, within seconds: Double = 15,
                       where predicate: @escaping @Sendable (ConversationEvent) -> Bool) async throws -> ConversationEvent {
    try await firstPicked(events, within: seconds) { live in
        if case .event(let event) = live, predicate(event) { return event }
        return nil
    }
}

/// The first status of the message `clientID` that matches, within `seconds`.
public func firstUpdate(_ updates: AsyncStream<ParleyClient.OutgoingUpdate>, for clientID: String, within seconds: Double = 15,
                        where predicate: @escaping @Sendable (ParleyClient.OutgoingStatus) -> Bool) async throws -> ParleyClient.OutgoingStatus {
    try await firstPicked(updates, within: seconds) { update in
        update.clientID == clientID && predicate(update.status) ? update.status : nil
    }
}
