import Foundation
import FoundationNetworking
import Testing
import ParleyNet
import ParleyServerTesting
import ParleyTesting
import ParleyChat
import ParleyWire
@testable import ParleyServer
import ParleySync

/// The realtime WebSocket end to end in Swift: the real server in process, Parley's own
/// WebSocket client, frames decoded with the `ServerFrame` type the SDK will use.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct RealtimeTests {
    private func text(_ clientID: String, _ body: String) -> SendMessageRequest {
        SendMessageRequest(clientID: clientID, content: .text(body))
    }

    @Test func twoUsersThreeDevicesExchangeAndTheOneThatWasAwayCatchesUpExactly() async throws {
        try await withTestServer { server in
            let alice: SignedIn = try await server.post("/v1/users", RegisterRequest(username: "alice", password: "correct horse battery"))
            let bob: SignedIn = try await server.post("/v1/users", RegisterRequest(username: "bob", password: "correct horse battery"))
            let laptopSession: SignedIn = try await server.post("/v1/sessions", SignInRequest(username: "alice", password: "correct horse battery"))
            let room: Conversation = try await server.post("/v1/conversations",
                                                    CreateConversationRequest(kind: .group, members: ["bob"], title: "plans"),
                                                    token: alice.session.token)
            let phone = RealtimeDevice(server: server, alice), laptop = RealtimeDevice(server: server, laptopSession), bobs = RealtimeDevice(server: server, bob)
            for device in [phone, laptop, bobs] { try await device.connect() }

            func send(_ clientID: String, _ body: String) -> (String) -> ClientFrame {
                { .send(id: $0, conversationID: room.id, message: self.text(clientID, body)) }
            }
            let ack = try await phone.command(send("one", "dinner at 8?"))
            guard case .ack(_, .sent(created: true, let sent)) = ack else { Issue.record("not a send's ack: \(ack)"); return }
            let sentID = sent.id.rawValue
            for device in [phone, laptop, bobs] {
                let event = try await device.event { $0.type == .messageCreated }
                #expect(event.message?.id.rawValue == sentID)
                #expect(event.message?.clientID == "one")
            }

            // Bob's device received it: delivered, then read; Alice's devices see the receipts.
            let deliveredSeq = try #require(laptop.events.last?.seq)
            #expect(try await bobs.command { .markDelivered(id: $0, conversationID: room.id, seq: deliveredSeq) }.type == .ack)
            let receipt = try await phone.event { $0.type == .receiptUpdated }
            #expect(receipt.userID?.rawValue == bob.user.id.rawValue && receipt.deliveredSeq == deliveredSeq && receipt.seq == nil)

            // The laptop goes away; the others keep talking, editing and deleting.
            let awayAt = try #require(laptop.events.map(\.position).max())
            try await laptop.disconnect()
            _ = try await bobs.command(send("two", "or 9"))
            #expect(try await phone.command {
                .edit(id: $0, conversationID: room.id, messageID: MessageID(rawValue: sentID), content: .text("dinner at 8:30?"), metadata: nil)
            }.type == .ack)
            let typo = try await phone.command(send("three", "typo"))
            guard case .ack(_, .sent(_, let typoMessage)) = typo else { Issue.record("not a send's ack: \(typo)"); return }
            #expect(try await phone.command { .delete(id: $0, conversationID: room.id, messageIDs: [typoMessage.id]) }.type == .ack)
            #expect(try await bobs.command { .markRead(id: $0, conversationID: room.id, seq: 100) }.type == .ack)
            _ = try await phone.event { $0.type == .receiptUpdated && $0.readSeq != nil && $0.readSeq ?? 0 > 0 }

            // Back: exactly what the phone saw after that position, in order; then live.
            let ready = try await laptop.connect(after: awayAt)
            let stayed = phone.events.filter { $0.position > awayAt }.map { [$0.position, $0.seq ?? -1] }
            let resumed = laptop.events.filter { $0.position > awayAt }.map { [$0.position, $0.seq ?? -1] }
            #expect(!stayed.isEmpty)
            #expect(resumed == stayed)
            #expect((ready.position ?? 0) >= (stayed.last?.first ?? 0))
            _ = try await bobs.command(send("four", "see you"))
            let live = try await laptop.event { $0.message?.clientID == "four" }
            #expect(live.position > (ready.position ?? 0))
        }
    }

    @Test func aSecondConnectionOfAnotherAppsTokenIsClosedWith4001() async throws {
        try await withTestServer { server in
            let alice: SignedIn = try await server.post("/v1/users", RegisterRequest(username: "alice", password: "correct horse battery"))
            let other = try await ParleyServer.runApps(.create(name: "other"), configuration: server.configuration)
            let key = try #require(other.split(separator: "app key:").last?.split(separator: " ").first.map(String.init))
            let device = RealtimeDevice(server: server, alice, appKey: key)
            let refused = try await device.connect()
            #expect(refused.type == .error && refused.error?.code == "unauthenticated")
            let code = try await device.closes.next(timeout: 10)
            #expect(code == RealtimeCloseCode.unauthorized)
        }
    }
}

extension RealtimeTests {
    /// The defect of issue 14: a device that authenticated without a position could miss the
    /// events right after its `ready.position` while later ones arrived (16 of 3,000 fresh
    /// connects, gaps of one commit batch). Under a steady stream of sends into one group,
    /// every fresh device must receive `ready.position + 1`, `+ 2`, … with nothing skipped:
    /// all events of this test are in that group, so their positions are consecutive.
    @Test(.timeLimit(.minutes(3)))
    func freshDevicesUnderLoadMissNothingAfterReady() async throws {
        try await withTestServer { server in
            let listener: SignedIn = try await server.post("/v1/users", RegisterRequest(username: "listener", password: "correct horse battery"))
            var senders: [SignedIn] = []
            for index in 0..<4 {
                senders.append(try await server.post("/v1/users", RegisterRequest(username: "sender\(index)", password: "correct horse battery")))
            }
            let room: Conversation = try await server.post("/v1/conversations",
                                                    CreateConversationRequest(kind: .group, members: ["listener", "sender1", "sender2", "sender3"]),
                                                    token: senders[0].session.token)
            let devices = Int(ProcessInfo.processInfo.environment["PARLEY_FRESH_DEVICES"] ?? "") ?? 600
            let wanted = 4
            let stop = LockedValue(false)
            // Four senders, each sending as fast as its answers come back.
            let load = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (index, sender) in senders.enumerated() {
                        group.addTask {
                            var count = 0
                            while !stop.get() {
                                count += 1
                                let _: JSONValue = try await server.post("/v1/conversations/\(room.id.rawValue)/messages",
                                                                                 self.text("s\(index)-\(count)", "load"), token: sender.session.token)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            var checked = 0
            var gaps: [String] = []
            for batch in stride(from: 0, to: devices, by: 20) {
                try await withThrowingTaskGroup(of: String?.self) { group in
                    for _ in batch..<min(devices, batch + 20) {
                        group.addTask {
                            let device = RealtimeDevice(server: server, listener)
                            let ready = try await device.connect()
                            let start = try #require(ready.position)
                            var positions: [Int64] = []
                            while positions.count < wanted {
                                positions.append(try await device.event { $0.position > start }.position)
                            }
                            try await device.disconnect()
                            let expected = (1...Int64(wanted)).map { start + $0 }
                            return positions == expected ? nil : "ready at \(start), then \(positions)"
                        }
                    }
                    for try await gap in group {
                        checked += 1
                        if let gap { gaps.append(gap) }
                    }
                }
            }
            stop.set(true)
            try await load.value
            #expect(checked == devices)
            #expect(gaps.isEmpty, "\(gaps.count) of \(devices) fresh devices missed events after ready: \(gaps.prefix(5))")
        }
    }

    /// A device resuming with a position of another history (a restored backup) is told to
    /// resync, with the server's epoch, instead of replaying positions that mean something else.
    @Test func aDeviceFromAnotherEpochIsToldToResync() async throws {
        try await withTestServer { server in
            let alice: SignedIn = try await server.post("/v1/users", RegisterRequest(username: "alice", password: "correct horse battery"))
            _ = try await server.post("/v1/conversations", CreateConversationRequest(kind: .group, title: "notes"),
                               token: alice.session.token, as: Conversation.self)
            let phone = RealtimeDevice(server: server, alice)
            let ready = try await phone.connect()
            let epoch = try #require(ready.epoch)
            #expect(epoch.hasPrefix("e_"))
            let position = try #require(ready.position)
            try await phone.disconnect()

            // The same epoch resumes (ready, no resync).
            let resumed = try await phone.connect(after: position, epoch: epoch)
            #expect(resumed.type == .ready && resumed.epoch == epoch)
            try await phone.disconnect()

            // Another epoch: resync, naming the server's epoch and where to continue.
            let other = try await phone.connect(after: position, epoch: "e_restoredelsewhere", until: { $0.type == .resync })
            #expect(other.type == .resync && other.epoch == epoch && other.position == position)
            #expect(other.reason?.contains("history changed") == true)
            let readyAfter = try await phone.until { $0.type == .ready }
            #expect(readyAfter.epoch == epoch)
        }
    }
}

extension JSONDecoder {
    /// The decoder the SDK uses for server JSON (ISO 8601 dates with milliseconds).
    static var wire: JSONDecoder { WireCoding.decoder() }
}

/// The command budgets, with time passed in.
struct TokenBucketTests {
    @Test func aBurstIsAllowedThenTheRateAndTheWaitIsReported() {
        var bucket = TokenBucket(rate: 5, burst: 10)
        let start = ContinuousClock.now
        let taken = (0..<12).map { _ in bucket.take(now: start) }
        #expect(taken.prefix(10).allSatisfy { $0 == nil })
        #expect(taken.suffix(2).allSatisfy { $0 == 1 }, "one token comes back within a second at 5/s")
        #expect(bucket.take(now: start + .milliseconds(199)) != nil)
        #expect(bucket.take(now: start + .milliseconds(400)) == nil, "two tokens refilled after 400 ms at 5/s; one used")
    }

    @Test func everyDeviceOfAUserSharesTheUsersBudget() {
        let buckets = SharedRate(name: "commands-user", rate: 1, burst: 3, shared: nil)
        let now = ContinuousClock.now
        #expect((0..<3).map { _ in buckets.take("7", now: now) } == [nil, nil, nil])
        #expect(buckets.take("7", now: now) == 1)
        #expect(buckets.take("8", now: now) == nil, "another user has their own budget")
    }
}
