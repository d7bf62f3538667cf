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
        /// Larger than the limits.
        case tooLarge(width: Int, height: Int, maxPixels: Int, maxSide: Int)

        package var description: String {
            switch self {
            case .unreadable(let detail): "the image could not be read (\(detail))"
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

    /// A processor; the first one initialises libvips.
    package init(limits: Limits = Limits()) {
        self.limits = limits
        _ = Self.initialised
    }

    private static let initialised: Bool = {
        guard vips_init("parley") == 0 else { return false }
        vips_block_untrusted_set(1)
        vips_operation_block_set("VipsForeignLoad", 1)
        for loader in ["VipsForeignLoadJpeg", "VipsForeignLoadPng", "VipsForeignLoadGif", "VipsForeignLoadWebp"] {
            vips_operation_block_set(loader, 0)
        }
        vips_cache_set_max(0)
        return true
    }()

    /// The displayed size of the image at `path`, reading only its header.
    ///
    /// - Throws: ``Problem/unreadable(_:)`` or ``Problem/tooLarge(width:height:maxPixels:maxSide:)``.
    package func info(path: String) throws(Problem) -> Info {
        guard Self.initialised else { throw .unreadable("libvips did not start") }
        guard let image = parley_vips_open(path) else { throw .unreadable(Self.lastError()) }
        defer { parley_vips_unref(image) }
        let width = Int(vips_image_get_width(image)), height = Int(vips_image_get_height(image))
        guard width > 0, height > 0 else { throw .unreadable("no pixels") }
        guard width <= limits.maxSide, height <= limits.maxSide, width * height <= limits.maxPixels else {
            throw .tooLarge(width: width, height: height, maxPixels: limits.maxPixels, maxSide: limits.maxSide)
        }
        let swapped = vips_image_get_orientation_swap(image) != 0
        return Info(width: swapped ? height : width, height: swapped ? width : height)
    }

    /// Writes a JPEG thumbnail of the image at `path` to `output`: upright (EXIF orientation
    /// applied), fitting ``Limits-swift.struct/thumbnailSide``, transparency on white, no
    /// metadata. Call ``info(path:)`` first: it enforces the size limits.
    package func thumbnail(path: String, output: String) throws(Problem) -> Info {
        guard Self.initialised else { throw .unreadable("libvips did not start") }
        var thumbnail: UnsafeMutablePointer<VipsImage>?
        guard parley_vips_thumbnail(path, &thumbnail, Int32(limits.thumbnailSide)) == 0, var image = thumbnail else {
            throw .unreadable(Self.lastError())
        }
        defer { parley_vips_unref(image) }
        if vips_image_hasalpha(image) != 0 {
            var flat: UnsafeMutablePointer<VipsImage>?
            guard parley_vips_flatten_white(image, &flat) == 0, let flattened = flat else { throw .unreadable(Self.lastError()) }
            parley_vips_unref(image)
            image = flattened
        }
        guard parley_vips_jpegsave(image, output, Int32(limits.thumbnailQuality)) == 0 else { throw .unreadable(Self.lastError()) }
        return Info(width: Int(vips_image_get_width(image)), height: Int(vips_image_get_height(image)))
    }

    private static func lastError() -> String {
        guard let buffer = vips_error_buffer() else { return "unknown error" }
        let text = String(cString: buffer)
        vips_error_clear()
        // libvips names the temporary path; keep the reason only.
        let reason = text.split(separator: "\n").first.map { line in
            line.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? String(line)
        } ?? "unknown error"
        return reason.isEmpty ? "unknown error" : String(reason.prefix(200))
    }
}
