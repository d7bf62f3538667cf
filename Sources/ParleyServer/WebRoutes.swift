import Foundation
import ParleyCrypto
import ParleyNet
import ParleyWire

/// The web client (`/app/`): plain HTML, CSS and JavaScript modules shipped as the server's
/// resources and held in memory, served with a strict Content-Security-Policy.
enum WebRoutes {
    /// What a page of the app may load and do: only its own scripts and styles (no inline
    /// code, no eval), images from itself and from local previews, network only to itself
    /// (REST and the realtime WebSocket), never framed.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
        + "media-src 'self' blob:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
        + "form-action 'self'; frame-ancestors 'none'"

    struct Asset: Sendable {
        var bytes: [UInt8]
        var contentType: String
        var etag: String
    }

    /// The app's files by path under `/app/` (`index.html`, `js/app.js`, …), read once.
    static func loadAssets() -> [String: Asset] {
        guard let root = Bundle.module.resourceURL?.appendingPathComponent("Web") else { return [:] }
        var assets: [String: Asset] = [:]
        let types = ["html": "text/html; charset=utf-8", "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
                     "svg": "image/svg+xml", "png": "image/png", "json": "application/json", "webmanifest": "application/manifest+json"]
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return [:] }
        for case let url as URL in walker where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            let relative = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))
            guard let data = try? Data(contentsOf: url), let type = types[url.pathExtension.lowercased()] else { continue }
            let bytes = Array(data)
            assets[relative] = Asset(bytes: bytes, contentType: type, etag: "\"\(SHA256.hash(bytes).hexString.prefix(32))\"")
        }
        return assets
    }

    static func add(to router: inout Router, appKey: @escaping @Sendable () -> String?) {
        let assets = loadAssets()
        // `/app` and `/app/` look alike to the router; the page links everything absolutely.
        router.get("/") { _ in redirect("/app/") }
        router.get("/app/config.json") { _ in
            guard let key = appKey() else {
                return HTTPError(.serviceUnavailable, code: ChatError.Code.noApp.rawValue, message: "no app exists yet; create one with parley-server apps create").response
            }
            var response = try Response.json(["appKey": key, "version": ParleyVersion.current])
            secure(&response, cache: "no-cache")
            return response
        }
        router.get("/app/*") { request in
            var path = request.parameters["*"] ?? ""
            if path.isEmpty { path = "index.html" }
            guard let asset = assets[path] else {
                if assets.isEmpty {
                    return HTTPError(.notFound, code: ChatError.Code.notFound.rawValue, message: "this build has no web client files (Web resources missing)").response
                }
                return HTTPError(.notFound, code: ChatError.Code.notFound.rawValue, message: "no such file in the web client").response
            }
            var response = Response(status: .ok, headers: HTTPHeaders([("Content-Type", asset.contentType), ("ETag", asset.etag)]))
            secure(&response, cache: "no-cache")
            if request.ifNoneMatch(asset.etag) {
                response.status = .notModified
                return response
            }
            response.body = asset.bytes
            return response
        }
    }

    static func secure(_ response: inout Response, cache: String) {
        response.headers.add(name: "Content-Security-Policy", value: contentSecurityPolicy)
        response.headers.add(name: "X-Content-Type-Options", value: "nosniff")
        response.headers.add(name: "Referrer-Policy", value: "no-referrer")
        response.headers.add(name: "X-Frame-Options", value: "DENY")
        response.headers.add(name: "Cache-Control", value: cache)
    }

    static func redirect(_ location: String) -> Response {
        var response = Response(status: HTTPStatus(code: 302, reason: "Found"), headers: HTTPHeaders([("Location", location)]))
        secure(&response, cache: "no-cache")
        return response
    }
}
