// Syncano's chat (with JSQMessagesViewController), against Parley: log in with clear errors,
// a channel, the newest messages with each sender's display name — and the bug the tutorial
// admitted fixed: the same account on two devices sees its own messages on the other device.
//
//   swift run SyncanoChat --server http://127.0.0.1:8080 --app-key pk_…
import ExampleSupport
import Foundation
import Parley
import ParleyWire

let (server, appKey) = try exampleSettings()
let suffix = String(UUID().uuidString.prefix(6)).lowercased()
let phone = ParleyClient(server: server, appKey: appKey)
let tablet = ParleyClient(server: server, appKey: appKey)
let bea = ParleyClient(server: server, appKey: appKey)

try await phone.register(username: "ana-\(suffix)", password: "correct horse battery", displayName: "Ana")
try await bea.register(username: "bea-\(suffix)", password: "correct horse battery", displayName: "Bea")
do {
    try await tablet.signIn(username: "ana-\(suffix)", password: "wrong password")
    fail("a wrong password must be refused")
} catch let error as ParleyError where error.code == "wrong_credentials" {
    step("wrong password refused: \(error)")
}
try await tablet.signIn(username: "ana-\(suffix)", password: "correct horse battery")   // the same account, second device
step("ana signed in on two devices")

let channel = try await phone.createConversation(.public, title: "lobby-\(suffix)")
try await bea.join(channel.id)
let tabletEvents = await tablet.events(in: channel.id)
try await connectAll([phone, tablet, bea])

for text in ["hello from ana's phone", "anyone here?"] {
    _ = try await phone.waitUntilSent(try await phone.send(.text(text), to: channel.id))
}
_ = try await bea.waitUntilSent(try await bea.send(.text("hi Ana, Bea here"), to: channel.id))

// The Syncano bug, fixed: the tablet sees what the phone sent, live.
var seen: [String] = []
for await event in tabletEvents where event.type == .messageCreated {
    if let message = event.message, case .text(let text) = message.content { seen.append("\(message.sender.displayName): \(text)") }
    if seen.count == 3 { break }
}
step("the tablet saw, live: \(seen)")
guard seen.first == "Ana: hello from ana's phone" else { fail("the second device missed its own account's message") }

let newest = try await tablet.history(of: channel.id, limit: 2)
step("newest two, oldest first: \(newest.messages.map { "\($0.sender.displayName): \($0.messageKind)" })")
guard newest.messages.map(\.sender.displayName) == ["Ana", "Bea"] else { fail("the newest messages are wrong") }
for client in [phone, tablet, bea] { await client.disconnect() }
try await phone.signOut()
step("signed out on the phone; the tablet stays signed in as \(await tablet.currentUser?.username ?? "?")")
print("SyncanoChat: ok")
