import Foundation
import ParleyChat
import ParleyCrypto
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
import ParleyLinkPreview

/// The server's HTTP and WebSocket routes.
enum Routes {
    static func make(configuration: ServerConfiguration, group: EventLoopGroup, startedAt: ContinuousClock.Instant, store: any GroupCommitStore,
                     fanout: Fanout<EncodedWebSocketFrame>? = nil, media: MediaService? = nil, pusher: PusherService? = nil,
                     bus: (@Sendable () -> RedisBus.Statistics)? = nil, push: PushService? = nil, webhooks: WebhookService? = nil,
                     chat: Chat? = nil, linkPreviews: LinkPreviewService? = nil) -> Router {
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
        let metricsToken = configuration.metricsToken.map { Array("Bearer \($0)".utf8) }
        router.get("/metrics") { request in
            // With --metrics-token, only a scraper that has it reads the figures.
            if let metricsToken, !Crypto.constantTimeEqual(Array((request.headers["authorization"] ?? "").utf8), metricsToken) {
                var refused = Response.error(status: .unauthorized, code: "unauthenticated", message: "/metrics needs Authorization: Bearer <the --metrics-token>")
                refused.headers.add(name: "WWW-Authenticate", value: "Bearer")
                return refused
            }
            var realtime: (devices: Int, routed: Int)?
            if let fanout { realtime = (await fanout.deviceCount, await fanout.routedCount) }
            let pusherCounts = await pusher?.counts
            let outbox = try? await chat?.outboxDepths()
            let reports = try? await chat?.moderation.openReports()
            var hooks: WebhookMetrics?
            if let webhooks, let chat {
                hooks = WebhookMetrics(statistics: webhooks.currentStatistics, health: try? await chat.webhooks.health())
            }
            var response = Response.text(Metrics.render(group: group, startedAt: startedAt, store: store, realtime: realtime,
                                                        media: media?.metrics.withLock { $0 }, pusher: pusherCounts, bus: bus?(),
                                                        push: push, webhooks: hooks, storage: chat.map { $0.storage.current },
                                                        workers: chat?.workers.all, outbox: outbox, reports: reports,
                                                        reportResolution: chat?.reportResolution, sendToDelivered: chat?.sendToDelivered, traceRecorder: chat?.traceRecorder, dataDirectory: configuration.dataDirectory,
                                                        linkPreviews: linkPreviews?.metrics.withLock { $0 }))
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
                       workers: [Workers.Worker]? = nil, outbox: [(kind: String, waiting: Int, overdueSeconds: Double)]? = nil,
                       reports: (open: Int, oldestSeconds: Double)? = nil, reportResolution: LatencyHistogram? = nil,
                       sendToDelivered: SendToDelivered? = nil, traceRecorder: TraceRecorder? = nil,
                       dataDirectory: String? = nil, linkPreviews: LinkPreviewMetrics? = nil) -> String {
        let net = NetMetrics.shared.snapshot()
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: String)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples { out += "\(name)\(sample.labels) \(sample.value)\n" }
        }
        func histogram(_ name: String, _ help: String, _ histogram: LatencyHistogram) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
            for sample in histogram.samples() { out += "\(name)\(sample.suffix)\(sample.labels) \(sample.value)\n" }
        }
        let process = ProcessFigures.current(startedAt: startedAt)
        metric("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.", [("", String(format: "%.3f", process.cpuSeconds))])
        metric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [("", "\(process.residentBytes)")])
        metric("process_open_fds", "gauge", "Open file descriptors.", [("", "\(process.openDescriptors)")])
        metric("process_max_fds", "gauge", "The most open file descriptors allowed (the soft limit).", [("", "\(process.maxDescriptors)")])
        metric("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.",
               [("", String(format: "%.3f", process.startTime))])
        if let dataDirectory, let free = ProcessFigures.freeBytes(at: dataDirectory) {
            metric("parley_data_dir_free_bytes", "gauge", "Bytes free to this user on the data directory's file system.", [("", "\(free)")])
        }
        histogram("parley_http_request_duration_seconds", "HTTP requests, from the head's first byte to the response queued.",
                  NetMetrics.shared.requestLatency)
        histogram("parley_store_commit_seconds", "The store's COMMITs (a group of writes each, with its fsync).", StoreMetrics.commitLatency)
        if let outbox {
            metric("parley_outbox_waiting", "gauge", "Rows waiting in the outbox by kind (push expansions, push-<provider>, webhooks; all nodes).",
                   outbox.map { ("{kind=\"\($0.kind)\"}", "\($0.waiting)") })
            metric("parley_outbox_overdue_seconds", "gauge", "How long the oldest due row of each kind has waited past its due time.",
                   outbox.map { ("{kind=\"\($0.kind)\"}", String(format: "%.3f", $0.overdueSeconds)) })
        }
        if let reports {
            metric("parley_reports_open", "gauge", "Reports no moderator has resolved yet (every app, all nodes).", [("", "\(reports.open)")])
            metric("parley_reports_oldest_open_seconds", "gauge", "How long the oldest open report has waited (App Review asks for action within 24 hours).",
                   [("", String(format: "%.0f", reports.oldestSeconds))])
        }
        if let traceRecorder, traceRecorder.isOn {
            metric("parley_trace_steps_dropped_total", "counter", "Delivery-trace steps dropped because too many waited to be written (docs/trace.md).",
                   [("", "\(traceRecorder.dropped)")])
        }
        if let sendToDelivered {
            out += "# HELP parley_send_to_delivered_seconds From a new message stored to a device reached: routed to its socket on this node (socket), or its push accepted by the provider (apns, fcm).\n"
            out += "# TYPE parley_send_to_delivered_seconds histogram\n"
            for platform in SendToDelivered.platforms {
                guard let histogram = sendToDelivered.histogram(platform) else { continue }
                for sample in histogram.samples(labels: "platform=\"\(platform)\"") {
                    out += "parley_send_to_delivered_seconds\(sample.suffix)\(sample.labels) \(sample.value)\n"
                }
            }
        }
        if let reportResolution {
            histogram("parley_report_resolution_seconds", "From a report to its resolution, for reports this node resolved.", reportResolution)
        }
        metric("parley_build_info", "gauge", "Version of this server.", [("{version=\"\(ParleyVersion.current)\"}", "1")])
        metric("parley_uptime_seconds", "gauge", "Seconds since start.",
               [("", String(format: "%.3f", (ContinuousClock.now - startedAt).inSeconds))])
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
                   statuses.map { ("{worker=\"\($0.0)\"}", String(format: "%.3f", $0.1.quiet.inSeconds)) })
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
               group.loops.map { loop in ("{loop=\"\(loop.index)\"}", String(format: "%.6f", loop.lag.inSeconds)) })
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
        if let linkPreviews {
            metric("parley_link_preview_links_total", "counter", "Links this node worked on, by what it took: a fetch that found something, the app's cache, or a page that gave nothing.",
                   [("{outcome=\"fetched\"}", "\(linkPreviews.fetched)"), ("{outcome=\"cached\"}", "\(linkPreviews.cached)"),
                    ("{outcome=\"empty\"}", "\(linkPreviews.empty)")])
            metric("parley_link_previews_total", "counter", "Messages this node put a link preview on.", [("", "\(linkPreviews.previewed)")])
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
            metric("parley_bus_foreign_total", "counter", "Bus messages from a node of another log on the same channel, not delivered.",
                   [("", "\(bus.foreign)")])
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
        if let roundTrips = store.writeRoundTrips {
            metric("parley_store_round_trips_total", "counter",
                   "Times the writer waited for PostgreSQL: round trips per write is this over parley_store_writes_total.",
                   [("", "\(roundTrips)")])
        }
        if let runAgain = store.batchesRunAgain {
            metric("parley_store_batches_run_again_total", "counter",
                   "Write batches rolled back whole because one write failed after it changed something, and run again without it.",
                   [("", "\(runAgain)")])
        }
        return out
    }
}

/// The process's own figures, as Prometheus's client libraries name them (`process_*`).
struct ProcessFigures {
    var cpuSeconds: Double
    var residentBytes: Int
    var openDescriptors: Int
    var maxDescriptors: Int
    var startTime: Double

    static func current(startedAt: ContinuousClock.Instant) -> ProcessFigures {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        // /proc/self/statm: size, resident, … in pages.
        let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
        let residentPages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let descriptors = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1  // less the listing's own
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let uptime = (ContinuousClock.now - startedAt).inSeconds
        return ProcessFigures(cpuSeconds: cpu, residentBytes: residentPages * Int(sysconf(Int32(_SC_PAGESIZE))), openDescriptors: max(0, descriptors),
                              maxDescriptors: limit.rlim_cur > UInt64(Int.max) ? Int.max : Int(limit.rlim_cur),
                              startTime: Date().timeIntervalSince1970 - uptime)
    }

    /// Bytes free to an unprivileged user on the file system holding `path`.
    static func freeBytes(at path: String) -> UInt64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }
}
