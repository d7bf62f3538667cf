import Foundation
package import ParleySync

/// How long a new message took to reach devices, per way it reached them (`/metrics`'
/// `parley_send_to_delivered_seconds{platform}`): from the time the message was stored to
/// its routing to a connected device's socket on this node (`socket`), or to the provider
/// accepting its push (`apns`, `fcm`). Only new messages count (not edits, reactions or
/// receipts), and only live deliveries: a device that catches up on resume is not counted.
package final class SendToDelivered: Sendable {
    /// The platforms, in the order `/metrics` lists them.
    package static let platforms = ["socket", "apns", "fcm"]

    /// One histogram per platform: 1 ms to 10 minutes (a push can wait for its window and retries).
    private let histograms: [String: LatencyHistogram]

    /// Empty histograms.
    package init() {
        let bounds = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600]
        histograms = Dictionary(uniqueKeysWithValues: Self.platforms.map { ($0, LatencyHistogram(bounds: bounds)) })
    }

    /// Counts `count` devices reached now through `platform` by a message stored at `sentAt`
    /// (milliseconds since 1970, the message's `createdAt`; another node's clock for a message
    /// stored there, so a clock behind this one reads as zero).
    package func observe(_ platform: String, sentAt: Int64, count: Int = 1, now: Int64 = SendToDelivered.nowMilliseconds()) {
        guard let histogram = histograms[platform] else { return }
        histogram.observe(nanoseconds: UInt64(max(0, now - sentAt)) * 1_000_000, count: count)
    }

    /// The histogram of one platform (nil for a name not in ``platforms``).
    package func histogram(_ platform: String) -> LatencyHistogram? { histograms[platform] }

    /// The wall clock in milliseconds since 1970.
    package static func nowMilliseconds() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}

extension EventRecord {
    /// The `createdAt` of a `message.created` event's realtime frame, read from its bytes
    /// without decoding it (once per message a node routes), or nil for any other frame.
    /// The frame is ours: ``frame`` writes the event's keys in order, so the event's own
    /// `createdAt` comes before its message's, and its `type` is its last key.
    package static func messageSentAt(frame bytes: [UInt8]) -> Int64? {
        let suffix = Self.messageCreatedSuffix
        guard bytes.count > suffix.count + 40, bytes.suffix(suffix.count).elementsEqual(suffix) else { return nil }
        let key = Self.createdAtKey
        var index = 0
        let end = bytes.count - suffix.count - 24
        while index < end {
            if bytes[index] == key[0], bytes[index..<(index + key.count)].elementsEqual(key) {
                return Self.milliseconds(iso: bytes[(index + key.count)..<(index + key.count + 24)])
            }
            index += 1
        }
        return nil
    }

    private static let messageCreatedSuffix = Array(#""type":"message.created"},"type":"event"}"#.utf8)
    private static let createdAtKey = Array(#""createdAt":""#.utf8)

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` (what ``JSONWriter/date(milliseconds:)`` writes) as
    /// milliseconds since 1970; nil for anything else.
    static func milliseconds(iso bytes: ArraySlice<UInt8>) -> Int64? {
        guard bytes.count == 24 else { return nil }
        let b = Array(bytes)
        func number(_ from: Int, _ width: Int) -> Int64? {
            var value: Int64 = 0
            for byte in b[from..<(from + width)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            return value
        }
        guard b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A, b[19] == 0x2E, b[23] == 0x5A,
              let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
              let minute = number(14, 2), let second = number(17, 2), let milli = number(20, 3),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        // Days-from-civil (Howard Hinnant's algorithm), the inverse of WireCoding's civil.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + milli
    }
}
