import Foundation
import ParleyChat
import ParleyCrypto
import ParleyOutbound
import ParleyWire
import ParleySync

/// What a provider's answer means for the notice.
enum PushOutcome: Sendable, Equatable {
    /// Accepted.
    case sent
    /// The token is dead: remove the device.
    case removeDevice(String)
    /// Try again later (429, 5xx, no answer).
    case retry(String)
    /// This node could not even make the request (no file descriptor for a socket): try again
    /// in a second, not counted against the notice's attempts.
    case postpone(String)
    /// The provider refused the credentials: renew them and send again, once.
    case renewCredentials(String)
    /// Refused for good (a payload the provider will never take).
    case failed(String)
}

/// A request to a provider, ready to go.
struct ProviderRequest: Sendable {
    var url: String
    var headers: [String]
    var body: [UInt8]
}

/// Why a notice cannot be sent now, as the outcome to record (no credentials, say).
struct NotSendable: Error {
    var outcome: PushOutcome
}

/// A push provider: APNs or FCM.
protocol PushProvider: Sendable {
    /// `apns` or `fcm`, in metrics and logs.
    var name: String { get }
    /// The request that sends `notice` (fetching credentials over `http` when needed).
    ///
    /// - Throws: ``NotSendable`` with the outcome to record.
    func request(for notice: PushNotice, over http: any PushTransport) async throws(NotSendable) -> ProviderRequest
    /// What the provider's answer means.
    func outcome(of response: OutboundResponse) -> PushOutcome
    /// The provider's name for an accepted push (APNs's `apns-id`, FCM's message name), for
    /// the delivery trace.
    func providerID(of response: OutboundResponse) -> String?
    /// Forgets cached credentials made before `date` (the provider said they expired): those
    /// made since are already new, so many requests refused at once renew them once.
    func renewCredentials(madeBefore date: Date)
}

/// One attempt's result: what it means, and what the provider said (for the trace).
struct PushAttempt: Sendable, Equatable {
    var outcome: PushOutcome
    /// The provider's HTTP status; nil when no answer came.
    var status: Int? = nil
    /// The provider's id of an accepted push.
    var providerID: String? = nil
}

extension PushProvider {
    /// Sends one notice over `http`, on a stream of a shared connection.
    func send(_ notice: PushNotice, over http: any PushTransport) async -> PushAttempt {
        let request: ProviderRequest
        do {
            request = try await self.request(for: notice, over: http)
        } catch {
            return PushAttempt(outcome: error.outcome)
        }
        do {
            let response = try await http.post(request.url, headers: request.headers, body: request.body)
            let outcome = outcome(of: response)
            return PushAttempt(outcome: outcome, status: response.status, providerID: outcome == .sent ? providerID(of: response) : nil)
        } catch let error as OutboundError where error.local {
            return PushAttempt(outcome: .postpone(error.description))
        } catch {
            return PushAttempt(outcome: .retry("\(name == "apns" ? "APNs" : "FCM") did not answer: \(error)"))
        }
    }
}


/// Apple Push Notification service over HTTP/2 with token authentication: an ES256 JWT
/// (`kid` = key id, `iss` = team id, `iat`) signed with the `.p8` key, renewed every 40 minutes
/// (Apple refuses tokens older than an hour and throttles renewing more than every 20).
final class APNsProvider: PushProvider, Sendable {
    let name = "apns"
    /// Nil in test mode: the built-in fake takes any provider token (docs/test-mode.md).
    private let key: SigningKey?
    private let keyID: String
    private let teamID: String
    private let topic: String
    private let url: String?
    private let cached = LockedValue<(token: String, madeAt: Date)?>(nil)

    init(keyFile: String, keyID: String, teamID: String, topic: String, url: String?) throws {
        guard let pem = FileManager.default.contents(atPath: keyFile) else {
            throw OutboundError(description: "cannot read the APNs key \(keyFile) (--apns-key-file): download the .p8 key from developer.apple.com")
        }
        let read: SigningKey
        do {
            read = try SigningKey(pem: String(decoding: pem, as: UTF8.self))
        } catch {
            throw OutboundError(description: "the APNs key \(keyFile) is not usable: \(error)")
        }
        guard read.algorithm == .es256 else { throw OutboundError(description: "the APNs key \(keyFile) is not an EC P-256 .p8 key") }
        key = read
        self.keyID = keyID
        self.teamID = teamID
        self.topic = topic
        self.url = url
    }

    /// Test mode's APNs: the same requests, to the built-in fake, with no key.
    init(testTopic topic: String) {
        key = nil
        keyID = "TESTMODE00"
        teamID = "TESTMODE00"
        self.topic = topic
        url = TestPushes.apnsURL
    }

    /// The provider token, made again when 40 minutes old.
    func providerToken() throws -> String {
        guard let key else { return "test-mode" }
        return try cached.withLock { cached in
            if let cached, Date().timeIntervalSince(cached.madeAt) < 40 * 60 { return cached.token }
            let now = Date()
            let token = try key.jwt(headerFields: "\"kid\":\(jsonString(keyID))",
                                    claims: "{\"iss\":\(jsonString(teamID)),\"iat\":\(Int(now.timeIntervalSince1970))}")
            cached = (token, now)
            return token
        }
    }

    func renewCredentials(madeBefore date: Date) {
        cached.withLock { cached in if let made = cached?.madeAt, made < date { cached = nil } }
    }

    /// Parley's own keys: which message, so the app's extension can fetch it.
    static func parleyKeys(_ notice: PushNotice, _ json: inout JSONWriter) {
        json.object { keys in
            keys.key("conversationId"); keys.string(notice.conversationID)
            keys.key("messageId"); keys.string(notice.messageID)
            keys.key("seq"); keys.integer(notice.seq)
            keys.key("position"); keys.integer(notice.position)
        }
    }

    func request(for notice: PushNotice, over http: any PushTransport) async throws(NotSendable) -> ProviderRequest {
        let token: String
        do { token = try providerToken() } catch { throw NotSendable(outcome: .failed("cannot sign the APNs token: \(error)")) }
        let base = url ?? (notice.environment == .sandbox ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com")
        var payload = JSONWriter(capacity: 512)
        payload.object { json in
            json.key("aps")
            json.object { aps in
                aps.key("alert")
                aps.object { alert in
                    if !notice.title.isEmpty { alert.key("title"); alert.string(notice.title) }
                    if let subtitle = notice.subtitle { alert.key("subtitle"); alert.string(subtitle) }
                    alert.key("body"); alert.string(notice.body ?? "New message")
                }
                aps.key("badge"); aps.integer(Int64(notice.badge))
                aps.key("sound"); aps.string("default")
                aps.key("thread-id"); aps.string(notice.conversationID)
                aps.key("mutable-content"); aps.integer(1)
            }
            json.key("parley")
            Self.parleyKeys(notice, &json)
        }
        let headers = [
            "authorization: bearer \(token)", "apns-topic: \(topic)", "apns-push-type: alert", "apns-priority: 10",
            "apns-expiration: \(notice.sentAt / 1000 + 86_400)", "apns-collapse-id: \(notice.messageID)", "content-type: application/json",
        ]
        return ProviderRequest(url: base + "/3/device/" + notice.token, headers: headers, body: payload.bytes)
    }

    func providerID(of response: OutboundResponse) -> String? { response.headers["apns-id"] }

    func outcome(of response: OutboundResponse) -> PushOutcome {
        let reason = (try? JSONValue.decode(String(decoding: response.body, as: UTF8.self)))?["reason"]?.stringValue ?? ""
        switch response.status {
        case 200: return .sent
        case 410: return .removeDevice("410 \(reason)")
        case 400 where ["BadDeviceToken", "DeviceTokenNotForTopic"].contains(reason): return .removeDevice("400 \(reason)")
        case 403 where reason == "ExpiredProviderToken" || reason == "InvalidProviderToken": return .renewCredentials("403 \(reason)")
        case 429, 500...599: return .retry("\(response.status) \(reason)")
        default: return .failed("\(response.status) \(reason)")
        }
    }
}

/// Firebase Cloud Messaging's HTTP v1 API: an OAuth2 access token from the service account's
/// `token_uri` (an RS256 assertion signed with its `private_key`), cached until a minute
/// before it expires.
final class FCMProvider: PushProvider, Sendable {
    let name = "fcm"
    /// Nil in test mode: the built-in fake's token endpoint takes any assertion.
    private let key: SigningKey?
    private let keyID: String?
    private let clientEmail: String
    private let tokenURI: String
    private let sendURL: String
    /// The token, and the one being fetched, which every request that needs one waits for:
    /// one fetch, not one per request in flight.
    private let tokens = LockedValue<(cached: AccessToken?, fetching: Task<AccessToken, any Error>?)>((nil, nil))

    /// An OAuth2 access token, when it was fetched and when to stop using it.
    struct AccessToken: Sendable {
        var token: String
        var madeAt: Date
        var expires: Date
    }

    init(credentialsFile: String, url: String?) throws {
        guard let data = FileManager.default.contents(atPath: credentialsFile),
              let account = try? JSONValue.decode(String(decoding: data, as: UTF8.self)) else {
            throw OutboundError(description: "cannot read the FCM service account \(credentialsFile) (--fcm-credentials-file): download it from the Firebase console")
        }
        guard let pem = account["private_key"]?.stringValue, let email = account["client_email"]?.stringValue,
              let project = account["project_id"]?.stringValue, let tokenURI = account["token_uri"]?.stringValue,
              tokenURI.hasPrefix("https://") else {
            throw OutboundError(description: "\(credentialsFile) is not a service account file (it needs private_key, client_email, project_id and an https token_uri)")
        }
        let read: SigningKey
        do {
            read = try SigningKey(pem: pem)
        } catch {
            throw OutboundError(description: "the private_key in \(credentialsFile) is not usable: \(error)")
        }
        guard read.algorithm == .rs256 else { throw OutboundError(description: "the private_key in \(credentialsFile) is not an RSA key") }
        key = read
        keyID = account["private_key_id"]?.stringValue
        clientEmail = email
        self.tokenURI = tokenURI
        sendURL = url ?? "https://fcm.googleapis.com/v1/projects/\(project)/messages:send"
    }

    /// Test mode's FCM: the same requests, to the built-in fake, with no service account.
    init(testProject project: String) {
        key = nil
        keyID = nil
        clientEmail = "parley@\(project).iam.gserviceaccount.com"
        tokenURI = TestPushes.fcmTokenURL
        sendURL = TestPushes.fcmBaseURL + "/v1/projects/\(project)/messages:send"
    }

    func renewCredentials(madeBefore date: Date) {
        tokens.withLock { tokens in if let made = tokens.cached?.madeAt, made < date { tokens.cached = nil } }
    }

    /// The access token, fetched again a minute before it expires.
    private func accessToken(over http: any PushTransport) async throws -> String {
        let task: Task<AccessToken, any Error> = tokens.withLock { tokens in
            if let cached = tokens.cached, cached.expires > Date() { return Task { cached } }
            if let fetching = tokens.fetching { return fetching }
            let task = Task { try await self.fetchAccessToken(over: http) }
            tokens.fetching = task
            return task
        }
        do {
            let fetched = try await task.value
            tokens.withLock { tokens in
                if tokens.fetching == task { tokens.fetching = nil }
                if fetched.expires > tokens.cached?.expires ?? .distantPast { tokens.cached = fetched }
            }
            return fetched.token
        } catch {
            tokens.withLock { tokens in if tokens.fetching == task { tokens.fetching = nil } }
            throw error
        }
    }

    private func fetchAccessToken(over http: any PushTransport) async throws -> AccessToken {
        let made = Date()
        let now = Int(made.timeIntervalSince1970)
        let claims = "{\"iss\":\(jsonString(clientEmail)),\"scope\":\"https://www.googleapis.com/auth/firebase.messaging\","
            + "\"aud\":\(jsonString(tokenURI)),\"iat\":\(now),\"exp\":\(now + 3600)}"
        let assertion = try key?.jwt(headerFields: keyID.map { "\"kid\":\(jsonString($0))" } ?? "", claims: claims) ?? "test-mode"
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let response = try await http.post(tokenURI, headers: ["content-type: application/x-www-form-urlencoded"], body: Array(form.utf8))
        guard response.status == 200, let answer = try? JSONValue.decode(String(decoding: response.body, as: UTF8.self)),
              let token = answer["access_token"]?.stringValue else {
            throw OutboundError(description: "the token endpoint answered \(response.status): \(String(decoding: response.body.prefix(200), as: UTF8.self))")
        }
        let lifetime = answer["expires_in"]?.numberValue ?? 3600
        return AccessToken(token: token, madeAt: made, expires: Date().addingTimeInterval(max(60, lifetime - 60)))
    }

    func request(for notice: PushNotice, over http: any PushTransport) async throws(NotSendable) -> ProviderRequest {
        let token: String
        do { token = try await accessToken(over: http) } catch { throw NotSendable(outcome: .retry("no FCM access token: \(error)")) }
        let title = [notice.title, notice.subtitle].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " · ")
        var body = JSONWriter(capacity: 768)
        body.object { json in
            json.key("message")
            json.object { message in
                message.key("token"); message.string(notice.token)
                message.key("notification")
                message.object { notification in
                    if !title.isEmpty { notification.key("title"); notification.string(title) }
                    notification.key("body"); notification.string(notice.body ?? "New message")
                }
                message.key("data")
                message.object { data in  // FCM's data values are strings
                    data.key("conversationId"); data.string(notice.conversationID)
                    data.key("messageId"); data.string(notice.messageID)
                    data.key("seq"); data.string(String(notice.seq))
                    data.key("position"); data.string(String(notice.position))
                }
                message.key("android")
                message.object { android in
                    android.key("collapse_key"); android.string(notice.messageID)
                    android.key("priority"); android.string("HIGH")
                }
                message.key("apns")
                message.object { apns in
                    apns.key("headers")
                    apns.object { headers in
                        headers.key("apns-collapse-id"); headers.string(notice.messageID)
                        headers.key("apns-priority"); headers.string("10")
                    }
                    apns.key("payload")
                    apns.object { payload in
                        payload.key("aps")
                        payload.object { aps in
                            aps.key("thread-id"); aps.string(notice.conversationID)
                            aps.key("badge"); aps.integer(Int64(notice.badge))
                            aps.key("sound"); aps.string("default")
                            aps.key("mutable-content"); aps.integer(1)
                        }
                    }
                }
            }
        }
        return ProviderRequest(url: sendURL, headers: ["authorization: Bearer \(token)", "content-type: application/json"], body: body.bytes)
    }

    func providerID(of response: OutboundResponse) -> String? {
        (try? JSONValue.decode(String(decoding: response.body, as: UTF8.self)))?["name"]?.stringValue
    }

    func outcome(of response: OutboundResponse) -> PushOutcome {
        let error = (try? JSONValue.decode(String(decoding: response.body, as: UTF8.self)))?["error"]
        let status = error?["status"]?.stringValue ?? ""
        let codes = error?["details"]?.arrayValue?.compactMap { $0["errorCode"]?.stringValue } ?? []
        switch response.status {
        case 200: return .sent
        case _ where codes.contains("UNREGISTERED") || status == "UNREGISTERED": return .removeDevice("\(response.status) UNREGISTERED")
        case 401: return .renewCredentials("401 \(status)")
        case 429, 500...599: return .retry("\(response.status) \(status)")
        default: return .failed("\(response.status) \(status) \(codes.joined(separator: ","))")
        }
    }
}

/// `text` as a JSON string literal, quoted and escaped (for the tokens' claims).
func jsonString(_ text: String) -> String {
    var writer = JSONWriter(capacity: text.utf8.count + 2)
    writer.string(text)
    return String(decoding: writer.bytes, as: UTF8.self)
}

extension JSONValue {
    /// An object's member.
    subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }
    /// The string, when this is one.
    var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }
    /// The number, when this is one.
    var numberValue: Double? {
        if case .number(let number) = self { return number }
        return nil
    }
    /// The elements, when this is an array.
    var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }
}
