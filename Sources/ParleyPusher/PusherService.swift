package import ParleyChat
package import ParleyNet
import Foundation
import ParleyWire
import ParleySync

/// The Pusher Channels protocol as an adapter over Parley's event log (docs/pusher.md,
/// docs/decisions/0016-pusher-channels-on-the-event-log.md): the WebSocket at
/// `/app/{key}` that PusherSwift, pusher-js and pysher connect to, and the signed HTTP API
/// under `/apps/{app_id}/` that Pusher's server libraries call. Events the backend triggers
/// are stored in the channel's log before they are sent, so a client that was away can ask
/// for what it missed.
///
/// ```swift
/// let pusher = PusherService(chat: chat, bus: bus, configuration: PusherConfiguration())
/// pusher.addRoutes(to: &router)
/// ```
package final class PusherService: Sendable {
    let context: PusherContext
    /// HTTP API requests per app, over every node.
    private let requestRate: SharedRate

    /// Routes the bus's channel events to this node's Pusher sockets; with a `directory`
    /// (several nodes) presence members and occupancy count every node.
    package init(chat: Chat, bus: any Bus, configuration: PusherConfiguration, directory: (any ChannelDirectory)? = nil) {
        // Pusher-format webhook events are written in the order they happen, one write at a time.
        let (events, sink) = AsyncStream.makeStream(of: (Int64, [PusherWebhookEvent]).self)
        Task {
            for await (app, batch) in events { await chat.webhooks.pusherFormat(app: app, batch) }
        }
        let hub = PusherHub(bus: bus, directory: directory) { app, batch in sink.yield((app, batch)) }
        context = PusherContext(chat: chat, hub: hub, configuration: configuration)
        let rate = Double(configuration.apiRequestsPerSecond)
        requestRate = SharedRate(name: "pusher-api", rate: rate, burst: 2 * rate, shared: chat.sharedCounters)
    }

    /// Open Pusher sockets, and channel events routed to them, on this node.
    package var counts: (connections: Int, routed: Int) {
        get async { await context.hub.counts }
    }

    /// Adds the WebSocket endpoint and the HTTP API.
    package func addRoutes(to router: inout Router, webSocket: WebSocketConfiguration) {
        addWebSocket(to: &router, webSocket: webSocket)
        addEvents(to: &router)
        addQueries(to: &router)
    }

    // MARK: - WebSocket

    private func addWebSocket(to router: inout Router, webSocket: WebSocketConfiguration) {
        var configuration = webSocket
        configuration.maxMessageSize = PusherProtocol.frameBytesMax
        configuration.maxQueuedBytes = context.configuration.maxQueuedBytes
        configuration.slowPeerCloseCode = WebSocketCloseCode(rawValue: UInt16(PusherProtocol.Code.reconnect))
        let context = context
        router.webSocket("/app/:key", configuration: configuration) { request in
            let key = request.parameters["key"] ?? ""
            let version = request.queryItems["protocol"].flatMap { Int($0) }
            let refusal: (code: Int, message: String)?
            var found: ChannelApp?
            if version == nil {
                refusal = (PusherProtocol.Code.noProtocol, "no protocol version: connect with ?protocol=7")
            } else if let version, !PusherProtocol.versions.contains(version) {
                refusal = (PusherProtocol.Code.unsupportedProtocol, "protocol \(version) is not supported: use 5, 6 or 7")
            } else if let app = try? await context.chat.channels.app(key: key) {
                found = app
                refusal = nil
            } else {
                refusal = (PusherProtocol.Code.unknownApp, "App key \(key.prefix(64)) not in this cluster. Did you forget to specify the cluster?")
            }
            guard let app = found, refusal == nil else {
                // As Pusher does: the socket opens, says why, and closes with the code.
                let (code, message) = refusal ?? (PusherProtocol.Code.unknownApp, "unknown app")
                return WebSocketHandler(onOpen: { socket in
                    socket.send(EncodedWebSocketFrame(utf8: PusherFrames.error(code: code, message: message)))
                    socket.close(code: WebSocketCloseCode(rawValue: UInt16(code)), reason: String(message.prefix(100)))
                })
            }
            let connection = LockedValue<PusherConnection?>(nil)
            return WebSocketHandler(
                onOpen: { socket in
                    let created = PusherConnection(socket: socket, app: app, context: context)
                    connection.withLock { $0 = created }
                    created.opened()
                },
                onMessage: { _, message in connection.withLock { $0 }?.received(message) },
                onClose: { _, _, _ in
                    connection.withLock { $0 }?.didClose()
                    connection.withLock { $0 = nil }
                })
        }
    }

    // MARK: - HTTP API: events

    private struct TriggerBody: Decodable {
        var name: String
        var data: String
        var channels: [String]?
        var channel: String?
        var socket_id: String?
        var info: String?
    }

    private struct BatchBody: Decodable {
        var batch: [TriggerBody]
    }

    private func addEvents(to router: inout Router) {
        let options = RouteOptions(body: .collect(maxBytes: 256 * 1024))
        router.post("/apps/:appId/events", options: options) { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let trigger = try await request.decode(TriggerBody.self)
                let channels = try trigger.channels ?? trigger.channel.map { [$0] } ?? { throw ChatError.invalid("give 'channels' (a list) or 'channel'") }()
                guard trigger.channels == nil || trigger.channel == nil else { throw ChatError.invalid("give 'channels' or 'channel', not both") }
                guard (1...PusherProtocol.channelsPerTrigger).contains(channels.count) else {
                    throw ChatError.invalid("an event goes to 1–\(PusherProtocol.channelsPerTrigger) channels")
                }
                let triggers = try channels.map { try validated(trigger, channel: $0) }
                // Everything is checked before anything is stored: a bad `info` changes nothing.
                _ = try Self.attributes(trigger.info, allowed: Self.infoAttributes)
                try await context.chat.channels.trigger(triggers, app: app.app, keep: context.configuration.historyPerChannel)
                guard let info = trigger.info else { return .object([:]) }
                return .object(["channels": .object(try await channelInfo(app: app.app.id, channels: channels, info: info))])
            }
        }
        router.post("/apps/:appId/batch_events", options: options) { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let batch = try await request.decode(BatchBody.self).batch
                guard (1...PusherProtocol.eventsPerBatch).contains(batch.count) else {
                    throw ChatError.invalid("a batch holds 1–\(PusherProtocol.eventsPerBatch) events")
                }
                let triggers = try batch.map { event in
                    guard let channel = event.channel, event.channels == nil else { throw ChatError.invalid("each batch event names one 'channel'") }
                    _ = try Self.attributes(event.info, allowed: Self.infoAttributes)
                    return try validated(event, channel: channel)
                }
                try await context.chat.channels.trigger(triggers, app: app.app, keep: context.configuration.historyPerChannel)
                guard batch.contains(where: { $0.info != nil }) else { return .object([:]) }
                var answers: [JSONValue] = []
                for event in batch {
                    guard let info = event.info, let channel = event.channel else { answers.append(.object([:])); continue }
                    answers.append(try await channelInfo(app: app.app.id, channels: [channel], info: info)[channel] ?? .object([:]))
                }
                return .object(["batch": .array(answers)])
            }
        }
    }

    private func validated(_ trigger: TriggerBody, channel: String) throws -> ChannelTrigger {
        if let problem = PusherProtocol.triggerChannelProblem(channel) { throw ChatError.invalid(problem) }
        if let problem = PusherProtocol.eventNameProblem(trigger.name) { throw ChatError.invalid(problem) }
        guard !trigger.name.hasPrefix("pusher:"), !trigger.name.hasPrefix("pusher_internal:") else {
            throw ChatError.invalid("event names starting with 'pusher:' are the protocol's own")
        }
        guard trigger.data.utf8.count <= PusherProtocol.dataBytesMax else {
            throw ChatError.tooLarge("event data is at most \(PusherProtocol.dataBytesMax) bytes (this is \(trigger.data.utf8.count))")
        }
        if let socket = trigger.socket_id, !Self.isSocketID(socket) {
            throw ChatError.invalid("socket_id '\(socket.prefix(40))' is not a socket id (digits.digits)")
        }
        return ChannelTrigger(channel: channel, name: trigger.name, data: trigger.data, excludedSocket: trigger.socket_id)
    }

    static func isSocketID(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.utf8.count <= 64 && parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
    }

    // MARK: - HTTP API: channels, users, history

    private func addQueries(to router: inout Router) {
        router.get("/apps/:appId/channels") { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let prefix = request.queryItems["filter_by_prefix"] ?? ""
                let attributes = try Self.attributes(request.queryItems["info"], allowed: Self.infoAttributes)
                if attributes.contains("user_count"), !prefix.hasPrefix("presence-") {
                    throw ChatError.invalid("user_count is only for presence channels: add filter_by_prefix=presence-")
                }
                var channels: [String: JSONValue] = [:]
                for channel in await context.hub.occupied(app: app.app.id, prefix: prefix) {
                    channels[channel.name] = .object(Self.describe(channel, attributes))
                }
                return .object(["channels": .object(channels)])
            }
        }
        router.get("/apps/:appId/channels/:channel") { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let name = try channelParameter(request)
                let attributes = try Self.attributes(request.queryItems["info"], allowed: Self.infoAttributes)
                if attributes.contains("user_count"), PusherProtocol.kind(of: name) != .presence {
                    throw ChatError.invalid("user_count is only for presence channels")
                }
                let occupancy = await context.hub.occupancy(app: app.app.id, channel: name)
                var fields = Self.describe(occupancy, attributes)
                fields["occupied"] = .bool(occupancy.subscriptionCount > 0)
                return .object(fields)
            }
        }
        router.get("/apps/:appId/channels/:channel/users") { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let name = try channelParameter(request)
                guard PusherProtocol.kind(of: name) == .presence else { throw ChatError.invalid("only presence channels have users") }
                let users = await context.hub.users(app: app.app.id, channel: name)
                return .object(["users": .array(users.map { .object(["id": .string($0)]) })])
            }
        }
        router.get("/apps/:appId/channels/:channel/events") { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let name = try channelParameter(request)
                let after: Int64 = try request.queryItems["after"].map { text -> Int64 in
                    guard let value = Int64(text), value >= 0 else { throw ChatError.invalid("after is a position (a whole number ≥ 0)") }
                    return value
                } ?? 0
                let limit: Int = try request.queryItems["limit"].map { text -> Int in
                    guard let value = Int(text), (1...1_000).contains(value) else { throw ChatError.invalid("limit must be 1–1000") }
                    return value
                } ?? 100
                let history = try await context.chat.channels.history(app: app.app, channel: name, after: after, limit: limit)
                return .object([
                    "events": .array(history.events.map { event in
                        .object(["channel": .string(event.channel), "event": .string(event.name),
                                 "data": (try? JSONValue.decode(event.dataJSON)) ?? .null,
                                 "position": .number(Double(event.position ?? 0)), "seq": .number(Double(event.seq ?? 0)),
                                 "created_at": .number(Double(event.createdAt))])
                    }),
                    "has_more": .bool(history.hasMore),
                    "oldest_position": .number(Double(history.oldestKept)),
                ])
            }
        }
        let terminate: Router.Handler = { [self] request in
            await answer {
                let (app, _) = try await signed(request)
                let user = request.parameters["userId"]?.removingPercentEncoding ?? ""
                guard (1...128).contains(user.utf8.count) else { throw ChatError.invalid("a user id is 1–128 bytes") }
                // Through the bus: the user's sockets may be on any node.
                context.chat.channels.terminate(app: app.app, userID: user)
                return .object([:])
            }
        }
        router.post("/apps/:appId/users/:userId/terminate_connections", handler: terminate)
        // The `pusher` Python library (3.3.4) posts here without the app's path; the signed
        // auth_key names the app.
        router.post("/users/:userId/terminate_connections", handler: terminate)
    }

    private func channelParameter(_ request: Request) throws -> String {
        let name = request.parameters["channel"]?.removingPercentEncoding ?? ""
        if let problem = PusherProtocol.channelNameProblem(name) { throw ChatError.invalid(problem) }
        return name
    }

    /// The channel attributes `info` may ask for.
    private static let infoAttributes: Set<String> = ["user_count", "subscription_count"]

    private static func attributes(_ info: String?, allowed: Set<String>) throws -> Set<String> {
        guard let info, !info.isEmpty else { return [] }
        let names = Set(info.split(separator: ",").map(String.init))
        if let unknown = names.subtracting(allowed).first {
            throw ChatError.invalid("info '\(unknown.prefix(40))' is not one of \(allowed.sorted().joined(separator: ", "))")
        }
        return names
    }

    private static func describe(_ occupancy: PusherHub.Occupancy, _ attributes: Set<String>) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        if attributes.contains("subscription_count") { fields["subscription_count"] = .number(Double(occupancy.subscriptionCount)) }
        if attributes.contains("user_count") { fields["user_count"] = .number(Double(occupancy.userCount)) }
        return fields
    }

    private func channelInfo(app: Int64, channels: [String], info: String) async throws -> [String: JSONValue] {
        let attributes = try Self.attributes(info, allowed: Self.infoAttributes)
        var answer: [String: JSONValue] = [:]
        for channel in channels {
            var wanted = attributes
            if PusherProtocol.kind(of: channel) != .presence { wanted.remove("user_count") }
            answer[channel] = .object(Self.describe(await context.hub.occupancy(app: app, channel: channel), wanted))
        }
        return answer
    }

    // MARK: - Signing, decoding, answering

    /// The app a signed request is for, and its body, once the signature checks out.
    private func signed(_ request: Request) async throws -> (ChannelApp, [UInt8]) {
        let found: ChannelApp?
        if let id = request.parameters["appId"] {
            guard let pusherID = Int64(id) else { throw ChatError.appNotFound }
            found = try await context.chat.channels.app(pusherID: pusherID)
        } else {
            // The `pusher` Python library's terminate_connections path has no app id: the signed key names the app.
            guard let key = request.queryItems["auth_key"] else { throw ChatError.appNotFound }
            found = try await context.chat.channels.app(key: key)
        }
        guard let app = found else { throw ChatError.appNotFound }
        guard let secret = app.secret else {
            throw ChatError.badRequestSignature("this app's secret predates signing: run 'parley-server apps rotate-secret <app>' and use the new secret")
        }
        let body = try await request.body.collect(upTo: 256 * 1024)
        do {
            try PusherSignature.verifyRequest(method: request.method.rawValue, path: String(request.path), query: request.head.query, body: body,
                                              key: app.key, secret: secret, now: Int64(Date().timeIntervalSince1970))
        } catch {
            throw ChatError.badRequestSignature(error.description)
        }
        let rate = context.configuration.apiRequestsPerSecond
        if let wait = requestRate.take(String(app.app.id)) { throw ChatError.rateLimited(retryAfter: wait, "more than \(rate) Pusher API requests per second for this app") }
        return (app, body)
    }

    private func answer(_ work: () async throws -> JSONValue) async -> Response {
        do {
            let value = try await work()
            return Response(status: .ok, headers: HTTPHeaders([("Content-Type", "application/json")]), body: Array(try value.encoded().utf8))
        } catch let error as ChatError {
            var response = Response.error(status: HTTPStatus(code: error.status), code: error.code, message: error.message)
            if let seconds = error.retryAfterSeconds { response.headers.add(name: "Retry-After", value: String(seconds)) }
            return response
        } catch let error as HTTPError {
            return error.response
        } catch {
            return Response.error(status: .internalServerError, code: ChatError.internalError.code, message: ChatError.internalError.message)
        }
    }
}
