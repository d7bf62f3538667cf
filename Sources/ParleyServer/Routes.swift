import Foundation
import ParleyChat
import ParleyLog
import ParleyNet
import ParleyPusher
import ParleyPush
import ParleyWebhooks
import ParleyRedis
import ParleyStore
import ParleyStoreSQLite
import ParleySync
import ParleyMediaService

/// The server's HTTP and WebSocket routes.
enum Routes {
    static func make(configuration: ServerConfiguration, group: EventLoopGroup, startedAt: ContinuousClock.Instant, store: any GroupCommitStore,
                     fanout: Fanout<EncodedWebSocketFrame>? = nil, media: MediaService? = nil, pusher: PusherService? = nil,
                     bus: (@Sendable () -> RedisBus.Statistics)? = nil, push: PushService? = nil, webhooks: WebhookService? = nil,
                     chat: Chat? = nil) -> Router {
        var router = Router()
        // Liveness probes hit this constantly: the JSON is written by hand (three fields, no
        // user input) because Foundation's JSONEncoder cost 18% of the server's CPU under wrk.
        // `storage` is whether the last write committed: "ok", "full" (the disk: writes are
        // answered 507 storage_full) or "failing"; it clears when a write commits again.
        let healthPrefix = Array(#"{"status":"ok","storage":""#.utf8)
        let healthUptime = Array(#"","uptimeSeconds":"#.utf8)
        let healthSuffix = Array(#","version":"\#(ParleyVersion.current)"}"#.utf8)
        router.get("/healthz") { _ in
            let uptime = Int((ContinuousClock.now - startedAt).components.seconds)
            let storage = chat?.storage.current?.rawValue ?? "ok"
            var response = Response(status: .ok, headers: HTTPHeaders([("Content-Type", "application/json")]),
                                    body: healthPrefix + Array(storage.utf8) + healthUptime + Array(String(uptime).utf8) + healthSuffix)
            response.logLevel = .debug
            return response
        }
        router.get("/metrics") { _ in
            var realtime: (devices: Int, routed: Int)?
            if let fanout { realtime = (await fanout.deviceCount, await fanout.routedCount) }
            let pusherCounts = await pusher?.counts
            var hooks: WebhookMetrics?
            if let webhooks, let chat {
                hooks = WebhookMetrics(statistics: webhooks.currentStatistics, health: try? await chat.webhooks.health())
            }
            var response = Response.text(Metrics.render(group: group, startedAt: startedAt, store: store, realtime: realtime,
                                                        media: media?.metrics.withLock { $0 }, pusher: pusherCounts, bus: bus?(),
                                                        push: push, webhooks: hooks, storage: chat.map { $0.storage.current },
                                                        workers: chat?.workers.all))
            response.headers.replaceOrAdd(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
            response.logLevel = .debug
            return response
        }
        if configuration.enableEcho { addEcho(to: &router, configuration: configuration, group: group) }
        return router
    }

    struct Health: Codable, Sendable {
        var status: String
        var storage: String
        var version: String
        var uptimeSeconds: Int
    }

    /// Conformance and benchmark endpoints, only with `--enable-echo`:
    /// - `POST /echo`: answers with the request body (streamed in, up to --max-body-bytes).
    /// - `GET /echo/ws`: a WebSocket that sends every message back (Autobahn's target).
    /// - `GET /echo/broadcast`: a WebSocket whose every message goes to every connected socket.
    static func addEcho(to router: inout Router, configuration: ServerConfiguration, group: EventLoopGroup) {
        router.post("/echo", options: RouteOptions(body: .stream(maxBytes: configuration.maxBodyBytes))) { request in
            let body = try await request.body.collect(upTo: configuration.maxBodyBytes)
            var response = Response(status: .ok, body: body)
            response.headers.add(name: "Content-Type", value: request.headers["content-type"] ?? "application/octet-stream")
            return response
        }
        var webSocket = WebSocketConfiguration()
        webSocket.maxMessageSize = configuration.maxMessageBytes
        webSocket.maxQueuedBytes = max(webSocket.maxQueuedBytes, 2 * configuration.maxMessageBytes + 1024)
        webSocket.pingInterval = configuration.pingInterval
        router.webSocket("/echo/ws", configuration: webSocket) { _ in
            WebSocketHandler(onMessage: { socket, message in
                switch message {
                case .text(let text): socket.send(text: text)
                case .binary(let bytes): socket.send(binary: bytes)
                }
            })
        }
        let broadcaster = WebSocketBroadcaster(group: group)
        router.webSocket("/echo/broadcast", configuration: webSocket) { _ in
            WebSocketHandler(
                onOpen: { broadcaster.add($0) },
                onMessage: { _, message in
                    switch message {
                    case .text(let text): broadcaster.broadcast(EncodedWebSocketFrame(text: text))
                    case .binary(let bytes): broadcaster.broadcast(EncodedWebSocketFrame(binary: bytes))
                    }
                },
                onClose: { socket, _, _ in broadcaster.remove(socket) })
        }
    }
}

/// Webhook counts for `/metrics`: this node's attempts, and the endpoints' state (read from the
/// database, so every node reports the same).
struct WebhookMetrics {
    var statistics: WebhookStatistics
    var health: (paused: Int, failing: Int, failedDeliveries: Int, pending: Int)?
}

/// Renders `/metrics` in the Prometheus text exposition format (version 0.0.4).
enum Metrics {
    static func render(group: EventLoopGroup, startedAt: ContinuousClock.Instant, store: any GroupCommitStore,
                       realtime: (devices: Int, routed: Int)? = nil, media: MediaMetrics? = nil,
                       pusher: (connections: Int, routed: Int)? = nil, bus: RedisBus.Statistics? = nil,
                       push: PushService? = nil, webhooks: WebhookMetrics? = nil, storage: StorageHealth.Problem?? = nil,
                       workers: [Workers.Worker]? = nil) -> String {
        let net = NetMetrics.shared.snapshot()
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples { out += "\(name)\(sample.labels) \(sample.value)\n" }
        }
        metric("parley_build_info", "gauge", "Version of this server.", [("{version=\"\(ParleyVersion.current)\"}", "1")])
        metric("parley_uptime_seconds", "gauge", "Seconds since start.",
               [("", String(format: "%.3f", seconds(ContinuousClock.now - startedAt)))])
        metric("parley_connections_open", "gauge", "Open TCP connections (HTTP and WebSocket).", [("", "\(net.openConnections)")])
        metric("parley_connections_total", "counter", "TCP connections opened since start.", [("", "\(net.connectionsTotal)")])
        let refused = NetMetrics.shared.connectionsRefused
        metric("parley_connections_refused_total", "counter", "Connections closed as soon as accepted, over --max-connections (total) or one address's limit (address).",
               [("{limit=\"total\"}", "\(refused.total)"), ("{limit=\"address\"}", "\(refused.address)")])
        metric("parley_errors_total", "counter", "Error answers by code, over REST and in realtime error frames.",
               ErrorCounts.shared.snapshot.map { ("{code=\"\($0.code)\",via=\"\($0.via.rawValue)\"}", "\($0.count)") })
        if let workers {
            let statuses = workers.map { ($0.name, $0.status) }
            metric("parley_worker_state", "gauge", "Each background worker's state (idle, busy, stopped): 1 for the one it is in.",
                   statuses.flatMap { name, status in
                       Workers.State.allCases.map { ("{worker=\"\(name)\",state=\"\($0.rawValue)\"}", status.state == $0 ? "1" : "0") }
                   })
            metric("parley_worker_quiet_seconds", "gauge", "Seconds since each worker last went round; an idle one past 30 is stuck.",
                   statuses.map { ("{worker=\"\($0.0)\"}", String(format: "%.3f", seconds($0.1.quiet))) })
        }
        if let storage {
            metric("parley_storage_writable", "gauge", "1 while writes commit; 0 since a write failed for the store's sake (a full disk, a failure) until one commits.",
                   [("", storage == nil ? "1" : "0")])
            if let storage {
                metric("parley_storage_problem", "gauge", "What the last failed write met, while it lasts.", [("{problem=\"\(storage.rawValue)\"}", "1")])
            }
        }
        metric("parley_http_responses_total", "counter", "HTTP responses by status class.",
               net.responsesByClass.enumerated().map { ("{class=\"\($0.offset + 1)xx\"}", "\($0.element)") })
        metric("parley_network_bytes_total", "counter", "Bytes read from and written to sockets.",
               [("{direction=\"in\"}", "\(net.bytesRead)"), ("{direction=\"out\"}", "\(net.bytesWritten)")])
        metric("parley_websocket_connections_open", "gauge", "Open WebSocket connections.", [("", "\(net.openWebSockets)")])
        metric("parley_websocket_frames_total", "counter", "WebSocket frames received and sent.",
               [("{direction=\"in\"}", "\(net.framesIn)"), ("{direction=\"out\"}", "\(net.framesOut)")])
        metric("parley_websocket_bytes_total", "counter", "WebSocket frame bytes received and sent.",
               [("{direction=\"in\"}", "\(net.webSocketBytesIn)"), ("{direction=\"out\"}", "\(net.webSocketBytesOut)")])
        metric("parley_websocket_slow_closed_total", "counter", "WebSockets closed for falling too far behind (they resume).",
               [("", "\(NetMetrics.shared.slowWebSocketsClosed)")])
        metric("parley_event_loop_lag_seconds", "gauge", "How late each loop's 100 ms heartbeat timer last fired.",
               group.loops.map { loop in ("{loop=\"\(loop.index)\"}", String(format: "%.6f", seconds(loop.lag))) })
        if let realtime {
            metric("parley_realtime_devices", "gauge", "Authenticated realtime sockets attached on this node.", [("", "\(realtime.devices)")])
            metric("parley_realtime_published_total", "counter", "Publications (events, typing, presence) the fanout routed.",
                   [("", "\(realtime.routed)")])
        }
        if let media {
            metric("parley_media_uploads_total", "counter", "Uploads by outcome (a retry that found its first upload counts in neither).",
                   [("{result=\"stored\"}", "\(media.stored)"), ("{result=\"refused\"}", "\(media.refused)")])
            metric("parley_media_upload_bytes_total", "counter", "Bytes received in upload bodies.", [("", "\(media.bytesReceived)")])
            metric("parley_media_downloads_total", "counter", "Downloads answered with bytes (200 and 206).", [("", "\(media.downloads)")])
            metric("parley_media_files_removed_total", "counter", "Stored files removed because no upload uses them any more.",
                   [("", "\(media.blobsRemoved)")])
        }
        if let pusher {
            metric("parley_pusher_connections", "gauge", "Open Pusher-protocol sockets on this node.", [("", "\(pusher.connections)")])
            metric("parley_pusher_channel_events_total", "counter", "Channel events routed to this node's Pusher sockets.",
                   [("", "\(pusher.routed)")])
        }
        if let bus {
            metric("parley_bus_subscribed", "gauge", "1 while this node's Redis subscription is up.", [("", bus.subscribed ? "1" : "0")])
            metric("parley_bus_head_position", "gauge", "The newest event position delivered on this node.", [("", "\(bus.head)")])
            metric("parley_bus_published_total", "counter", "Writes published to the other nodes through Redis.", [("", "\(bus.published)")])
            metric("parley_bus_publish_failures_total", "counter", "Writes Redis did not take (the other nodes read them from the database).",
                   [("", "\(bus.droppedPublishes)")])
            metric("parley_bus_received_total", "counter", "Writes received from the other nodes.", [("", "\(bus.received)")])
            metric("parley_bus_repairs_total", "counter", "Gaps filled from the database.", [("", "\(bus.repairs)")])
            metric("parley_bus_repaired_events_total", "counter", "Events delivered from the database instead of Redis.", [("", "\(bus.repairedEvents)")])
            metric("parley_bus_duplicates_total", "counter", "Writes received after they were delivered, dropped.", [("", "\(bus.duplicates)")])
            metric("parley_bus_undecodable_total", "counter", "Bus messages that could not be decoded.", [("", "\(bus.undecodable)")])
        }
        if let push {
            let counts = push.currentStatistics
            let providers = push.providerNames
            func samples(_ value: (PushStatistics) -> Int) -> [(labels: String, value: String)] {
                providers.map { ("{provider=\"\($0)\"}", "\(value(counts[$0] ?? PushStatistics()))") }
            }
            metric("parley_push_sent_total", "counter", "Notifications the provider accepted.", samples(\.sent))
            metric("parley_push_retried_total", "counter", "Attempts to be tried again (429, 5xx, no answer).", samples(\.retried))
            metric("parley_push_failed_total", "counter", "Notifications given up on.", samples(\.failed))
            metric("parley_push_devices_removed_total", "counter", "Devices removed because the provider said the token is dead.",
                   samples(\.devicesRemoved))
        }
        if let webhooks {
            let counts = webhooks.statistics
            metric("parley_webhook_deliveries_total", "counter", "Webhook delivery attempts by outcome on this node.",
                   [("{result=\"delivered\"}", "\(counts.delivered)"), ("{result=\"retried\"}", "\(counts.retried)"),
                    ("{result=\"failed\"}", "\(counts.failed)")])
            if let health = webhooks.health {
                metric("parley_webhook_endpoints_paused", "gauge", "Webhook endpoints paused (by their app, or after failing a whole retry window).",
                       [("", "\(health.paused)")])
                metric("parley_webhook_endpoints_failing", "gauge", "Webhook endpoints whose last delivery failed.", [("", "\(health.failing)")])
                metric("parley_webhook_deliveries_waiting", "gauge", "Webhook deliveries waiting to be sent (all nodes).", [("", "\(health.pending)")])
                metric("parley_webhook_deliveries_failed", "gauge", "Webhook deliveries given up on, kept to be replayed (all nodes).",
                       [("", "\(health.failedDeliveries)")])
            }
        }
        let commits = store.commitStatistics
        metric("parley_store_writes_total", "counter", "Write transactions requested of the store.", [("", "\(commits.writes)")])
        metric("parley_store_commits_total", "counter", "Commits (fsyncs) that carried them: writes/commits is the group-commit batching.",
               [("", "\(commits.transactions)")])
        return out
    }

    /// A duration in seconds.
    static func seconds(_ duration: Duration) -> Double {
        let (whole, attoseconds) = duration.components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
