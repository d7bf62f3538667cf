import Foundation
import ParleyChat
@testable import ParleyServer
import ParleyWire
import Testing

/// The realtime session's rules without a socket or a clock (issue 28): phases, the auth
/// deadline, held deliveries and their order after a replay, the command budget, and which
/// failures end a session (4001) and which only ask the device to come back (1013).
struct RealtimeSessionMachineTests {
    typealias Machine = RealtimeSessionMachine<String>
    typealias Action = Machine.Action

    private func frame(_ json: String) throws -> ClientFrame {
        try WireCoding.decoder().decode(ClientFrame.self, from: Data(json.utf8))
    }

    private func sent(_ actions: [Action]) -> [String] {
        actions.compactMap { action in
            switch action {
            case .send(let bytes): String(decoding: bytes, as: UTF8.self)
            case .sendFrame(let frame): frame
            default: nil
            }
        }
    }

    private func runs(_ actions: [Action]) -> Bool {
        if case .runCommand? = actions.first { return true }
        return false
    }

    private func closeCode(_ actions: [Action]) -> UInt16? {
        actions.lazy.compactMap { if case .close(let code, _) = $0 { code } else { nil } }.first
    }

    /// A machine that authenticated and is catching up.
    private func attached(_ configuration: RealtimeConfiguration = RealtimeConfiguration()) throws -> Machine {
        var machine = Machine(configuration: configuration)
        _ = machine.opened()
        let actions = machine.received(try frame(#"{"type":"auth","token":"pt_x","position":3}"#), now: .now)
        let asked = actions.lazy.compactMap { if case .authenticate(let token, let resume, _) = $0 { (token, resume) } else { nil } }.first
        #expect(asked?.0 == "pt_x" && asked?.1 == LogCursor(position: 3), "a client before cursors: its one position is a cursor of one shard")
        let attached = machine.attached()
        #expect(attached)
        return machine
    }

    @Test func theFirstFrameMustBeAuthWithinTheDeadline() throws {
        var late = Machine(configuration: RealtimeConfiguration())
        let opening = late.opened()
        #expect(opening.count == 1)
        let timedOut = late.authDeadlinePassed()
        #expect(closeCode(timedOut) == RealtimeCloseCode.authTimeout)
        let after = late.received(try frame(#"{"type":"ping"}"#), now: .now)
        #expect(late.phase == .closed && after.isEmpty, "nothing after closing")

        var rude = Machine(configuration: RealtimeConfiguration())
        let actions = rude.received(try frame(#"{"type":"ping","id":"1"}"#), now: .now)
        #expect(closeCode(actions) == RealtimeCloseCode.protocolViolation && sent(actions).first?.contains("unauthenticated") == true)

        var binary = Machine(configuration: RealtimeConfiguration())
        let bytes = binary.receivedBinary()
        #expect(closeCode(bytes) == RealtimeCloseCode.protocolViolation)

        var timely = Machine(configuration: RealtimeConfiguration())
        _ = timely.received(try frame(#"{"type":"auth","token":"t"}"#), now: .now)
        let noDeadline = timely.authDeadlinePassed()
        #expect(noDeadline.isEmpty, "the deadline no longer applies once auth arrived")
    }

    @Test func aRefusedTokenEndsTheSessionButAnUnreachableStoreDoesNot() throws {
        var refused = Machine(configuration: RealtimeConfiguration())
        _ = refused.received(try frame(#"{"type":"auth","token":"t"}"#), now: .now)
        let signedOut = refused.authenticationFailed(ChatError.unauthenticated)
        #expect(closeCode(signedOut) == RealtimeCloseCode.unauthorized)

        var outage = Machine(configuration: RealtimeConfiguration())
        _ = outage.received(try frame(#"{"type":"auth","token":"t"}"#), now: .now)
        let blip = outage.authenticationFailed(ChatError.storeUnavailable)
        #expect(closeCode(blip) == RealtimeCloseCode.tryAgainLater, "a database blip never signs anyone out")
        #expect(sent(blip).first?.contains("store_unavailable") == true)

        var failedCatchUp = try attached()
        let failed = failedCatchUp.catchUpFailed()
        #expect(closeCode(failed) == RealtimeCloseCode.tryAgainLater)
    }

    @Test func whatArrivesWhileCatchingUpIsSentAfterTheReplayOnceAndInOrder() throws {
        var machine = try attached()
        var held: [[Action]] = []
        held.append(machine.delivered(.event(position: 10, frame: "e10")))
        held.append(machine.delivered(.ephemeral("typing")))
        held.append(machine.delivered(.event(position: 12, frame: "e12")))
        #expect(held.allSatisfy { $0.isEmpty }, "held, not sent")
        #expect(machine.heldCount == 3)
        // The replay sent everything up to 10: e10 is not sent again.
        let actions = machine.replayFinished(replayedUpTo: LogCursor(position: 10), readyAt: LogCursor(position: 11)) { #"{"cursor":\#($0),"type":"ready"}"# .utf8.map { $0 } }
        #expect(sent(actions) == ["typing", "e12", #"{"cursor":[12],"type":"ready"}"#])
        #expect(machine.phase == .live && machine.sent == LogCursor(position: 12))
        let again = machine.delivered(.event(position: 12, frame: "again"))
        #expect(sent(again).isEmpty, "no duplicate")
        let next = machine.delivered(.event(position: 13, frame: "e13"))
        #expect(sent(next) == ["e13"])
        let signedOut = machine.delivered(.signedOut)
        #expect(closeCode(signedOut) == RealtimeCloseCode.unauthorized)
    }

    /// A log of four shards: each shard's positions arrive in order, but shards interleave, so
    /// the device's place is one position per shard and a duplicate is judged in its own shard.
    @Test func withShardsAnEventIsJudgedAgainstItsOwnShard() throws {
        var machine = Machine(configuration: RealtimeConfiguration())
        _ = machine.opened()
        let actions = machine.received(try frame(#"{"type":"auth","token":"pt_x","cursor":[8,5,2,0],"position":8}"#), now: .now)
        let asked = actions.lazy.compactMap { if case .authenticate(_, let resume, _) = $0 { resume } else { nil } }.first
        #expect(asked == (try LogCursor(positions: [8, 5, 2, 0])), "the cursor wins over the old position")
        let attached = machine.attached()
        #expect(attached)
        _ = machine.delivered(.event(position: 9, frame: "e9"))    // shard 1, after 5
        _ = machine.delivered(.event(position: 12, frame: "e12"))  // shard 0, after 8
        _ = machine.delivered(.event(position: 3, frame: "e3"))    // shard 3: lower than 12, still new
        _ = machine.delivered(.event(position: 6, frame: "e6"))    // shard 2, replayed already
        let ready = machine.replayFinished(replayedUpTo: try LogCursor(positions: [8, 9, 6, 0]), readyAt: try LogCursor(positions: [8, 5, 2, 0])) {
            "ready \($0)".utf8.map { $0 }
        }
        #expect(sent(ready) == ["e12", "e3", "ready [12,9,6,3]"])
        #expect(sent(machine.delivered(.event(position: 7, frame: "e7"))) == ["e7"], "shard 3 moves on from 3")
        #expect(sent(machine.delivered(.event(position: 3, frame: "again"))).isEmpty, "no duplicate in its shard")
    }

    @Test func aCursorThatCannotBeOneIsRefusedAtAuth() throws {
        for text in [#"{"type":"auth","token":"pt_x","cursor":[]}"#, #"{"type":"auth","token":"pt_x","cursor":[4,4]}"#,
                     #"{"type":"auth","token":"pt_x","cursor":[-2]}"#, #"{"type":"auth","token":"pt_x","cursor":3}"#] {
            #expect(throws: (any Error).self, "\(text)") { try frame(text) }
        }
    }

    @Test func aDeviceTooFarBehindWhileCatchingUpIsToldToResume() throws {
        var configuration = RealtimeConfiguration()
        configuration.maxHeldEvents = 2
        var machine = try attached(configuration)
        _ = machine.delivered(.event(position: 1, frame: "a"))
        _ = machine.delivered(.event(position: 2, frame: "b"))
        let actions = machine.delivered(.event(position: 3, frame: "c"))
        #expect(closeCode(actions) == RealtimeCloseCode.resume && machine.phase == .closed && machine.heldCount == 0)
    }

    @Test func commandsAreBudgetedPerSecondAndInFlight() throws {
        var configuration = RealtimeConfiguration()
        configuration.commandBurst = 2
        configuration.commandsPerSecond = 1
        configuration.maxCommandsInFlight = 1
        var machine = try attached(configuration)
        _ = machine.replayFinished(replayedUpTo: LogCursor(position: 0), readyAt: LogCursor(position: 0)) { _ in [] }
        let start = ContinuousClock.now
        let typing = try frame(#"{"type":"typing.start","conversationId":"c_1","id":"t1"}"#)
        let first = machine.received(typing, now: start)
        #expect(runs(first), "the first command runs")
        let busy = machine.received(typing, now: start)
        #expect(sent(busy).first?.contains("too many commands waiting") == true, "one in flight at most")
        let answered = machine.commandAnswered(Array(#"{"ack":1}"#.utf8))
        #expect(answered.count == 1 && machine.inFlight == 0)
        // The burst (2) is spent: the next one waits for the rate.
        let limited = machine.received(typing, now: start)
        #expect(sent(limited).first?.contains("rate_limited") == true)
        _ = machine.commandAnswered(nil)
        let later = machine.received(typing, now: start.advanced(by: .seconds(2)))
        #expect(runs(later), "after a second, the budget allows another")
        // Pings are answered at once, whatever the budget.
        let pong = machine.received(try frame(#"{"type":"ping","id":"p"}"#), now: start)
        #expect(sent(pong).first?.contains("pong") == true)
    }

    @Test func aReplayIsPacedByWhatTheDeviceHasNotReadYet() {
        var configuration = RealtimeConfiguration()
        configuration.maxQueuedBytes = 4000
        let machine = Machine(configuration: configuration)
        #expect(machine.maySendReplay(queuedBytes: 1000) && !machine.maySendReplay(queuedBytes: 1001))
    }
}
