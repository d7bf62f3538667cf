import Synchronization

/// A set of server-side sockets that receive the same frames: each frame is encoded once and
/// handed to each loop once, and that loop writes it to its own sockets (coalesced with any
/// other frame sent in the same loop iteration).
public final class WebSocketBroadcaster: Sendable {
    /// The members on one loop; touched only on that loop's thread.
    private final class Members: @unchecked Sendable {
        // @unchecked: `sockets` and `positions` are read and written only on `loop`'s thread
        // (every entry point hops there first); `count` is an atomic readable anywhere.
        let loop: EventLoop
        var sockets: [WebSocket] = []
        var positions: [ObjectIdentifier: Int] = [:]
        let count = Atomic<Int>(0)

        init(loop: EventLoop) { self.loop = loop }

        func add(_ socket: WebSocket) {
            let id = ObjectIdentifier(socket)
            guard positions[id] == nil else { return }
            positions[id] = sockets.count
            sockets.append(socket)
            count.store(sockets.count, ordering: .relaxed)
        }

        func remove(_ socket: WebSocket) {
            guard let index = positions.removeValue(forKey: ObjectIdentifier(socket)) else { return }
            let last = sockets.removeLast()
            if index < sockets.count {
                sockets[index] = last
                positions[ObjectIdentifier(last)] = index
            }
            count.store(sockets.count, ordering: .relaxed)
        }
    }

    private let members: [Members]

    /// A broadcaster for sockets on `group`'s loops.
    public init(group: EventLoopGroup) {
        members = group.loops.map { Members(loop: $0) }
    }

    /// Adds a socket (typically from its `onOpen`). Safe from any thread.
    public func add(_ socket: WebSocket) {
        let set = members[socket.loop.index]
        if set.loop.inEventLoop { set.add(socket) } else { set.loop.execute { set.add(socket) } }
    }

    /// Removes a socket (typically from its `onClose`). Safe from any thread.
    public func remove(_ socket: WebSocket) {
        let set = members[socket.loop.index]
        if set.loop.inEventLoop { set.remove(socket) } else { set.loop.execute { set.remove(socket) } }
    }

    /// Number of sockets.
    public var count: Int { members.reduce(0) { $0 + $1.count.load(ordering: .relaxed) } }

    /// Sends `frame` to every socket. Safe from any thread.
    public func broadcast(_ frame: EncodedWebSocketFrame) {
        for set in members {
            let deliver: @Sendable () -> Void = {
                for socket in set.sockets { socket.send(frame) }
            }
            if set.loop.inEventLoop { deliver() } else { set.loop.execute(deliver) }
        }
    }
}
