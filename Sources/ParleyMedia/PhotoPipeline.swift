package import ParleyWire

/// The steps every uploaded photo takes, in one place so the server and the fuzzer run the
/// same code in the same order:
///
/// 1. The container's structure is checked by our own parser (``MetadataStripper``): every
///    segment or chunk length must fit inside the file. Only then does libvips (and the
///    libpng, libjpeg, libwebp or GIF decoder under it) read a byte. A decoder trusts a
///    declared length before it reads: an 85-byte PNG whose `tEXt` chunk claims 1 GiB made
///    libpng ask for 1 GiB (found by `fuzz-media`).
/// 2. Location-bearing metadata is removed (unless kept by configuration). The file that
///    results is the one stored and served.
/// 3. The stored file's header is read and held to ``ImageProcessor/Limits-swift.struct``
///    before any pixel is decoded.
/// 4. The thumbnail is made from the stored file.
package struct PhotoPipeline: Sendable {
    /// What a photo came to.
    package struct Result: Sendable, Hashable {
        /// The photo's displayed size.
        package var size: ImageProcessor.Info
        /// The thumbnail's size.
        package var thumbnail: ImageProcessor.Info
        /// The SHA-256 (hex) and size of the file written without metadata, or `nil` when
        /// the input is stored as it came (nothing to remove, or metadata kept).
        package var stripped: MediaFiles.Hashed?
    }

    /// Why a photo was refused.
    package enum Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// The structure does not add up (truncated, or a length that leaves the file).
        case structure(MetadataStripper.Problem)
        /// libvips refused it, or it is larger than the limits.
        case image(ImageProcessor.Problem)

        package var description: String {
            switch self {
            case .structure(let problem): problem.description
            case .image(let problem): problem.description
            }
        }
    }

    /// Reads headers and makes thumbnails.
    package var images: ImageProcessor
    /// Keep EXIF, XMP and the like (`--keep-photo-metadata`); the structure is still checked.
    package var keepMetadata: Bool

    /// A pipeline over `images`.
    package init(images: ImageProcessor, keepMetadata: Bool = false) {
        self.images = images
        self.keepMetadata = keepMetadata
    }

    /// Runs the steps over the photo at `input`, writing the metadata-free copy to `stripped`
    /// and the thumbnail (JPEG) to `thumbnail`.
    ///
    /// - Throws: ``Problem`` for a photo that is refused; `BlobStoreError` when a file cannot
    ///   be read or written.
    package func process(_ format: MediaFormat, input: String, stripped: StagingFile, thumbnail: String) throws -> Result {
        var hashed: MediaFiles.Hashed?
        do {
            if keepMetadata {
                try MediaFiles.checkStructure(format, path: input)
            } else {
                hashed = try MediaFiles.stripMetadata(format, input: input, output: stripped)
            }
        } catch let problem as MetadataStripper.Problem {
            throw Problem.structure(problem)
        }
        let stored = hashed == nil ? input : stripped.path
        do {
            let size = try images.info(path: stored)
            let small = try images.thumbnail(path: stored, output: thumbnail)
            return Result(size: size, thumbnail: small, stripped: hashed)
        } catch {
            throw Problem.image(error)
        }
    }
}
