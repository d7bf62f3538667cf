import CParleyVips
import Foundation

/// Reads images and makes thumbnails with libvips.
///
/// Only the JPEG, PNG, GIF and WebP loaders are enabled (libvips can also open SVG, PDF,
/// MATLAB files and more; none of those parsers sees user input). Every image's header is
/// read before any pixel is decoded, and one larger than ``Limits-swift.struct/maxPixels``
/// or ``Limits-swift.struct/maxSide`` is refused, so a "decompression bomb" (a small file
/// that claims 100,000 × 100,000 pixels) costs nothing.
package struct ImageProcessor: Sendable {
    /// Bounds on what is decoded.
    package struct Limits: Sendable, Hashable {
        /// Largest accepted width × height. Default: 64 megapixels.
        package var maxPixels = 64_000_000
        /// Largest accepted width or height. Default: 20,000 px.
        package var maxSide = 20_000
        /// The thumbnail fits a square of this side. Default: 512 px.
        package var thumbnailSide = 512
        /// JPEG quality of thumbnails. Default: 80.
        package var thumbnailQuality = 80

        /// The defaults.
        package init() {}
    }

    /// Why an image was refused.
    package enum Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// libvips could not read it (corrupt, truncated, or not what it claims).
        case unreadable(String)
        /// This server cannot read images at all: libvips is missing or did not start (the
        /// operator's to fix, not the uploader's).
        case unavailable(String)
        /// Larger than the limits.
        case tooLarge(width: Int, height: Int, maxPixels: Int, maxSide: Int)

        package var description: String {
            switch self {
            case .unreadable(let detail): "the image could not be read (\(detail))"
            case .unavailable(let detail): "this server cannot read images: \(detail)"
            case .tooLarge(let width, let height, let maxPixels, let maxSide):
                "the image is \(width)×\(height) pixels; at most \(maxPixels / 1_000_000) megapixels and \(maxSide) px a side are accepted"
            }
        }
    }

    /// An image's size as displayed.
    package struct Info: Sendable, Hashable {
        /// Width after EXIF orientation.
        package var width: Int
        /// Height after EXIF orientation.
        package var height: Int
    }

    /// The limits in force.
    package var limits: Limits

    /// A processor. libvips is loaded and started by the first image read, not here: a
    /// server that never sees a photo never maps it (issue 29).
    package init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Nil once libvips has started with only the allowed loaders; else why it did not.
    private static let startFailure: String? = {
        guard parley_vips_start() == 0 else { return parley_vips_start_error().map { String(cString: $0) } ?? "libvips did not start" }
        parley_vips_block_untrusted(1)
        parley_vips_block_operation("VipsForeignLoad", 1)
        for loader in ["VipsForeignLoadJpeg", "VipsForeignLoadPng", "VipsForeignLoadGif", "VipsForeignLoadWebp"] {
            parley_vips_block_operation(loader, 0)
        }
        parley_vips_cache_set_max(0)
        return nil
    }()

    /// The displayed size of the image at `path`, reading only its header.
    ///
    /// - Throws: ``Problem/unreadable(_:)`` or ``Problem/tooLarge(width:height:maxPixels:maxSide:)``.
    package func info(path: String) throws(Problem) -> Info {
        if let failure = Self.startFailure { throw .unavailable(failure) }
        guard let image = parley_vips_open(path) else { throw .unreadable(Self.lastError()) }
        defer { parley_vips_unref(image) }
        let width = Int(parley_vips_width(image)), height = Int(parley_vips_height(image))
        guard width > 0, height > 0 else { throw .unreadable("no pixels") }
        guard width <= limits.maxSide, height <= limits.maxSide, width * height <= limits.maxPixels else {
            throw .tooLarge(width: width, height: height, maxPixels: limits.maxPixels, maxSide: limits.maxSide)
        }
        let swapped = parley_vips_orientation_swap(image) != 0
        return Info(width: swapped ? height : width, height: swapped ? width : height)
    }

    /// Writes a JPEG thumbnail of the image at `path` to `output`: upright (EXIF orientation
    /// applied), fitting ``Limits-swift.struct/thumbnailSide``, transparency on white, no
    /// metadata. Call ``info(path:)`` first: it enforces the size limits.
    package func thumbnail(path: String, output: String) throws(Problem) -> Info {
        if let failure = Self.startFailure { throw .unavailable(failure) }
        var thumbnail: OpaquePointer?
        guard parley_vips_thumbnail(path, &thumbnail, Int32(limits.thumbnailSide)) == 0, var image = thumbnail else {
            throw .unreadable(Self.lastError())
        }
        defer { parley_vips_unref(image) }
        if parley_vips_has_alpha(image) != 0 {
            var flat: OpaquePointer?
            guard parley_vips_flatten_white(image, &flat) == 0, let flattened = flat else { throw .unreadable(Self.lastError()) }
            parley_vips_unref(image)
            image = flattened
        }
        guard parley_vips_jpegsave(image, output, Int32(limits.thumbnailQuality)) == 0 else { throw .unreadable(Self.lastError()) }
        return Info(width: Int(parley_vips_width(image)), height: Int(parley_vips_height(image)))
    }

    private static func lastError() -> String {
        guard let buffer = parley_vips_error() else { return "unknown error" }
        let text = String(cString: buffer)
        parley_vips_error_clear()
        // libvips names the temporary path; keep the reason only.
        let reason = text.split(separator: "\n").first.map { line in
            line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? String(line)
        } ?? "unknown error"
        return reason.isEmpty ? "unknown error" : String(reason.prefix(200))
    }
}
