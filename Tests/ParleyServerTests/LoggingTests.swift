import Foundation
import FoundationNetworking
import ParleyChat
import ParleyChatTesting
import ParleyStore
import ParleyLog
import ParleyNet
@testable import ParleyServer
import ParleyServerTesting
import ParleyWire
import Testing

/// The log an operator reads (issue 28): the two line formats as text, the options, and what a
/// running server writes — one line per request with its id, status and caller, the socket's
/// lines, start and stop — asserted on records, never on standard error.
@Suite(.serialized)
struct LoggingTests {
    private let record = LogRecord(time: Date(timeIntervalSince1970: 1_800_000_000.25), level: .warning, label: "parley.http",
                                   message: "request", metadata: ["status": 503, "path": "/v1/me", "note": "two words \"quoted\"\n", "ms": 1.25])

    @Test func aTextLineIsOneLineWithFieldsInOrderAndQuotedWhenNeeded() {
        let line = LogLine.render(record, format: .text)
        #expect(line == #"2027-01-15T08:00:00.250Z warn parley.http: request ms=1.2 note="two words \"quoted\"\n" path=/v1/me status=503"# + "\n")
        #expect(line.filter { $0 == "\n" }.count == 1, "a field's newline never breaks the line")
    }

    @Test func aJSONLineIsOneObjectACollectorReads() throws {
        let line = LogLine.render(record, format: .json)
        #expect(line.hasSuffix("}\n") && line.filter { $0 == "\n" }.count == 1)
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["time"] as? String == "2027-01-15T08:00:00.250Z" && object["level"] as? String == "warn")
        #expect(object["label"] as? String == "parley.http" && object["message"] as? String == "request")
        #expect(object["status"] as? Int == 503 && object["note"] as? String == "two words \"quoted\"\n")
        #expect((object["ms"] as? Double).map { abs($0 - 1.25) < 0.001 } == true)
    }

    @Test func aStuckDescriptorDropsAndCountsLinesInsteadOfBlockingTheCaller() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let handler = StreamLogHandler(minimumLevel: .info, format: .text, descriptor: ends[1])
        let logger = Logger(label: "parley.test", handler: handler)
        // Nobody reads the pipe: once it and the buffer are full, callers go on and lines are dropped.
        let started = ContinuousClock.now
        for index in 0..<40_000 { logger.info("request", metadata: ["index": .integer(Int64(index)), "path": "/v1/conversations/c_abcdefghijklmnop"]) }
        // A caller that waited on the pipe would wait for ever (nobody reads it): the bound is
        // there to catch that, not to time the handler, so it is wide enough for a loaded
        // debug build (14 s seen in a CI run beside other work).
        #expect(ContinuousClock.now - started < .seconds(60), "40,000 lines into a stuck pipe must not wait on it")
        // A reader drains it; the next flush says how many were dropped.
        let readEnd = ends[0]
        let reader = Task.detached { () -> String in
            var text: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                text += chunk[..<count]
            }
            return String(decoding: text, as: UTF8.self)
        }
        handler.flush()
        logger.warning("after")
        handler.flush()
        close(ends[1])
        let text = await reader.value
        let lines = text.split(separator: "\n")
        let count = lines.filter { $0.contains("log lines dropped") }.compactMap { Int($0.split(separator: "=").last ?? "") }.reduce(0, +)
        let written = lines.filter { $0.contains(" request ") }.count
        #expect(count > 0 && written + count == 40_000, "every line is written or counted as dropped")
        #expect(lines.last?.hasSuffix("parley.test: after") == true, "lines stay in order")
    }

    @Test func requestIdsAreDistinctAndOfOneShape() {
        let made = (0..<5_000).map { _ in RequestID.make() }
        #expect(Set(made).count == made.count)
        #expect(made.allSatisfy { $0.wholeMatch(of: /r[0-9a-f]{6}-[0-9a-f]{1,16}/) != nil }, "\(made.prefix(3))")
        #expect(RequestID.accept("trace-42") == "trace-42")
        for refused in ["", "two words", String(repeating: "a", count: 129), "é"] { #expect(RequestID.accept(refused).hasPrefix("r")) }
    }

    @Test func recordsBelowTheLevelAreNeverMade() {
        let handler = RecordingLogHandler(minimumLevel: .warning)
        let logger = Logger(label: "t", handler: handler)
        var evaluated = false
        logger.info("hidden", metadata: { evaluated = true; return [:] }())
        logger.error("shown")
        #expect(!evaluated && handler.records.map(\.message) == ["shown"])
    }

    @Test func aFailingLoopIsLoggedOncePerInterval() async {
        let handler = RecordingLogHandler()
        let logger = Logger(label: "throttle.\(UUID().uuidString)", handler: handler)
        struct Boom: Error {}
        for _ in 0..<5 { _ = await logger.attempt("claim failed") { () async throws -> Int in throw Boom() } }
        #expect(handler.records.count == 1 && handler.records.first?.metadata["error"] != nil)
    }

    @Test func theOptionsNameTheLevelAndFormat() throws {
        let parsed = try ServerConfiguration.parse(["--log-level", "warn", "--log-format", "json"])
        guard case .run(let configuration) = parsed else { throw ServerConfiguration.UsageError(message: "expected run, got \(parsed)") }
        #expect(configuration.logLevel == .warning && configuration.logFormat == .json)
        let fromEnvironment = try ServerConfiguration.parse([], environment: ["PARLEY_LOG_LEVEL": "debug", "PARLEY_LOG_FORMAT": "text"])
        guard case .run(let other) = fromEnvironment else { throw ServerConfiguration.UsageError(message: "expected run") }
        #expect(other.logLevel == .debug)
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["--log-level", "loud"]) }
        #expect(ServerConfiguration().logLevel == .info && ServerConfiguration().logFormat == .text)
    }

    @Test func everyRequestIsOneLineWithItsIdStatusAndCaller() async throws {
        try await withTestServer { server in
            let handler = try #require(server.logger.handler as? RecordingLogHandler)
            let signedIn = try await server.register("logged")
            let token = try #require(signedIn.session.token)
            var request = URLRequest(url: try #require(URL(string: server.url + "/v1/me")))
            request.setValue(server.createdApp?.publicKey, forHTTPHeaderField: "X-Parley-App-Key")
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("trace-42", forHTTPHeaderField: "X-Request-Id")
            let (_, response) = try await URLSession.shared.data(for: request)
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Request-Id") == "trace-42", "the client's id is echoed")
            let line = try #require(handler.records.first { $0.message == "request" && $0.metadata["request.id"] == "trace-42" })
            #expect(line.label == "parley.http" && line.level == .info)
            #expect(line.metadata["status"] == 200 && line.metadata["method"] == "GET" && line.metadata["route"] == "/v1/me")
            #expect(line.metadata["user.id"] == .string(signedIn.user.id.rawValue) && line.metadata["ms"] != nil)
            // A made-up id is replaced by one of the server's, and a refusal is logged as well.
            request.setValue("bad id with spaces", forHTTPHeaderField: "X-Request-Id")
            request.setValue("Bearer pt_nothing", forHTTPHeaderField: "Authorization")
            let (_, refused) = try await URLSession.shared.data(for: request)
            let made = try #require((refused as? HTTPURLResponse)?.value(forHTTPHeaderField: "X-Request-Id"))
            #expect(made.hasPrefix("r") && made != "bad id with spaces")
            #expect(handler.records.contains { $0.metadata["request.id"] == .string(made) && $0.metadata["status"] == 401 })
            // Health checks and metrics scrapes are debug lines: at the default level they are not written.
            for path in ["/healthz", "/metrics"] {
                var probe = URLRequest(url: try #require(URL(string: server.url + path)))
                probe.setValue("probe-\(path.dropFirst())", forHTTPHeaderField: "X-Request-Id")
                _ = try await URLSession.shared.data(for: probe)
                let probed = try #require(handler.records.first { $0.metadata["request.id"] == .string("probe-\(path.dropFirst())") })
                #expect(probed.level == .debug && probed.metadata["status"] == 200)
            }
            // Start, and the migrations a fresh database took.
            #expect(handler.records.contains { $0.message == "listening" })
            let schema = try Schema.migrator(for: TestEngine.isPostgres ? .postgres : .sqlite)
            #expect(handler.records.filter { $0.message == "migration applied" }.count == schema.migrations.count)
            // Nothing of the token or the password.
            let all = handler.records.map { LogLine.render($0, format: .json) }.joined()
            #expect(!all.contains(token) && !all.contains("correct horse battery"))
        }
    }
}
