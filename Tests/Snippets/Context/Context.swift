// What the snippets in README.md and docs/sdk.md take from the app around them: the app key
// the server printed, where the SDK keeps its state, a photo, an attachment id, a progress bar,
// and the app's MessageKit items (docs/sdk.md: "Place, Media and Audio are the app's
// LocationItem, MediaItem and AudioItem"). scripts/snippets.py compiles each snippet with this.
import Foundation
import MessageKit
import Parley

let KEY = "pk_snippets"
let statePath = "/tmp/parley-snippets-state.json"
let jpegData = Data()
let attachmentID = "a_snippets"
/// What `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)` hands the app, and
/// what a notification's `userInfo` holds (docs/sdk.md, "Push").
let deviceToken = Data(repeating: 0xab, count: 32)
nonisolated(unsafe) let userInfo: [AnyHashable: Any] = [:]

@MainActor final class ProgressBar {
    var progress = 0.0
}
@MainActor let bar = ProgressBar()

struct Place: LocationItem {
    var latitude: Double
    var longitude: Double
    var size: CGSize { CGSize(width: 240, height: 240) }
}

struct Media: MediaItem {
    var attachment: Attachment
    init(_ attachment: Attachment) { self.attachment = attachment }
    var url: URL? { nil }
    var size: CGSize { CGSize(width: 240, height: 240) }
}

struct Link: LinkItem {
    var item: LinkItemMirror
    init(_ item: LinkItemMirror) { self.item = item }
    var text: String? { item.text }
    var attributedText: NSAttributedString? { item.markdown.map { NSAttributedString(string: $0) } }
    var url: URL { item.url }
    var title: String? { item.title }
    var teaser: String { item.teaser }
}

struct Audio: AudioItem {
    var attachment: Attachment
    init(_ attachment: Attachment) { self.attachment = attachment }
    var url: URL { URL(fileURLWithPath: "/dev/null") }
    var duration: Float { 0 }
    var size: CGSize { CGSize(width: 160, height: 40) }
}
