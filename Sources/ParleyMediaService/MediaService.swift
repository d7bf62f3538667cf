import Foundation
package import ParleyChat
import ParleyCrypto
package import ParleyMedia
package import ParleyNet
package import ParleyWire
package import ParleySync
package import ParleyLog

/// Media limits and timers (docs/media.md). Each has a `parley-server` option.
package struct MediaConfiguration: Sendable, Equatable {
    /// Largest photo upload. `--max-photo-bytes`. Default: 25 MiB.
    package var maxPhotoBytes: Int64 = 25 << 20
    /// Largest video upload. `--max-video-bytes`. Default: 512 MiB.
    package var maxVideoBytes: Int64 = 512 << 20
    /// Largest audio upload. `--max-audio-bytes`. Default: 64 MiB.
    package var maxAudioBytes: Int64 = 64 << 20
    /// Largest file upload. `--max-file-bytes`. Default: 100 MiB.
    package var maxFileBytes: Int64 = 100 << 20
    /// Bytes of uploads one account may hold. `--media-quota-bytes`. Default: 1 GiB.
    package var quotaBytes: Int64 = 1 << 30
    /// Largest photo in pixels (width × height). `--max-image-pixels`. Default: 64,000,000.
    package var maxImagePixels = 64_000_000
    /// Side of the square a photo's thumbnail fits. `--thumbnail-size`. Default: 512.
    package var thumbnailSide = 512
    /// Keep photos' EXIF/XMP/IPTC metadata, location included. `--keep-photo-metadata`.
    /// Default: off (removed).
    package var keepPhotoMetadata = false
    /// Seconds a signed download URL works. `--media-url-lifetime`. Default: 600.
    package var urlLifetimeSeconds = 600
    /// Seconds an upload no message refers to is kept. `--media-orphan-lifetime`. Default: 86,400.
    package var orphanLifetimeSeconds = 86_400
    /// Seconds between collections of unreferenced uploads. `--media-gc-interval`. Default: 300.
    package var collectionIntervalSeconds = 300
    /// Uploads one account may have in progress at once. Default: 4.
    package var concurrentUploadsPerUser = 4
    /// Unfinished (resumable) uploads one account may keep. Default: 16.
    package var unfinishedUploadsPerUser = 16

    /// The defaults.
    package init() {}

    /// The limit for a kind.
    package func maxBytes(_ kind: MediaKind) -> Int64 {
        switch kind {
        case .photo: maxPhotoBytes
        case .video: maxVideoBytes
        case .audio: maxAudioBytes
        case .file: maxFileBytes
        }
    }

    /// The largest of the per-kind limits: what the upload route reads at most.
    package var largestUpload: Int64 { MediaKind.allCases.map(maxBytes).max() ?? maxFileBytes }
}

/// What `/metrics` reports about media.
package struct MediaMetrics: Sendable {
    /// Uploads stored (retries that found the first upload are not counted).
    package var stored = 0
    /// Uploads refused (type, size, quota, image problems, broken bodies).
    package var refused = 0
    /// Bytes received in upload bodies, stored or not.
    package var bytesReceived: Int64 = 0
    /// Downloads answered with bytes (200 and 206).
    package var downloads = 0
    /// Files removed by the collector.
    package var blobsRemoved = 0
}

/// Uploads and downloads: streams bodies to the blob store, verifies and processes them,
/// records them in ``Chat``, serves them to members, and collects what no message uses.
package final class MediaService: Sendable {
    package let chat: Chat
    package let blobs: any BlobStore
    package let images: ImageProcessor
    package let configuration: MediaConfiguration
    /// Where what the operator must fix is said (libvips missing).
    private let logger: Logger
    /// Whether the log said libvips is missing already (once per process is enough).
    private let saidImagesUnavailable = LockedValue(false)
    /// Serialises blob puts and the collector's deletes, so a blob being collected is never
    /// re-used halfway (see ``collect()``).
    package let gate = AsyncGate()
    /// Uploads that stopped before their last byte, to be completed (`Content-Range`).
    package let partials: PartialUploadStore
    /// Unfinished uploads a request holds now (receiving, asking, abandoning or expiring):
    /// one at a time each; see ``claim(_:interrupt:takeOver:)``.
    private let claims = LockedValue([PartialKey: Holder]())

    /// Who holds an unfinished upload: how to make it let go, and who waits for it; once the
    /// database claim is taken, its holder name and the task renewing its lease.
    private struct Holder {
        var interrupt: (@Sendable () -> Void)?
        var waiters: [CheckedContinuation<Void, Never>] = []
        var holder: String?
        var renewal: Task<Void, Never>?
    }
    /// This process's name in upload claims (a request adds its own number).
    private let node = Crypto.randomID(prefix: "n_", length: 12)
    private let requestCounter = LockedValue(0)
    /// How long a claim in the database lasts without renewal (renewed every third of it while
    /// the request runs): a node that dies holding an upload blocks it for at most this long.
    package static let claimLease: Duration = .seconds(10)
    private let lanes: [DispatchQueue]
    private let laneCounter = LockedValue(0)
    private let uploadsInProgress = LockedValue([Int64: Int]())
    private let signingKey = LockedValue<[UInt8]?>(nil)
    /// Counters for `/metrics`.
    package let metrics = LockedValue(MediaMetrics())

    /// A kept upload opened to append the rest, with its hashing and type check caught up.
    /// The staging files one upload made, removed together when it ends (stored ones were
    /// moved into the blob store first, so removing them is a no-op).
    final class StagedFiles: @unchecked Sendable {
        // @unchecked: used by one request's task only, one step after another.
        private var files: [StagingFile] = []

        func make(_ blobs: any BlobStore) throws -> StagingFile {
            let file = try blobs.makeStagingFile()
            files.append(file)
            return file
        }

        func discardAll() {
            for file in files { file.discard() }
            files = []
        }
    }

    struct Resumed {
        var entry: PartialUploadStore.Entry
        var file: StagingFile
        var hasher: SHA256
        var prefix: [UInt8]
    }

    struct PartialKey: Hashable, Sendable {
        var user: Int64
        var clientID: String
    }

    package init(chat: Chat, blobs: any BlobStore, partials: PartialUploadStore, configuration: MediaConfiguration,
                 logger: Logger = .discarding(label: "parley.media")) {
        self.logger = logger
        self.chat = chat
        self.blobs = blobs
        self.partials = partials
        self.configuration = configuration
        var limits = ImageProcessor.Limits()
        limits.maxPixels = configuration.maxImagePixels
        limits.thumbnailSide = configuration.thumbnailSide
        images = ImageProcessor(limits: limits)
        lanes = (0..<max(1, min(4, EventLoopGroup.coreCount))).map { DispatchQueue(label: "parley.media.\($0)") }
        // Another node wants an upload a request here is receiving: let it go (its bytes stay).
        chat.bus?.subscribe { [weak self] publications in
            guard let self else { return }
            for case .uploadWanted(let user, let clientID) in publications {
                let stop = claims.withLock { table -> (@Sendable () -> Void)? in
                    guard let holder = table[PartialKey(user: user, clientID: clientID)], holder.holder != nil else { return nil }
                    return holder.interrupt
                }
                stop?()
            }
        }
    }

    package var policy: Chat.MediaPolicy {
        var policy = Chat.MediaPolicy()
        policy.quotaBytes = configuration.quotaBytes
        policy.orphanLifetime = TimeInterval(configuration.orphanLifetimeSeconds)
        return policy
    }

    /// Runs blocking file or image work off the event loops.
    package func offLoop<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let lane = lanes[laneCounter.withLock { value in value &+= 1; return value } % lanes.count]
        return try await withCheckedThrowingContinuation { continuation in
            lane.async { continuation.resume(with: Result { try work() }) }
        }
    }

    // MARK: - Upload

    /// What the query and headers of an upload ask for.
    package struct UploadRequest: Sendable {
        var kind: MediaKind
        var mimeType: String
        var declared: MediaFormat?
        var name: String?
        var clientID: String?
        var maxBytes: Int64
        /// `Content-Length`, when the body has one.
        var length: Int64?
        /// `Content-Range` of a resumed upload: the first byte sent and the whole size.
        var resume: (first: Int64, total: Int64)?

        /// Kept when the connection breaks: a client id and a known size.
        var resumable: Bool { clientID != nil && length != nil }
    }

    /// Checks everything that can be checked before the body is read.
    package func uploadRequest(_ request: Request) throws -> UploadRequest {
        let query = request.queryItems
        guard let kindName = query["kind"], let kind = MediaKind(rawValue: kindName) else {
            throw ChatError.invalid("kind must be photo, video, audio or file")
        }
        var name: String?
        if let given = query["name"] {
            do { name = try FileName.sanitize(given) } catch { throw ChatError.invalid(error.description) }
        }
        let clientID = query["clientId"]
        guard let header = request.headers["content-type"], let mimeType = MediaType.parse(header) else {
            throw ChatError.unsupportedMediaType("send the file's media type in Content-Type (e.g. image/jpeg); the body is the file's bytes")
        }
        let declared = MediaFormat.named(mimeType)
        switch kind {
        case .photo, .video, .audio:
            guard let declared, declared.kind == kind else {
                throw ChatError.unsupportedMediaType(Self.accepted(kind, given: mimeType))
            }
        case .file:
            break
        }
        let maxBytes = configuration.maxBytes(kind)
        let length = request.headers["content-length"].flatMap { Int64($0) }
        if let length, length > maxBytes {
            throw Self.tooLarge(kind, limit: maxBytes)
        }
        var resume: (first: Int64, total: Int64)?
        if let header = request.headers["content-range"] {
            guard clientID != nil else { throw ChatError.invalid("a Content-Range continues an upload: name it with clientId") }
            guard let length, let range = ContentRange.parse(header), range.last - range.first + 1 == length else {
                throw ChatError.invalid("Content-Range must be 'bytes <first>-<total - 1>/<total>' with a Content-Length of the bytes sent; "
                                        + "ask GET /v1/uploads/{clientId} where to start")
            }
            guard range.total <= maxBytes else { throw Self.tooLarge(kind, limit: maxBytes) }
            resume = (range.first, range.total)
        }
        return UploadRequest(kind: kind, mimeType: declared?.mimeType ?? mimeType, declared: declared, name: name,
                             clientID: clientID, maxBytes: maxBytes, length: length, resume: resume)
    }

    package static func accepted(_ kind: MediaKind, given: String) -> String {
        let formats = MediaFormat.allCases.filter { $0.kind == kind }.map(\.mimeType).joined(separator: ", ")
        let hint = MediaFormat.named(given) == .heic ? " (HEIC/AVIF is not accepted: convert to JPEG, e.g. UIImage.jpegData)" : ""
        return "a \(kind.rawValue) must be one of \(formats), not \(given)\(hint); send other files with kind=file"
    }

    package static func tooLarge(_ kind: MediaKind, limit: Int64) -> ChatError {
        ChatError.fileTooLarge(kind: kind.rawValue, limit: limit)
    }

    /// Handles `POST /v1/media`: the body is streamed to a staging file (never held whole in
    /// memory), verified against its declared type by its first bytes, processed (photos:
    /// size, metadata removal, thumbnail), stored under its hash and recorded.
    package func upload(_ caller: Caller, _ request: Request) async throws -> (MediaInfo, created: Bool) {
        do {
            let result = try await storeUpload(caller, request)
            if result.created { metrics.withLock { $0.stored += 1 } }
            return result
        } catch {
            metrics.withLock { $0.refused += 1 }
            throw error
        }
    }

    /// What happens to an unfinished upload's kept bytes when its request ends.
    private enum PartialFate {
        /// Removed: the upload was stored, or refused for good.
        case remove
        /// Left as they are: the connection broke (a later request resumes), the continuation
        /// was refused (the bytes are still valid), or another request had already finished it.
        case keep
    }

    /// The body as received: the staging file, its size, hash and first bytes.
    private struct ReceivedBody {
        var file: StagingFile
        var size: Int64
        var hash: String
        var prefix: [UInt8]
    }

    /// A photo's results: the file to store (metadata removed), its size, and the thumbnail.
    private struct ProcessedPhoto {
        var file: StagingFile
        var size: (width: Int, height: Int)
        var stripped: (hex: String, size: Int64)?
        var thumbnail: (file: StagingFile, hex: String, info: MediaThumbnail)
    }

    /// `POST /v1/media` in four steps: receive the body (``receive(_:into:upload:partial:)``),
    /// check it is what it claims, process photos (``processPhoto(_:format:staged:)``), store and
    /// record it (``storeAndRecord(_:_:file:thumbnail:)``). A resumable upload (client id and
    /// length) is claimed for the request's duration, and its kept bytes' fate is decided once.
    private func storeUpload(_ caller: Caller, _ request: Request) async throws -> (MediaInfo, created: Bool) {
        var upload = try uploadRequest(request)
        if let clientID = upload.clientID, let existing = try await chat.attachments.existingUpload(caller, clientID: clientID) {
            return (existing, false)
        }
        let staged = StagedFiles()
        defer { staged.discardAll() }
        guard upload.resumable, let clientID = upload.clientID else {
            guard reserveUploadSlot(caller.userKey) else {
                throw ChatError.tooManyUploads(limit: configuration.concurrentUploadsPerUser)
            }
            defer { releaseUploadSlot(caller.userKey) }
            let body = try await receive(request, into: try staged.make(blobs), upload: upload, partial: nil)
            return try await store(caller, upload, body, staged: staged)
        }
        let key = PartialKey(user: caller.userKey, clientID: clientID)
        // A request for this upload while an older one still receives it takes over: the
        // client came back on a new connection, the old one is dead.
        var interrupt: (@Sendable () -> Void)?
        if case .stream(let stream) = request.body { interrupt = { stream.interrupt(with: ChatError.uploadSuperseded) } }
        _ = try await claim(key, interrupt: interrupt, takeOver: true)
        var fate = PartialFate.keep
        defer {
            if fate == .remove { partials.remove(user: key.user, clientID: key.clientID) }
            unclaim(key)
        }
        // The slot is counted after the takeover: the request taken over (a dead connection
        // the server had not noticed yet) has given its slot back by now, so a client whose old
        // connections all died can still continue (they filled the slots and got 429 before).
        guard reserveUploadSlot(caller.userKey) else {
            throw ChatError.tooManyUploads(limit: configuration.concurrentUploadsPerUser)
        }
        defer { releaseUploadSlot(caller.userKey) }
        // The request this one took over from may have finished it.
        if let existing = try await chat.attachments.existingUpload(caller, clientID: clientID) { return (existing, false) }
        let file: StagingFile
        var kept: Resumed?
        if let resume = upload.resume {
            let resumed = try await resumePartial(key, upload, resume)  // refused: the kept bytes stay as they were
            kept = resumed
            file = resumed.file
            upload.name = resumed.entry.record.name ?? upload.name  // it goes on as it began
        } else {
            guard let total = upload.length else { throw ChatError.invalid("a resumable upload needs a Content-Length") }
            fate = .remove  // a fresh upload refused before any byte is kept leaves nothing
            file = try await beginPartial(caller, key, upload, total: total)
        }
        let body: ReceivedBody
        do {
            body = try await receive(request, into: file, upload: upload, partial: (key, kept))
        } catch let broken as BodyInterrupted {
            fate = .keep
            throw broken.underlying
        } catch {
            fate = .remove
            throw error
        }
        fate = .remove  // from here the bytes are the whole file: stored, or refused for good
        return try await store(caller, upload, body, staged: staged)
    }

    /// The body stopped arriving (the connection broke or stalled, or a newer request took the
    /// upload over); a resumable upload's bytes so far were kept.
    private struct BodyInterrupted: Error {
        var underlying: any Error
    }

    /// Receives the body into `file`, after what a resumed upload already holds, within the
    /// kind's size limit, hashing it and keeping its first bytes for the type check.
    ///
    /// - Throws: ``BodyInterrupted`` when the stream broke, after suspending a resumable
    ///   upload's file; the size or storage errors otherwise.
    private func receive(_ request: Request, into file: StagingFile, upload: UploadRequest,
                         partial: (key: PartialKey, resumed: Resumed?)?) async throws -> ReceivedBody {
        var received = partial?.resumed?.entry.receivedBytes ?? 0
        var hasher = partial?.resumed?.hasher ?? SHA256()
        var prefix = partial?.resumed?.prefix ?? []
        let keptBefore = received
        func take(_ bytes: [UInt8]) throws {
            received += Int64(bytes.count)
            guard received <= upload.maxBytes else { throw Self.tooLarge(upload.kind, limit: upload.maxBytes) }
            if prefix.count < MediaFormat.magicLength { prefix += bytes.prefix(MediaFormat.magicLength - prefix.count) }
            hasher.update(bytes)
            do { try file.write(bytes) } catch { throw Self.storageError(error) }
        }
        switch request.body {
        case .bytes(let bytes):
            try take(bytes)
        case .stream(let stream):
            var chunks = stream.makeAsyncIterator()
            while true {
                let next: [UInt8]?
                do {
                    next = try await chunks.next()
                } catch {
                    if let key = partial?.key { partials.suspend(file, user: key.user, clientID: key.clientID) }
                    throw BodyInterrupted(underlying: error)
                }
                guard let chunk = next else { break }
                try take(chunk)
            }
        }
        file.closeForWriting()
        metrics.withLock { $0.bytesReceived += received - keptBefore }  // this request's bytes
        guard received > 0 else { throw ChatError.invalid("the upload is empty") }
        return ReceivedBody(file: file, size: received, hash: hasher.finalize().hexString, prefix: prefix)
    }

    /// Checks the content is what it claims to be, processes a photo, then stores and records.
    private func store(_ caller: Caller, _ upload: UploadRequest, _ body: ReceivedBody, staged: StagedFiles) async throws
        -> (MediaInfo, created: Bool) {
        let sniffed = MediaFormat.sniff(body.prefix)
        if let declared = upload.declared {
            guard let sniffed, sniffed.matches(declared: declared) else {
                throw ChatError.typeMismatch(found: sniffed?.mimeType, declared: upload.mimeType)
            }
        }
        var new = NewAttachment(kind: upload.kind, mimeType: upload.mimeType, sizeBytes: body.size, name: upload.name, blob: body.hash,
                                clientID: upload.clientID)
        var file = body.file
        var thumbnail: StagingFile?
        if upload.kind == .photo, let format = sniffed {
            let photo = try await processPhoto(body.file, format: format, staged: staged)
            new.width = photo.size.width
            new.height = photo.size.height
            if let stripped = photo.stripped {
                file = photo.file
                new.sizeBytes = stripped.size
                new.blob = stripped.hex
            }
            new.thumbnail = (photo.thumbnail.hex, photo.thumbnail.info)
            thumbnail = photo.thumbnail.file
        }
        return try await storeAndRecord(caller, new, file: file, thumbnail: thumbnail)
    }

    /// Photos: the structure checked, metadata removed, pixel limits held, a thumbnail made
    /// (``PhotoPipeline``, shared with the fuzzer), off the loop.
    private func processPhoto(_ original: StagingFile, format: MediaFormat, staged: StagedFiles) async throws -> ProcessedPhoto {
        let stripped = try staged.make(blobs)
        let thumbnail = try staged.make(blobs)
        thumbnail.closeForWriting()
        let pipeline = PhotoPipeline(images: images, keepMetadata: configuration.keepPhotoMetadata)
        let result = try await offLoop { () throws -> PhotoPipeline.Result in
            do {
                return try pipeline.process(format, input: original.path, stripped: stripped, thumbnail: thumbnail.path)
            } catch let problem as PhotoPipeline.Problem {
                if case .image(.unavailable(let why)) = problem { self.sayImagesUnavailable(why) }
                throw Self.imageError(problem)
            }
        }
        let thumbHash = try await offLoop { try MediaFiles.sha256(path: thumbnail.path) }
        return ProcessedPhoto(file: result.stripped == nil ? original : stripped, size: (result.size.width, result.size.height),
                              stripped: result.stripped.map { ($0.hex, $0.size) },
                              thumbnail: (thumbnail, thumbHash.hex,
                                          MediaThumbnail(width: result.thumbnail.width, height: result.thumbnail.height, sizeBytes: thumbHash.size)))
    }

    /// Stores the file (and thumbnail) under its hash, then records the upload; both behind
    /// the gate the collector uses, so a blob it is about to remove is never reused meanwhile.
    ///
    /// The gate is this process's. Against a collector on another node sharing the media
    /// directory the database decides: the collector marks the blobs it is removing in its
    /// transaction, and recording refuses a marked blob (``ChatError/fileBeingCollected``)
    /// until the collector is done; then the upload checks its files are still there and
    /// stores them again from a second name it kept for the bytes (a hard link) if that
    /// collector removed them after this upload found them present.
    private func storeAndRecord(_ caller: Caller, _ record: NewAttachment, file: StagingFile, thumbnail: StagingFile?) async throws
        -> (MediaInfo, created: Bool) {
        guard let key = BlobKey(hex: record.blob) else { throw ChatError.internalError }
        let thumbKey = record.thumbnail.flatMap { BlobKey(hex: $0.blob) }
        let blobs = blobs
        var pairs: [(BlobKey, StagingFile)] = [(key, file)]
        if let thumbKey, let thumbnail { pairs.append((thumbKey, thumbnail)) }
        let stored = pairs
        return try await gate.run {
            let kept: [(BlobKey, StagingFile)]
            do {
                kept = try await self.offLoop {
                    try stored.map { key, file in
                        let second = try file.secondName()
                        try blobs.put(key, from: file)
                        return (key, second)
                    }
                }
            } catch {
                throw Self.storageError(error)
            }
            defer { for (_, second) in kept { second.discard() } }
            do {
                let result = try await self.recordWhenNotCollected(caller, record)
                try await self.offLoop {
                    for (key, second) in kept where try blobs.open(key) == nil { try blobs.put(key, from: second) }
                }
                return result
            } catch {
                try? await self.chat.attachments.markGarbage(stored.map(\.0.hex))
                throw error
            }
        }
    }

    /// ``Chat/recordUpload(_:_:policy:)``, waiting (up to 5 s) while another node's collector
    /// is removing one of the upload's blobs.
    private func recordWhenNotCollected(_ caller: Caller, _ record: NewAttachment) async throws -> (MediaInfo, created: Bool) {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            do {
                return try await chat.attachments.record(caller, record, policy: policy)
            } catch let error as ChatError where error == ChatError.fileBeingCollected && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Starts keeping a resumable upload: at most ``MediaConfiguration/unfinishedUploadsPerUser``
    /// unfinished ones per account, and their declared sizes count against the quota.
    private func beginPartial(_ caller: Caller, _ key: PartialKey, _ upload: UploadRequest, total: Int64) async throws -> StagingFile {
        let others = partials.entries(user: key.user).filter { $0.record.clientID != key.clientID }
        guard others.count < configuration.unfinishedUploadsPerUser else {
            throw ChatError.tooManyUnfinishedUploads(limit: configuration.unfinishedUploadsPerUser)
        }
        let used = try await chat.attachments.usage(caller)
        let pending = others.reduce(Int64(0)) { $0 + $1.record.totalBytes }
        guard used + pending + total <= configuration.quotaBytes else {
            throw ChatError.quotaExceeded(usedBytes: used + pending, quotaBytes: configuration.quotaBytes)
        }
        let record = PartialUploadStore.Record(user: key.user, clientID: key.clientID, kind: upload.kind, mimeType: upload.mimeType,
                                               name: upload.name, totalBytes: total, createdAt: Date())
        let partials = partials
        do { return try await offLoop { try partials.begin(record) } } catch { throw Self.storageError(error) }
    }

    /// Opens a kept upload to append the rest: same kind, type and size as it began, and the
    /// range starts at the first byte the server does not have.
    private func resumePartial(_ key: PartialKey, _ upload: UploadRequest, _ resume: (first: Int64, total: Int64)) async throws
        -> Resumed {
        let partials = partials
        guard let (entry, file) = try await offLoop({ try partials.resume(user: key.user, clientID: key.clientID) }) else {
            throw ChatError.uploadNotFound
        }
        let record = entry.record
        guard record.kind == upload.kind, record.mimeType == upload.mimeType, record.totalBytes == resume.total else {
            file.closeForWriting()
            throw ChatError.uploadMismatch(kind: record.kind.rawValue, mimeType: record.mimeType, totalBytes: record.totalBytes)
        }
        guard resume.first == entry.receivedBytes else {
            file.closeForWriting()
            throw ChatError.uploadOffsetMismatch(received: entry.receivedBytes, totalBytes: record.totalBytes)
        }
        let path = file.path
        let (hasher, prefix) = try await offLoop { try MediaFiles.resumeHashing(path: path, prefixLength: MediaFormat.magicLength) }
        return Resumed(entry: entry, file: file, hasher: hasher, prefix: prefix)
    }

    /// Where the caller's upload `clientID` stands (`GET /v1/uploads/{clientId}`).
    package func uploadStatus(_ caller: Caller, clientID: String) async throws -> UploadStatus {
        // A connection still receiving it is interrupted, so the answer is what is kept.
        let key = PartialKey(user: caller.userKey, clientID: clientID)
        _ = try await claim(key, takeOver: true)
        defer { unclaim(key) }
        if let info = try await chat.attachments.existingUpload(caller, clientID: clientID) {
            return UploadStatus(clientId: clientID, state: .complete, receivedBytes: info.sizeBytes, totalBytes: info.sizeBytes, attachment: info)
        }
        guard let entry = partials.entry(user: caller.userKey, clientID: clientID) else { throw ChatError.uploadNotFound }
        let expires = entry.updatedAt.addingTimeInterval(TimeInterval(configuration.orphanLifetimeSeconds))
        return UploadStatus(clientId: clientID, state: .partial, receivedBytes: entry.receivedBytes, totalBytes: entry.record.totalBytes,
                            expiresAt: expires)
    }

    /// Abandons an unfinished upload (`DELETE /v1/uploads/{clientId}`); its bytes are removed.
    package func abandonUpload(_ caller: Caller, clientID: String) async throws {
        let key = PartialKey(user: caller.userKey, clientID: clientID)
        _ = try await claim(key, takeOver: true)
        defer { unclaim(key) }
        guard partials.remove(user: key.user, clientID: clientID) else { throw ChatError.uploadNotFound }
    }

    /// Takes the unfinished upload `key` for one request (receiving, abandoning or expiring
    /// it); `false` when another holds it.
    ///
    /// With `takeOver`, a request that holds it while receiving is interrupted (its bytes so far
    /// are kept) and this waits for it to let go: a phone that changed networks
    /// comes back before the server has noticed its old connection is dead (that can take the
    /// 30 s body timeout), and its status call or continuation must not wait for that or be
    /// refused. An upload past its body (being processed) is waited for, not interrupted.
    ///
    /// Two steps: this process's table (requests here wait for each other), then the claim in
    /// the database (nodes sharing the media directory). A request on another node that holds
    /// it is asked through the bus to let go (``Publication/uploadWanted(user:clientID:)``);
    /// one on a node that died holds it until its lease runs out. A takeover that cannot get
    /// the claim within a lease and a bit throws 409 `conflict` (ask again).
    private func claim(_ key: PartialKey, interrupt: (@Sendable () -> Void)? = nil, takeOver: Bool = false) async throws -> Bool {
        guard await claimHere(key, interrupt: interrupt, takeOver: takeOver) else { return false }
        let holder = node + "/" + String(requestCounter.withLock { value in value &+= 1; return value })
        let deadline = ContinuousClock.now + Self.claimLease + .seconds(2)
        var asked = false
        do {
            while try await !chat.attachments.claimUpload(user: key.user, clientID: key.clientID, holder: holder, lease: Self.claimLease) {
                guard takeOver, ContinuousClock.now < deadline else {
                    if takeOver { throw ChatError.uploadBusy }
                    unclaimHere(key)
                    return false
                }
                if !asked {
                    chat.bus?.publish([.uploadWanted(user: key.user, clientID: key.clientID)])
                    asked = true
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch {
            unclaimHere(key)
            throw error
        }
        let chat = chat
        let lease = Self.claimLease
        let renewal = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: lease / 3)
                guard !Task.isCancelled else { return }
                // Lost (the lease ran out while the database was away, and another took it):
                // stop writing. Unreachable: keep going; the next renewal tries again.
                if (try? await chat.attachments.claimUpload(user: key.user, clientID: key.clientID, holder: holder, lease: lease)) == false {
                    self?.claims.withLock { $0[key]?.interrupt }?()
                    return
                }
            }
        }
        claims.withLock { table in
            table[key]?.holder = holder
            table[key]?.renewal = renewal
        }
        return true
    }

    /// The first step of ``claim(_:interrupt:takeOver:)``: this process's table.
    private func claimHere(_ key: PartialKey, interrupt: (@Sendable () -> Void)?, takeOver: Bool) async -> Bool {
        while true {
            enum Outcome { case claimed, busy, wait((@Sendable () -> Void)?) }
            let outcome: Outcome = claims.withLock { table in
                guard let holder = table[key] else {
                    table[key] = Holder(interrupt: interrupt)
                    return .claimed
                }
                return takeOver ? .wait(holder.interrupt) : .busy
            }
            switch outcome {
            case .claimed: return true
            case .busy: return false
            case .wait(let stop):
                stop?()
                await released(key)
            }
        }
    }

    /// Returns once `key` is not held (callers then try to claim it again).
    private func released(_ key: PartialKey) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let held = claims.withLock { table in
                guard table[key] != nil else { return false }
                table[key]?.waiters.append(continuation)
                return true
            }
            if !held { continuation.resume() }
        }
    }

    /// Lets `key` go: the database claim is released first, then the requests here that wait
    /// for it go on (so they find it free).
    private func unclaim(_ key: PartialKey) {
        guard let holder = claims.withLock({ $0[key] }), let name = holder.holder else { return unclaimHere(key) }
        holder.renewal?.cancel()
        let chat = chat
        Task {
            try? await chat.attachments.releaseUpload(user: key.user, clientID: key.clientID, holder: name)
            unclaimHere(key)
        }
    }

    private func unclaimHere(_ key: PartialKey) {
        let waiters = claims.withLock { $0.removeValue(forKey: key)?.waiters ?? [] }
        for waiter in waiters { waiter.resume() }
    }

    /// Logs, once per process, that photos cannot be read and why.
    private func sayImagesUnavailable(_ why: String) {
        let said = saidImagesUnavailable.withLock { said in
            defer { said = true }
            return said
        }
        guard !said else { return }
        logger.error("photos cannot be read: install libvips 8 (libvips42); photo uploads are answered 500 until then",
                     metadata: ["reason": .string(why)])
    }

    package static func imageError(_ problem: PhotoPipeline.Problem) -> ChatError {
        switch problem {
        case .image(.tooLarge): ChatError.imageTooLarge(problem.description)
        // The server's fault, not the photo's: a 500 that says what the operator must install.
        // Its cause (a path, the loader's text) goes to the log, not to the uploader.
        case .image(.unavailable): ChatError(.internalError, "this server cannot read photos now (libvips is not loaded); its operator must install libvips 8")
        default: ChatError.invalidImage(problem.description)
        }
    }

    package static func storageError(_ error: any Error) -> any Error {
        if let error = error as? BlobStoreError, error.isNoSpace {
            return ChatError.storageFull
        }
        return error
    }

    private func reserveUploadSlot(_ user: Int64) -> Bool {
        uploadsInProgress.withLock { counts in
            let current = counts[user, default: 0]
            guard current < configuration.concurrentUploadsPerUser else { return false }
            counts[user] = current + 1
            return true
        }
    }

    private func releaseUploadSlot(_ user: Int64) {
        uploadsInProgress.withLock { counts in
            let remaining = counts[user, default: 1] - 1
            counts[user] = remaining > 0 ? remaining : nil
        }
    }

    // MARK: - Avatars

    /// Handles `GET /v1/avatars/{id}`: the thumbnail of an upload that is someone's profile
    /// photo or a conversation's photo now — no token (an `<img src>` or MessageKit's avatar
    /// view sends none); anything else is 404. The id is unguessable, and the bytes of one id
    /// never change, so caches keep it.
    package func avatar(_ request: Request, id: String) async throws -> Response {
        let attachment = try await chat.attachments.avatar(id)
        guard let thumbnail = attachment.thumbnailBlob else { throw ChatError.thumbnailNotFound }
        return try publicThumbnail(request, blob: thumbnail, missing: .attachmentNotFound)
    }

    /// A thumbnail anyone with its path may read (an avatar, a link preview's): a JPEG cached
    /// publicly for a day, named by its blob (the bytes of a blob never change).
    private func publicThumbnail(_ request: Request, blob: String, missing: ChatError) throws -> Response {
        let etag = "\"\(blob)\""
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: etag)
        headers.add(name: "Cache-Control", value: "public, max-age=86400")
        if request.ifNoneMatch(etag) { return Response(status: .notModified, headers: headers) }
        guard let key = BlobKey(hex: blob), let file = try blobs.open(key) else { throw missing }
        headers.add(name: "Content-Type", value: "image/jpeg")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "Content-Security-Policy", value: "default-src 'none'; sandbox")
        var response = Response(status: .ok, headers: headers)
        response.file = FileRegion(descriptor: file.descriptor, offset: 0, length: file.size, owner: file)
        return response
    }

    /// Handles `GET /v1/previews/{id}`: a link preview's thumbnail, with no token, as an
    /// avatar (a picture of a public page, at an unguessable path a message names). 404 for an
    /// id no preview has.
    package func previewImage(_ request: Request, id: String) async throws -> Response {
        guard let thumbnail = try await chat.linkPreviews.thumbnail(publicID: id) else { throw ChatError.thumbnailNotFound }
        return try publicThumbnail(request, blob: thumbnail, missing: .thumbnailNotFound)
    }

    // MARK: - Download

    /// Handles `GET /v1/media/{id}` and `/thumbnail`: a bearer token of someone allowed to
    /// see it, or a valid signed URL; `If-None-Match` (304) and one `Range` (206/416).
    package func download(_ request: Request, id: String, variant: MediaVariant,
                  caller: @Sendable (Request) async throws -> Caller) async throws -> Response {
        let query = request.queryItems
        let attachment: StoredAttachment
        let signed = query["signature"] != nil || query["expires"] != nil
        if signed {
            try await verifySignature(id: id, variant: variant, expires: query["expires"], signature: query["signature"])
            attachment = try await chat.attachments.attachment(signedID: id)
        } else {
            attachment = try await chat.attachments.attachment(try await caller(request), id: id)
        }
        let blob: String, mimeType: String
        switch variant {
        case .original:
            blob = attachment.blob
            mimeType = Self.servedType(attachment.info)
        case .thumbnail:
            guard let thumbnail = attachment.thumbnailBlob else {
                throw ChatError.thumbnailNotFound
            }
            blob = thumbnail
            mimeType = "image/jpeg"
        }
        let etag = "\"\(blob)\""
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: etag)
        headers.add(name: "Cache-Control", value: signed ? "private, max-age=\(configuration.urlLifetimeSeconds)" : "private, max-age=31536000, immutable")
        if request.ifNoneMatch(etag) {
            return Response(status: .notModified, headers: headers)
        }
        guard let key = BlobKey(hex: blob), let file = try blobs.open(key) else { throw ChatError.attachmentNotFound }
        headers.add(name: "Content-Type", value: mimeType)
        headers.add(name: "Accept-Ranges", value: "bytes")
        let disposition = attachment.info.kind == .file && variant == .original ? "attachment" : "inline"
        let name = variant == .thumbnail ? attachment.info.name.map { $0 + ".jpg" } : attachment.info.name
        headers.add(name: "Content-Disposition", value: FileName.contentDisposition(disposition, name: name))
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "Content-Security-Policy", value: "default-src 'none'; sandbox")
        var range = ByteRange.whole
        if let header = request.headers["range"] {
            let ifRange = request.headers["if-range"]
            if ifRange == nil || ifRange == etag { range = ByteRange.parse(header, length: file.size) }
        }
        if range != .unsatisfiable { metrics.withLock { $0.downloads += 1 } }
        switch range {
        case .whole:
            var response = Response(status: .ok, headers: headers)
            response.file = FileRegion(descriptor: file.descriptor, offset: 0, length: file.size, owner: file)
            return response
        case .part(let first, let last):
            headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(file.size)")
            var response = Response(status: .partialContent, headers: headers)
            response.file = FileRegion(descriptor: file.descriptor, offset: first, length: last - first + 1, owner: file)
            return response
        case .unsatisfiable:
            var response = HTTPError(.rangeNotSatisfiable, code: ChatError.Code.rangeNotSatisfiable.rawValue,
                                     message: "the range starts beyond the end of the \(file.size)-byte file").response
            response.headers.add(name: "Content-Range", value: "bytes */\(file.size)")
            return response
        }
    }

    /// The type a download is served as. Files declared as something a browser would run
    /// (HTML, SVG, XML, JavaScript) are served as bytes.
    package static func servedType(_ info: MediaInfo) -> String {
        guard info.kind == .file else { return info.mimeType }
        let active = ["html", "xml", "svg", "javascript", "ecmascript", "xhtml"]
        return active.contains(where: { info.mimeType.contains($0) }) ? "application/octet-stream" : info.mimeType
    }

    // MARK: - Signed URLs

    /// A short-lived URL for an attachment the caller may download.
    package func signedURL(_ caller: Caller, id: String, variant: MediaVariant) async throws -> SignedMediaURL {
        let attachment = try await chat.attachments.attachment(caller, id: id)
        if variant == .thumbnail, attachment.thumbnailBlob == nil {
            throw ChatError.thumbnailNotFound
        }
        let expires = Int64(Date().timeIntervalSince1970) + Int64(configuration.urlLifetimeSeconds)
        let signature = try await sign(id: attachment.info.id, variant: variant, expires: expires)
        let path = "/v1/media/\(attachment.info.id)" + (variant == .thumbnail ? "/thumbnail" : "")
        return SignedMediaURL(url: "\(path)?expires=\(expires)&signature=\(signature)",
                              expiresAt: Date(timeIntervalSince1970: TimeInterval(expires)))
    }

    private func sign(id: String, variant: MediaVariant, expires: Int64) async throws -> String {
        let key: [UInt8]
        if let cached = signingKey.withLock({ $0 }) {
            key = cached
        } else {
            key = try await chat.attachments.signingKey()
            signingKey.withLock { $0 = key }
        }
        let message = Array("parley-media-v1\n\(id)\n\(variant.rawValue)\n\(expires)".utf8)
        return Crypto.base64URLEncoded(Crypto.hmacSHA256(key: key, message: message))
    }

    private func verifySignature(id: String, variant: MediaVariant, expires: String?, signature: String?) async throws {
        let invalid = ChatError.invalidSignature
        guard let expires, let expiry = Int64(expires), let signature, signature.utf8.count <= 64 else { throw invalid }
        let now = Int64(Date().timeIntervalSince1970)
        guard expiry >= now, expiry - now <= Int64(max(configuration.urlLifetimeSeconds, 1)) + 60 else { throw invalid }
        let expected = try await sign(id: id, variant: variant, expires: expiry)
        guard Crypto.constantTimeEqual(Array(expected.utf8), Array(signature.utf8)) else { throw invalid }
    }

    // MARK: - Collection

    /// Forgets uploads no message uses and removes blobs no attachment uses, until nothing is
    /// left to do. Runs behind the gate: an upload cannot store a blob this pass is removing.
    @discardableResult package
    func collect() async throws -> Int {
        let cutoff = Date().addingTimeInterval(-TimeInterval(configuration.orphanLifetimeSeconds))
        var removed = 0
        let partials = partials
        try await offLoop { partials.refresh() }  // other nodes' uploads too
        for entry in partials.stale(before: cutoff) {
            let key = PartialKey(user: entry.record.user, clientID: entry.record.clientID)
            guard (try? await claim(key)) == true else { continue }  // bytes are arriving now
            if partials.remove(user: key.user, clientID: key.clientID) { removed += 1 }
            unclaim(key)
        }
        while true {
            let count: Int = try await gate.run {
                let garbage = try await self.chat.attachments.collect(policy: self.policy)
                guard !garbage.isEmpty else { return 0 }
                let blobs = self.blobs
                try await self.offLoop { for hex in garbage { if let key = BlobKey(hex: hex) { try blobs.delete(key) } } }
                try await self.chat.attachments.forgetGarbage(garbage)
                self.metrics.withLock { $0.blobsRemoved += garbage.count }
                return garbage.count
            }
            removed += count
            if count < 500 { return removed }
        }
    }
}

/// An asynchronous mutual exclusion: `run` bodies execute one at a time, in arrival order,
/// even across suspension points (an actor would interleave them).
package final class AsyncGate: Sendable {
    private let state = LockedValue((busy: false, waiters: [CheckedContinuation<Void, Never>]()))

    package func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enter = state.withLock { state -> Bool in
                if state.busy {
                    state.waiters.append(continuation)
                    return false
                }
                state.busy = true
                return true
            }
            if enter { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
