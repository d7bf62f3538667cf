// Magnet's MessageMe, against Parley: register (409 when taken) and sign in, search
// recipients by name prefix, send text plus a location to a set of recipients (answered with
// the invalid ones), receive it as an event, and confirm delivery back to the sender.
//
//   swift run MessageMe --server http://127.0.0.1:8080 --app-key pk_…
import ExampleSupport
import Foundation
import Parley
import ParleyWire

let (server, appKey) = try exampleSettings()
let suffix = String(UUID().uuidString.prefix(6)).lowercased()
let alice = ParleyClient(server: server, appKey: appKey)
let bob = ParleyClient(server: server, appKey: appKey)

try await alice.register(username: "alice-\(suffix)", password: "correct horse battery")
do {
    try await bob.register(username: "alice-\(suffix)", password: "another password")
    fail("a taken username must be refused")
} catch let error as ParleyError where error.code == "username_taken" {
    step("a taken username is refused: \(error)")
}
try await bob.register(username: "bob-\(suffix)", password: "correct horse battery")
try await bob.signIn(username: "bob-\(suffix)", password: "correct horse battery")
step("signed in as \(await bob.currentUser?.username ?? "?")")

let found = try await alice.searchUsers("bob-\(suffix.prefix(3))", limit: 10, sort: .username)
guard let recipient = found.users.first(where: { $0.username == "bob-\(suffix)" }) else { fail("search did not find bob") }
step("search found \(recipient.username) (\(found.total) match)")

let bobEvents = await bob.events()
let aliceEvents = await alice.events()
try await connectAll([alice, bob])
let sent = try await alice.send(.location(Location(latitude: 37.7749, longitude: -122.4194, name: "meet here")),
                                toUsernames: [recipient.username, "nobody-\(suffix)"])
step("sent; invalid recipients: \(sent.invalidUsernames)")
guard sent.invalidUsernames == ["nobody-\(suffix)"], let message = sent.message, let conversation = sent.conversation else {
    fail("the invalid recipient was not reported")
}
try await alice.track(conversation.id)

// Bob receives it live; his client confirms delivery by itself, and Alice sees the receipt.
let received = try await firstEvent(bobEvents) { $0.message?.id == message.id }
step("bob received \(received.message.map { "\($0.messageKind)" } ?? "?")")
let receipt = try await firstEvent(aliceEvents) { $0.type == .receiptUpdated && ($0.deliveredSeq ?? 0) >= message.seq }
step("alice got the delivery confirmation (delivered up to seq \(receipt.deliveredSeq ?? 0))")
await alice.disconnect()
await bob.disconnect()
print("MessageMe: ok")
