import Foundation
import Parley
import ParleyNetTesting

/// The real server in a child process and the people SDK tests need: Alice, and Bob signed in
/// on two devices (a phone and a laptop), each a client of its own.
struct People {
    let server: ServerProcess
    let alice: ParleyClient
    let phone: ParleyClient
    let laptop: ParleyClient

    /// Starts the server and signs everyone in (Bob registers on the phone, signs in on the laptop).
    static func start() async throws -> People {
        let server = ServerProcess()
        try server.start()
        let people = People(server: server, alice: ParleyClient(server: server.url, appKey: server.appKey),
                            phone: ParleyClient(server: server.url, appKey: server.appKey),
                            laptop: ParleyClient(server: server.url, appKey: server.appKey))
        try await people.alice.register(username: "alice", password: "correct horse battery")
        try await people.phone.register(username: "bob", password: "correct horse battery")
        _ = try await people.laptop.signIn(username: "bob", password: "correct horse battery")
        return people
    }
}
