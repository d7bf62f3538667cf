import Foundation
import ParleyChat
import ParleyLog

/// One command connection to Redis on a serial queue of its own: what the presence directory
/// and the shared rate limits send their commands through. Commands are pipelined; a broken
/// connection is made again on the next use.
final class RedisClient: @unchecked Sendable {
    // @unchecked: `connection` and `brokenSince` are touched only on `queue`.
    private let url: RedisURL
    private let timeout: Duration
    let queue: DispatchQueue
    private var connection: RedisConnection?
    /// When the connection last broke, until one is made again (for the reconnect's log line).
    private var brokenSince: Date?

    init(url: RedisURL, label: String, timeout: Duration) {
        self.url = url
        self.timeout = timeout
        queue = DispatchQueue(label: label)
    }

    /// Sends `commands` pipelined and returns their replies. Call on `queue` only.
    ///
    /// - Throws: ``RedisError`` for an error reply or a broken connection.
    func send(_ commands: [[String]]) throws -> [RESPValue] {
        try send(commands.map { $0.map { Array($0.utf8) } })
    }

    /// ``send(_:)-([[String]])`` with byte arguments.
    func send(_ commands: [[[UInt8]]]) throws -> [RESPValue] {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !commands.isEmpty else { return [] }
        do {
            let live: RedisConnection
            if let connection {
                live = connection
            } else {
                live = try RedisConnection(url, timeout: timeout)
                if brokenSince != nil { Logger.process.labelled("parley.redis").info("reconnected to Redis", metadata: ["client": .string(queue.label)]) }
                brokenSince = nil
            }
            connection = live
            try live.write(commands.flatMap(RESPCommand.encode))
            var replies: [RESPValue] = []
            for _ in commands {
                let reply = try live.read()
                if case .error(let message) = reply { throw RedisError.server(message) }
                replies.append(reply)
            }
            return replies
        } catch {
            connection?.close()
            connection = nil
            if brokenSince == nil { brokenSince = Date() }
            Logger.process.labelled("parley.redis").failed("Redis command failed; reconnecting on the next one", error,
                                                           metadata: ["client": .string(queue.label)])
            throw error
        }
    }

    /// Runs `body` on the queue.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    /// Closes the connection. Call on `queue` only.
    func close() {
        connection?.close()
        connection = nil
    }
}

extension DispatchQueue {
    /// A timer on this queue calling `tick` every `period`, the first time after `delay`
    /// (a node's heartbeat, the bus's poll); cancel it to stop.
    func repeating(every period: Duration, after delay: Duration = .zero, _ tick: @escaping @Sendable () -> Void) -> any DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: self)
        timer.schedule(deadline: .now() + delay.dispatchInterval, repeating: period.dispatchInterval)
        timer.setEventHandler(handler: tick)
        timer.resume()
        return timer
    }
}
