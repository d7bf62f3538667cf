// MessageKit's public protocols and its `MessageKind`, declared with the same names and shapes
// so that the MessageKit snippets in README.md and docs/sdk.md compile on Linux. MessageKit
// itself needs UIKit, which exists only on Apple's platforms; members that need UIKit or
// CoreLocation (images, CLLocation) are left out. Declarations only: nothing here runs.
@_exported import Foundation

public protocol SenderType {
    var senderId: String { get }
    var displayName: String { get }
}

public protocol MediaItem {
    var url: URL? { get }
    var size: CGSize { get }
}

public protocol LocationItem {
    var size: CGSize { get }
}

public protocol AudioItem {
    var url: URL { get }
    var duration: Float { get }
    var size: CGSize { get }
}

public protocol LinkItem {
    var text: String? { get }
    var attributedText: NSAttributedString? { get }
    var url: URL { get }
    var title: String? { get }
    var teaser: String { get }
}

public enum MessageKind {
    case text(String)
    case attributedText(NSAttributedString)
    case photo(any MediaItem)
    case video(any MediaItem)
    case location(any LocationItem)
    case emoji(String)
    case audio(any AudioItem)
    case linkPreview(any LinkItem)
    case custom(Any?)
}

public protocol MessageType {
    var sender: any SenderType { get }
    var messageId: String { get }
    var sentDate: Date { get }
    var kind: MessageKind { get }
}
