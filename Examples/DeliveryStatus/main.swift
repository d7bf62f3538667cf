// The Pusher delivery-status chat, against Parley: anonymous senders in a room; a message is
// stored and given an id, pushed to every client, each receiving client confirms delivery,
// and the sender's bubble goes sending → sent → delivered — kept by the server, not by a
// Node backend.
//
//   swift run DeliveryStatus --server http://127.0.0.1:8080 --app-key pk_…
import ExampleSupport
import Foundation
import Parley
import ParleyWire

let (server, appKey) = try exampleSettings()
let sender = ParleyClient(server: server, appKey: appKey)
let others = [ParleyClient(server: server, appKey: appKey), ParleyClient(server: server, appKey: appKey)]

let me = try await sender.signInAsGuest(displayName: "Anonymous fox")
var names: [String] = []
for (index, client) in others.enumerated() { names.append(try await client.signInAsGuest(displayName: "Anonymous \(index)").username) }
step("three guests: \(me.username), \(names.joined(separator: ", "))")

let room = try await sender.createConversation(.group, title: "room", members: names)
try await sender.track(room.id)
let updates = await sender.outgoingUpdates()
try await connectAll([sender] + others)

let clientID = try await sender.send(.text("Is this thing on?"), to: room.id)
step("bubble: sending")
guard case .sent(let message) = try await firstUpdate(updates, for: clientID, where: { if case .sent = $0 { true } else { false } }) else {
    fail("never sent")
}
step("bubble: sent (stored as \(message.id.rawValue), seq \(message.seq))")
// Each receiving client marks it delivered by itself; the bubble turns delivered once all have.
_ = try await firstUpdate(updates, for: clientID, where: { $0 == .delivered || $0 == .read })
step("bubble: delivered (every other member's device has it)")
for client in [sender] + others { await client.disconnect() }
print("DeliveryStatus: ok")
