// Backendless's chat, against Parley: history that survives restarts, sorted by creation
// time; edit and delete one's own messages only, with every other client seeing the change
// live and an "edited" time; deleting several messages at once.
//
//   swift run BackendlessChat --server http://127.0.0.1:8080 --app-key pk_…
import ExampleSupport
import Foundation
import Parley
import ParleyWire

let (server, appKey) = try exampleSettings()
let suffix = String(UUID().uuidString.prefix(6)).lowercased()
let state = NSTemporaryDirectory() + "backendless-example-\(suffix).json"
defer { try? FileManager.default.removeItem(atPath: state) }
var carla = ParleyClient(server: server, appKey: appKey, store: FileStateStore(path: state))
let dan = ParleyClient(server: server, appKey: appKey)
try await carla.register(username: "carla-\(suffix)", password: "correct horse battery")
try await dan.register(username: "dan-\(suffix)", password: "correct horse battery")
let chat = try await carla.directConversation(with: "dan-\(suffix)")
try await connectAll([carla])
var mine: [Message] = []
for text in ["first", "second", "third", "fourth"] {
    mine.append(try await carla.waitUntilSent(try await carla.send(.text(text), to: chat.id)))
}
await carla.disconnect()

// The app restarts: a new client from the saved state reads the history, oldest first.
carla = ParleyClient(server: server, appKey: appKey, store: FileStateStore(path: state))
let history = try await carla.history(of: chat.id)
step("after a restart, history: \(history.messages.map(\.messageKind))")
guard history.messages.map(\.id) == mine.map(\.id), history.messages.map(\.sentDate) == history.messages.map(\.sentDate).sorted() else {
    fail("history lost or out of order")
}

let danEvents = await dan.events(in: chat.id)
try await connectAll([dan, carla])
let edited = try await carla.edit(mine[0].id, in: chat.id, to: .text("first (fixed)"))
guard let editedAt = edited.editedAt else { fail("no edited time") }
step("edited at \(WireCoding.formatDate(editedAt))")
do {
    _ = try await dan.edit(mine[1].id, in: chat.id, to: .text("not yours"))
    fail("editing someone else's message must be refused")
} catch let error as ParleyError where error.code == "forbidden" {
    step("dan cannot edit carla's message: \(error)")
}
try await carla.delete([mine[2].id, mine[3].id], in: chat.id)   // several at once

var changes: [String] = []
for await event in danEvents where event.type == .messageEdited || event.type == .messageDeleted {
    changes.append("\(event.type.rawValue) \(event.message?.id.rawValue ?? "")")
    if changes.count == 3 { break }
}
step("dan saw live: \(changes)")
let after = try await dan.history(of: chat.id).messages
guard after.filter({ $0.deletedAt != nil }).count == 2, after.first?.editedAt != nil else { fail("dan's history does not show the changes") }
await carla.disconnect()
await dan.disconnect()
print("BackendlessChat: ok")
