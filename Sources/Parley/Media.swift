public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import ParleyWire
import ParleySync

/// Media to upload and send in one step (``ParleyClient/send(_:to:caption:)``).
public enum OutgoingMedia: Sendable {
    /// A JPEG, PNG, GIF or WebP image (on iOS, `UIImage.jpegData(compressionQuality:)`); the
    /// server removes its location metadata and makes a thumbnail.
    case photo(Data)
    /// A video file and its thumbnail image (MessageKit's `video(file:thumbnail:)`), with what
    /// the client knows about it.
    case video(file: URL, thumbnail: Data, durationSeconds: Double? = nil, width: Int? = nil, height: Int? = nil)
    /// A sound file.
    case audio(file: URL, durationSeconds: Double? = nil)
    /// A voice message recorded in the app: the recording, its length (over 0) and its
    /// loudness as at most 128 values of 0–255 (``Attachment/waveform``), shown as a player.
    case voice(file: URL, durationSeconds: Double, waveform: [Int])
    /// Any file, sent under its own name unless `name` says otherwise.
    case file(URL, name: String? = nil)
}

/// How far an upload is.
public struct UploadProgress: Sendable, Hashable {
    /// Bytes sent so far (over every file of the message).
    public var sentBytes: Int64
    /// Bytes to send in all.
    public var totalBytes: Int64
    /// `sentBytes / totalBytes`, 0…1.
    public var fraction: Double { totalBytes > 0 ? min(1, Double(sentBytes) / Double(totalBytes)) : 1 }

    /// Creates the value.
    public init(sentBytes: Int64, totalBytes: Int64) {
        self.sentBytes = sentBytes
        self.totalBytes = totalBytes
    }
}

/// A transfer in progress: its progress as an `AsyncSequence`, and its result.
///
/// ```swift
/// let sending = try await client.send(.photo(jpeg), to: chat.id)
/// for await step in sending.progress { bar.progress = step.fraction }
/// let message = try await sending.value
/// ```
public final class MediaTransfer<Value: Sendable>: Sendable {
    /// Upload progress; finishes when the uploads are done (or failed).
    public let progress: AsyncStream<UploadProgress>
    private let task: Task<Value, any Error>

    init(progress: AsyncStream<UploadProgress>, task: Task<Value, any Error>) {
        self.progress = progress
        self.task = task
    }

    /// The result, once the transfer finished.
    public var value: Value {
        get async throws { try await task.value }
    }

    /// Stops the transfer. What the server received of an upload in flight is kept as an
    /// unfinished upload (removed after `--media-orphan-lifetime`, or at once with
    /// ``ParleyClient/abandonUpload(clientID:)``); nothing is stored or sent.
    public func cancel() { task.cancel() }
}

extension ParleyClient {
    // MARK: - Sending media

    /// Uploads the media, then sends a message carrying it through the outbox (like
    /// ``send(_:to:metadata:replyTo:inThread:alsoInConversation:clientID:)``). The transfer's value is the stored message.
    ///
    /// - Throws: ``ParleyError/notSignedIn``; the transfer's value throws the server's typed
    ///   refusal (`file_too_large`, `type_mismatch`, `quota_exceeded`, …) or a transport error.
    public func send(_ media: OutgoingMedia, to conversation: ConversationID, caption: String? = nil) throws -> MediaTransfer<Message> {
        _ = try requireToken()
        let (progress, continuation) = AsyncStream<UploadProgress>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let parts = try Self.parts(of: media)
        let total = parts.reduce(Int64(0)) { $0 + $1.size }
        let task = Task<Message, any Error> {
            defer { continuation.finish() }
            var done: Int64 = 0
            var uploaded: [MediaInfo] = []
            for part in parts {
                let before = done
                let info = try await self.upload(part, clientID: UUID().uuidString.lowercased(), askFirst: false) { sent in
                    continuation.yield(UploadProgress(sentBytes: before + sent, totalBytes: total))
                }
                done += part.size
                continuation.yield(UploadProgress(sentBytes: done, totalBytes: total))
                uploaded.append(info)
            }
            continuation.finish()
            let content = Self.content(for: media, uploaded: uploaded, caption: caption)
            let clientID = try self.send(content, to: conversation)
            return try await self.waitUntilSent(clientID)
        }
        return MediaTransfer(progress: progress, task: task)
    }

    /// Uploads one file without sending it (the answer names it for a message's content).
    ///
    /// Uploads are resumable: if the connection breaks, the SDK asks the server how much
    /// arrived and sends only the rest (three more attempts). To continue an upload after the
    /// app itself was stopped, pass the `clientID` it began with (keep it with the file):
    /// the upload goes on from where the server stopped, or returns the stored upload when it
    /// had finished. Unfinished uploads are kept for a day (`--media-orphan-lifetime`).
    public func upload(file: URL, kind: MediaKind, mimeType: String, name: String? = nil,
                       clientID: String? = nil) throws -> MediaTransfer<MediaInfo> {
        _ = try requireToken()
        let size = try Self.size(of: file)
        let part = Part(source: .file(file), kind: kind, mimeType: mimeType, name: name ?? file.lastPathComponent, size: size)
        let (progress, continuation) = AsyncStream<UploadProgress>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let task = Task<MediaInfo, any Error> {
            defer { continuation.finish() }
            let info = try await self.upload(part, clientID: clientID ?? UUID().uuidString.lowercased(), askFirst: clientID != nil) { sent in
                continuation.yield(UploadProgress(sentBytes: sent, totalBytes: size))
            }
            continuation.yield(UploadProgress(sentBytes: size, totalBytes: size))
            return info
        }
        return MediaTransfer(progress: progress, task: task)
    }

    /// Where the upload `clientID` stands on the server: complete (with the stored upload),
    /// partial (how many bytes arrived), or `nil` when the server has none.
    public func uploadStatus(clientID: String) async throws -> UploadStatus? {
        do {
            return try await http.call("GET", "/v1/uploads/\(Self.pathSegment(clientID))", token: try requireToken())
        } catch ParleyError.server(let error) where error.code == "upload_not_found" {
            return nil
        }
    }

    /// Gives up an unfinished upload; the server removes what it kept.
    ///
    /// - Throws: `upload_not_found` (404) when there is none.
    public func abandonUpload(clientID: String) async throws {
        let _: Empty = try await http.call("DELETE", "/v1/uploads/\(Self.pathSegment(clientID))", token: try requireToken())
    }

    // MARK: - Downloading

    /// The attachment's bytes in a local file, downloaded once and then read from the cache
    /// (attachments never change: their ETag is their content's hash). Each account has its
    /// own cache folder, so one account never reads what only another was allowed to fetch.
    public func download(_ attachmentID: String, variant: MediaVariant = .original) async throws -> URL {
        let token = try requireToken()
        guard let user = currentUser else { throw ParleyError.notSignedIn }
        let cache = mediaCache.appendingPathComponent(Self.safe(user.id.rawValue))
        let target = cache.appendingPathComponent("\(Self.safe(attachmentID))-\(variant.rawValue)")
        if FileManager.default.fileExists(atPath: target.path) {
            try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: target.path)
            return target
        }
        let suffix = variant == .thumbnail ? "/thumbnail" : ""
        let request = try http.request("GET", "/v1/media/\(attachmentID)\(suffix)", token: token)
        let file = try await Self.downloadFile(request)
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: target)
        try FileManager.default.moveItem(at: file, to: target)
        Self.trim(cache, toBytes: mediaCacheBytes)
        return target
    }

    /// Saves an export as NDJSON to `destination` (streamed to disk, never whole in memory):
    /// everything of the user's, or with `conversation` one they own.
    ///
    /// - Returns: the counts from the export's last line (`"messages": 1204`, …).
    @discardableResult
    public func export(conversation: ConversationID? = nil, to destination: URL) async throws -> [String: Int] {
        let path = conversation.map { "/v1/conversations/\($0.rawValue)/export" } ?? "/v1/me/export"
        let request = try http.request("GET", path, token: try requireToken())
        let file = try await Self.downloadFile(request)
        try? FileManager.default.removeItem(at: destination)
        try FileManager.default.moveItem(at: file, to: destination)
        // The last line says the file is whole, with the counts.
        let handle = try FileHandle(forReadingFrom: destination)
        defer { try? handle.close() }
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size > 4096 ? size - 4096 : 0)
        let tail = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        guard let last = tail.split(separator: "\n").last,
              case .object(let fields)? = try? JSONValue.decode(String(last)), fields["type"] == .string("end"),
              case .object(let counts)? = fields["counts"] else {
            throw ParleyError.badResponse("the export ended without its end line: it is incomplete")
        }
        return counts.compactMapValues { if case .number(let n) = $0 { return Int(n) } else { return nil } }
    }

    /// Streams a GET to a temporary file (never whole in memory) and returns it; a non-200
    /// answer is removed and thrown as the server's error.
    private static func downloadFile(_ request: URLRequest) async throws -> URL {
        let (file, response): (URL, URLResponse) = try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.downloadTask(with: request) { location, response, error in
                if let error { return continuation.resume(throwing: ParleyError.unreachable(error.localizedDescription)) }
                guard let location, let response else { return continuation.resume(throwing: ParleyError.badResponse("no download")) }
                // The file is removed when this handler returns: keep it.
                let kept = FileManager.default.temporaryDirectory.appendingPathComponent("parley-download-\(UUID().uuidString)")
                do {
                    try FileManager.default.moveItem(at: location, to: kept)
                    continuation.resume(returning: (kept, response))
                } catch {
                    continuation.resume(throwing: ParleyError.badResponse("cannot keep the download: \(error)"))
                }
            }.resume()
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else {
            let data = (try? Data(contentsOf: file)) ?? Data()
            try? FileManager.default.removeItem(at: file)
            throw HTTPClient.failure(status: status, data: data, response: response)
        }
        return file
    }

    /// A short-lived URL for an attachment that needs no headers (`AsyncImage`, a web view).
    public func signedURL(for attachmentID: String, variant: MediaVariant = .original) async throws -> URL {
        let signed: SignedMediaURL = try await http.call("GET", "/v1/media/\(attachmentID)/url", query: [("variant", variant.rawValue)],
                                                         token: try requireToken())
        guard let url = URL(string: http.base + signed.url) else { throw ParleyError.badResponse("bad signed URL \(signed.url)") }
        return url
    }

    /// What the server knows about an upload (size, type, a photo's dimensions and thumbnail).
    public func mediaInfo(_ attachmentID: String) async throws -> MediaInfo {
        try await http.call("GET", "/v1/media/\(attachmentID)/info", token: try requireToken())
    }

    // MARK: - Inside

    struct Part: Sendable {
        enum Source: Sendable { case data(Data), file(URL) }
        var source: Source
        var kind: MediaKind
        var mimeType: String
        var name: String?
        var size: Int64
    }

    static func parts(of media: OutgoingMedia) throws -> [Part] {
        switch media {
        case .photo(let data):
            return [Part(source: .data(data), kind: .photo, mimeType: mediaType(of: data, fallback: "image/jpeg"), name: nil, size: Int64(data.count))]
        case .video(let file, let thumbnail, _, _, _):
            return [Part(source: .file(file), kind: .video, mimeType: mediaType(of: file, fallback: "video/mp4"), name: file.lastPathComponent, size: try size(of: file)),
                    Part(source: .data(thumbnail), kind: .photo, mimeType: mediaType(of: thumbnail, fallback: "image/jpeg"), name: nil, size: Int64(thumbnail.count))]
        case .audio(let file, _), .voice(let file, _, _):
            return [Part(source: .file(file), kind: .audio, mimeType: mediaType(of: file, fallback: "audio/mp4"), name: file.lastPathComponent, size: try size(of: file))]
        case .file(let file, let name):
            return [Part(source: .file(file), kind: .file, mimeType: mediaType(of: file, fallback: "application/octet-stream"),
                         name: name ?? file.lastPathComponent,
                         size: try size(of: file))]
        }
    }

    static func content(for media: OutgoingMedia, uploaded: [MediaInfo], caption: String?) -> MessageContent {
        let first = uploaded.first?.id ?? ""
        switch media {
        case .photo:
            return .photo(Attachment(attachmentID: first, caption: caption))
        case .video(_, _, let duration, let width, let height):
            return .video(Attachment(attachmentID: first, thumbnailID: uploaded.dropFirst().first?.id, width: width, height: height,
                                     durationSeconds: duration, caption: caption))
        case .audio(_, let duration):
            return .audio(Attachment(attachmentID: first, durationSeconds: duration, caption: caption))
        case .voice(_, let duration, let waveform):
            var attachment = Attachment(attachmentID: first, durationSeconds: duration, caption: caption)
            attachment.voice = true
            attachment.waveform = waveform
            return .audio(attachment)
        case .file:
            return .file(Attachment(attachmentID: first, caption: caption))
        }
    }

    /// The media type of a file's first bytes, as the server will recognise them
    /// (``MediaFormat``); `fallback` for anything it does not recognise, which the server then
    /// refuses for photos, video and audio with a typed error.
    static func mediaType(of head: Data, fallback: String) -> String {
        MediaFormat.sniff(head)?.mimeType ?? fallback
    }

    static func mediaType(of file: URL, fallback: String) -> String {
        guard let handle = try? FileHandle(forReadingFrom: file) else { return fallback }
        defer { try? handle.close() }
        return mediaType(of: (try? handle.read(upToCount: MediaFormat.magicLength)) ?? Data(), fallback: fallback)
    }

    static func size(of file: URL) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        return (attributes[.size] as? NSNumber)?.int64Value ?? 0
    }

    static func safe(_ id: String) -> String {
        String(id.unicodeScalars.filter { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-") }.map(Character.init))
    }

    /// Removes the least recently used cached files beyond `limit` bytes.
    static func trim(_ cache: URL, toBytes limit: Int64) {
        let keys: [URLResourceKey] = [.contentModificationDateKey, .fileSizeKey]
        guard let files = try? FileManager.default.contentsOfDirectory(at: cache, includingPropertiesForKeys: keys) else { return }
        var entries = files.compactMap { file -> (URL, Date, Int64)? in
            guard let values = try? file.resourceValues(forKeys: Set(keys)) else { return nil }
            return (file, values.contentModificationDate ?? .distantPast, Int64(values.fileSize ?? 0))
        }
        var total = entries.reduce(Int64(0)) { $0 + $1.2 }
        entries.sort { $0.1 < $1.1 }
        for (file, _, size) in entries where total > limit {
            try? FileManager.default.removeItem(at: file)
            total -= size
        }
    }

    /// Sends one part with progress under one client id. The server keeps what arrived when a
    /// connection breaks; then, up to three more times, this asks how far it got and sends the
    /// rest (or finds the upload stored, when only the answer was lost). With `askFirst` it
    /// asks before the first attempt too (an upload begun before the app was stopped).
    func upload(_ part: Part, clientID: String, askFirst: Bool, progress: @escaping @Sendable (Int64) -> Void) async throws -> MediaInfo {
        var ask = askFirst
        var attempt = 0
        while true {
            do {
                var first: Int64 = 0
                if ask, let status = try await uploadStatus(clientID: clientID) {
                    if status.state == .complete, let stored = status.attachment { return stored }
                    if status.totalBytes == part.size { first = status.receivedBytes }
                }
                return try await send(part, clientID: clientID, from: first, progress: progress)
            } catch let error as ParleyError where attempt < 3 && Self.worthResuming(error) {
                attempt += 1
                ask = true
                try await Task.sleep(nanoseconds: UInt64(attempt) * 500_000_000)
            }
        }
    }

    /// A broken connection, another request for the upload that took it over (a network
    /// layer may send a failed request again by itself), or a server error that may pass.
    static func worthResuming(_ error: ParleyError) -> Bool {
        switch error {
        case .unreachable: true
        case .server(let error): error.code == ChatError.Code.uploadSuperseded.rawValue || error.status >= 500
        case .badResponse, .notSignedIn, .stateNotSaved: false
        }
    }

    /// One request: the part from byte `first` on (`Content-Range` when not from the start).
    private func send(_ part: Part, clientID: String, from first: Int64, progress: @escaping @Sendable (Int64) -> Void) async throws -> MediaInfo {
        var query = [("kind", part.kind.rawValue), ("clientId", clientID)]
        if let name = part.name { query.append(("name", name)) }
        var request = try http.request("POST", "/v1/media", query: query, token: try requireToken())
        request.setValue(part.mimeType, forHTTPHeaderField: "Content-Type")
        var rest: URL?
        defer { if let rest { try? FileManager.default.removeItem(at: rest) } }
        var source = part.source
        if first > 0 {
            request.setValue("bytes \(first)-\(part.size - 1)/\(part.size)", forHTTPHeaderField: "Content-Range")
            switch part.source {
            case .data(let data):
                source = .data(data.subdata(in: Int(first)..<data.count))
            case .file(let file):
                let copy = try Self.copyRest(of: file, from: first)
                rest = copy
                source = .file(copy)
            }
        }
        let delegate = UploadDelegate { sent in progress(first + sent) }
        let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, URLResponse), any Error>) in
                delegate.begin(continuation)
                let task: URLSessionUploadTask
                switch source {
                case .data(let data): task = session.uploadTask(with: request, from: data)
                case .file(let file): task = session.uploadTask(with: request, fromFile: file)
                }
                delegate.task = task
                task.resume()
            }
        } onCancel: {
            delegate.cancel()
        }
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200..<300).contains(status) else { throw HTTPClient.failure(status: status, data: data, response: response) }
        do {
            return try WireCoding.decoder().decode(MediaInfo.self, from: data)
        } catch {
            throw ParleyError.badResponse("POST /v1/media: \(error)")
        }
    }

    /// The bytes of `file` from `offset` on, in a temporary file (URLSession uploads whole
    /// files), copied in 1 MiB pieces.
    static func copyRest(of file: URL, from offset: Int64) throws -> URL {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("parley-upload-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: copy.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw ParleyError.badResponse("cannot create \(copy.path) to resume an upload")
        }
        do {
            let input = try FileHandle(forReadingFrom: file)
            defer { try? input.close() }
            let output = try FileHandle(forWritingTo: copy)
            defer { try? output.close() }
            try input.seek(toOffset: UInt64(offset))
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                try output.write(contentsOf: chunk)
            }
        } catch {
            try? FileManager.default.removeItem(at: copy)
            throw error
        }
        return copy
    }

    /// `text` as one path segment (a client id may hold characters a path may not).
    static func pathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
    }
}

/// Collects an upload's answer and reports bytes sent.
final class UploadDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // @unchecked: NSObject subclasses cannot be checked Sendable; every mutable field is in
    // `state` (a LockedValue) and `progress` is a Sendable constant.
    private struct State {
        var received = Data()
        var response: URLResponse?
        var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
        var task: URLSessionTask?
    }
    private let state = LockedValue(State())
    private let progress: @Sendable (Int64) -> Void
    var task: URLSessionTask? {
        get { state.withLock { $0.task } }
        set { state.withLock { $0.task = newValue } }
    }

    init(progress: @escaping @Sendable (Int64) -> Void) { self.progress = progress }

    func begin(_ continuation: CheckedContinuation<(Data, URLResponse), any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    func cancel() { task?.cancel() }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
                    totalBytesExpectedToSend: Int64) {
        progress(totalBytesSent)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        state.withLock { $0.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock { $0.received.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, data, response) = state.withLock { state -> (CheckedContinuation<(Data, URLResponse), any Error>?, Data, URLResponse?) in
            defer { state.continuation = nil }
            return (state.continuation, state.received, state.response ?? task.response)
        }
        if let error {
            continuation?.resume(throwing: (error as? URLError)?.code == .cancelled ? CancellationError() : ParleyError.unreachable(error.localizedDescription))
        } else if let response {
            continuation?.resume(returning: (data, response))
        } else {
            continuation?.resume(throwing: ParleyError.badResponse("no answer to the upload"))
        }
    }
}
