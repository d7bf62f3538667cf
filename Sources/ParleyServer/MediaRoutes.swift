import Foundation
import ParleyChat
import ParleyMediaService
import ParleyNet
import ParleyWire

/// The media routes (docs/openapi.yaml, docs/media.md).
enum MediaRoutes {
    static func add(to router: inout Router, media: MediaService, chat: Chat) {
        let api = API(chat: chat)
        let uploadLimit = Int(clamping: media.configuration.largestUpload)
        api.userCreatedOrFound(&router, .POST, "/v1/media", options: RouteOptions(body: .stream(maxBytes: uploadLimit))) { request, caller in
            try await media.upload(caller, request)
        }
        api.user(&router, .GET, "/v1/uploads/:clientId") { request, caller in
            try await media.uploadStatus(caller, clientID: try request.parameter("clientId"))
        }
        api.userEmpty(&router, .DELETE, "/v1/uploads/:clientId") { request, caller in
            try await media.abandonUpload(caller, clientID: try request.parameter("clientId"))
        }
        router.get("/v1/media/:id") { request in
            do {
                return try await media.download(request, id: try request.parameter("id"), variant: .original, caller: api.caller)
            } catch {
                return api.errorResponse(error)
            }
        }
        router.get("/v1/avatars/:id") { request in
            do { return try await media.avatar(request, id: try request.parameter("id")) } catch { return api.errorResponse(error) }
        }
        router.get("/v1/previews/:id") { request in
            do { return try await media.previewImage(request, id: try request.parameter("id")) } catch { return api.errorResponse(error) }
        }
        router.get("/v1/media/:id/thumbnail") { request in
            do {
                return try await media.download(request, id: try request.parameter("id"), variant: .thumbnail, caller: api.caller)
            } catch {
                return api.errorResponse(error)
            }
        }
        api.user(&router, .GET, "/v1/media/:id/info") { request, caller in
            try await chat.attachments.attachment(caller, id: try request.parameter("id")).info
        }
        api.user(&router, .GET, "/v1/media/:id/url") { request, caller in
            let variantName = request.queryItems["variant"] ?? "original"
            guard let variant = MediaVariant(rawValue: variantName) else { throw ChatError.invalid("variant must be original or thumbnail") }
            return try await media.signedURL(caller, id: try request.parameter("id"), variant: variant)
        }
    }
}
