import ParleySync
/// Items handed to one event loop from other threads (a fan-out queue), so that a burst costs
/// one hop to the loop, not one per item: ``push(_:)`` says whether this item is the first
/// since the last ``take()`` (the caller schedules the drain), and ``take()`` hands over
/// everything pushed so far, in order.
///
/// ```swift
/// if inbox.push(delivery) { socket.loop.execute { for item in inbox.take() { send(item) } } }
/// ```
package final class LoopInbox<Item: Sendable>: Sendable {
    private let state = LockedValue<(items: [Item], scheduled: Bool)>(([], false))

    /// An empty inbox.
    package init() {}

    /// Adds an item; true when a drain must be scheduled (none is pending).
    package func push(_ item: Item) -> Bool {
        state.withLock { box in
            box.items.append(item)
            defer { box.scheduled = true }
            return !box.scheduled
        }
    }

    /// Everything pushed since the last take, oldest first; the next push schedules again.
    package func take() -> [Item] {
        state.withLock { box in
            defer { box = ([], false) }
            return box.items
        }
    }
}
