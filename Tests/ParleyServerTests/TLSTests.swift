import Foundation
import ParleyNet
import ParleyNetTesting
import ParleyServer
import ParleyServerTesting
import Testing

/// The Swift WebSocket client (the SDK's and `parley`'s on Linux) over `wss://` to the server's
/// own TLS (`--tls-cert-file`), with certificates made by the openssl tool for this test.
struct TLSTests {
    /// A CA and a leaf for `names` (subjectAltName entries such as `IP:127.0.0.1`).
    private static func certificates(names: String) throws -> (ca: String, cert: String, key: String) {
        let directory = NSTemporaryDirectory() + "parley-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        func openssl(_ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw TLSError(description: "openssl \(arguments.first ?? "") failed") }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(["req", "-x509"] + ec + ["-days", "1", "-subj", "/CN=test CA", "-keyout", "\(directory)/ca.key", "-out", "\(directory)/ca.pem",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
        try openssl(["req"] + ec + ["-subj", "/CN=server", "-keyout", "\(directory)/server.key", "-out", "\(directory)/server.csr"])
        try "subjectAltName=\(names)\n".write(toFile: "\(directory)/ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(directory)/server.csr", "-CA", "\(directory)/ca.pem", "-CAkey", "\(directory)/ca.key",
                    "-CAcreateserial", "-days", "1", "-extfile", "\(directory)/ext", "-out", "\(directory)/server.pem"])
        return ("\(directory)/ca.pem", "\(directory)/server.pem", "\(directory)/server.key")
    }


    @Test func theSwiftClientSpeaksWSSAndChecksTheCertificateAndTheName() async throws {
        let files = try Self.certificates(names: "IP:127.0.0.1")
        let trusting = try TLSContext.client(caFile: files.ca)
        try await withTestServer({
            $0.enableEcho = true
            $0.tlsCertificateFile = files.cert
            $0.tlsKeyFile = files.key
        }) { server in
            #expect(server.url.hasPrefix("https://"))
            let group = try EventLoopGroup(loopCount: 1)
            defer { group.shutdown() }
            let url = "wss://127.0.0.1:\(server.localAddress.port)/echo/ws"
            let (handler, events) = recordingHandler()
            let socket = try await WebSocketClient.connect(to: url, on: group.loops[0], tlsContext: trusting, handler: handler)
            // Small and large frames: one record, and a frame spread over many TLS records.
            let large = [UInt8]((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            socket.send(text: "over TLS")
            #expect(try await nextEvent(events) == .message(.text("over TLS")))
            socket.send(binary: large)
            #expect(try await nextEvent(events) == .message(.binary(large)))
            socket.close(code: .normalClosure, reason: "done")

            // A server whose certificate no trusted CA signed is refused.
            let untrusting = try TLSContext.client()
            await #expect(throws: (any Error).self) {
                _ = try await WebSocketClient.connect(to: url, on: group.loops[0], tlsContext: untrusting, handler: recordingHandler().0)
            }
            // So is one whose certificate does not name the host connected to.
            await #expect(throws: (any Error).self) {
                _ = try await WebSocketClient.connect(to: "wss://localhost:\(server.localAddress.port)/echo/ws", on: group.loops[0],
                                                      tlsContext: trusting, handler: recordingHandler().0)
            }
        }
    }
}
