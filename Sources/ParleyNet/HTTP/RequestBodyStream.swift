import ParleySync
/// A request body delivered as it arrives, with backpressure.
///
/// The connection appends chunks on its loop; when more than ``highWatermark`` bytes wait
/// unread it stops reading from the socket, and resumes once the handler has consumed the
/// buffer down to ``lowWatermark``. So a slow consumer holds at most about 1 MiB in memory
/// however large the upload.
public final class RequestBodyStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    /// Unread bytes above which the connection pauses reading. 1 MiB.
    public static let highWatermark = 1 << 20
    /// Unread bytes below which a paused connection resumes. 256 KiB.
    public static let lowWatermark = 256 << 10

    private struct State {
        var chunks: [[UInt8]] = []
        var head = 0
        var buffered = 0
        var finished = false
        var failure: (any Error)?
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
        var paused = false
    }

    private let state = LockedValue(State())
    private let resume: @Sendable () -> Void

    init(resume: @escaping @Sendable () -> Void) { self.resume = resume }

    /// Appends a chunk. Returns false when the reader is behind and the producer should pause.
    func append(_ chunk: [UInt8]) -> Bool {
        let (waiter, shouldPause): (CheckedContinuation<[UInt8]?, any Error>?, Bool) = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return (waiter, false)
            }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            if state.buffered > Self.highWatermark { state.paused = true }
            return (nil, state.paused)
        }
        waiter?.resume(returning: chunk)
        return !shouldPause
    }

    /// Marks the end of the body.
    func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Ends the body with an error the reader will throw.
    func fail(_ error: any Error) {
        let waiter = state.withLock { state in
            if state.failure == nil, !state.finished { state.failure = error }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(throwing: error)
    }

    /// Stops the body from the reading side: once the chunks already buffered are read, the
    /// next read throws `error` (another request took an upload over). No effect on a body
    /// that has ended.
    public func interrupt(with error: any Error) { fail(error) }

    fileprivate func next() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            enum Outcome { case chunk([UInt8], resume: Bool), end, failure(any Error), wait }
            let outcome: Outcome = state.withLock { state in
                if state.head < state.chunks.count {
                    let chunk = state.chunks[state.head]
                    state.chunks[state.head] = []
                    state.head += 1
                    if state.head == state.chunks.count {
                        state.chunks.removeAll(keepingCapacity: true)
                        state.head = 0
                    }
                    state.buffered -= chunk.count
                    var resume = false
                    if state.paused, state.buffered <= Self.lowWatermark {
                        state.paused = false
                        resume = true
                    }
                    return .chunk(chunk, resume: resume)
                }
                if let failure = state.failure { return .failure(failure) }
                if state.finished { return .end }
                state.waiter = continuation
                return .wait
            }
            switch outcome {
            case .chunk(let chunk, let shouldResume):
                if shouldResume { resume() }
                continuation.resume(returning: chunk)
            case .end: continuation.resume(returning: nil)
            case .failure(let error): continuation.resume(throwing: error)
            case .wait: break
            }
        }
    }

    /// Iterates the body's chunks.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        let stream: RequestBodyStream
        public mutating func next() async throws -> [UInt8]? { try await stream.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }
}
