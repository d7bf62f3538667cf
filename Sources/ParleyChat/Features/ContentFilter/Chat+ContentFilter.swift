import Foundation
import ParleyCrypto
import ParleyLog
import ParleyStore
import ParleySync
package import ParleyWire

// The content filter (docs/trust-and-safety.md): what App Store guideline 1.2 calls "a
// method for filtering objectionable material from being posted". Before a message or an
// edit is written, the app's blocklists refuse or mask it, then the app's before-send hook
// (its own backend) accepts, refuses or replaces it. A refused message writes nothing: no
// row, no event, no push, no webhook.

/// Posts a before-send question to an app's hook and returns its answer; the server gives
/// one that goes through the outbound address rules (ParleyWebhooks' `BeforeSendClient`).
package protocol BeforeSendTransport: Sendable {
    /// Posts `body`, signed with `secret` as webhooks are, to `url`; the answer's status and
    /// body, or a thrown error when there is none within `timeout`.
    func post(url: String, secret: String, body: [UInt8], timeout: Duration) async throws -> (status: Int, body: [UInt8])
}

/// The content filter's settings: the app's blocklists and before-send hook (the server API
/// sets them).
package struct ContentFilters: ChatFeature {
    package let core: Chat
}

extension Chat {
    /// The content filter's settings: the app's blocklists and before-send hook.
    package var contentFilters: ContentFilters { ContentFilters(core: self) }
}

/// One app's filter as the send path consults it.
struct ContentSettings: Sendable {
    var filter: CompiledFilter
    var hook: HookSettings?
    var readAt: ContinuousClock.Instant
    /// Changed on this node since it was read: read again before the next send; a caller
    /// that cannot wait (a Pusher client event) keeps using it meanwhile.
    var changed = false

    var isEmpty: Bool { filter.isEmpty && hook == nil }
}

/// An app's before-send hook, its secret opened.
struct HookSettings: Sendable {
    var url: String
    var secret: String
    var timeout: Duration
    var onFailure: HookFailurePolicy
    var serverAPI: Bool
}

extension ContentFilters {
    /// Blocklists an app may have.
    package static let listsPerApp = 10
    /// Words and phrases per list.
    package static let wordsPerList = 1_000
    /// Regular expressions per list.
    package static let regexesPerList = 50
    /// Before-send requests one app may have waiting at once; more are treated as the hook failing.
    package static let hookRequestsPerApp = 64
    /// How long a node keeps an app's settings before reading them again (the node that set
    /// them drops its copy at once).
    static let settingsLifetime: Duration = .seconds(2)

    // MARK: - Blocklists

    /// Sets (creates or replaces) the blocklist `name`.
    ///
    /// - Throws: 400 naming the entry that is not accepted (a regular expression that could
    ///   match an empty text, or uses back-references or look-around, a word over 64 bytes…);
    ///   409 `conflict` past ``listsPerApp``.
    package func setBlocklist(_ server: ServerApp, name: String, _ request: SetBlocklistRequest) async throws -> Blocklist {
        try Self.validateName(name)
        let words = try Self.validateWords(request.words ?? [])
        let regexes = try Self.validateRegexes(request.regexes ?? [])
        if let reason = request.reason { try Self.validateReason(reason) }
        guard !words.isEmpty || !regexes.isEmpty else { throw ChatError.invalid("a blocklist needs at least one word or regex") }
        let now = nowMilliseconds
        let app = server.app.id
        let wordsJSON = String(decoding: try JSONEncoder().encode(words), as: UTF8.self)
        let regexesJSON = String(decoding: try JSONEncoder().encode(regexes), as: UTF8.self)
        let list: Blocklist = try await run {
            try await store.write { db in
                let exists = try db.fetchOne("SELECT 1 FROM blocklist WHERE app_id = \(app) AND name = \(name)") != nil
                if !exists {
                    let count = try db.fetchValue(Int.self, "SELECT count(*) FROM blocklist WHERE app_id = \(app)") ?? 0
                    guard count < Self.listsPerApp else {
                        throw ChatError.conflict("an app may have at most \(Self.listsPerApp) blocklists; add to one or delete one")
                    }
                    try db.execute("""
                        INSERT INTO blocklist (app_id, name, mode, reason, words, regexes, updated_at)
                        VALUES (\(app), \(name), \(request.mode.rawValue), \(request.reason), \(wordsJSON), \(regexesJSON), \(now))
                        """)
                } else {
                    try db.execute("""
                        UPDATE blocklist SET mode = \(request.mode.rawValue), reason = \(request.reason), words = \(wordsJSON),
                                             regexes = \(regexesJSON), updated_at = \(now)
                        WHERE app_id = \(app) AND name = \(name)
                        """)
                }
                return try Self.blocklist(db, app: app, name: name)
            }
        }
        core.contentSettingsChanged(app: app)
        return list
    }

    /// The app's blocklists, by name.
    package func blocklists(_ server: ServerApp) async throws -> BlocklistList {
        try await run {
            try await store.read { db in
                let names: [String] = try db.fetchAll("SELECT name FROM blocklist WHERE app_id = \(server.app.id) ORDER BY name").map { try $0.get("name") }
                return BlocklistList(blocklists: try names.map { try Self.blocklist(db, app: server.app.id, name: $0) })
            }
        }
    }

    /// One blocklist.
    ///
    /// - Throws: 404 `blocklist_not_found`.
    package func blocklist(_ server: ServerApp, name: String) async throws -> Blocklist {
        try await run { try await store.read { db in try Self.blocklist(db, app: server.app.id, name: name) } }
    }

    /// Deletes a blocklist.
    ///
    /// - Throws: 404 `blocklist_not_found`.
    package func deleteBlocklist(_ server: ServerApp, name: String) async throws {
        let app = server.app.id
        try await run {
            try await store.write { db in
                guard try db.execute("DELETE FROM blocklist WHERE app_id = \(app) AND name = \(name)") > 0 else { throw Self.noBlocklist }
            }
        }
        core.contentSettingsChanged(app: app)
    }

    // MARK: - The before-send hook

    /// Sets the app's before-send hook; the answer carries its signing secret, this once.
    ///
    /// - Throws: 400 for a URL that is not http(s), or names a private address the operator
    ///   did not allow, or a timeout outside 100–2000 ms; 503 when this server cannot call hooks.
    package func setHook(_ server: ServerApp, _ request: SetBeforeSendHookRequest) async throws -> BeforeSendHook {
        guard configuration.beforeSendTransport != nil else {
            throw ChatError.forbidden("this server has no outbound client for before-send hooks")
        }
        let url = try Validate.webhookURL(request.url, allowPrivate: configuration.webhooksAllowPrivate)
        let timeout = request.timeoutMilliseconds ?? 1500
        guard (100...2000).contains(timeout) else { throw ChatError.invalid("timeoutMilliseconds must be 100–2000") }
        let secret = "whsec_" + Crypto.randomToken()
        let sealed = seal(secret)
        let now = nowMilliseconds
        let app = server.app.id
        let onFailure = request.onFailure ?? .accept
        let serverAPI = request.serverAPI ?? false
        var hook: BeforeSendHook = try await run {
            try await store.write { db in
                try db.execute("DELETE FROM before_send_hook WHERE app_id = \(app)")
                try db.execute("""
                    INSERT INTO before_send_hook (app_id, url, secret, timeout_ms, on_failure, server_api, updated_at)
                    VALUES (\(app), \(url), \(sealed), \(timeout), \(onFailure.rawValue), \(serverAPI ? 1 : 0), \(now))
                    """)
                return try Self.hook(db, app: app)
            }
        }
        core.contentSettingsChanged(app: app)
        hook.secret = secret
        return hook
    }

    /// The app's before-send hook, without its secret.
    ///
    /// - Throws: 404 `hook_not_found` when none is set.
    package func hook(_ server: ServerApp) async throws -> BeforeSendHook {
        try await run { try await store.read { db in try Self.hook(db, app: server.app.id) } }
    }

    /// Removes the app's before-send hook.
    ///
    /// - Throws: 404 `hook_not_found` when none is set.
    package func deleteHook(_ server: ServerApp) async throws {
        let app = server.app.id
        try await run {
            try await store.write { db in
                guard try db.execute("DELETE FROM before_send_hook WHERE app_id = \(app)") > 0 else { throw Self.noHook }
            }
        }
        core.contentSettingsChanged(app: app)
    }

    // MARK: - For the Pusher protocol's client events

    /// This node's blocklists for `app` as last read, for a caller that cannot wait (a Pusher
    /// client event is relayed in order, on its socket's loop): read again in the background
    /// once older than the settings' lifetime or changed, as every send would; nil until the
    /// first read finished (``load(app:)``, which a Pusher connection awaits before it
    /// tells the client its socket id).
    package func currentFilter(app: Int64) -> CompiledFilter? {
        let known = core.contentSettings.withLock { $0[app] }
        if known.map({ $0.changed || ContinuousClock.now - $0.readAt >= Self.settingsLifetime }) ?? true { warm(app: app) }
        return known?.filter
    }

    /// Whether this node's copy of `app`'s blocklists is read and not changed since.
    package func isLoaded(app: Int64) -> Bool {
        core.contentSettings.withLock { $0[app].map { !$0.changed } ?? false }
    }

    /// Reads `app`'s blocklists into this node's copy unless it has them unchanged, and waits for it.
    ///
    /// - Returns: false when storage could not be read (client events are then refused until it can).
    package func load(app: Int64) async -> Bool {
        if isLoaded(app: app) { return true }
        return (try? await core.contentSettings(app: app)) != nil
    }

    /// Reads `app`'s settings into this node's copy in the background (once at a time).
    package func warm(app: Int64) {
        guard core.contentRefreshes.withLock({ $0.insert(app).inserted }) else { return }
        let core = core
        Task {
            defer { core.contentRefreshes.withLock { _ = $0.remove(app) } }
            _ = try? await core.contentSettings(app: app)
        }
    }

    // MARK: - Rows and rules

    static let noBlocklist = ChatError.blocklistNotFound
    static let noHook = ChatError.hookNotFound

    static func blocklist(_ db: any Database, app: Int64, name: String) throws -> Blocklist {
        guard let row = try db.fetchOne("""
            SELECT name, mode, reason, words, regexes, updated_at FROM blocklist WHERE app_id = \(app) AND name = \(name)
            """) else { throw noBlocklist }
        let decoder = JSONDecoder()
        return Blocklist(name: try row.get("name"), words: try decoder.decode([String].self, from: Data(try row.get("words", as: String.self).utf8)),
                         regexes: try decoder.decode([String].self, from: Data(try row.get("regexes", as: String.self).utf8)),
                         mode: BlocklistMode(rawValue: try row.get("mode")) ?? .reject, reason: try row.get("reason", as: String?.self),
                         updatedAt: Chat.date(try row.get("updated_at")))
    }

    static func hook(_ db: any Database, app: Int64) throws -> BeforeSendHook {
        guard let row = try db.fetchOne("""
            SELECT url, timeout_ms, on_failure, server_api, updated_at FROM before_send_hook WHERE app_id = \(app)
            """) else { throw noHook }
        return BeforeSendHook(url: try row.get("url"), timeoutMilliseconds: Int(try row.get("timeout_ms", as: Int64.self)),
                              onFailure: HookFailurePolicy(rawValue: try row.get("on_failure")) ?? .accept,
                              serverAPI: try row.get("server_api", as: Int64.self) != 0, secret: nil, updatedAt: Chat.date(try row.get("updated_at")))
    }

    static func validateName(_ name: String) throws {
        guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }) else {
            throw ChatError.invalid("a blocklist's name is 1–64 letters, digits, '-' or '_'")
        }
    }

    static func validateWords(_ words: [String]) throws -> [String] {
        guard words.count <= wordsPerList else { throw ChatError.invalid("a blocklist holds at most \(wordsPerList) words") }
        var seen = Set<String>()
        var kept: [String] = []
        for (index, word) in words.enumerated() {
            guard (1...64).contains(word.utf8.count) else { throw ChatError.invalid("words[\(index)] must be 1–64 bytes") }
            guard !CompiledFilter.words(of: FoldedText(word)).isEmpty else {
                throw ChatError.invalid("words[\(index)] has no letters or digits to match")
            }
            if seen.insert(word.lowercased()).inserted { kept.append(word) }
        }
        return kept
    }

    static func validateRegexes(_ regexes: [String]) throws -> [String] {
        guard regexes.count <= regexesPerList else { throw ChatError.invalid("a blocklist holds at most \(regexesPerList) regexes") }
        for (index, pattern) in regexes.enumerated() {
            do {
                let regex = try SafeRegex(pattern)
                guard !regex.matchesEmpty else {
                    throw SafeRegexError(description: "it can match an empty text, so it would match every message")
                }
            } catch let error as SafeRegexError {
                throw ChatError.invalid("regexes[\(index)] is not accepted: \(error.description)")
            }
        }
        return regexes
    }

    static func validateReason(_ reason: String) throws {
        guard (1...256).contains(reason.utf8.count) else { throw ChatError.invalid("reason must be 1–256 bytes") }
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}

extension Chat {
    /// What a message may be written as, after the app's content filter; see the file's comment.
    ///
    /// - Parameters:
    ///   - conversation: where it goes (nil for a send to usernames, which names `to`).
    ///   - clientID: a send's client id; `messageID`: an edited message's id.
    /// - Throws: 422 `content_rejected` with the reason the sender is shown.
    func screen(_ caller: Caller, conversation: ConversationID?, clientID: String?, messageID: MessageID?,
                content: MessageContent) async throws -> MessageContent {
        if case .system = content { return content }
        let settings = try await contentSettings(app: caller.appID)
        guard !settings.isEmpty else { return content }
        let filtered = try settings.filter.apply(to: content)
        // The app's backend asks its own hook only when it chose to (`serverAPI`).
        guard let hook = settings.hook, caller.sessionKey != 0 || hook.serverAPI, let transport = configuration.beforeSendTransport else {
            return filtered
        }
        return try await ask(hook, transport: transport, caller: caller, question: BeforeSendQuestion(
            type: messageID == nil ? "message.send" : "message.edit", conversationID: conversation ?? ConversationID(rawValue: ""),
            user: try await sender(caller), clientID: clientID, messageID: messageID, content: filtered))
    }

    /// The app's settings, from this node's copy while it is fresh.
    /// Marks `app`'s settings changed on this node: the next send reads them again.
    func contentSettingsChanged(app: Int64) {
        contentSettings.withLock { $0[app]?.changed = true }
        contentChanges.withLock { $0[app, default: 0] += 1 }
    }

    func contentSettings(app: Int64) async throws -> ContentSettings {
        let now = ContinuousClock.now
        if let known = contentSettings.withLock({ $0[app] }), !known.changed, now - known.readAt < ContentFilters.settingsLifetime { return known }
        let changesBefore = contentChanges.withLock { $0[app] }
        let sealer = configuration.sealer
        let (lists, hook): ([Blocklist], HookSettings?) = try await run {
            try await store.read { db in
                let names: [String] = try db.fetchAll("SELECT name FROM blocklist WHERE app_id = \(app) ORDER BY name").map { try $0.get("name") }
                let lists = try names.map { try ContentFilters.blocklist(db, app: app, name: $0) }
                let hook = try db.fetchOne("SELECT url, secret, timeout_ms, on_failure, server_api FROM before_send_hook WHERE app_id = \(app)").map { row in
                    HookSettings(url: try row.get("url"), secret: try Chat.unseal(try row.get("secret"), with: sealer),
                                 timeout: .milliseconds(try row.get("timeout_ms", as: Int64.self)),
                                 onFailure: HookFailurePolicy(rawValue: try row.get("on_failure")) ?? .accept,
                                 serverAPI: try row.get("server_api", as: Int64.self) != 0)
                }
                return (lists, hook)
            }
        }
        var settings = ContentSettings(filter: try CompiledFilter(lists), hook: hook, readAt: now)
        // Changed while this read was under way: what was read may be older than the change.
        settings.changed = contentChanges.withLock { $0[app] } != changesBefore
        contentSettings.withLock { $0[app] = settings }
        return settings
    }

    /// The sender as the hook is told: from this node's copy when it is under a minute old
    /// (a renamed user shows the new name to the hook within a minute).
    private func sender(_ caller: Caller) async throws -> Sender {
        let now = ContinuousClock.now
        if let known = hookSenders.withLock({ $0[caller.userKey] }), now - known.readAt < .seconds(60) { return known.sender }
        let sender = try await readSender(caller)
        hookSenders.withLock { senders in
            if senders.count >= 10_000 { senders.removeAll(keepingCapacity: true) }
            senders[caller.userKey] = (sender, now)
        }
        return sender
    }

    private func readSender(_ caller: Caller) async throws -> Sender {
        try await run {
            try await store.read { db in
                guard let row = try db.fetchOne("SELECT public_id, username, display_name FROM account WHERE id = \(caller.userKey)") else {
                    throw ChatError.userNotFound
                }
                return Sender(id: UserID(rawValue: try row.get("public_id")), username: try row.get("username"), displayName: try row.get("display_name"))
            }
        }
    }

    /// Asks the hook; a failure (no answer in time, a status other than 200, an answer that is
    /// not one of the three) takes the app's `onFailure`.
    private func ask(_ hook: HookSettings, transport: any BeforeSendTransport, caller: Caller, question: BeforeSendQuestion) async throws -> MessageContent {
        let app = caller.appID
        let admitted = hookRequests.withLock { counts -> Bool in
            guard counts[app, default: 0] < ContentFilters.hookRequestsPerApp else { return false }
            counts[app, default: 0] += 1
            return true
        }
        let log = configuration.logger
        func failed(_ why: String) throws -> MessageContent {
            log.warning("before-send hook failed", metadata: ["app.id": .integer(app), "error": .string(why),
                                                             "policy": .string(hook.onFailure.rawValue)])
            guard hook.onFailure == .accept else {
                throw ChatError.contentRejected("the app could not check this message just now; try again")
            }
            return question.content
        }
        guard admitted else { return try failed("\(ContentFilters.hookRequestsPerApp) requests already waiting") }
        let requests = hookRequests
        // The count drops when the request itself ends, not when the send stops waiting for
        // it: a hook that hangs holds at most hookRequestsPerApp requests open, however fast
        // its app sends.
        let release: @Sendable () -> Void = { requests.withLock { $0[app, default: 1] -= 1 } }
        let body: [UInt8]
        do {
            body = Array(try WireCoding.encoder().encode(question))
        } catch {
            release()
            throw error
        }
        let answer: (status: Int, body: [UInt8])
        do {
            answer = try await Self.withinBudget(hook.timeout) {
                defer { release() }
                return try await transport.post(url: hook.url, secret: hook.secret, body: body, timeout: hook.timeout)
            }
        } catch is OutboundTimeout {
            return try failed("no answer within \(hook.timeout)")
        } catch {
            return try failed(String(describing: error))
        }
        guard answer.status == 200 else { return try failed("HTTP \(answer.status)") }
        guard let decision = try? WireCoding.decoder().decode(BeforeSendAnswer.self, from: Data(answer.body)) else {
            return try failed("the answer is not {\"action\": \"accept\" | \"reject\" | \"replace\"}")
        }
        switch decision.action {
        case .accept:
            return question.content
        case .reject:
            let reason = decision.reason.flatMap { (1...256).contains($0.utf8.count) ? $0 : nil } ?? "the app did not accept this message"
            throw ChatError.contentRejected(reason)
        case .replace:
            guard let content = decision.content, (try? Validate.content(content)) != nil else {
                return try failed("a replace answer without valid content")
            }
            if case .system = content { return try failed("a replace answer may not make a system message") }
            return content
        }
    }
}

extension Chat {
    /// `work`'s result, or ``OutboundTimeout`` once `budget` has passed: the caller stops
    /// waiting at once, while the request itself ends by its own timeout in the background.
    static func withinBudget<T: Sendable>(_ budget: Duration, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let waiting = LockedValue<CheckedContinuation<T, any Error>?>(continuation)
            let timer = Task {
                // Cancelled when the work answered first: then it is the work's to resume.
                guard (try? await Task.sleep(for: budget)) != nil else { return }
                waiting.withLock { $0.take() }?.resume(throwing: OutboundTimeout())
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                waiting.withLock { $0.take() }?.resume(with: result)
                timer.cancel()
            }
        }
    }
}

struct OutboundTimeout: Error {}
