#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: the call's name and its `errno`.
public struct IOError: Error, Equatable, CustomStringConvertible {
    /// The `errno` value.
    public var code: CInt
    /// The system call that failed, for example `"bind"`.
    public var call: String

    /// Creates an error for `call` with an explicit `errno`.
    public init(code: CInt, call: String) {
        self.code = code
        self.call = call
    }

    public var description: String { "\(call): \(String(cString: strerror(code))) (errno \(code))" }

    static func current(_ call: String) -> IOError { IOError(code: errno, call: call) }
}

/// The result of a non-blocking call: a value, or "try again when the descriptor is ready".
enum IOResult<Value> {
    case processed(Value)
    case wouldBlock
}

/// Runs a system call, retrying `EINTR` here and only here; `EAGAIN` is a normal result.
@inline(__always)
func syscall<T: FixedWidthInteger>(_ call: String, _ body: () -> T) throws(IOError) -> IOResult<T> {
    while true {
        let result = body()
        guard result == -1 else { return .processed(result) }
        switch errno {
        case EINTR: continue
        case EAGAIN: return .wouldBlock  // == EWOULDBLOCK on Linux
        case let code: throw IOError(code: code, call: call)
        }
    }
}

/// Monotonic time in nanoseconds; the loops' timers and timeouts use it.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

/// Process-wide settings every Parley process needs before it touches a socket.
public enum ProcessSetup: Sendable {
    /// Ignores SIGPIPE (a write to a closed socket must be an error, not death) and raises the
    /// open-file limit to its hard maximum so thousands of connections fit.
    ///
    /// - Returns: the soft file-descriptor limit now in force.
    @discardableResult
    public static func prepare() -> Int {
        _ = signal(SIGPIPE, SIG_IGN)
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            if limit.rlim_cur < limit.rlim_max {
                limit.rlim_cur = limit.rlim_max
                _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            }
            return Int(clamping: limit.rlim_cur)
        }
        return 1024
    }
}
