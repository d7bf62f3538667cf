import Foundation
import FoundationNetworking
import Testing
import ParleyNet
import ParleyNetTesting
import ParleyTesting
import ParleyServerTesting
@testable import ParleyServer

/// The real server, in process, on an ephemeral port with a temporary data directory.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ParleyServerTests {
    /// The server for one test, shut down however the test ends.
    private func withServer(echo: Bool = false, _ body: (ParleyServer) async throws -> Void) async throws {
        try await withTestServer({ $0.enableEcho = echo }, body)
    }

    private func get(_ url: String) async throws -> (Int, String, [AnyHashable: Any]) {
        guard let target = URL(string: url) else { throw URLError(.badURL) }
        let (data, response) = try await URLSession.shared.data(from: target)
        let http = response as? HTTPURLResponse
        return (http?.statusCode ?? 0, String(decoding: data, as: UTF8.self), http?.allHeaderFields ?? [:])
    }

    @Test func healthzReportsVersionAsJSON() async throws {
        try await withServer { server in
            let (status, body, _) = try await get(server.url + "/healthz")
            #expect(status == 200)
            let health = try JSONDecoder().decode(Routes.Health.self, from: Data(body.utf8))
            #expect(health.status == "ok")
            #expect(health.version == ParleyVersion.current)
            #expect(FileManager.default.fileExists(atPath: server.configuration.dataDirectory))
        }
    }

    @Test func metricsAreInPrometheusTextFormat() async throws {
        try await withServer { server in
            _ = try await get(server.url + "/healthz")
            let (status, body, headers) = try await get(server.url + "/metrics")
            #expect(status == 200)
            #expect((headers["Content-Type"] as? String)?.hasPrefix("text/plain; version=0.0.4") == true)
            for name in ["parley_connections_open", "parley_http_responses_total{class=\"2xx\"}",
                         "parley_websocket_frames_total{direction=\"in\"}", "parley_network_bytes_total{direction=\"out\"}",
                         "parley_event_loop_lag_seconds{loop=\"1\"}", "parley_build_info{version=\"\(ParleyVersion.current)\"} 1",
                         "parley_store_writes_total", "parley_store_commits_total", "parley_realtime_devices", "parley_realtime_published_total",
                         "parley_websocket_slow_closed_total"] {
                #expect(body.contains(name), "metrics include \(name)")
            }
            // Every sample line is `name{labels} value` with a numeric value.
            for line in body.split(separator: "\n") where !line.hasPrefix("#") {
                let value = line.split(separator: " ").last.map(String.init) ?? ""
                #expect(Double(value) != nil, "numeric sample: \(line)")
            }
        }
    }

    @Test func echoEndpointsAreOffByDefault() async throws {
        try await withServer { server in
            let (status, body, _) = try await get(server.url + "/echo/ws")
            #expect(status == 404)
            #expect(body.contains("\"not_found\""))
        }
    }

    @Test func aBusyPortSaysWhatToDo() async throws {
        try await withServer { first in
            var configuration = ServerConfiguration()
            configuration.port = first.localAddress.port
            configuration.dataDirectory = first.configuration.dataDirectory + "-second"
            defer { try? FileManager.default.removeItem(atPath: configuration.dataDirectory) }
            do {
                _ = try await ParleyServer.start(configuration)
                Issue.record("the second bind should fail")
            } catch let error as StartError {
                #expect(error.message.contains("already in use"))
                #expect(error.message.contains("--port"))
            }
        }
    }

    /// On SQLite the data directory's lock refuses it; on PostgreSQL the database's node claim.
    @Test func aSecondServerOnTheSameDataDirectoryIsRefused() async throws {
        try await withServer { first in
            var configuration = ServerConfiguration()
            configuration.port = 0
            configuration.dataDirectory = first.configuration.dataDirectory
            configuration.databaseURL = first.configuration.databaseURL  // on PostgreSQL: the same database
            do {
                let second = try await ParleyServer.start(configuration)
                await second.shutdown()
                Issue.record("two servers shared one data directory")
            } catch let error as StartError {
                #expect(error.message.contains("another parley-server is using"))
            }
        }
    }

    @Test func broadcastEndpointFansOut() async throws {
        try await withServer(echo: true) { server in
            let group = try EventLoopGroup(loopCount: 1)
            defer { group.shutdown() }
            var sockets: [WebSocket] = []
            var queues: [EventQueue<SocketEvent>] = []
            for _ in 0..<3 {
                let (handler, events) = recordingHandler()
                sockets.append(try await WebSocketClient.connect(
                    to: "ws://127.0.0.1:\(server.localAddress.port)/echo/broadcast", on: group.loops[0], handler: handler))
                queues.append(events)
            }
            // The server registers a socket before its 101 can reach the client, so all three are in.
            sockets[1].send(text: "to all")
            for events in queues {
                #expect(try await nextEvent(events) == .message(.text("to all")))
            }
        }
    }

    @Test func echoWebSocketEchoes() async throws {
        try await withServer(echo: true) { server in
            let group = try EventLoopGroup(loopCount: 1)
            defer { group.shutdown() }
            let (handler, events) = recordingHandler()
            let socket = try await WebSocketClient.connect(
                to: "ws://127.0.0.1:\(server.localAddress.port)/echo/ws", on: group.loops[0], handler: handler)
            socket.send(binary: [1, 2, 3])
            #expect(try await nextEvent(events) == .message(.binary([1, 2, 3])))
            await server.shutdown()
            #expect(try await nextEvent(events) == .close(.goingAway, "server shutting down"))
        }
    }
}
