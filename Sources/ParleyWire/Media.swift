public import Foundation

/// What an upload is for; the message kind that may carry it.
public enum MediaKind: String, Codable, Sendable, Hashable, CaseIterable {
    /// JPEG, PNG, GIF or WebP; the server reads its size, strips location metadata and makes
    /// a thumbnail.
    case photo
    /// MP4, QuickTime, WebM or 3GP; the client supplies the thumbnail (a `photo` upload).
    case video
    /// MP3, M4A/AAC, Ogg, WAV, FLAC, AMR or CAF.
    case audio
    /// Any bytes, downloaded as a file (`Content-Disposition: attachment`).
    case file
}

/// An uploaded file: the answer to `POST /v1/media` and `GET /v1/media/{id}/info`.
public struct MediaInfo: Codable, Sendable, Hashable {
    /// The attachment id a message's content refers to (`attachmentId`, `thumbnailId`).
    public var id: String
    /// What it was uploaded as.
    public var kind: MediaKind
    /// The media type the content was verified to be (files: as declared).
    public var mimeType: String
    /// Stored size in bytes (photos: after location metadata was removed).
    public var sizeBytes: Int64
    /// The file name given at upload, made safe (no directories, no control characters).
    public var name: String?
    /// Pixel width as displayed (photos; EXIF orientation applied).
    public var width: Int?
    /// Pixel height as displayed (photos).
    public var height: Int?
    /// The server-made preview (photos): `GET /v1/media/{id}/thumbnail`.
    public var thumbnail: MediaThumbnail?
    /// When it was uploaded.
    public var createdAt: Date

    /// Creates the value; each argument sets the property of the same name.
    public init(id: String, kind: MediaKind, mimeType: String, sizeBytes: Int64, name: String? = nil, width: Int? = nil,
                height: Int? = nil, thumbnail: MediaThumbnail? = nil, createdAt: Date) {
        self.id = id
        self.kind = kind
        self.mimeType = mimeType
        self.sizeBytes = sizeBytes
        self.name = name
        self.width = width
        self.height = height
        self.thumbnail = thumbnail
        self.createdAt = createdAt
    }
}

/// A photo's server-made preview: a JPEG that fits the server's thumbnail box.
public struct MediaThumbnail: Codable, Sendable, Hashable {
    /// Pixel width.
    public var width: Int
    /// Pixel height.
    public var height: Int
    /// Size in bytes.
    public var sizeBytes: Int64

    /// Creates the value.
    public init(width: Int, height: Int, sizeBytes: Int64) {
        self.width = width
        self.height = height
        self.sizeBytes = sizeBytes
    }
}

/// Which bytes of an attachment to download.
public enum MediaVariant: String, Codable, Sendable, Hashable, CaseIterable {
    /// The file as stored.
    case original
    /// The server-made preview (photos only).
    case thumbnail
}

/// A short-lived download link that needs no `Authorization` header (`<img src>`, `AsyncImage`).
public struct SignedMediaURL: Codable, Sendable, Hashable {
    /// A path and query relative to the server's base URL, e.g.
    /// `/v1/media/a_…?variant=original&expires=…&signature=…`.
    public var url: String
    /// When the link stops working.
    public var expiresAt: Date

    /// Creates the value.
    public init(url: String, expiresAt: Date) {
        self.url = url
        self.expiresAt = expiresAt
    }
}

/// How far an upload with a `clientId` got (`GET /v1/media/uploads/{clientId}`): finished
/// (``attachment`` is set), or unfinished with ``receivedBytes`` of ``totalBytes`` kept on the
/// server, to be completed by sending the rest with `Content-Range: bytes received-(total-1)/total`.
public struct UploadStatus: Codable, Sendable, Hashable {
    /// Where an upload stands.
    public enum State: String, Codable, Sendable, Hashable {
        /// Some bytes are kept; send the rest.
        case partial
        /// Stored: ``UploadStatus/attachment`` is the upload.
        case complete
    }

    /// The client's id for the upload.
    public var clientId: String
    /// Where it stands.
    public var state: State
    /// Bytes the server holds (all of them when complete).
    public var receivedBytes: Int64
    /// The whole file's size as first declared (the stored size when complete).
    public var totalBytes: Int64
    /// When an unfinished upload that receives nothing more is removed.
    public var expiresAt: Date?
    /// The stored upload, when complete.
    public var attachment: MediaInfo?

    /// Creates the value.
    public init(clientId: String, state: State, receivedBytes: Int64, totalBytes: Int64, expiresAt: Date? = nil, attachment: MediaInfo? = nil) {
        self.clientId = clientId
        self.state = state
        self.receivedBytes = receivedBytes
        self.totalBytes = totalBytes
        self.expiresAt = expiresAt
        self.attachment = attachment
    }
}
