import Foundation
import ParleyMedia
import ParleyNet
import ParleyNetTesting
import ParleyWire

/// libFuzzer entry for everything an upload's bytes and headers pass through. The first byte
/// picks the part:
/// - 0–3: metadata removal for JPEG, PNG, WebP, GIF. Promises: never traps; every copied
///   range lies inside the input; the output grows by at most one minimal EXIF segment and a
///   WebP header; and what it outputs is accepted by it again, unchanged (stripping is
///   idempotent, so a stripped file is well-formed by the stripper's own rules).
/// - 4: the whole photo path as an upload takes it (``PhotoPipeline``): sniffing, the
///   structure check and metadata removal, libvips reading the header with the pixel limits,
///   and a thumbnail of at most 256 × 256.
/// - 5: the text an upload's request carries: `Content-Type`, the file name (and the
///   `Content-Disposition` made from it), a resumed upload's `Content-Range`, and a
///   download's `Range`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMedia(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let body = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    switch data[0] % 6 {
    case 0: strip(.jpeg, body)
    case 1: strip(.png, body)
    case 2: strip(.webp, body)
    case 3: strip(.gif, body)
    case 4: image(body)
    default: text(Array(body))
    }
    return 0
}

private func strip(_ format: MediaFormat, _ body: UnsafeRawBufferPointer) {
    guard let (pieces, orientation) = try? MetadataStripper.plan(format, body) else { return }
    precondition((1...8).contains(orientation), "orientation \(orientation) out of range")
    for case .copy(let range) in pieces {
        precondition(range.lowerBound >= 0 && range.upperBound <= body.count, "a copied range leaves the input")
    }
    let out = MetadataStripper.apply(pieces, to: body)
    precondition(out.count <= body.count + 64, "stripping grew the file from \(body.count) to \(out.count) bytes")
    out.withUnsafeBytes { stripped in
        guard let (again, _) = try? MetadataStripper.plan(format, stripped) else {
            preconditionFailure("the stripped output is refused by the stripper")
        }
        precondition(MetadataStripper.apply(again, to: stripped) == out, "stripping is not idempotent")
    }
}

private let pipeline: PhotoPipeline = {
    var limits = ImageProcessor.Limits()
    limits.maxPixels = 4_000_000
    limits.thumbnailSide = 256
    return PhotoPipeline(images: ImageProcessor(limits: limits))
}()

private let scratch: FileBlobStore? = {
    try? FileBlobStore(root: NSTemporaryDirectory() + "parley-fuzz-media-\(getpid())")
}()

/// The upload's photo steps, as the server runs them (``PhotoPipeline``).
private func image(_ body: UnsafeRawBufferPointer) {
    guard let format = MediaFormat.sniff(body.prefix(MediaFormat.magicLength)), format.kind == .photo,
          let scratch, let input = try? scratch.makeStagingFile(), let stripped = try? scratch.makeStagingFile() else { return }
    defer { input.discard(); stripped.discard() }
    guard (try? input.write(body)) != nil else { return }
    input.closeForWriting()
    let thumbnail = scratch.root + "/thumb.jpg"
    guard let result = try? pipeline.process(format, input: input.path, stripped: stripped, thumbnail: thumbnail) else { return }
    let size = result.size, small = result.thumbnail
    precondition(size.width > 0 && size.height > 0 && size.width * size.height <= 4_000_000, "the pixel limit let \(size) through")
    precondition(small.width <= 256 && small.height <= 256, "a thumbnail of \(small) is larger than its box")
}

private func text(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    if let type = MediaType.parse(text) {
        precondition(type.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ";") }, "a parsed type holds \(type)")
    }
    if let name = try? FileName.sanitize(text) {
        precondition(!name.isEmpty && !name.contains("/") && !name.contains("\\") && name.utf8.count <= FileName.maxBytes)
        precondition(!name.hasPrefix("."), "a name starts with a dot")
        let header = FileName.contentDisposition("attachment", name: name)
        precondition(header.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "a Content-Disposition holds a byte a header may not")
        precondition(header.filter { $0 == "\"" }.count == 2, "a quote escaped the filename")
    }
    if let range = ContentRange.parse(text) {
        precondition(range.first >= 0 && range.first <= range.last && range.last == range.total - 1, "Content-Range \(range) is not the end of a file")
    }
    let length = Int64(bytes.first ?? 0) * 1000
    switch ByteRange.parse(text, length: length) {
    case .part(let first, let last):
        precondition(first >= 0 && first <= last && last < length, "range \(first)-\(last) outside \(length)")
    case .whole, .unsatisfiable:
        break
    }
}

#if !FUZZING

/// Without libFuzzer: replays saved inputs (crashes found once stay tests forever).
@main
struct Replay {
    static func main() {
        replayFuzzInputs(name: "fuzz-media", arguments: Array(CommandLine.arguments.dropFirst()), target: fuzzMedia)
    }
}
#endif
