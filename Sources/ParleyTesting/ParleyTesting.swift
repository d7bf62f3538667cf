// Test helpers every test target may use without pulling in sockets (STYLE.md rule 7): an
// event queue a callback pushes into and a test awaits with a timeout, and the timeout itself.
import Foundation
import ParleySync

/// Waits for `operation`, failing after `seconds` instead of hanging the suite.
package func withTimeout<T: Sendable>(_ seconds: Double = 5, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut(seconds: seconds)
        }
        guard let first = try await group.next() else { throw TimedOut(seconds: seconds) }
        group.cancelAll()
        return first
    }
}

package struct TimedOut: Error, CustomStringConvertible {
    /// How long was waited.
    package var seconds: Double
    /// A timeout after `seconds`.
    package init(seconds: Double) { self.seconds = seconds }
    package var description: String { "timed out after \(seconds) s" }
}

/// A queue a callback pushes into and a test awaits, with a timeout: the test waits for the
/// event itself, never for a fixed time.
package final class EventQueue<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element] = []
        var waiter: (id: Int, continuation: CheckedContinuation<Element, any Error>)?
        var nextID = 0
    }
    private let state = LockedValue(State())
    private func withState<T>(_ body: (inout State) -> T) -> T { state.withLock { body(&$0) } }

    /// An empty queue.
    package init() {}

    /// Adds an element, waking a waiting `next`.
    package func push(_ item: Element) {
        let waiter = withState { state -> CheckedContinuation<Element, any Error>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter.continuation
            }
            state.items.append(item)
            return nil
        }
        waiter?.resume(returning: item)
    }

    /// The next element; throws ``TimedOut`` after `seconds`.
    package func next(timeout seconds: Double = 5) async throws -> Element {
        try await withTimeout(seconds) { try await self.take() }
    }

    private func take() async throws -> Element {
        let id = withState { state in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element, any Error>) in
                let ready: Result<Element, any Error>? = withState { state in
                    if !state.items.isEmpty { return .success(state.items.removeFirst()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiter = (id, continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = withState { state -> CheckedContinuation<Element, any Error>? in
                guard let waiter = state.waiter, waiter.id == id else { return nil }
                state.waiter = nil
                return waiter.continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}

/// The cases of the sent/delivered/read rule (`Tests/Fixtures/delivery-status.json`), which
/// the server's rule, the SDK's tracker and the web client's `status.js` are each tested against.
package struct DeliveryStatusCase: Decodable, Sendable {
    /// The other members' watermarks.
    package struct Marks: Decodable, Sendable {
        package var delivered: Int64
        package var read: Int64
    }
    /// The message's seq.
    package var seq: Int64
    /// Every other member's watermarks.
    package var others: [Marks]
    /// What its author sees: "sent", "delivered" or "read".
    package var status: String

    /// The cases, read from the fixture beside the tests.
    package static func load(file: String = #filePath) throws -> [DeliveryStatusCase] {
        struct Fixture: Decodable { var cases: [DeliveryStatusCase] }
        var folder = URL(fileURLWithPath: file).deletingLastPathComponent()
        while folder.path != "/", !FileManager.default.fileExists(atPath: folder.appendingPathComponent("Tests/Fixtures").path) {
            folder.deleteLastPathComponent()
        }
        let url = folder.appendingPathComponent("Tests/Fixtures/delivery-status.json")
        return try JSONDecoder().decode(Fixture.self, from: try Data(contentsOf: url)).cases
    }
}
