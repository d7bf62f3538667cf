import Foundation

/// A file format recognised from its first bytes ("magic"), never from a name or a header
/// the client chose. The server checks uploads with it; the SDK labels what it uploads with it.
public enum MediaFormat: String, Sendable, Hashable, CaseIterable {
    case jpeg, png, gif, webp, heic
    case mp4, quicktime, webm, threeGPP
    case mp3, m4a, aac, ogg, wav, flac, amr, caf
    case pdf

    /// The media type served for it.
    public var mimeType: String {
        switch self {
        case .jpeg: "image/jpeg"
        case .png: "image/png"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .heic: "image/heic"
        case .mp4: "video/mp4"
        case .quicktime: "video/quicktime"
        case .webm: "video/webm"
        case .threeGPP: "video/3gpp"
        case .mp3: "audio/mpeg"
        case .m4a: "audio/mp4"
        case .aac: "audio/aac"
        case .ogg: "audio/ogg"
        case .wav: "audio/wav"
        case .flac: "audio/flac"
        case .amr: "audio/amr"
        case .caf: "audio/x-caf"
        case .pdf: "application/pdf"
        }
    }

    /// The upload kind this format may be sent as, besides `file`.
    public var kind: MediaKind? {
        switch self {
        case .jpeg, .png, .gif, .webp: .photo
        case .heic, .pdf: nil
        case .mp4, .quicktime, .webm, .threeGPP: .video
        case .mp3, .m4a, .aac, .ogg, .wav, .flac, .amr, .caf: .audio
        }
    }

    /// Bytes needed to recognise any format.
    public static let magicLength = 16

    /// Recognises a format from the first bytes of a file (at least ``magicLength`` when the
    /// file is that long); `nil` when none matches.
    public static func sniff(_ bytes: some Collection<UInt8>) -> MediaFormat? {
        let b = Array(bytes.prefix(magicLength))
        func at(_ offset: Int, _ text: String) -> Bool {
            let pattern = Array(text.utf8)
            return b.count >= offset + pattern.count && Array(b[offset..<offset + pattern.count]) == pattern
        }
        func starts(_ pattern: [UInt8]) -> Bool { b.count >= pattern.count && Array(b[0..<pattern.count]) == pattern }

        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if at(0, "GIF87a") || at(0, "GIF89a") { return .gif }
        if at(0, "RIFF"), at(8, "WEBP") { return .webp }
        if at(0, "RIFF"), at(8, "WAVE") { return .wav }
        if at(4, "ftyp"), b.count >= 12 {
            let brand = String(decoding: b[8..<12], as: UTF8.self)
            switch brand {
            case "heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1", "avif": return .heic
            case "qt  ": return .quicktime
            case "M4A ", "M4B ", "M4P ": return .m4a
            case "3gp4", "3gp5", "3gp6", "3gp7", "3g2a", "3g2b", "3g2c": return .threeGPP
            case "isom", "iso2", "iso4", "iso5", "iso6", "mp41", "mp42", "avc1", "M4V ", "M4VH", "M4VP", "dash", "MSNV", "f4v ":
                return .mp4
            default: return nil
            }
        }
        if starts([0x1A, 0x45, 0xDF, 0xA3]) { return .webm }
        if at(0, "ID3") { return .mp3 }
        // MPEG audio frame sync: 11 set bits, then layer bits not 00. ADTS (AAC) has layer 00.
        if b.count >= 2, b[0] == 0xFF, b[1] & 0xE0 == 0xE0 {
            return b[1] & 0x06 == 0 ? .aac : .mp3
        }
        if at(0, "OggS") { return .ogg }
        if at(0, "fLaC") { return .flac }
        if at(0, "#!AMR") { return .amr }
        if at(0, "caff") { return .caf }
        if at(0, "%PDF-") { return .pdf }
        return nil
    }

    /// The format a declared media type names, accepting common aliases (`image/jpg`,
    /// `audio/mp3`, `audio/x-m4a`, `audio/x-wav`, …); `nil` for any other type.
    public static func named(_ mimeType: String) -> MediaFormat? {
        switch mimeType {
        case "image/jpeg", "image/jpg", "image/pjpeg": .jpeg
        case "image/png", "image/x-png": .png
        case "image/gif": .gif
        case "image/webp": .webp
        case "image/heic", "image/heif", "image/avif": .heic
        case "video/mp4", "video/x-m4v", "video/mpeg4": .mp4
        case "video/quicktime": .quicktime
        case "video/webm", "video/x-matroska": .webm
        case "video/3gpp", "video/3gpp2": .threeGPP
        case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg": .mp3
        case "audio/mp4", "audio/m4a", "audio/x-m4a": .m4a
        case "audio/aac", "audio/x-aac", "audio/aacp": .aac
        case "audio/ogg", "audio/opus", "audio/vorbis", "application/ogg": .ogg
        case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave": .wav
        case "audio/flac", "audio/x-flac": .flac
        case "audio/amr": .amr
        case "audio/x-caf": .caf
        case "application/pdf": .pdf
        default: nil
        }
    }

    /// Whether a declared type and the sniffed format agree: the same format, or containers
    /// that share a layout (an `.m4a` declared as `video/mp4`; WebM audio as `audio/webm`).
    public func matches(declared: MediaFormat) -> Bool {
        if self == declared { return true }
        let isoFamily: Set<MediaFormat> = [.mp4, .m4a, .quicktime, .threeGPP]
        return isoFamily.contains(self) && isoFamily.contains(declared)
    }
}

/// A declared media type, parsed strictly: `type/subtype` of RFC 9110 token characters,
/// lower-cased, parameters dropped.
public enum MediaType: Sendable {
    /// The lower-cased `type/subtype`, or `nil` when it is not one.
    public static func parse(_ header: String) -> String? {
        let essence = header.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let trimmed = essence.trimmingCharacters(in: .whitespaces)
        let parts = trimmed.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...127).contains(parts[0].utf8.count), (1...127).contains(parts[1].utf8.count),
              parts.allSatisfy({ $0.utf8.allSatisfy(isTokenByte) }) else { return nil }
        return trimmed.lowercased()
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
