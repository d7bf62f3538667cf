import Foundation
import ParleyChat
import ParleyOutbound
import ParleyWire

/// Posts before-send questions to apps' hooks (docs/trust-and-safety.md): over libcurl with
/// HTTP/2 where the hook offers it, many at once on a few shared connections, through the
/// same address rules as webhooks (no private addresses unless `--webhooks-allow-private`),
/// signed with the hook's secret as deliveries are (`Parley-Signature`).
package final class BeforeSendClient: BeforeSendTransport {
    private let multiplexer: OutboundMultiplexer
    private let userAgent: String

    /// A client; `timeout` bounds every request (each hook's own budget is shorter or equal).
    package init(configuration: WebhookConfiguration, timeout: Duration = .seconds(2)) throws {
        let trust = try TrustStore(extraFile: configuration.outboundCAFile)
        multiplexer = try OutboundMultiplexer(trust: trust, timeout: timeout, policy: .webhooks(allowPrivate: configuration.allowPrivate),
                                              connections: 8, streams: 100)
        userAgent = configuration.userAgent
    }

    /// Stops the client's loop (requests in flight end with an error).
    package func stop() { multiplexer.stop() }

    package func post(url: String, secret: String, body: [UInt8], timeout: Duration) async throws -> (status: Int, body: [UInt8]) {
        let timestamp = Int64(Date().timeIntervalSince1970)
        let response = try await multiplexer.post(url, headers: [
            "Content-Type: application/json", "User-Agent: \(userAgent)",
            "Parley-Signature: " + WebhookSignature.header(secret: secret, timestamp: timestamp, body: body),
        ], body: body)
        return (response.status, response.body)
    }
}
