/// A set of server-side sockets that receive the same frames: each frame is encoded once and
/// handed to each loop once, and that loop writes it to its own sockets.
public final class WebSocketBroadcaster: Sendable {
    private let members: [Locked<[ObjectIdentifier: WebSocket]>]
    private let loops: [EventLoop]

    /// A broadcaster for sockets on `group`'s loops.
    public init(group: EventLoopGroup) {
        loops = group.loops
        members = group.loops.map { _ in Locked([:]) }
    }

    /// Adds a socket (from its `onOpen`).
    public func add(_ socket: WebSocket) {
        members[socket.loop.index].withLock { $0[ObjectIdentifier(socket)] = socket }
    }

    /// Removes a socket (from its `onClose`).
    public func remove(_ socket: WebSocket) {
        members[socket.loop.index].withLock { $0[ObjectIdentifier(socket)] = nil }
    }

    /// Number of sockets.
    public var count: Int { members.reduce(0) { $0 + $1.withLock { $0.count } } }

    /// Sends `frame` to every socket.
    public func broadcast(_ frame: EncodedWebSocketFrame) {
        for (loop, set) in zip(loops, members) {
            let deliver: @Sendable () -> Void = {
                for socket in set.withLock({ Array($0.values) }) { socket.send(frame) }
            }
            if loop.inEventLoop { deliver() } else { loop.execute(deliver) }
        }
    }
}
