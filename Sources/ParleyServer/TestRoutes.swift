import Foundation
import ParleyChat
import ParleyNet
import ParleyPush
import ParleyRedis
import ParleyWire

/// Test mode's routes (`parley-server --test-mode`, docs/test-mode.md), under `/v1/test/`,
/// with the app secret as the server API: what an app's CI uses to make time testable.
extension ServerRoutes {
    /// The most the clock moves in one call: ten years.
    static let maxClockAdvanceSeconds = 315_360_000.0

    /// An outage's length from its body: 0 (over now) to an hour.
    @Sendable static func outage(_ request: Request) async throws -> Duration {
        let fault = try await request.decode(Outage.self)
        guard fault.unavailableSeconds.isFinite, (0...3600).contains(fault.unavailableSeconds) else {
            throw ChatError.invalid("unavailableSeconds must be 0 (back now) to 3600")
        }
        return .milliseconds(Int64(fault.unavailableSeconds * 1000))
    }

    static func addTestRoutes(to router: inout Router, chat: Chat, server: ServerAPI, api: API, test: TestModeParts) {
        let faults = test.faults, fanout = test.fanout
        router.post("/v1/test/faults/store") { request in
            // Authenticated past the fault it may be ending (the app secret is read from the store).
            await TestFaults.$bypassingStoreFault.withValue(true) {
                await server.handle(request) { _ in
                    await api.respondEmpty { faults.storeDown(for: try await outage(request)) }
                }
            }
        }
        router.post("/v1/test/faults/redis") { request in
            await server.handle(request) { _ in
                await api.respondEmpty {
                    let duration = try await outage(request)
                    guard test.hasRedis else { throw ChatError.invalid("this server has no Redis (--redis-url): nothing to make unavailable") }
                    RedisFault.unavailable(for: duration)
                }
            }
        }
        router.post("/v1/test/faults/drop-connections") { request in
            await server.handle(request) { app in
                await api.respond {
                    let target = try await request.decode(DropConnections.self)
                    let key = try await chat.backend.userKey(app, username: target.username)
                    return DroppedConnections(dropped: fanout.dropConnections(user: key))
                }
            }
        }
        @Sendable func failWebhook(_ request: Request, _ failing: Bool) async -> Response {
            await server.handle(request) { app in
                await api.respondEmpty {
                    // One of this app's endpoints (webhook_not_found otherwise): a typo fails loudly.
                    let endpoint = try await chat.webhooks.endpoint(app, id: try request.parameter("webhookId"))
                    faults.setWebhookFailing(endpoint.id, failing)
                }
            }
        }
        router.put("/v1/test/faults/webhooks/:webhookId") { request in await failWebhook(request, true) }
        router.delete("/v1/test/faults/webhooks/:webhookId") { request in await failWebhook(request, false) }
        router.post("/v1/test/reset") { request in
            // Past a store fault too: a reset ends it.
            await TestFaults.$bypassingStoreFault.withValue(true) {
                await server.handle(request) { _ in
                    await api.respond {
                        faults.clear()
                        if test.hasRedis { RedisFault.unavailable(for: .zero) }
                        let removed = try await chat.resetForTests()
                        fanout.dropAllConnections()
                        test.pushes?.clear()
                        test.pushes?.reviveAll()
                        TestClock.reset()
                        return TestReset(removedRows: removed)
                    }
                }
            }
        }
        let pushes = test.pushes
        @Sendable func state() -> TestClockState {
            TestClockState(now: TestClock.now(), offsetSeconds: Double(TestClock.offset) / 1000)
        }
        router.get("/v1/test/clock") { request in
            await server.handle(request) { _ in await api.respond { state() } }
        }
        router.post("/v1/test/clock") { request in
            await server.handle(request) { _ in
                await api.respond {
                    let move = try await request.decode(AdvanceClockRequest.self)
                    guard move.advanceSeconds.isFinite, move.advanceSeconds > 0, move.advanceSeconds <= maxClockAdvanceSeconds else {
                        throw ChatError.invalid("advanceSeconds must be more than 0 and at most \(Int(maxClockAdvanceSeconds)) (ten years)")
                    }
                    TestClock.advance(byMilliseconds: Int64((move.advanceSeconds * 1000).rounded()))
                    // Retention sweeps on an interval of real time: the moved clock's sweep runs now.
                    _ = try await chat.retention.sweep()
                    return state()
                }
            }
        }
        guard let pushes else { return }  // real providers configured: their pushes go to Apple and Google
        router.get("/v1/test/pushes") { request in
            await server.handle(request) { _ in
                await api.respond {
                    let token = request.queryItems["token"]
                    let platform = request.queryItems["platform"]
                    return TestPushList(pushes: pushes.pushes(token: token).filter { platform == nil || $0.platform == platform })
                }
            }
        }
        router.delete("/v1/test/pushes") { request in
            await server.handle(request) { _ in await api.respondEmpty { pushes.clear() } }
        }
        router.put("/v1/test/push-tokens/:token/dead") { request in
            await server.handle(request) { _ in await api.respondEmpty { pushes.setDead(try request.parameter("token"), true) } }
        }
        router.delete("/v1/test/push-tokens/:token/dead") { request in
            await server.handle(request) { _ in await api.respondEmpty { pushes.setDead(try request.parameter("token"), false) } }
        }
    }
}

/// What test mode's routes work with.
struct TestModeParts: Sendable {
    let faults: TestFaults
    /// The built-in APNs and FCM; nil when real providers are configured.
    let pushes: TestPushes?
    let fanout: Fanout<EncodedWebSocketFrame>
    /// Given `--redis-url`: Redis can be made unavailable.
    let hasRedis: Bool
}
