import Foundation
package import ParleyChat
import ParleyCrypto
package import ParleyLog
import ParleyMedia
package import ParleyMediaService
import ParleyOutbound
package import ParleySync
import ParleyWire

/// Counters for `/metrics`.
package struct LinkPreviewMetrics: Sendable, Hashable {
    /// Pages read (a fetch that found something to show).
    package var fetched = 0
    /// Links answered from the app's cache.
    package var cached = 0
    /// Links whose page gave nothing (refused address, error answer, not HTML, nothing in it).
    package var empty = 0
    /// Messages that got a preview.
    package var previewed = 0
}

/// A node's link-preview worker: claims the jobs sends leave (``LinkPreviews``), reads each
/// link once per app and cache lifetime (``LinkPreviewFetcher``), makes the image's
/// thumbnail through the media pipeline (the same structure check and libvips thumbnailer as
/// photos, stored in the blob store), and puts the preview on the message.
package final class LinkPreviewService: Sendable {
    private let chat: Chat
    private let media: MediaService
    private let fetcher: LinkPreviewFetcher
    private let wakeup: Wakeup
    private let logger: Logger
    /// How long a page read is reused for the same link, and how long a page that gave
    /// nothing is (a site that was down is tried again sooner).
    private let cacheLifetime: Duration
    private let emptyLifetime: Duration
    /// Jobs in flight at once (each a blocking fetch on a thread of ``queue``).
    private let concurrency: Int
    private let queue = DispatchQueue(label: "parley.link-previews", attributes: .concurrent)
    private let holder = "lp_" + Crypto.randomToken(bytes: 6)
    /// Counters for `/metrics`.
    package let metrics = LockedValue(LinkPreviewMetrics())
    private let saidImagesUnavailable = LockedValue(false)

    /// A worker for `chat`'s jobs, woken by `wakeup` (the one the chat's sends signal).
    package init(chat: Chat, media: MediaService, fetcher: LinkPreviewFetcher, wakeup: Wakeup, cacheLifetime: Duration = .seconds(86_400),
                 emptyLifetime: Duration = .seconds(600), concurrency: Int = 8, logger: Logger) {
        self.chat = chat
        self.media = media
        self.fetcher = fetcher
        self.wakeup = wakeup
        self.cacheLifetime = cacheLifetime
        self.emptyLifetime = min(emptyLifetime, cacheLifetime)
        self.concurrency = max(1, concurrency)
        self.logger = logger
    }

    /// Works until cancelled: claims waiting jobs (a few at a time), finishes them, and
    /// sleeps until a send leaves one here or a second passes (another node's sends).
    package func run() async {
        let worker = chat.workers.register("link-previews")
        defer { worker.stopped() }
        while !Task.isCancelled {
            worker.idle()
            let jobs: [LinkPreviewJob]
            do {
                jobs = try await chat.linkPreviews.claim(holder: holder, limit: concurrency)
            } catch {
                logger.failed("cannot claim link previews; retrying", error)
                await wakeup.wait(upTo: .seconds(1))
                continue
            }
            if jobs.isEmpty {
                await wakeup.wait(upTo: .seconds(1))
                continue
            }
            worker.busy()
            await withTaskGroup(of: Void.self) { group in
                for job in jobs { group.addTask { await self.process(job) } }
            }
        }
    }

    /// One job: the cache's copy when fresh, else a fetch; then the message's preview.
    func process(_ job: LinkPreviewJob) async {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        do {
            let freshAfter = now - milliseconds(cacheLifetime)
            if try await chat.linkPreviews.cached(app: job.app, url: job.url, freshAfter: freshAfter) != nil {
                metrics.withLock { $0.cached += 1 }
                if try await chat.linkPreviews.finish(job, holder: holder, fetched: nil) { metrics.withLock { $0.previewed += 1 } }
                return
            }
            let fetcher = fetcher
            let outcome = await queue.run { fetcher.fetch(job.url) }
            let entry: CachedLinkPreview
            switch outcome {
            case .found(let page, let image):
                metrics.withLock { $0.fetched += 1 }
                let preview = LinkPreview(url: job.url, title: page.title, description: page.description, siteName: page.siteName)
                entry = CachedLinkPreview(preview: preview, thumbnail: await image.asyncFlatMap(thumbnail), fetchedAt: now)
            case .nothing(let why):
                metrics.withLock { $0.empty += 1 }
                logger.info("no link preview", metadata: ["host": .string(LinkPreviewFetcher.host(job.url)), "why": .string(why)])
                // Kept as if fetched earlier, so that it expires after emptyLifetime.
                entry = CachedLinkPreview(preview: nil, fetchedAt: now - milliseconds(cacheLifetime) + milliseconds(emptyLifetime))
            }
            if try await chat.linkPreviews.finish(job, holder: holder, fetched: entry) { metrics.withLock { $0.previewed += 1 } }
        } catch {
            logger.failed("a link preview could not be stored; trying again", error)
            try? await chat.linkPreviews.retry(job, holder: holder, after: .seconds(5 * (job.attempts + 1)))
        }
    }

    /// The JPEG thumbnail of a page's image, stored in the blob store: its blob and size; nil
    /// when the image cannot be read (the preview is kept without it).
    func thumbnail(_ image: FetchedImage) async -> (blob: String, width: Int, height: Int)? {
        let media = media
        let blobs = media.blobs
        var original: StagingFile?
        var small: StagingFile?
        defer {
            original?.discard()
            small?.discard()
        }
        do {
            let input = try blobs.makeStagingFile()
            original = input
            try input.write(image.bytes)
            input.closeForWriting()
            let output = try blobs.makeStagingFile()
            small = output
            output.closeForWriting()
            let images = media.images
            let made = try await media.offLoop { () throws -> (ImageProcessor.Info, MediaFiles.Hashed) in
                try MediaFiles.checkStructure(image.format, path: input.path)
                _ = try images.info(path: input.path)
                let info = try images.thumbnail(path: input.path, output: output.path)
                return (info, try MediaFiles.sha256(path: output.path))
            }
            guard let key = BlobKey(hex: made.1.hex) else { return nil }
            try await media.gate.run { try await media.offLoop { try blobs.put(key, from: output) } }
            return (made.1.hex, made.0.width, made.0.height)
        } catch let problem as ImageProcessor.Problem {
            if case .unavailable = problem, !saidImagesUnavailable.withLock({ said in defer { said = true }; return said }) {
                logger.failed("link previews have no pictures: libvips cannot be loaded (install libvips 8)", problem, level: .error)
            }
            return nil
        } catch {
            logger.debug("a link preview's image was not used", metadata: ["error": .string("\(error)")])
            return nil
        }
    }
}

/// A duration in whole milliseconds.
private func milliseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
}

extension Optional where Wrapped: Sendable {
    /// `flatMap` with an asynchronous transform.
    func asyncFlatMap<T>(_ transform: (Wrapped) async -> T?) async -> T? {
        guard let value = self else { return nil }
        return await transform(value)
    }
}
