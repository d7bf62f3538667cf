import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ParleyWire

/// `parley-server admin …` (docs/admin.md): what an operator does by hand, through the running
/// server's server API with the app secret, so every change takes effect at once on every
/// node (a deactivated user's sockets close, a replayed delivery goes out).
package struct AdminCommand: Equatable, Sendable {
    /// The verb and its arguments (`users alice`, `replay wh_… whd_…`).
    package var words: [String]
    /// The server's base URL. `--url`, `PARLEY_URL`. Default: http://127.0.0.1:8080.
    package var url = "http://127.0.0.1:8080"
    /// The app secret. `--secret`, `PARLEY_APP_SECRET`.
    package var secret: String?
    /// Print the server's JSON instead of tables. `--json`.
    package var json = false
    /// Confirms an action that cannot be undone (`delete-user`). `--yes`.
    package var yes = false
    /// `delete-user`: erase the user's messages too. `--erase`.
    package var erase = false

    /// The `admin help` text.
    package static let helpText = """
        USAGE: parley-server admin <command> [--url <url>] [--secret <sk_…>] [--json]

        Talks to a running server's server API (/v1/server) with the app's secret, so a change
        takes effect at once on every node. The secret comes from --secret or PARLEY_APP_SECRET;
        the server from --url or PARLEY_URL (default http://127.0.0.1:8080).

        COMMANDS:
          users [<query>]                  List users (whose username or name starts with <query>)
          user <username>                  Show a user: id, name, state, sessions
          reset-password <username>        Set a new password (from PARLEY_PASSWORD or standard input); signs them out
          deactivate <username>            Sign them out everywhere and refuse new sessions
          reactivate <username>            Let them sign in again
          sign-out <username>              End every session of theirs (the account stays active)
          delete-user <username> --yes [--erase]
                                           Delete the account for good (a deletion asked for by e-mail);
                                           --erase turns every message they sent into a tombstone
          conversation <id>                Show a conversation and its members
          trace <message-id>               Where a message went: each recipient's devices, live, on
                                           resume or by push (with the provider's answers), or why
                                           no push was sent; and the webhook attempts
          webhooks                         List webhook endpoints with their state
          failed <webhook-id>              List an endpoint's failed deliveries
          replay <webhook-id> [<delivery>] Queue failed deliveries again (all, or one)
          reports [resolved]               List open reports across every conversation, oldest first (or resolved ones)
          blocklists                       List the app's blocklists
          blocklist <name>                 Show one: its mode, words and regexes
          blocklist-set <name> reject|mask <file>
                                           Set a blocklist from a file ('-': standard input): one word or
                                           phrase per line, /…/ for a regular expression, 'reason: …' for
                                           what a refused sender is told, '#' for a comment
          blocklist-delete <name>          Delete a blocklist

        --json prints the server's answer as JSON, for scripts. Exit codes: 0 done, 1 the server
        refused (the message says why), 3 the server cannot be reached, 64 a usage mistake.
        """

    /// Parses `admin`'s arguments (after the word `admin`).
    ///
    /// - Throws: ``ServerConfiguration/UsageError``.
    package static func parse(_ arguments: [String], environment: [String: String]) throws(ServerConfiguration.UsageError) -> AdminCommand {
        var command = AdminCommand(words: [])
        if let url = environment["PARLEY_URL"] { command.url = url }
        command.secret = environment["PARLEY_APP_SECRET"]
        var rest = arguments[...]
        while let word = rest.popFirst() {
            switch word {
            case "--json": command.json = true
            case "--yes": command.yes = true
            case "--erase": command.erase = true
            case "--url", "--secret":
                guard let value = rest.popFirst() else { throw ServerConfiguration.UsageError(message: "\(word) needs a value") }
                if word == "--url" { command.url = value } else { command.secret = value }
            case "-h", "--help": command.words = ["help"]
            case let option where option.hasPrefix("--"):
                throw ServerConfiguration.UsageError(message: "unknown admin option '\(option)'; see 'parley-server admin help'")
            default: command.words.append(word)
            }
        }
        guard let verb = command.words.first else { throw ServerConfiguration.UsageError(message: "name an admin command; see 'parley-server admin help'") }
        let counts: [String: ClosedRange<Int>] = [
            "help": 0...0, "users": 0...1, "user": 1...1, "reset-password": 1...1, "deactivate": 1...1, "reactivate": 1...1,
            "sign-out": 1...1, "delete-user": 1...1, "conversation": 1...1, "trace": 1...1, "webhooks": 0...0, "failed": 1...1, "replay": 1...2,
            "reports": 0...1, "blocklists": 0...0, "blocklist": 1...1, "blocklist-set": 3...3, "blocklist-delete": 1...1,
        ]
        guard let range = counts[verb] else {
            throw ServerConfiguration.UsageError(message: "unknown admin command '\(verb)'; see 'parley-server admin help'")
        }
        guard range.contains(command.words.count - 1) else {
            throw ServerConfiguration.UsageError(message: "wrong arguments for 'admin \(verb)'; see 'parley-server admin help'")
        }
        if verb == "delete-user", !command.yes {
            throw ServerConfiguration.UsageError(message: "deleting a user cannot be undone: add --yes to confirm (and --erase to erase their messages)")
        }
        if verb == "blocklist-set", BlocklistMode(rawValue: command.words[2]) == nil {
            throw ServerConfiguration.UsageError(message: "a blocklist's mode is 'reject' or 'mask', not '\(command.words[2])'")
        }
        guard verb == "help" || command.secret != nil else {
            throw ServerConfiguration.UsageError(message: "give the app secret with --secret or PARLEY_APP_SECRET (shown when the app was created; 'parley-server apps rotate-secret' makes a new one)")
        }
        guard command.url.hasPrefix("http://") || command.url.hasPrefix("https://") else {
            throw ServerConfiguration.UsageError(message: "--url must be the server's http:// or https:// address")
        }
        return command
    }
}

/// What went wrong talking to the server.
package struct AdminError: Error, CustomStringConvertible, Sendable {
    /// 1: the server refused; 3: it cannot be reached.
    package var exitCode: Int32
    /// The message for the operator.
    package var description: String
}

/// Runs admin commands against the server API.
package enum Admin: Sendable {
    /// Runs `command`; the text to print.
    ///
    /// - Throws: ``AdminError``.
    package static func run(_ command: AdminCommand, password: @Sendable () -> String? = { nil }) async throws -> String {
        let client = AdminClient(base: command.url.hasSuffix("/") ? String(command.url.dropLast()) : command.url, secret: command.secret ?? "")
        let words = command.words
        func segment(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text }
        func show(_ data: Data, _ table: (Data) throws -> String) throws -> String {
            command.json ? String(decoding: data, as: UTF8.self) : try table(data)
        }
        switch words[0] {
        case "help":
            return AdminCommand.helpText
        case "users":
            let query = words.count > 1 ? "?limit=100&query=" + segment(words[1]) : "?limit=100"
            return try show(try await client.call("GET", "/v1/server/users" + query)) { data in
                let list = try WireCoding.decoder().decode(ServerUserList.self, from: data)
                let rows = list.users.map(describe)
                return (rows.isEmpty ? ["No users match."] : rows + (list.hasMore ? ["… more: narrow the query"] : [])).joined(separator: "\n")
            }
        case "user", "deactivate", "reactivate", "reset-password":
            let path = "/v1/server/users/" + segment(words[1])
            let data: Data
            switch words[0] {
            case "deactivate": data = try await client.call("POST", path + "/deactivate")
            case "reactivate": data = try await client.call("POST", path + "/reactivate")
            case "reset-password":
                guard let secret = password() else {
                    throw AdminError(exitCode: 1, description: "no password: set PARLEY_PASSWORD or write it on standard input")
                }
                data = try await client.call("POST", path + "/password", body: try JSONEncoder().encode(SetPasswordRequest(password: secret)))
            default: data = try await client.call("GET", path)
            }
            return try show(data) { data in describe(try WireCoding.decoder().decode(ServerUser.self, from: data)) }
        case "delete-user":
            _ = try await client.call("DELETE", "/v1/server/users/" + segment(words[1]) + (command.erase ? "?erase=true" : ""))
            return command.json ? "{}" : "Deleted \(words[1])" + (command.erase ? " and erased every message they sent." : "; their messages stay, from \"Deleted user\".")
        case "sign-out":
            _ = try await client.call("DELETE", "/v1/server/users/" + segment(words[1]) + "/sessions")
            return command.json ? "{}" : "Signed \(words[1]) out everywhere."
        case "conversation":
            let path = "/v1/server/conversations/" + segment(words[1])
            let conversation = try await client.call("GET", path)
            let members = try await client.call("GET", path + "/members?limit=100")
            if command.json { return "{\"conversation\":\(String(decoding: conversation, as: UTF8.self)),\"members\":\(String(decoding: members, as: UTF8.self))}" }
            let found = try WireCoding.decoder().decode(Conversation.self, from: conversation)
            let list = try WireCoding.decoder().decode(MemberList.self, from: members)
            return (["\(found.id.rawValue)  \(found.kind.rawValue)  \(found.title ?? "(no title)")  \(found.memberCount) members  last seq \(found.lastSeq)"]
                    + list.members.map { "  \($0.role.rawValue)\t\($0.user.username)\t\($0.user.displayName)" }).joined(separator: "\n")
        case "trace":
            return try show(try await client.call("GET", "/v1/server/messages/" + segment(words[1]) + "/trace")) { data in
                describe(try WireCoding.decoder().decode(MessageTrace.self, from: data))
            }
        case "webhooks":
            return try show(try await client.call("GET", "/v1/server/webhooks")) { data in
                let list = try WireCoding.decoder().decode(WebhookEndpointList.self, from: data)
                guard !list.webhooks.isEmpty else { return "No webhook endpoints." }
                return list.webhooks.map { hook in
                    let state = hook.pausedAt != nil ? "PAUSED (\(hook.pausedReason ?? ""))" : hook.failingSince != nil ? "failing: \(hook.lastError ?? "")" : "ok"
                    return "\(hook.id)\t\(hook.url)\t\(hook.format.rawValue)\t\(hook.pending) waiting, \(hook.failed) failed\t\(state)"
                }.joined(separator: "\n")
            }
        case "failed":
            return try show(try await client.call("GET", "/v1/server/webhooks/" + segment(words[1]) + "/deliveries?status=failed&limit=500")) { data in
                let list = try WireCoding.decoder().decode(WebhookDeliveryList.self, from: data)
                guard !list.deliveries.isEmpty else { return "No failed deliveries." }
                return list.deliveries.map { "\($0.id)\t\($0.type)\t\(iso($0.createdAt))\t\($0.attempts) attempts" }.joined(separator: "\n")
            }
        case "replay":
            var path = "/v1/server/webhooks/" + segment(words[1])
            path += words.count > 2 ? "/deliveries/" + segment(words[2]) + "/replay" : "/replay"
            return try show(try await client.call("POST", path)) { data in
                let result = try WireCoding.decoder().decode(ReplayResult.self, from: data)
                return "Queued \(result.replayed) failed deliveries again; a paused endpoint sends them once resumed."
            }
        case "reports":
            let resolved = words.count > 1
            if resolved, words[1] != "resolved" { throw AdminError(exitCode: 64, description: "try: parley-server admin reports [resolved]") }
            return try show(try await client.call("GET", "/v1/server/reports?limit=100&state=" + (resolved ? "resolved" : "open"))) { data in
                let list = try WireCoding.decoder().decode(ReportList.self, from: data)
                guard !list.reports.isEmpty else { return resolved ? "No resolved reports." : "No open reports." }
                let now = Date()
                return (list.reports.map { report in
                    let waited = Int(now.timeIntervalSince(report.createdAt) / 60)
                    let age = waited < 120 ? "\(waited) min" : "\(waited / 60) h"
                    return "\(report.id)\t\(report.conversationID.rawValue)\t\(report.message.id.rawValue)\t\(report.reason.rawValue)\t"
                        + "by \(report.reporter.username)\t\(iso(report.createdAt)) (\(age) ago)"
                        + (report.resolution.map { "\t\($0.rawValue)" } ?? "")
                } + (list.hasMore ? ["… more: resolve these first"] : [])).joined(separator: "\n")
            }
        case "blocklists":
            return try show(try await client.call("GET", "/v1/server/blocklists")) { data in
                let list = try WireCoding.decoder().decode(BlocklistList.self, from: data)
                guard !list.blocklists.isEmpty else { return "No blocklists: messages are not filtered by words." }
                return list.blocklists.map { "\($0.name)\t\($0.mode.rawValue)\t\($0.words.count) words, \($0.regexes.count) regexes\t\(iso($0.updatedAt))" }
                    .joined(separator: "\n")
            }
        case "blocklist", "blocklist-set":
            let path = "/v1/server/blocklists/" + segment(words[1])
            let data: Data
            if words[0] == "blocklist-set" {
                let request = try blocklistRequest(mode: BlocklistMode(rawValue: words[2]) ?? .reject, file: words[3])
                data = try await client.call("PUT", path, body: try JSONEncoder().encode(request))
            } else {
                data = try await client.call("GET", path)
            }
            return try show(data) { data in
                let list = try WireCoding.decoder().decode(Blocklist.self, from: data)
                return (["\(list.name)  \(list.mode.rawValue)  reason: \(list.reason ?? "(the default)")"] + list.words.map { "  \($0)" }
                        + list.regexes.map { "  /\($0)/" }).joined(separator: "\n")
            }
        case "blocklist-delete":
            _ = try await client.call("DELETE", "/v1/server/blocklists/" + segment(words[1]))
            return command.json ? "{}" : "Deleted the blocklist \(words[1])."
        default:
            throw AdminError(exitCode: 1, description: "unknown admin command")
        }
    }

    /// A blocklist from its file: one word or phrase per line, `/…/` a regular expression,
    /// `reason: …` the refusal's reason, `#` a comment.
    static func blocklistRequest(mode: BlocklistMode, file: String) throws -> SetBlocklistRequest {
        let data: Data?
        if file == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            data = FileManager.default.contents(atPath: file)
        }
        guard let data else { throw AdminError(exitCode: 1, description: "cannot read \(file)") }
        var request = SetBlocklistRequest(words: [], regexes: [], mode: mode)
        for raw in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.lowercased().hasPrefix("reason:") {
                request.reason = line.dropFirst("reason:".count).trimmingCharacters(in: .whitespaces)
            } else if line.count >= 2, line.hasPrefix("/"), line.hasSuffix("/") {
                request.regexes?.append(String(line.dropFirst().dropLast()))
            } else {
                request.words?.append(line)
            }
        }
        return request
    }

    static func describe(_ user: ServerUser) -> String {
        let state = user.deactivatedAt.map { "deactivated \(iso($0))" } ?? "active"
        return "\(user.user.username)\t\(user.user.displayName)\t\(user.user.id.rawValue)\t\(state)\t\(user.sessionCount) sessions"
    }

    /// A trace as lines: the message, then each recipient's outcome and steps, then webhooks.
    static func describe(_ trace: MessageTrace) -> String {
        func time(_ date: Date) -> String {
            let milliseconds = Int((date.timeIntervalSince(trace.createdAt) * 1000).rounded())
            return milliseconds >= 0 ? "+\(milliseconds) ms" : "\(milliseconds) ms"
        }
        func line(_ step: TraceStep) -> String {
            var parts = [time(step.at), step.step, "on \(step.node)"]
            if let session = step.session { parts.append("session \(session)") }
            if let device = step.device { parts.append("device \(device)") }
            if let platform = step.platform { parts.append(platform) }
            if let endpoint = step.endpoint { parts.append(endpoint) }
            if let event = step.event { parts.append(event) }
            if let outcome = step.outcome { parts.append(outcome) }
            if let status = step.status { parts.append("HTTP \(status)") }
            if let reason = step.reason, !reason.isEmpty { parts.append("(\(reason))") }
            if let id = step.providerId { parts.append("id \(id)") }
            if step.idOnly == true { parts.append("id-only: no text") }
            if let seq = step.deliveredSeq { parts.append("delivered through \(seq)") }
            if let seq = step.readSeq { parts.append("read through \(seq)") }
            return "    " + parts.joined(separator: "  ")
        }
        var lines = ["\(trace.messageId.rawValue) in \(trace.conversationId.rawValue), seq \(trace.seq), position \(trace.position), by \(trace.authorId.rawValue)",
                     "  stored \(iso(trace.createdAt))" + (trace.committedOn.map { " on \($0)" } ?? "") + "; trace kept until \(iso(trace.keptUntil))"]
        if trace.shadow { lines.append("  only its author sees it: they were shadow-banned when they sent it") }
        for recipient in trace.recipients {
            lines.append("  \(recipient.userId.rawValue): \(recipient.outcome)" + (recipient.notPushed.map { ", not pushed: \($0)" } ?? ""))
            lines += recipient.steps.map(line)
        }
        if trace.recipients.isEmpty { lines.append("  no recipient steps recorded") }
        if !trace.webhooks.isEmpty {
            lines.append("  webhooks:")
            lines += trace.webhooks.map(line)
        }
        return lines.joined(separator: "\n")
    }

    static func iso(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
}

/// Calls to the server API with the secret.
struct AdminClient: Sendable {
    let base: String
    let secret: String

    func call(_ method: String, _ path: String, body: Data? = nil) async throws -> Data {
        guard let url = URL(string: base + path) else { throw AdminError(exitCode: 64, description: "bad URL \(base + path)") }
        var request = URLRequest(url: url, timeoutInterval: 30)
        request.httpMethod = method
        request.setValue("Bearer \(secret)", forHTTPHeaderField: "Authorization")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response): (Data, URLResponse)
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            throw AdminError(exitCode: 3, description: "cannot reach the server at \(base): \(error.localizedDescription); is it running? (--url)")
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200...299).contains(status) else {
            if let answer = try? JSONDecoder().decode(ErrorBody.self, from: data) {
                throw AdminError(exitCode: 1, description: "\(status) \(answer.error.code): \(answer.error.message)")
            }
            throw AdminError(exitCode: 1, description: "the server answered \(status)")
        }
        return data
    }

    struct ErrorBody: Decodable {
        struct Inner: Decodable {
            var code: String
            var message: String
        }
        var error: Inner
    }
}
