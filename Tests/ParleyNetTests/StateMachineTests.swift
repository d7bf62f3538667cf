import Testing
@testable import ParleyNet

/// Time is injected as plain nanosecond instants: no clock, no sleeps.
private let second: UInt64 = 1_000_000_000

struct HTTPTimeoutsTests {
    /// `rate` 0: the silence limits alone (the tests below that are about them).
    private func machine(at now: UInt64 = 0, rate: Int = 0) -> HTTPTimeouts {
        var configuration = HTTPTimeouts.Configuration()
        configuration.head = .seconds(10)
        configuration.body = .seconds(30)
        configuration.idle = .seconds(60)
        configuration.minimumRate = rate
        configuration.rateGrace = .seconds(10)
        return HTTPTimeouts(configuration, now: now)
    }

    @Test func aBodyThatTricklesBelowTheFloorGets408AfterTheGraceThoughNeverSilentFor30s() {
        var timeouts = machine(rate: 500)
        timeouts.headParsed(now: 0, expectingBody: true)
        for instant in stride(from: 5, through: 15, by: 5) {   // a byte every 5 s: the silence limit never fires
            timeouts.bytesArrived(now: UInt64(instant) * second, count: 1)
        }
        // 3 bytes buy 6 ms past the 10 s grace.
        #expect(timeouts.check(now: 10 * second) == .wait(until: 10 * second + 6_000_000))
        #expect(timeouts.check(now: 15 * second) == .requestTimeout)
    }

    @Test func aBodyAboveTheFloorRunsAsLongAsItKeepsUp() {
        var timeouts = machine(rate: 500)
        timeouts.headParsed(now: 0, expectingBody: true)
        for instant in 1...600 {   // 10 minutes at 1,000 bytes/s: a slow phone's upload
            timeouts.bytesArrived(now: UInt64(instant) * second, count: 1_000)
            #expect(timeouts.check(now: UInt64(instant) * second) != .requestTimeout)
        }
        // It stops: the silence limit, 30 s after the last byte, comes first.
        #expect(timeouts.check(now: 630 * second) == .requestTimeout)
        #expect(timeouts.check(now: 629 * second) == .wait(until: 630 * second))
    }

    @Test func aFileResponseReadBelowTheFloorIsClosed() {
        var timeouts = machine(rate: 500)
        timeouts.headParsed(now: 0, expectingBody: false)
        timeouts.sendProgressed(now: 0, sent: 0)
        timeouts.sendProgressed(now: 9 * second, sent: 1_000)   // 2 s of credit past the grace
        #expect(timeouts.check(now: 11 * second) == .wait(until: 12 * second))
        #expect(timeouts.check(now: 12 * second) == .closeIdle)
    }

    @Test func idleConnectionClosesQuietlyAfterTheIdleTimeout() {
        let timeouts = machine()
        #expect(timeouts.check(now: 59 * second) == .wait(until: 60 * second))
        #expect(timeouts.check(now: 60 * second) == .closeIdle)
    }

    @Test func slowHeadGets408AfterTheHeadTimeoutEvenIfBytesKeepTrickling() {
        var timeouts = machine()
        timeouts.bytesArrived(now: 1 * second)
        timeouts.bytesArrived(now: 5 * second)   // slowloris: a byte now and then
        timeouts.bytesArrived(now: 10 * second)
        #expect(timeouts.check(now: 10 * second) == .wait(until: 11 * second))
        #expect(timeouts.check(now: 11 * second) == .requestTimeout)
    }

    @Test func bodyTimeoutCountsFromTheLastProgress() {
        var timeouts = machine()
        timeouts.bytesArrived(now: 0)
        timeouts.headParsed(now: 1 * second, expectingBody: true)
        timeouts.bytesArrived(now: 20 * second)
        #expect(timeouts.check(now: 49 * second) == .wait(until: 50 * second))
        #expect(timeouts.check(now: 50 * second) == .requestTimeout)
    }

    @Test func aFileBodyThePeerStopsTakingIsClosedAfterTheBodyTimeout() {
        var timeouts = machine()
        timeouts.headParsed(now: 0, expectingBody: false)
        timeouts.sendProgressed(now: 1 * second)
        timeouts.sendProgressed(now: 20 * second)   // the peer drained some of the queue
        #expect(timeouts.check(now: 49 * second) == .wait(until: 50 * second))
        #expect(timeouts.check(now: 50 * second) == .closeIdle)
        timeouts.responseSent(now: 50 * second)
        #expect(timeouts.check(now: 51 * second) == .wait(until: 110 * second))
    }

    @Test func statusCodesCarryTheirStandardReasons() {
        #expect(HTTPStatus(code: 507) == .insufficientStorage)
        #expect(HTTPStatus(code: 415).reason == "Unsupported Media Type")
        #expect(HTTPStatus(code: 416).reason == "Range Not Satisfiable")
        #expect(HTTPStatus(code: 599).reason == "Server Error" && HTTPStatus(code: 499).reason == "Error")
    }

    @Test func aRunningHandlerNeverTimesOutHere() {
        var timeouts = machine()
        timeouts.bytesArrived(now: 0)
        timeouts.headParsed(now: 0, expectingBody: false)
        #expect(timeouts.deadline == nil)
        #expect(timeouts.check(now: 3600 * second) == .wait(until: nil))
    }

    @Test func keepAliveCycleRestartsTheIdleClock() {
        var timeouts = machine()
        timeouts.bytesArrived(now: 0)
        timeouts.headParsed(now: 0, expectingBody: false)
        timeouts.responseSent(now: 100 * second)
        #expect(timeouts.check(now: 159 * second) == .wait(until: 160 * second))
        #expect(timeouts.check(now: 160 * second) == .closeIdle)
    }

    @Test func pausedBodyDoesNotTimeOutUntilResumed() {
        var timeouts = machine()
        timeouts.bytesArrived(now: 0)
        timeouts.headParsed(now: 0, expectingBody: true)
        timeouts.becameBusy()
        #expect(timeouts.check(now: 1000 * second) == .wait(until: nil))
        timeouts.bodyResumed(now: 1000 * second)
        #expect(timeouts.check(now: 1030 * second) == .requestTimeout)
    }
}

struct WebSocketKeepaliveTests {
    @Test func pingsAfterOneIntervalAndDropsAfterTwo() {
        var keepalive = WebSocketKeepalive(interval: .seconds(30), now: 0)
        #expect(keepalive.check(now: 10 * second) == .wait(until: 30 * second))
        #expect(keepalive.check(now: 30 * second) == .ping(next: 60 * second))
        #expect(keepalive.check(now: 45 * second) == .wait(until: 60 * second))  // one ping per silence
        #expect(keepalive.check(now: 60 * second) == .dead)
    }

    @Test func anyFrameKeepsThePeerAlive() {
        var keepalive = WebSocketKeepalive(interval: .seconds(30), now: 0)
        #expect(keepalive.check(now: 30 * second) == .ping(next: 60 * second))
        keepalive.heard(now: 31 * second)  // the pong
        #expect(keepalive.check(now: 60 * second) == .wait(until: 61 * second))
        #expect(keepalive.check(now: 61 * second) == .ping(next: 91 * second))
    }
}

struct RouterTests {
    private func head(_ method: HTTPMethod, _ target: String) -> HTTPRequestHead {
        HTTPRequestHead(method: method, target: target)
    }

    private func router() -> Router {
        var router = Router()
        router.get("/v1/users/:userID") { _ in Response.text("user") }
        router.post("/v1/users") { _ in Response.text("create") }
        router.get("/files/*") { _ in Response.text("file") }
        return router
    }

    @Test func capturesPercentDecodedParameters() {
        guard case .found(_, let parameters) = router().match(head(.GET, "/v1/users/al%20ice?x=1")) else {
            Issue.record("no match")
            return
        }
        #expect(parameters["userID"] == "al ice")
    }

    @Test func restCapturesTheTail() {
        guard case .found(_, let parameters) = router().match(head(.GET, "/files/a/b/c.txt")) else {
            Issue.record("no match")
            return
        }
        #expect(parameters["*"] == "a/b/c.txt")
    }

    @Test func headUsesTheGetRoute() {
        guard case .found(let route, _) = router().match(head(.HEAD, "/v1/users/x")) else {
            Issue.record("no match")
            return
        }
        #expect(route.method == .GET)
    }

    @Test func wrongMethodIs405WithTheAllowedOnes() {
        guard case .methodNotAllowed(let allowed) = router().match(head(.DELETE, "/v1/users")) else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == [.POST])
    }

    @Test func theFirstRouteRegisteredWinsWhateverItsLength() {
        var router = Router()
        router.get("/a/:id") { _ in Response.text("param") }
        router.get("/a/*") { _ in Response.text("rest") }
        router.get("/a/fixed") { _ in Response.text("literal") }
        router.get("/b/*") { _ in Response.text("rest") }
        router.get("/b/c/d") { _ in Response.text("literal") }
        let expected = [("/a/fixed", "/a/:id"), ("/a/x/y", "/a/*"), ("/a", "/a/*"), ("/b/c/d", "/b/*"), ("/b", "/b/*")]
        for (path, route) in expected {
            guard case .found(let found, _) = router.match(head(.GET, path)) else {
                Issue.record("\(path) found nothing")
                continue
            }
            #expect(found.path == route, "\(path)")
        }
        // Methods are collected across lengths too.
        router.post("/c/:id") { _ in Response.text("post") }
        router.put("/c/*") { _ in Response.text("put") }
        guard case .methodNotAllowed(let allowed) = router.match(head(.DELETE, "/c/1")) else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == [.POST, .PUT])
    }

    @Test func unknownPathsAndBadEscapesAre404() {
        guard case .notFound = router().match(head(.GET, "/v2/nothing")) else {
            Issue.record("expected 404")
            return
        }
        guard case .notFound = router().match(head(.GET, "/v1/users/%zz")) else {
            Issue.record("a malformed escape must not match")
            return
        }
    }

    @Test func jsonErrorBodiesAreEscaped() {
        let response = Response.error(status: .badRequest, code: "bad", message: "quote \" and \\ and\nnewline\u{1}")
        #expect(String(decoding: response.body, as: UTF8.self)
                == #"{"error":{"code":"bad","message":"quote \" and \\ and\nnewline\u0001"}}"#)
    }
}
