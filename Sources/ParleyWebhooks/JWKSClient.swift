import Foundation
import ParleyChat
import ParleyOutbound

/// Fetches apps' JSON Web Key Sets (docs/trust-and-safety.md) over libcurl, through the same
/// address rules as webhooks (no private addresses unless `--webhooks-allow-private`), one
/// request at a time on a queue of its own: key sets are fetched rarely (when set, every ten
/// minutes, and for a token naming a key not seen yet).
package final class JWKSClient: JWKSFetcher {
    private let connection: OutboundHTTP
    private let queue = DispatchQueue(label: "parley.jwks")
    private let userAgent: String

    /// A client that gives up on a fetch after `timeout`.
    package init(configuration: WebhookConfiguration, timeout: Duration = .seconds(5)) throws {
        connection = try OutboundHTTP(trust: try TrustStore(extraFile: configuration.outboundCAFile), timeout: timeout,
                                      policy: .webhooks(allowPrivate: configuration.allowPrivate))
        userAgent = configuration.userAgent
    }

    package func fetch(url: String) async throws -> [UInt8] {
        let connection = connection
        let headers = ["Accept: application/json", "User-Agent: \(userAgent)"]
        let result: Result<OutboundResponse, OutboundError> = await queue.run {
            do { return .success(try connection.get(url, headers: headers)) } catch let error as OutboundError { return .failure(error) } catch {
                return .failure(OutboundError(description: "\(error)"))
            }
        }
        let response = try result.get()
        guard response.status == 200 else { throw OutboundError(description: "HTTP \(response.status)") }
        return response.body
    }
}
