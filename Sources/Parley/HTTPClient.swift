import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ParleyWire

/// The REST half: JSON over URLSession (FoundationNetworking on Linux), errors mapped to
/// ``ParleyError``.
struct HTTPClient: Sendable {
    let base: String
    let appKey: String

    func call<Response: Decodable & Sendable>(_ method: String, _ path: String, query: [(String, String)] = [],
                                              token: String?, as type: Response.Type = Response.self) async throws -> Response {
        try await call(method, path, query: query, body: Optional<Empty>.none, token: token)
    }

    func call<Body: Encodable, Response: Decodable & Sendable>(_ method: String, _ path: String, query: [(String, String)] = [],
                                                             body: Body?, token: String?,
                                                             as type: Response.Type = Response.self) async throws -> Response {
        let data = try await raw(method, path, query: query, body: body, token: token)
        if Response.self == Empty.self, let empty = Empty() as? Response { return empty }
        do {
            return try WireCoding.decoder().decode(Response.self, from: data)
        } catch {
            throw ParleyError.badResponse("\(method) \(path): \(error)")
        }
    }

    /// A request to `path` with the app key and token. Uploads and downloads get five minutes,
    /// other calls 30 seconds.
    func request(_ method: String, _ path: String, query: [(String, String)] = [], token: String?,
                 timeout: TimeInterval = 300) throws -> URLRequest {
        guard var components = URLComponents(string: base + path) else { throw ParleyError.badResponse("bad URL \(base + path)") }
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        guard let url = components.url else { throw ParleyError.badResponse("bad URL \(base + path)") }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = method
        request.setValue(appKey, forHTTPHeaderField: "X-Parley-App-Key")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        return request
    }

    /// The typed error of a non-2xx answer.
    static func failure(status: Int, data: Data, response: URLResponse?) -> ParleyError {
        let body = try? JSONDecoder().decode(ErrorEnvelope.self, from: data)
        let retryAfter = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Retry-After").flatMap(Int.init)
        return ParleyError.server(.answered(status: status, code: body?.error.code ?? "http_\(status)",
                                            message: body?.error.message ?? "HTTP \(status)", retryAfterSeconds: retryAfter))
    }

    private func raw<Body: Encodable>(_ method: String, _ path: String, query: [(String, String)], body: Body?, token: String?) async throws -> Data {
        var request = try request(method, path, query: query, token: token, timeout: 30)
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try WireCoding.encoder().encode(body)
        }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await URLSession.shared.data(for: request)
        } catch {
            throw ParleyError.unreachable(error.localizedDescription)
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { throw Self.failure(status: status, data: data, response: response) }
        return data
    }
}

/// The REST error body: `{"error":{"code":…,"message":…}}`.
struct ErrorEnvelope: Decodable {
    struct Body: Decodable {
        var code: String
        var message: String
    }
    var error: Body
}

/// An empty body or answer (204).
struct Empty: Codable, Sendable {}
