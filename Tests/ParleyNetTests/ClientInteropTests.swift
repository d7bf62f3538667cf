import Foundation
import Testing
@testable import ParleyNet
import ParleyNetTesting
import ParleyTesting

/// The Swift WebSocket client against a server nobody here wrote: Python `websockets`
/// (Tests/Interop/ws_echo_server.py). `make test` sets PARLEY_PYTHON to the venv's python.
@Suite(.serialized, .timeLimit(.minutes(1)),
       .enabled(if: ProcessInfo.processInfo.environment["PARLEY_PYTHON"] != nil,
                "needs PARLEY_PYTHON (make test sets it) for the Python websockets server"))
struct ClientInteropTests {
    /// A running Python server; `stop()` closes its stdin, which makes it exit.
    struct PythonServer {
        let process: Process
        let stdin: Pipe
        let port: UInt16

        func stop() {
            try? stdin.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// Starts the Python server and returns it with its port.
    private func startPythonServer() throws -> PythonServer {
        let python = ProcessInfo.processInfo.environment["PARLEY_PYTHON"] ?? "python3"
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Interop/ws_echo_server.py").standardized.path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script]
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        // Not our stderr: a child holding it keeps `swift test`'s pipe open after we exit.
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line: [UInt8] = []
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            guard let first = byte.first else { break }
            if first == UInt8(ascii: "\n") { break }
            line.append(first)
        }
        guard let port = UInt16(String(decoding: line, as: UTF8.self)) else {
            try? input.fileHandleForWriting.close()
            process.terminate()
            throw PythonServerDidNotStart(output: String(decoding: line, as: UTF8.self))
        }
        return PythonServer(process: process, stdin: input, port: port)
    }

    /// Runs `body` with a Swift client connected to a fresh Python server; stops both after.
    private func withPythonPeer(configuration: WebSocketConfiguration = WebSocketConfiguration(),
                                _ body: (WebSocket, EventQueue<SocketEvent>) async throws -> Void) async throws {
        let python = try startPythonServer()
        defer { python.stop() }
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let (handler, events) = recordingHandler()
        let socket = try await WebSocketClient.connect(to: "ws://127.0.0.1:\(python.port)/", configuration: configuration,
                                                       on: group.loops[0], handler: handler)
        try await body(socket, events)
    }

    @Test func swiftClientTalksToPythonWebsockets() async throws {
        var configuration = WebSocketConfiguration()
        configuration.maxMessageSize = 4 << 20
        try await withPythonPeer(configuration: configuration) { socket, events async throws in
            socket.send(text: "héllo from Swift")
            #expect(try await nextEvent(events) == .message(.text("héllo from Swift")))

            let big = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
            socket.send(binary: big)
            #expect(try await nextEvent(events) == .message(.binary(big)))

            socket.send(text: "fragment")  // the server answers in three fragments
            #expect(try await nextEvent(events) == .message(.text("fragmented ✓")))

            socket.send(text: "ping")  // the server pings; our automatic pong must reach it
            #expect(try await nextEvent(events) == .message(.text("pong-received")))

            socket.send(text: "close")  // the server starts the close handshake
            #expect(try await nextEvent(events) == .close(WebSocketCloseCode(rawValue: 4001), "bye"))
        }
    }

    @Test func clientInitiatedCloseCompletesWithPythonServer() async throws {
        try await withPythonPeer { socket, events async throws in
            socket.close(code: .normalClosure, reason: "done")
            #expect(try await nextEvent(events) == .close(.normalClosure, "done"))
        }
    }

    @Test func aBroadcastFrameIsMaskedWhenAClientSendsIt() async throws {
        // EncodedWebSocketFrame is built unmasked for servers; a client must mask it, or the
        // Python server would close with 1002 instead of echoing.
        try await withPythonPeer { socket, events async throws in
            socket.send(EncodedWebSocketFrame(text: "shared frame"))
            #expect(try await nextEvent(events) == .message(.text("shared frame")))
        }
    }
}

struct PythonServerDidNotStart: Error, CustomStringConvertible {
    var output: String
    var description: String { "the Python websockets server did not print its port (got '\(output)')" }
}
