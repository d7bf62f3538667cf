package import ParleyWire

/// Removes metadata that can hold a location (EXIF with GPS, XMP, IPTC, comments) from an
/// image without re-encoding it, by copying the parts of the file that are kept.
///
/// - JPEG: keeps JFIF (APP0), ICC profiles (APP2 `ICC_PROFILE`) and Adobe colour (APP14);
///   drops every other APPn and comments; replaces EXIF by a minimal one that holds only the
///   orientation (so the photo still displays upright); drops anything after the end of the
///   main image (MPF secondary images carry their own EXIF).
/// - PNG: drops `eXIf`, `tEXt`, `zTXt`, `iTXt` and anything after `IEND`.
/// - WebP: drops `EXIF` and `XMP ` chunks and clears their flags in `VP8X`.
/// - GIF: drops comment and XMP application extensions and anything after the trailer.
///
/// Every length is checked against the data; a file whose structure does not add up is
/// refused (``Problem``), never copied through.
package enum MetadataStripper: Sendable {
    /// A piece of the output: a range of the input, or new bytes.
    package enum Piece: Sendable, Hashable {
        case copy(Range<Int>)
        case insert([UInt8])
    }

    /// Why an image was refused.
    package enum Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// The structure ends before a declared length (a truncated upload).
        case truncated(String)
        /// A marker or chunk that cannot be there.
        case malformed(String)

        package var description: String {
            switch self {
            case .truncated(let what): "the image is truncated (\(what))"
            case .malformed(let what): "the image is malformed (\(what))"
            }
        }
    }

    /// What to write instead of `data`, and the EXIF orientation found (1 when none).
    package static func plan(_ format: MediaFormat, _ data: UnsafeRawBufferPointer) throws(Problem) -> (pieces: [Piece], orientation: Int) {
        let bytes = Bytes(data)
        switch format {
        case .jpeg: return try jpeg(bytes)
        case .png: return (try png(bytes), 1)
        case .webp: return (try webp(bytes), 1)
        case .gif: return (try gif(bytes), 1)
        default: return ([.copy(0..<data.count)], 1)
        }
    }

    /// The output of `pieces` over `data`, as one array (tests and the fuzzer).
    package static func apply(_ pieces: [Piece], to data: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        for piece in pieces {
            switch piece {
            case .copy(let range): out += data[range]
            case .insert(let bytes): out += bytes
            }
        }
        return out
    }

    // MARK: - JPEG (ITU T.81 §B.1; EXIF 2.32 §4.5)

    private static func jpeg(_ b: Bytes) throws(Problem) -> ([Piece], Int) {
        guard b.count >= 4, b[0] == 0xFF, b[1] == 0xD8 else { throw .malformed("no start-of-image marker") }
        var pieces: [Piece] = [.copy(0..<2)]
        var orientation = 1
        var offset = 2
        var exifInsertedAt: Int?
        while true {
            guard offset + 2 <= b.count else { throw .truncated("ends before the image data") }
            guard b[offset] == 0xFF else { throw .malformed("expected a marker at byte \(offset)") }
            let marker = b[offset + 1]
            if marker == 0xFF { offset += 1; continue }  // fill byte
            if marker == 0xD8 || marker == 0xD9 || (0xD0...0xD7).contains(marker) || marker == 0x01 {
                throw .malformed("unexpected marker FF\(hex(marker)) before the image data")
            }
            guard offset + 4 <= b.count else { throw .truncated("segment length") }
            let length = Int(b[offset + 2]) << 8 | Int(b[offset + 3])
            guard length >= 2 else { throw .malformed("segment length below 2") }
            let end = offset + 2 + length
            guard end <= b.count else { throw .truncated("segment FF\(hex(marker))") }
            let payload = (offset + 4)..<end
            switch marker {
            case 0xDA:  // start of scan: the entropy-coded data follows, up to the end of image
                guard let eoi = endOfImage(b, from: end) else { throw .truncated("no end-of-image marker") }
                if orientation != 1, exifInsertedAt == nil { pieces.append(.insert(exifSegment(orientation: orientation))) }
                pieces.append(.copy(offset..<eoi))
                return (merge(pieces), orientation)
            case 0xE1:
                if b.starts(with: Array("Exif\0\0".utf8), in: payload) {
                    orientation = exifOrientation(b, tiff: (payload.lowerBound + 6)..<payload.upperBound) ?? orientation
                }
            case 0xE0, 0xEE:
                pieces.append(.copy(offset..<end))
            case 0xE2:
                if b.starts(with: Array("ICC_PROFILE\0".utf8), in: payload) { pieces.append(.copy(offset..<end)) }
            case 0xE3...0xED, 0xEF, 0xFE:
                break  // other application segments (IPTC, vendor data) and comments
            default:
                // Tables and frame headers before the first scan: the image itself.
                if orientation != 1, exifInsertedAt == nil {
                    pieces.append(.insert(exifSegment(orientation: orientation)))
                    exifInsertedAt = offset
                }
                pieces.append(.copy(offset..<end))
            }
            offset = end
        }
    }

    /// The offset just past the main image's EOI: inside entropy-coded data 0xFF is always
    /// followed by 0x00 (stuffing) or a restart marker, so the first other marker that is EOI
    /// ends the image; markers between scans (tables, SOS) are skipped by their lengths.
    private static func endOfImage(_ b: Bytes, from start: Int) -> Int? {
        var index = start
        while index + 1 < b.count {
            guard b[index] == 0xFF else { index += 1; continue }
            let next = b[index + 1]
            switch next {
            case 0x00, 0xFF, 0xD0...0xD7: index += 1
            case 0xD9: return index + 2
            default:
                guard index + 3 < b.count else { return nil }
                index += 2 + (Int(b[index + 2]) << 8 | Int(b[index + 3]))
            }
        }
        return nil
    }

    /// The orientation tag (0x0112) of IFD0 in an EXIF TIFF structure, if valid (1…8).
    static func exifOrientation(_ b: Bytes, tiff: Range<Int>) -> Int? {
        let base = tiff.lowerBound
        guard tiff.count >= 8 else { return nil }
        let little: Bool
        switch (b[base], b[base + 1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func u16(_ at: Int) -> Int? {
            guard at >= base, at + 2 <= tiff.upperBound else { return nil }
            return little ? Int(b[at]) | Int(b[at + 1]) << 8 : Int(b[at]) << 8 | Int(b[at + 1])
        }
        func u32(_ at: Int) -> Int? {
            guard let high = u16(little ? at + 2 : at), let low = u16(little ? at : at + 2) else { return nil }
            return high << 16 | low
        }
        guard u16(base + 2) == 42, let ifd = u32(base + 4), ifd <= tiff.count, let count = u16(base + ifd) else { return nil }
        for entry in 0..<min(count, 1000) {
            let at = base + ifd + 2 + entry * 12
            guard let tag = u16(at) else { return nil }
            if tag == 0x0112 {
                guard u16(at + 2) == 3, let value = u16(at + 8), (1...8).contains(value) else { return nil }
                return value
            }
        }
        return nil
    }

    /// An APP1 EXIF segment holding only IFD0 with the orientation tag (big-endian TIFF).
    static func exifSegment(orientation: Int) -> [UInt8] {
        let tiff: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A, 0x00, 0x00, 0x00, 0x08,   // "MM", 42, IFD0 at 8
                             0x00, 0x01,                                       // one entry
                             0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01,   // orientation, SHORT, 1 value
                             0x00, UInt8(orientation), 0x00, 0x00,
                             0x00, 0x00, 0x00, 0x00]                           // no next IFD
        let payload = Array("Exif\0\0".utf8) + tiff
        let length = payload.count + 2
        return [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
    }

    // MARK: - PNG (ISO 15948 §5.3)

    private static func png(_ b: Bytes) throws(Problem) -> [Piece] {
        guard b.count >= 8 else { throw .truncated("signature") }
        var pieces: [Piece] = [.copy(0..<8)]
        var offset = 8
        while true {
            guard offset + 12 <= b.count else { throw .truncated("ends before IEND") }
            let length = b.u32be(offset)
            guard length <= 0x7FFF_FFFF, offset + 12 + length <= b.count else { throw .truncated("chunk") }
            let type = String(decoding: (0..<4).map { b[offset + 4 + $0] }, as: UTF8.self)
            guard type.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
                throw .malformed("chunk type is not four letters")
            }
            let end = offset + 12 + length
            if !["eXIf", "tEXt", "zTXt", "iTXt"].contains(type) { pieces.append(.copy(offset..<end)) }
            offset = end
            if type == "IEND" { return merge(pieces) }
        }
    }

    // MARK: - WebP (RIFF container, developers.google.com/speed/webp/docs/riff_container)

    private static func webp(_ b: Bytes) throws(Problem) -> [Piece] {
        guard b.count >= 12 else { throw .truncated("RIFF header") }
        let riffSize = b.u32le(4)
        guard riffSize >= 4, 8 + riffSize <= b.count else { throw .truncated("RIFF size \(riffSize)") }
        var kept: [Piece] = []
        var keptBytes = 4  // "WEBP"
        var offset = 12
        let end = 8 + riffSize
        while offset < end {
            guard offset + 8 <= end else { throw .truncated("chunk header") }
            let fourCC = String(decoding: (0..<4).map { b[offset + $0] }, as: UTF8.self)
            let size = b.u32le(offset + 4)
            let padded = size + (size & 1)
            guard offset + 8 + padded <= end || (offset + 8 + size == end) else { throw .truncated("chunk \(fourCC)") }
            let chunkEnd = min(offset + 8 + padded, end)
            switch fourCC {
            case "EXIF", "XMP ":
                break
            case "VP8X":
                guard size >= 10 else { throw .malformed("VP8X chunk too short") }
                // Flags byte: bit 3 EXIF, bit 2 XMP.
                kept.append(.copy(offset..<offset + 8))
                kept.append(.insert([b[offset + 8] & ~0x0C]))
                kept.append(.copy(offset + 9..<chunkEnd))
                keptBytes += chunkEnd - offset
            default:
                kept.append(.copy(offset..<chunkEnd))
                keptBytes += chunkEnd - offset
            }
            offset = chunkEnd
        }
        let header: [UInt8] = Array("RIFF".utf8) + [UInt8(keptBytes & 0xFF), UInt8(keptBytes >> 8 & 0xFF),
                                                   UInt8(keptBytes >> 16 & 0xFF), UInt8(keptBytes >> 24 & 0xFF)] + Array("WEBP".utf8)
        return merge([.insert(header)] + kept)
    }

    // MARK: - GIF (GIF89a specification)

    private static func gif(_ b: Bytes) throws(Problem) -> [Piece] {
        guard b.count >= 13 else { throw .truncated("header") }
        var offset = 13
        if b[10] & 0x80 != 0 { offset += 3 << (Int(b[10] & 0x07) + 1) }  // global colour table
        var pieces: [Piece] = [.copy(0..<min(offset, b.count))]
        guard offset <= b.count else { throw .truncated("colour table") }
        func subBlocks(from start: Int) throws(Problem) -> Int {
            var index = start
            while true {
                guard index < b.count else { throw .truncated("data sub-blocks") }
                let size = Int(b[index])
                index += 1 + size
                if size == 0 { return index }
            }
        }
        while true {
            guard offset < b.count else { throw .truncated("no trailer") }
            switch b[offset] {
            case 0x3B:
                pieces.append(.copy(offset..<offset + 1))
                return merge(pieces)
            case 0x21:
                guard offset + 2 < b.count else { throw .truncated("extension") }
                let label = b[offset + 1]
                let end = try subBlocks(from: offset + 2)
                let isXMP = label == 0xFF && b.starts(with: Array("XMP DataXMP".utf8), in: (offset + 3)..<end)
                if label != 0xFE, !isXMP { pieces.append(.copy(offset..<end)) }
                offset = end
            case 0x2C:
                guard offset + 10 <= b.count else { throw .truncated("image descriptor") }
                var index = offset + 10
                if b[offset + 9] & 0x80 != 0 { index += 3 << (Int(b[offset + 9] & 0x07) + 1) }
                index += 1  // LZW minimum code size
                guard index <= b.count else { throw .truncated("image") }
                let end = try subBlocks(from: index)
                pieces.append(.copy(offset..<end))
                offset = end
            default:
                throw .malformed("unknown block 0x\(hex(b[offset]))")
            }
        }
    }

    // MARK: - Helpers

    /// Joins adjacent copies, so the output is written in few system calls.
    private static func merge(_ pieces: [Piece]) -> [Piece] {
        var out: [Piece] = []
        for piece in pieces {
            if case .copy(let range) = piece, case .copy(let previous)? = out.last, previous.upperBound == range.lowerBound {
                out[out.count - 1] = .copy(previous.lowerBound..<range.upperBound)
            } else if case .copy(let range) = piece, range.isEmpty {
                continue
            } else {
                out.append(piece)
            }
        }
        return out
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
    }
}

/// Bounds-checked reads over a buffer (subscripts trap on a bad index, so every caller checks
/// lengths first; the fuzzer holds it to that).
struct Bytes {
    let base: UnsafeRawBufferPointer
    init(_ base: UnsafeRawBufferPointer) { self.base = base }
    var count: Int { base.count }
    subscript(index: Int) -> UInt8 { base[index] }
    func u32be(_ at: Int) -> Int { Int(base[at]) << 24 | Int(base[at + 1]) << 16 | Int(base[at + 2]) << 8 | Int(base[at + 3]) }
    func u32le(_ at: Int) -> Int { Int(base[at]) | Int(base[at + 1]) << 8 | Int(base[at + 2]) << 16 | Int(base[at + 3]) << 24 }
    /// Whether the bytes in `range` (a segment's payload, say) begin with `pattern`: a pattern
    /// longer than the range never matches, even when the bytes after it would.
    func starts(with pattern: [UInt8], in range: Range<Int>) -> Bool {
        guard range.lowerBound >= 0, range.upperBound <= count, pattern.count <= range.count else { return false }
        for (index, byte) in pattern.enumerated() where base[range.lowerBound + index] != byte { return false }
        return true
    }
}
