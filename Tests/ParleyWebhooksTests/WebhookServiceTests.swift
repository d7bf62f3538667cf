import Foundation
@testable import ParleyChat
@testable import ParleyWebhooks
import ParleyCrypto
import ParleyWire
import Testing

/// What a receiver checks and what the sender promises, without a network.
struct WebhookServiceTests {
    @Test func theSignatureIsWhatTheDocsSay() {
        let body = Array(#"{"id":"whd_1"}"#.utf8)
        let header = WebhookSignature.header(secret: "whsec_k", timestamp: 1_700_000_000, body: body)
        // docs/webhooks.md: v1 = hex HMAC-SHA256(secret, "<t>.<raw body>").
        #expect(header == "t=1700000000,v1=" + "\(hmacHex("whsec_k", "1700000000.{\"id\":\"whd_1\"}"))")
        #expect(WebhookSignature.verify(header: header, body: body, secret: "whsec_k", now: 1_700_000_100))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec_other", now: 1_700_000_100))
        #expect(!WebhookSignature.verify(header: header, body: body + [32], secret: "whsec_k", now: 1_700_000_100))
        #expect(!WebhookSignature.verify(header: header, body: body, secret: "whsec_k", now: 1_700_000_301), "a replay after five minutes")
        #expect(!WebhookSignature.verify(header: "v1=abc", body: body, secret: "whsec_k", now: 0))
    }

    @Test func theStandardWebhooksSignatureMatchesTheirLibrarysVector() throws {
        // The vector the `standardwebhooks` package (1.3.0) computes for key bytes 0…31, id
        // whd_test, timestamp 1767225600 and body {"a":1}; Parley keeps the key as whsec_ and
        // URL-safe base64 without padding, the library takes whsec_ and standard base64.
        let secret = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"
        let key = try #require(StandardWebhooks.key(secret: secret))
        #expect(key == Array(0..<32))
        #expect(StandardWebhooks.librarySecret(secret) == "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        #expect(StandardWebhooks.signature(key: key, id: "whd_test", timestamp: 1_767_225_600, body: Array(#"{"a":1}"#.utf8))
                == "v1,7kYSuPYeDYU/pA3u0dfl9PgmtrUIfKn7XQf6vqOb51M=")
        #expect(StandardWebhooks.key(secret: "not a whsec") == nil && StandardWebhooks.key(secret: "whsec_") == nil)
    }

    @Test func retriesCoverTheWindowWithBackoffAndJitter() {
        var configuration = WebhookConfiguration()
        #expect(configuration.maxAttempts >= 30, "24 hours of retries at 5 s doubling to an hour: \(configuration.maxAttempts)")
        for attempt in 0..<40 {
            let delay = configuration.backoff(attempt: attempt)
            let base = min(3600.0, 5 * pow(2, Double(attempt)))
            #expect(delay >= .milliseconds(Int(base * 800)) && delay <= .milliseconds(Int(base * 1200)))
        }
        configuration.retryWindow = .seconds(1)
        configuration.firstRetry = .milliseconds(100)
        #expect(configuration.maxAttempts == 5, "0.1 + 0.2 + 0.4 + 0.8 s reach one second")
    }

    @Test func bodiesAndHeadersOfBothFormats() throws {
        let item = OutboxItem(id: 42, kind: "webhook", payload: Array("message.created\n1700000000123\n{\"x\":1}".utf8), attempts: 2,
                              createdAt: Date())
        let message = try #require(WebhookMessage(item, ref: "whd_42"))
        #expect(message.id == "whd_42" && message.type == "message.created")
        #expect(String(decoding: message.body, as: UTF8.self)
                == #"{"createdAt":"2023-11-14T22:13:20.123Z","data":{"x":1},"id":"whd_42","type":"message.created"}"#)
        let parley = WebhookBatch(lane: 1, endpointID: "wh_1", url: "http://x", secret: "whsec_k", format: .parley, appKey: "pk", appSecret: "sk",
                                  deliveries: [message])
        let request = WebhookService.request(for: message, in: parley, userAgent: "t", now: Date(timeIntervalSince1970: 1_700_000_000))
        #expect(request.headers.contains("Parley-Webhook-Id: whd_42") && request.headers.contains("Parley-Webhook-Attempt: 3"))
        #expect(request.headers.contains("Parley-Signature: " + WebhookSignature.header(secret: "whsec_k", timestamp: 1_700_000_000, body: request.body)))
        var pusher = parley
        pusher.format = .pusher
        let pushed = WebhookService.request(for: message, in: pusher, userAgent: "t", now: Date(timeIntervalSince1970: 1_700_000_000))
        #expect(String(decoding: pushed.body, as: UTF8.self) == #"{"time_ms":1700000000000,"events":[{"x":1}]}"#)
        #expect(pushed.headers.contains("X-Pusher-Key: pk") && pushed.headers.contains("X-Pusher-Signature: " + hmacHex("sk", String(decoding: pushed.body, as: UTF8.self))))
        #expect(WebhookMessage(OutboxItem(id: 1, kind: "webhook", payload: Array("no newline".utf8), attempts: 0, createdAt: Date()), ref: "whd_1") == nil)
    }

    @Test func privateAddressesAreKnownInEveryForm() {
        let privateOnes = ["127.0.0.1", "10.2.3.4", "172.16.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
                           "224.0.0.1", "255.255.255.255", "::1", "::", "[::ffff:127.0.0.1]", "::ffff:10.0.0.1", "fc00::1", "fd12::1", "fe80::1",
                           "ff02::1", "64:ff9b::a00:1", "2002:a00:1::", "2001:db8::1", "::127.0.0.1"]
        for host in privateOnes {
            guard let bytes = AddressPolicy.literal(host) else {
                Issue.record("\(host) should parse")
                continue
            }
            #expect(bytes.count == 4 ? AddressPolicy.isPrivate(ipv4: bytes) : AddressPolicy.isPrivate(ipv6: bytes), "\(host)")
        }
        for host in ["8.8.8.8", "172.32.0.1", "192.169.0.1", "2606:4700::1111", "[2a00:1450::1]", "64:ff9b::808:808"] {
            let bytes = AddressPolicy.literal(host) ?? []
            #expect(!(bytes.count == 4 ? AddressPolicy.isPrivate(ipv4: bytes) : AddressPolicy.isPrivate(ipv6: bytes)), "\(host)")
        }
        // The last: a ':' inside a grapheme cluster (after U+06DD, a prepended mark) once sent
        // the parser round in circles until the stack overflowed (found by fuzz-webhooks).
        for name in ["example.com", "1.2.3", "1.2.3.4.5", "::g", "1:2:3:4:5:6:7:8:9", "256.1.1.1", "\u{1}\u{7f}2.0.2\u{6DD}:", "１.２.３.４"] {
            #expect(AddressPolicy.literal(name) == nil, "\(name)")
        }
        #expect(throws: ChatError.self) { try Chat.validateWebhookURL("http://[::1]:8080/x", allowPrivate: false) }
        #expect((try? Chat.validateWebhookURL("http://[::1]:8080/x", allowPrivate: true)) != nil)
    }

    private func hmacHex(_ key: String, _ message: String) -> String {
        Crypto.hmacSHA256(key: Array(key.utf8), message: Array(message.utf8)).hexString
    }
}
