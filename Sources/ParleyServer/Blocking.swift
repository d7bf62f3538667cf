import Dispatch

/// Runs async work to completion from synchronous code — an executable's top level, a
/// libFuzzer callback — on a detached task while the calling thread waits. Never call it
/// from a task or an event loop: the calling thread blocks until the work is done.
package func runBlocking<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let done = DispatchSemaphore(value: 0)
    let result = BlockingResult<T>()
    Task.detached {
        do { result.value = .success(try await work()) } catch { result.value = .failure(error) }
        done.signal()
    }
    done.wait()
    return result.value ?? .failure(CancellationError())
}

/// The result handed from the task to the waiting thread.
private final class BlockingResult<T>: @unchecked Sendable {
    // @unchecked: written once by the task before it signals, read by the waiter after.
    var value: Result<T, any Error>?
}
