import Foundation
import ParleyMedia
import ParleyNet

/// `parley-bench thumbnail`: the server's photo path on one file, in process, N times —
/// header read with the pixel limits, then a thumbnail of the same size `vipsthumbnail -s`
/// makes — with the same libvips the `vipsthumbnail` command line uses (scripts/bench-media.sh
/// times that beside it).
func runThumbnail(_ options: Options) async throws {
    guard let path = options.string("image") else { throw BenchError("thumbnail needs --image PATH (a JPEG)") }
    let count = try options.int("count", 20)
    var limits = ImageProcessor.Limits()
    limits.thumbnailSide = try options.int("size", 512)
    let processor = ImageProcessor(limits: limits)
    let output = NSTemporaryDirectory() + "parley-bench-thumb-\(getpid()).jpg"
    defer { unlink(output) }
    var times: [UInt64] = []
    var size: ImageProcessor.Info?
    var pixels = 0
    for _ in 0..<count {
        let started = monotonicNanoseconds()
        let info = try processor.info(path: path)
        size = try processor.thumbnail(path: path, output: output)
        times.append(monotonicNanoseconds() - started)
        pixels = info.width * info.height
    }
    times.sort()
    report(options, ["benchmark": "thumbnail", "count": "\(count)", "megapixels": String(format: "%.1f", Double(pixels) / 1e6),
                     "thumbnail": "\(size?.width ?? 0)x\(size?.height ?? 0)",
                     "p50_ms": String(format: "%.1f", percentile(times, 0.5) / 1000),
                     "p99_ms": String(format: "%.1f", percentile(times, 0.99) / 1000)])
}
