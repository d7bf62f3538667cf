package import Foundation
import ParleySync
import ParleyWire

/// The steps of new messages' delivery this node took, waiting to be written to the
/// `delivery_trace` table in one write a second (docs/trace.md). Recording is an append under
/// a lock, so the paths it watches (the fan-out, replays, receipts, push and webhook senders)
/// pay no write of their own; a node that dies loses at most its last second of steps.
package final class TraceRecorder: Sendable {
    /// One step, as a row.
    package struct Row: Sendable, Equatable {
        package var position: Int64
        package var conversation: Int64?
        package var step: String
        package var user: Int64?
        package var session: Int64?
        package var device: String?
        /// Several devices in one row: `<user>:<session>` (routed) or
        /// `<user>:<session>:<delivered>:<read>` (receipts), comma-separated.
        package var devices: String?
        package var at: Int64
        package var detail: String?

        /// Creates the value; each argument sets the property of the same name.
        package init(position: Int64, conversation: Int64? = nil, step: String, user: Int64? = nil, session: Int64? = nil,
                     device: String? = nil, devices: String? = nil, at: Int64, detail: String? = nil) {
            self.position = position
            self.conversation = conversation
            self.step = step
            self.user = user
            self.session = session
            self.device = device
            self.devices = devices
            self.at = at
            self.detail = detail
        }
    }

    /// False when tracing is off (`--trace-retention 0`): nothing is recorded.
    package let isOn: Bool
    /// The name this node's steps carry.
    package let node: String
    /// Steps waiting past this many are dropped (and counted): a store that cannot keep up
    /// must not grow the node's memory without bound.
    package let capacity: Int
    private let state = LockedValue<(rows: [Row], dropped: Int)>(([], 0))

    private let clock: @Sendable () -> Date

    /// A recorder for `node` with the chat's clock; `isOn` false records nothing.
    package init(isOn: Bool, node: String, capacity: Int = 200_000, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.isOn = isOn
        self.node = node
        self.capacity = capacity
        self.clock = clock
    }

    /// Records steps.
    package func record(_ rows: [Row]) {
        guard isOn, !rows.isEmpty else { return }
        state.withLock { state in
            let room = max(0, capacity - state.rows.count)
            if rows.count <= room {
                state.rows += rows
            } else {
                state.rows += rows.prefix(room)
                state.dropped += rows.count - room
            }
        }
    }

    /// Records one step.
    package func record(_ row: Row) { record([row]) }

    /// The steps waiting, handed over for writing.
    package func take() -> [Row] {
        state.withLock { state in
            defer { state.rows.removeAll(keepingCapacity: false) }
            return state.rows
        }
    }

    /// Puts back steps a failed write did not store (as room allows).
    package func putBack(_ rows: [Row]) {
        state.withLock { state in
            let room = max(0, capacity - state.rows.count)
            state.rows.insert(contentsOf: rows.prefix(room), at: 0)
            state.dropped += max(0, rows.count - room)
        }
    }

    /// Steps dropped because too many waited.
    package var dropped: Int { state.withLock { $0.dropped } }

    /// The chat's clock in milliseconds since 1970: the time steps carry.
    package func now() -> Int64 { Int64((clock().timeIntervalSince1970 * 1000).rounded()) }

    /// A step's details as the JSON object the trace reads back (only the fields given).
    package static func detail(platform: String? = nil, status: Int? = nil, reason: String? = nil, providerID: String? = nil,
                               outcome: String? = nil, idOnly: Bool? = nil, endpoint: String? = nil, event: String? = nil,
                               deliveredSeq: Int64? = nil, readSeq: Int64? = nil) -> String {
        var writer = JSONWriter(capacity: 96)
        writer.object { json in
            if let deliveredSeq { json.key("deliveredSeq"); json.integer(deliveredSeq) }
            if let endpoint { json.key("endpoint"); json.string(endpoint) }
            if let event { json.key("event"); json.string(event) }
            if let idOnly { json.key("idOnly"); json.bool(idOnly) }
            if let outcome { json.key("outcome"); json.string(outcome) }
            if let platform { json.key("platform"); json.string(platform) }
            if let providerID { json.key("providerId"); json.string(providerID) }
            if let readSeq { json.key("readSeq"); json.integer(readSeq) }
            if let reason { json.key("reason"); json.string(reason) }
            if let status { json.key("status"); json.integer(Int64(status)) }
        }
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}
