/// A presence channel member on some node: the user and their `user_info` as JSON.
package struct ChannelMember: Sendable, Hashable {
    /// The app's internal key.
    package var app: Int64
    /// The presence channel.
    package var channel: String
    /// The user's id in the channel.
    package var userID: String
    /// `user_info` as JSON text; nil when the auth gave none.
    package var infoJSON: String?

    /// Creates the value; each argument sets the property of the same name.
    package init(app: Int64, channel: String, userID: String, infoJSON: String?) {
        self.app = app
        self.channel = channel
        self.userID = userID
        self.infoJSON = infoJSON
    }
}

/// A channel's sockets and presence users over every node.
package struct ChannelOccupancy: Sendable, Hashable {
    /// The channel.
    package var channel: String
    /// Sockets subscribed, on every node.
    package var subscriptions: Int
    /// Distinct presence users, on every node (0 for other channels).
    package var users: Int

    /// Creates the value; each argument sets the property of the same name.
    package init(channel: String, subscriptions: Int, users: Int) {
        self.channel = channel
        self.subscriptions = subscriptions
        self.users = users
    }
}

/// What joining a presence channel found.
package struct ChannelJoin: Sendable {
    /// The channel's members on every node, the joining one included.
    package var members: [ChannelMember]
    /// No other node had the user: their arrival is news for the channel.
    package var news: Bool

    /// Creates the value; each argument sets the property of the same name.
    package init(members: [ChannelMember], news: Bool) {
        self.members = members
        self.news = news
    }
}

/// What this node holds, for a directory to write again after it lost it (Redis restarted).
package struct ChannelDirectoryState: Sendable {
    /// Sockets per channel on this node.
    package var subscriptions: [(app: Int64, channel: String, count: Int)]
    /// Presence members with a socket on this node.
    package var members: [ChannelMember]

    /// Creates the value; each argument sets the property of the same name.
    package init(subscriptions: [(app: Int64, channel: String, count: Int)], members: [ChannelMember]) {
        self.subscriptions = subscriptions
        self.members = members
    }
}

/// Where the Pusher channels of every node meet (with several nodes, Redis): who is present in
/// each presence channel and how many sockets each channel has on each node, so
/// `member_added` / `member_removed` are sent once per user however many nodes they are on,
/// a subscriber sees every node's members, and the HTTP API counts every node.
///
/// Calls are answered in the order they were made (a leave and a join of one user on one node
/// are never swapped). Every call is best effort: nil means the directory could not be
/// reached, and the node answers as if it were alone.
package protocol ChannelDirectory: Sendable {
    /// Starts the heartbeat. `state` gives what this node holds (written again when the
    /// directory lost it); `announce` sends member changes the directory found on its own
    /// (a dead node's users gone, this node's users back after Redis restarted): `true` added.
    func start(state: @escaping @Sendable () -> ChannelDirectoryState,
               announce: @escaping @Sendable ([(member: ChannelMember, added: Bool)]) -> Void)
    /// A user's first socket on this node joined their presence channel. Answers the channel's
    /// members on every node (this one included) and whether no other node had the user.
    func join(_ member: ChannelMember, completion: @escaping @Sendable (ChannelJoin?) -> Void)
    /// A user's last socket on this node left the channel. Answers whether no other node has
    /// the user (so they are gone).
    func leave(app: Int64, channel: String, userID: String, completion: @escaping @Sendable (Bool?) -> Void)
    /// The channel's members on every node.
    func members(app: Int64, channel: String, completion: @escaping @Sendable ([ChannelMember]?) -> Void)
    /// This node's sockets in a channel changed by `change`.
    func subscriptions(app: Int64, channel: String, change: Int)
    /// The app's channels that have sockets on some node, whose names start with `prefix`.
    func occupancy(app: Int64, prefix: String, completion: @escaping @Sendable ([ChannelOccupancy]?) -> Void)
    /// Stops the heartbeat; the other nodes then take this node's members away.
    func stop()
    /// ``start(state:announce:)``, and `occupancy` told when a channel gets its first socket
    /// on any node (`true`) or loses its last on every node (`false`), once across nodes (for
    /// Pusher's `channel_occupied` and `channel_vacated` webhooks).
    func start(state: @escaping @Sendable () -> ChannelDirectoryState,
               announce: @escaping @Sendable ([(member: ChannelMember, added: Bool)]) -> Void,
               occupancy: @escaping @Sendable ([(app: Int64, channel: String, occupied: Bool)]) -> Void)
}

extension ChannelDirectory {
    /// A directory that cannot tell occupancy changes: they are not reported.
    package func start(state: @escaping @Sendable () -> ChannelDirectoryState,
                      announce: @escaping @Sendable ([(member: ChannelMember, added: Bool)]) -> Void,
                      occupancy: @escaping @Sendable ([(app: Int64, channel: String, occupied: Bool)]) -> Void) {
        start(state: state, announce: announce)
    }
}
