import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyStore
import Testing

/// The outboxes' claims, on both engines; on PostgreSQL also two nodes claiming at once.
struct OutboxTests {
    private func add(_ harness: ChatHarness, _ count: Int, kind: String = "push") async throws {
        let now = harness.chat.nowMilliseconds
        try await harness.store.write { db in
            for index in 0..<count { try Outbox.add(db, kind: kind, payload: Array("row \(index)".utf8), now: now) }
        }
    }

    @Test func aRowIsClaimedByOneHolderUntilItsLeaseEnds() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        try await add(harness, 3)
        try await add(harness, 1, kind: "webhook")
        let first = try await chat.claimOutbox(kind: "push", holder: "a", limit: 2, lease: .seconds(30))
        #expect(first.map { String(decoding: $0.payload, as: UTF8.self) } == ["row 0", "row 1"])
        let second = try await chat.claimOutbox(kind: "push", holder: "b", limit: 10, lease: .seconds(30))
        #expect(second.map { String(decoding: $0.payload, as: UTF8.self) } == ["row 2"], "held rows and other kinds are not handed out")
        #expect(try await chat.claimOutbox(kind: "push", holder: "c", limit: 10, lease: .seconds(30)).isEmpty)
        // a finishes one; b's finishing a's row changes nothing.
        try await chat.finishOutbox([first[1].id], holder: "b")
        try await chat.finishOutbox([first[0].id], holder: "a")
        // a dies holding row 1: when its lease ends another takes it, one attempt more counted only by a retry.
        harness.clock.advance(by: 31)
        let taken = try await chat.claimOutbox(kind: "push", holder: "c", limit: 10, lease: .seconds(30))
        #expect(Set(taken.map(\.id)) == [first[1].id, second[0].id])
        try await chat.finishOutbox(taken.map(\.id), holder: "c")
        #expect(try await chat.nextOutboxDue(kind: "push") == nil)
        #expect(try await chat.claimOutbox(kind: "webhook", holder: "a", limit: 10, lease: .seconds(30)).count == 1)
    }

    @Test func aRetryWaitsItsTurnAndAFailureIsKeptButNeverClaimed() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        try await add(harness, 2)
        let rows = try await chat.claimOutbox(kind: "push", holder: "a", limit: 2, lease: .seconds(30))
        try await chat.retryOutbox(rows[0].id, holder: "a", after: .seconds(10))
        try await chat.failOutbox(rows[1].id, holder: "a")
        #expect(try await chat.claimOutbox(kind: "push", holder: "a", limit: 2, lease: .seconds(30)).isEmpty, "not due yet")
        #expect(try await chat.nextOutboxDue(kind: "push") == harness.clock.now.addingTimeInterval(10))
        harness.clock.advance(by: 10)
        let again = try await chat.claimOutbox(kind: "push", holder: "b", limit: 2, lease: .seconds(30))
        #expect(again.map(\.id) == [rows[0].id] && again[0].attempts == 1)
        let failed = try await harness.store.read { db in try db.fetchValue(Int64.self, "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL") }
        #expect(failed == 1)
    }

    @Test func aRowThisNodeCouldNotTryIsPutBackWithoutCountingAnAttempt() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        try await add(harness, 1)
        let row = try #require(try await chat.claimOutbox(kind: "push", holder: "a", limit: 1, lease: .seconds(30)).first)
        try await chat.postponeOutbox(row.id, holder: "b", after: .seconds(1))   // not b's: nothing changes
        #expect(try await chat.claimOutbox(kind: "push", holder: "c", limit: 1, lease: .seconds(30)).isEmpty)
        try await chat.postponeOutbox(row.id, holder: "a", after: .seconds(1))
        #expect(try await chat.nextOutboxDue(kind: "push") == harness.clock.now.addingTimeInterval(1))
        harness.clock.advance(by: 1)
        let again = try #require(try await chat.claimOutbox(kind: "push", holder: "c", limit: 1, lease: .seconds(30)).first)
        #expect(again.id == row.id && again.attempts == 0, "no attempt counted")
    }

    @Test(.enabled(if: TestEngine.isPostgres, "two nodes need PostgreSQL (SQLite has one)"))
    func nodesClaimingAtOnceNeverTakeOneRowTwice() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let other = try #require(try await harness.anotherNode())
        defer { other.store.close() }
        try await add(harness, 600)
        let nodes = [("a", harness.chat), ("b", other.chat)]
        let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for (name, chat) in nodes {
                for worker in 0..<3 {
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let rows = try await chat.claimOutbox(kind: "push", holder: "\(name)/\(worker)", limit: 7, lease: .seconds(60))
                            if rows.isEmpty { return mine }
                            mine += rows.map(\.id)
                            try await chat.finishOutbox(rows.map(\.id), holder: "\(name)/\(worker)")
                        }
                    }
                }
            }
            return try await group.reduce(into: [[Int64]]()) { $0.append($1) }
        }
        let all = claimed.flatMap { $0 }
        #expect(all.count == 600 && Set(all).count == 600, "every row once, none twice")
        #expect(claimed.filter { !$0.isEmpty }.count > 1, "the work was shared")
    }
}
