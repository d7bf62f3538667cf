public import ParleyWire

/// A failure of an SDK call: the server's typed answer, or a transport problem. Every case
/// says whether trying again later can help (``isTemporary``), which is the only thing the
/// SDK's own retries look at.
public enum ParleyError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server refused: its status, stable code and message (`ChatError`).
    case server(ChatError)
    /// The server could not be reached, or the connection dropped before an answer.
    case unreachable(String)
    /// The server answered something this SDK cannot read (a version mismatch).
    case badResponse(String)
    /// The call needs a signed-in user.
    case notSignedIn
    /// The client's state (token, position, outbox) could not be written to its store: what
    /// the message says (a full disk, a read-only folder). The change is kept in memory.
    case stateNotSaved(String)

    /// True when the same call may succeed later (network trouble, 429, 5xx).
    public var isTemporary: Bool {
        switch self {
        case .server(let error): error.isTemporary
        case .unreachable: true
        case .badResponse, .notSignedIn, .stateNotSaved: false
        }
    }

    /// The server's error code, when the server answered.
    public var code: String? {
        if case .server(let error) = self { return error.code }
        return nil
    }

    public var description: String {
        switch self {
        case .server(let error): error.description
        case .unreachable(let reason): "cannot reach the server: \(reason)"
        case .badResponse(let reason): "unexpected answer from the server: \(reason)"
        case .notSignedIn: "sign in first"
        case .stateNotSaved(let reason): "the client's state could not be saved: \(reason); free space or fix the store's folder"
        }
    }
}
