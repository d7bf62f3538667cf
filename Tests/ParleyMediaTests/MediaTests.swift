import Foundation
import ParleyCrypto
import ParleyMedia
import ParleyWire
import Testing

/// A small JPEG made by hand: SOI, APP0 JFIF, APP1 EXIF (orientation 6 and a GPS pointer),
/// APP13 IPTC, COM, a DQT, SOS, two entropy-coded bytes with a stuffed 0xFF, EOI, then a
/// trailing "secondary image".
func handmadeJPEG(orientation: UInt8 = 6) -> [UInt8] {
    func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
        [0xFF, marker, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
    }
    let tiff: [UInt8] = [0x49, 0x49, 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00, 0x02, 0x00,
                         0x12, 0x01, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, orientation, 0x00, 0x00, 0x00,
                         0x25, 0x88, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00, 0x26, 0x00, 0x00, 0x00,
                         0x00, 0x00, 0x00, 0x00]
    return [0xFF, 0xD8]
        + segment(0xE0, Array("JFIF\0".utf8) + [1, 1, 0, 0, 1, 0, 1, 0, 0])
        + segment(0xE1, Array("Exif\0\0".utf8) + tiff + Array("GPS 52.5N 13.4E".utf8))
        + segment(0xED, Array("Photoshop 3.0\0location".utf8))
        + segment(0xFE, Array("taken at home".utf8))
        + segment(0xDB, [0] + [UInt8](repeating: 1, count: 64))
        + segment(0xDA, [1, 1, 0, 0, 63, 0])
        + [0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD9]
        + [0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x04, 0x00, 0x00]
}

struct SniffTests {
    @Test(arguments: [
        ([0xFF, 0xD8, 0xFF, 0xE0], MediaFormat.jpeg),
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], .png),
        (Array("GIF89a".utf8), .gif),
        (Array("RIFF\0\0\0\0WEBPVP8 ".utf8), .webp),
        (Array("RIFF\0\0\0\0WAVEfmt ".utf8), .wav),
        ([0, 0, 0, 24] + Array("ftypisom".utf8), .mp4),
        ([0, 0, 0, 24] + Array("ftypqt  ".utf8), .quicktime),
        ([0, 0, 0, 24] + Array("ftypM4A ".utf8), .m4a),
        ([0, 0, 0, 24] + Array("ftypheic".utf8), .heic),
        ([0x1A, 0x45, 0xDF, 0xA3], .webm),
        (Array("ID3".utf8) + [4, 0], .mp3),
        ([0xFF, 0xFB, 0x90], .mp3),
        ([0xFF, 0xF1, 0x50], .aac),
        (Array("OggS".utf8), .ogg),
        (Array("fLaC".utf8), .flac),
        (Array("%PDF-1.7".utf8), .pdf),
    ] as [([UInt8], MediaFormat)])
    func recognisesFormatsByTheirFirstBytes(_ bytes: [UInt8], _ format: MediaFormat) {
        #expect(MediaFormat.sniff(bytes) == format)
    }

    @Test func textAndTruncatedHeadersAreNothing() {
        for bytes in [Array("<html><script>".utf8), [0xFF, 0xD8], [0, 0, 0, 24] + Array("ftypzzzz".utf8), []] {
            #expect(MediaFormat.sniff(bytes) == nil)
        }
    }

    @Test func declaredTypesParseStrictlyAndAliasesMatch() {
        #expect(MediaType.parse("Image/JPEG; charset=binary") == "image/jpeg")
        #expect(MediaType.parse("image/") == nil)
        #expect(MediaType.parse("image/jp eg") == nil)
        #expect(MediaType.parse("text/html\r\nX: y") == nil)
        #expect(MediaFormat.named("image/jpg") == .jpeg)
        #expect(MediaFormat.named("audio/x-m4a") == .m4a)
        #expect(MediaFormat.m4a.matches(declared: .mp4))
        #expect(!MediaFormat.png.matches(declared: .jpeg))
    }
}

struct MetadataStripperTests {
    func strip(_ format: MediaFormat, _ bytes: [UInt8]) throws -> (out: [UInt8], orientation: Int) {
        try bytes.withUnsafeBytes { buffer in
            let (pieces, orientation) = try MetadataStripper.plan(format, buffer)
            return (MetadataStripper.apply(pieces, to: buffer), orientation)
        }
    }

    @Test func jpegKeepsTheImageAndOnlyTheOrientation() throws {
        let original = handmadeJPEG()
        let (out, orientation) = try strip(.jpeg, original)
        #expect(orientation == 6)
        let text = String(decoding: out, as: UTF8.self)
        for secret in ["GPS", "location", "taken at home", "Photoshop"] { #expect(!text.contains(secret), "\(secret)") }
        #expect(text.contains("JFIF"))
        // JFIF, then a minimal EXIF with orientation 6, then the tables and the scan, ending at EOI.
        let exif = [UInt8](out[20..<(20 + 34)])
        #expect(exif[0..<2] == [0xFF, 0xE1] && exif[29] == 6)
        #expect(out.suffix(2) == [0xFF, 0xD9])
        #expect(Array(out.suffix(6)) == [0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD9])  // the secondary image is gone
        // Stripping what was stripped changes nothing more.
        #expect(try strip(.jpeg, out).out == out)
    }

    @Test func anUprightJPEGGetsNoExifAtAll() throws {
        let (out, orientation) = try strip(.jpeg, handmadeJPEG(orientation: 1))
        #expect(orientation == 1)
        #expect(!String(decoding: out, as: UTF8.self).contains("Exif"))
    }

    /// fuzz-media: an APP1 segment two bytes long, followed by bytes that spell the rest of an
    /// EXIF header, trapped (the EXIF header was looked for past the segment's end).
    @Test func anExifHeaderIsLookedForOnlyInsideItsSegment() throws {
        let short: [UInt8] = [0xFF, 0xE1, 0x00, 0x04] + Array("Ex".utf8)
        let jpeg = handmadeJPEG(orientation: 1)
        let (out, orientation) = try strip(.jpeg, Array(jpeg.prefix(2)) + short + jpeg.dropFirst(2))
        #expect(orientation == 1)
        #expect(out == (try strip(.jpeg, jpeg)).out)
        let found = try #require(Data(base64Encoded: "AP/Y/+AAEEpGSUYAAQGAAAEAAQAA/+EABEV4aWYAAE1NACoAAAAAAAMBDwACAAAAPwAAJzEBEgADAAAi"))
        #expect(throws: MetadataStripper.Problem.malformed("expected a marker at byte 26")) { try strip(.jpeg, Array(found.dropFirst())) }
    }

    @Test func truncatedAndMalformedJPEGsAreRefused() {
        let whole = handmadeJPEG()
        for cut in [3, 10, 30, whole.count - 14] {
            #expect(throws: MetadataStripper.Problem.self) { try strip(.jpeg, Array(whole.prefix(cut))) }
        }
        #expect(throws: MetadataStripper.Problem.self) { try strip(.jpeg, [0xFF, 0xD8, 0x00, 0x00, 0x00]) }
    }

    @Test func pngTextChunksAndTrailingBytesGo() throws {
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let count = UInt32(data.count)
            return [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
                + Array(type.utf8) + data + [0, 0, 0, 0]
        }
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let header = chunk("IHDR", [UInt8](repeating: 1, count: 13)), data = chunk("IDAT", [1, 2, 3]), end = chunk("IEND", [])
        let png = signature + header + chunk("tEXt", Array("GPS\u{0}52N".utf8)) + chunk("eXIf", [1, 2]) + data
            + chunk("iTXt", Array("XML:com.adobe.xmp".utf8)) + end + Array("trailing".utf8)
        #expect(try strip(.png, png).out == signature + header + data + end)
        #expect(throws: MetadataStripper.Problem.self) { try strip(.png, Array(png.prefix(40))) }
    }

    @Test func webpExifAndXmpChunksGoAndTheirFlagsAreCleared() throws {
        func chunk(_ fourCC: String, _ data: [UInt8]) -> [UInt8] {
            let size = UInt32(data.count)
            return Array(fourCC.utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 24)]
                + data + (data.count.isMultiple(of: 2) ? [] : [0])
        }
        let vp8x = chunk("VP8X", [0x0C] + [UInt8](repeating: 0, count: 9))
        let body = vp8x + chunk("VP8 ", [9, 9, 9]) + chunk("EXIF", Array("GPS".utf8)) + chunk("XMP ", Array("<x/>".utf8))
        func riff(_ body: [UInt8]) -> [UInt8] {
            let size = UInt32(body.count + 4)
            return Array("RIFF".utf8) + [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 24)]
                + Array("WEBP".utf8) + body
        }
        let expected = riff(chunk("VP8X", [0x00] + [UInt8](repeating: 0, count: 9)) + chunk("VP8 ", [9, 9, 9]))
        #expect(try strip(.webp, riff(body)).out == expected)
    }

    @Test func gifCommentsAndXmpGo() throws {
        let header = Array("GIF89a".utf8) + [1, 0, 1, 0, 0x80, 0, 0] + [0, 0, 0, 255, 255, 255]
        let comment: [UInt8] = [0x21, 0xFE, 3] + Array("GPS".utf8) + [0]
        let xmp: [UInt8] = [0x21, 0xFF, 11] + Array("XMP DataXMP".utf8) + [2, 0x3C, 0x3E, 0]
        let image: [UInt8] = [0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x4C, 0x01, 0]
        let gif = header + comment + xmp + image + [0x3B] + Array("junk".utf8)
        #expect(try strip(.gif, gif).out == header + image + [0x3B])
        #expect(throws: MetadataStripper.Problem.self) { try strip(.gif, Array(gif.prefix(gif.count - 10))) }
    }
}

struct FileNameTests {
    @Test func directoriesAndDotsAreDroppedAndControlCharactersRefused() throws {
        #expect(try FileName.sanitize("../../etc/passwd") == "passwd")
        #expect(try FileName.sanitize("C:\\Users\\me\\report.pdf") == "report.pdf")
        #expect(try FileName.sanitize("  ..hidden  ") == "hidden")
        #expect(throws: FileName.Problem.empty) { try FileName.sanitize("../..") }
        #expect(try FileName.sanitize("dir/") == "dir")
        #expect(throws: FileName.Problem.empty) { try FileName.sanitize("/") }
        #expect(throws: FileName.Problem.controlCharacter) { try FileName.sanitize("a\u{0}b") }
        #expect(throws: FileName.Problem.controlCharacter) { try FileName.sanitize("evil\u{202E}fdp.exe") }
        #expect(throws: FileName.Problem.tooLong) { try FileName.sanitize(String(repeating: "é", count: 200)) }
    }

    @Test func dispositionsQuoteSafelyAndCarryUnicode() {
        #expect(FileName.contentDisposition("inline", name: nil) == "inline")
        #expect(FileName.contentDisposition("attachment", name: "a b.pdf") == "attachment; filename=\"a b.pdf\"")
        #expect(FileName.contentDisposition("attachment", name: "Büro \"x\".pdf")
                == "attachment; filename=\"B__ro _x_.pdf\"; filename*=UTF-8''B%C3%BCro%20%22x%22.pdf")
    }
}

struct ImageProcessorTests {
    func temporaryFile(_ bytes: [UInt8]) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("parley-image-\(UUID().uuidString)").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A PNG that claims 100,000 × 100,000 pixels in a few dozen bytes.
    func bomb() -> [UInt8] {
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let count = UInt32(data.count)
            let body = Array(type.utf8) + data
            let crc = crc32(body)
            return [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)] + body
                + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        }
        let side: [UInt8] = [0x00, 0x01, 0x86, 0xA0]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", side + side + [8, 0, 0, 0, 0])
            + chunk("IDAT", [0x78, 0x9C, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]) + chunk("IEND", [])
    }

    func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    @Test func decompressionBombsAreRefusedFromTheHeader() throws {
        let path = try temporaryFile(bomb())
        defer { unlink(path) }
        #expect(throws: ImageProcessor.Problem.tooLarge(width: 100_000, height: 100_000, maxPixels: 64_000_000, maxSide: 20_000)) {
            try ImageProcessor().info(path: path)
        }
    }

    @Test func garbageWithAJPEGMagicIsUnreadable() throws {
        let path = try temporaryFile([0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0x41, count: 500))
        defer { unlink(path) }
        #expect(throws: ImageProcessor.Problem.self) { try ImageProcessor().info(path: path) }
    }
}

struct PhotoPipelineTests {
    let helpers = ImageProcessorTests()

    func chunk(_ type: String, _ data: [UInt8], claimedLength: UInt32? = nil) -> [UInt8] {
        let count = claimedLength ?? UInt32(data.count)
        let body = Array(type.utf8) + data
        let crc = helpers.crc32(body)
        return [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)] + body
            + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
    }

    /// A real 1 × 1 grey PNG (zlib stored block) with a text chunk between header and pixels.
    func png(text: [UInt8]) -> [UInt8] {
        let raw: [UInt8] = [0, 0x80]  // filter type none, one grey pixel
        let adler: [UInt8] = [0x00, 0x82, 0x00, 0x81]
        let zlib: [UInt8] = [0x78, 0x01, 0x01, 0x02, 0x00, 0xFD, 0xFF] + raw + adler
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", [0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0])
            + text + chunk("IDAT", zlib) + chunk("IEND", [])
    }

    func run(_ bytes: [UInt8], keepMetadata: Bool = false) throws -> (PhotoPipeline.Result, stored: [UInt8]) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parley-pipeline-\(UUID().uuidString)").path
        let store = try FileBlobStore(root: root)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let input = try store.makeStagingFile(), stripped = try store.makeStagingFile()
        try input.write(bytes)
        input.closeForWriting()
        let pipeline = PhotoPipeline(images: ImageProcessor(), keepMetadata: keepMetadata)
        let result = try pipeline.process(.png, input: input.path, stripped: stripped, thumbnail: root + "/thumb.jpg")
        stripped.closeForWriting()
        let stored = try Data(contentsOf: URL(fileURLWithPath: result.stripped == nil ? input.path : stripped.path))
        #expect(FileManager.default.fileExists(atPath: root + "/thumb.jpg"))
        return (result, [UInt8](stored))
    }

    @Test func aPhotoIsStoredWithoutItsTextAndGetsAThumbnail() throws {
        let secret = chunk("tEXt", Array("Comment\0secret location".utf8))
        let (result, stored) = try run(png(text: secret))
        #expect(result.size.width == 1 && result.size.height == 1)
        #expect(result.thumbnail.width == 1 && result.thumbnail.height == 1)
        #expect(stored == png(text: []))
        #expect(result.stripped?.size == Int64(stored.count))
        #expect(result.stripped?.hex == SHA256.hash(stored).hexString)
    }

    /// An 85-byte PNG whose text chunk claims 1 GiB made libpng allocate 1 GiB (fuzz-media,
    /// Fuzz/regressions/media): the structure check must refuse it before libvips reads it,
    /// with or without metadata removal.
    @Test(arguments: [false, true])
    func aLengthLeavingTheFileIsRefusedBeforeAnyDecoderSeesIt(keepMetadata: Bool) throws {
        let lying = chunk("tEXt", Array("Comment\0secret".utf8), claimedLength: 0x4000_0017)
        #expect(throws: PhotoPipeline.Problem.structure(.truncated("chunk"))) {
            try run(png(text: lying), keepMetadata: keepMetadata)
        }
    }

    @Test func theLimitsHoldForTheFileThatIsStored() throws {
        #expect(throws: PhotoPipeline.Problem.image(.tooLarge(width: 100_000, height: 100_000, maxPixels: 64_000_000, maxSide: 20_000))) {
            try run(helpers.bomb())
        }
    }
}

struct PartialUploadStoreTests {
    /// A store in a new temporary folder, removed after `body`.
    func withStore(_ body: (PartialUploadStore, String) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parley-partial-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try body(try PartialUploadStore(root: root), root)
    }

    func record(_ clientID: String, total: Int64 = 10, user: Int64 = 7) -> PartialUploadStore.Record {
        PartialUploadStore.Record(user: user, clientID: clientID, kind: .file, mimeType: "application/pdf", name: "a.pdf",
                                  totalBytes: total, createdAt: Date(timeIntervalSince1970: 1_700_000_000))
    }

    @Test func keptBytesSurviveARestartAndAContinuationAppends() throws {
        try withStore { store, root in
            let part = try store.begin(record("one"))
            try part.write(Array("hello".utf8))
            store.suspend(part, user: 7, clientID: "one")
            #expect(store.entry(user: 7, clientID: "one")?.receivedBytes == 5)
            #expect(store.entry(user: 8, clientID: "one") == nil, "keyed by account")

            let reopened = try PartialUploadStore(root: root)
            let entry = try #require(reopened.entry(user: 7, clientID: "one"))
            #expect(entry.record == record("one") && entry.receivedBytes == 5)
            let (resumed, file) = try #require(try reopened.resume(user: 7, clientID: "one"))
            #expect(resumed.receivedBytes == 5)
            try file.write(Array("world".utf8))
            file.closeForWriting()
            #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "helloworld")
            #expect(reopened.remove(user: 7, clientID: "one"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: root).isEmpty)
            #expect(!reopened.remove(user: 7, clientID: "one"))
        }
    }

    @Test func strayAndInconsistentFilesAreRemovedAtStart() throws {
        try withStore { store, root in
            let good = try store.begin(record("good"))
            good.closeForWriting()
            let long = try store.begin(record("long", total: 2))
            try long.write(Array("three".utf8))  // more bytes than declared
            long.closeForWriting()
            try Data("x".utf8).write(to: URL(fileURLWithPath: root + "/orphan.part"))
            try Data("{not json".utf8).write(to: URL(fileURLWithPath: root + "/broken.json"))
            try Data("{not js".utf8).write(to: URL(fileURLWithPath: root + "/young.json"))
            // A broken record two minutes old is left over; a young one may be another node's
            // record being written (nodes share the directory), so it is left for now.
            let old = Date().addingTimeInterval(-120)
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: root + "/broken.json")
            let reopened = try PartialUploadStore(root: root)
            #expect(reopened.entry(user: 7, clientID: "good") != nil)
            #expect(reopened.entry(user: 7, clientID: "long") == nil)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root).sorted().filter { !$0.hasPrefix("young") }.count == 2,
                    "only the good upload's two files remain")
            #expect(FileManager.default.fileExists(atPath: root + "/young.json"))
        }
    }

    @Test func stalenessCountsFromTheLastByte() throws {
        try withStore { store, _ in
            let part = try store.begin(record("old"))
            try part.write(Array("abc".utf8))
            #expect(store.stale(before: Date().addingTimeInterval(-60)).isEmpty, "it just began")
            let later = Date().addingTimeInterval(60)
            #expect(store.stale(before: later).map(\.record.clientID) == ["old"])
            store.suspend(part, user: 7, clientID: "old")
            #expect(store.entry(user: 7, clientID: "old")?.receivedBytes == 3)
            #expect(store.stale(before: Date().addingTimeInterval(-60)).isEmpty, "a byte arrived since")
        }
    }
}

struct BlobStoreTests {
    @Test func putIsAtomicIdempotentAndDeleteForgets() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("parley-blobs-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = try FileBlobStore(root: root)
        let bytes = Array("hello, media".utf8)
        guard let key = BlobKey(hex: SHA256.hash(bytes).hexString) else { Issue.record("bad key"); return }
        for _ in 0..<2 {
            let staging = try store.makeStagingFile()
            try staging.write(bytes)
            try store.put(key, from: staging)
            #expect(!FileManager.default.fileExists(atPath: staging.path))
        }
        let file = try #require(try store.open(key))
        #expect(file.size == Int64(bytes.count))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/staging").isEmpty)
        try store.delete(key)
        try store.delete(key)
        #expect(try store.open(key) == nil)
        #expect(BlobKey(hex: "../" + String(repeating: "a", count: 61)) == nil)
        #expect(BlobKey(hex: String(repeating: "A", count: 64)) == nil)
    }
}
