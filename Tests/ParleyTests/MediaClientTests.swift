import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Parley
import ParleyNetTesting
import ParleyWire
import Testing

/// A 16 × 12 JPEG (Pillow, quality 50).
let tinyJPEG = Data(base64Encoded: """
    /9j/4AAQSkZJRgABAQAAAQABAAD/2wBDABALDA4MChAODQ4SERATGCgaGBYWGDEjJR0oOjM9PDkzODdASFxOQERXRTc4UG1RV19iZ2hnPk1xeXBkeFxlZ2P/2wBDARESEhgVGC8aGi9jQjhCY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2P/wAARCAAMABADASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwCvRRRWJ4Z//9k=
    """, options: .ignoreUnknownCharacters) ?? Data()

/// Media through the SDK against the real binary: upload with progress, send, receive,
/// download once into the cache.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct MediaClientTests {
    @Test func aPhotoIsUploadedWithProgressSentAndDownloadedOnceByTheOtherMember() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("parley-cache-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        let bob = ParleyClient(server: server.url, appKey: server.appKey, mediaCache: cache)
        try await alice.register(username: "alice", password: "correct horse battery")
        try await bob.register(username: "bob", password: "correct horse battery")
        let chat = try await alice.directConversation(with: "bob")
        for client in [alice, bob] {
            let states = await client.connectionStates()
            await client.connect()
            _ = try await first(states) { $0 == .online }
        }
        let bobsEvents = await bob.events(in: chat.id)
        // A real JPEG followed by 2 MiB after its end marker (kept out of the stored file): an
        // upload long enough to report progress more than once.
        let photo = tinyJPEG + Data(count: 2 << 20)
        let sending = try await alice.send(.photo(photo), to: chat.id, caption: "the view")
        var steps: [UploadProgress] = []
        for await step in sending.progress { steps.append(step) }
        let message = try await sending.value
        #expect(steps.count >= 2)
        #expect(steps.map(\.sentBytes) == steps.map(\.sentBytes).sorted())
        #expect(steps.last == UploadProgress(sentBytes: Int64(photo.count), totalBytes: Int64(photo.count)))
        guard case .photo(let attachment)? = message.content else { Issue.record("not a photo: \(String(describing: message.content))"); return }
        #expect(attachment.width == 16 && attachment.height == 12 && attachment.caption == "the view")
        #expect(attachment.sizeBytes == Int64(tinyJPEG.count))

        let received = try await first(bobsEvents) { $0.message?.id == message.id }
        guard case .photo(let seen)? = received.message?.content else { Issue.record("Bob got no photo"); return }
        let file = try await bob.download(seen.attachmentID)
        #expect(try Data(contentsOf: file) == tinyJPEG)
        let thumbnail = try await bob.download(seen.attachmentID, variant: .thumbnail)
        #expect(try Data(contentsOf: thumbnail).prefix(2) == Data([0xFF, 0xD8]))
        // A signed URL works with no headers at all.
        let signed = try await bob.signedURL(for: seen.attachmentID)
        let (bytes, response) = try await URLSession.shared.data(from: signed)
        #expect((response as? HTTPURLResponse)?.statusCode == 200 && bytes == tinyJPEG)
        // Cached: the server can be gone.
        server.kill()
        #expect(try await bob.download(seen.attachmentID) == file)
    }

    @Test func aVideoGoesWithItsThumbnailAndRefusalsAreTyped() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        _ = try await ParleyClient(server: server.url, appKey: server.appKey).register(username: "bob", password: "correct horse battery")
        let chat = try await alice.directConversation(with: "bob")
        let states = await alice.connectionStates()
        await alice.connect()
        _ = try await first(states) { $0 == .online }
        let video = FileManager.default.temporaryDirectory.appendingPathComponent("clip-\(UUID().uuidString).mp4")
        defer { try? FileManager.default.removeItem(at: video) }
        var mp4 = Data([0, 0, 0, 24]) + Data("ftypisom".utf8) + Data([0, 0, 2, 0]) + Data("isomiso2".utf8)
        mp4 += Data([0, 0, 16, 0]) + Data("mdat".utf8) + Data(count: 4088)
        try mp4.write(to: video)
        let message = try await alice.send(.video(file: video, thumbnail: tinyJPEG, durationSeconds: 4.5, width: 1280, height: 720),
                                           to: chat.id).value
        guard case .video(let attachment)? = message.content else { Issue.record("not a video"); return }
        #expect(attachment.mimeType == "video/mp4" && attachment.durationSeconds == 4.5 && attachment.thumbnailID != nil)
        #expect(attachment.name == video.lastPathComponent)

        // A voice message: its length and waveform travel with it; MessageKit's audio item has the length.
        let memo = FileManager.default.temporaryDirectory.appendingPathComponent("memo-\(UUID().uuidString).mp3")
        defer { try? FileManager.default.removeItem(at: memo) }
        try (Data("ID3".utf8) + Data([4, 0, 0, 0, 0, 0, 0]) + Data(count: 2048)).write(to: memo)
        let voice = try await alice.send(.voice(file: memo, durationSeconds: 3.2, waveform: [0, 128, 255, 64]), to: chat.id).value
        guard case .audio(let recording)? = voice.content else { Issue.record("not audio"); return }
        #expect(recording.voice == true && recording.waveform == [0, 128, 255, 64] && recording.durationSeconds == 3.2)
        #expect(voice.messageKind == .audio(recording))
        let refusedVoice = try await alice.send(.voice(file: memo, durationSeconds: 3.2, waveform: [300]), to: chat.id)
        do {
            _ = try await refusedVoice.value
            Issue.record("a waveform value over 255 was accepted")
        } catch let error as ParleyError {
            #expect(error.code == "invalid_request")
        }

        // Text pretending to be a photo: the server's typed refusal, nothing sent.
        let refused = try await alice.send(.photo(Data("not a picture".utf8)), to: chat.id)
        do {
            _ = try await refused.value
            Issue.record("a text file was accepted as a photo")
        } catch let error as ParleyError {
            #expect(error.code == "type_mismatch")
        }
    }

    /// An upload that broke off (a raw socket closed halfway, as when an app is stopped) is
    /// continued by the SDK from the byte the server stopped at, given the same client id.
    @Test func anUploadThatBrokeOffIsContinuedFromWhereTheServerStopped() async throws {
        let server = ServerProcess()
        try server.start()
        defer { withExtendedLifetime(server) {} }
        let alice = ParleyClient(server: server.url, appKey: server.appKey)
        try await alice.register(username: "alice", password: "correct horse battery")
        // A second session of Alice's, to break an upload off by hand.
        var signIn = URLRequest(url: try #require(URL(string: server.url + "/v1/sessions")))
        signIn.httpMethod = "POST"
        signIn.setValue(server.appKey, forHTTPHeaderField: "X-Parley-App-Key")
        signIn.setValue("application/json", forHTTPHeaderField: "Content-Type")
        signIn.httpBody = Data(#"{"username":"alice","password":"correct horse battery"}"#.utf8)
        let token = try #require(try WireCoding.decoder().decode(SignedIn.self, from: try await URLSession.shared.data(for: signIn).0).session.token)

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("parley-resume-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("report.pdf")
        let bytes = Data("%PDF-1.7\n".utf8) + Data((0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        try bytes.write(to: file)
        let half = 600_000
        let raw = try RawClient(port: server.port)
        raw.send("POST /v1/media?kind=file&clientId=report-7&name=report.pdf HTTP/1.1\r\nHost: x\r\nX-Parley-App-Key: \(server.appKey)\r\n"
                 + "Authorization: Bearer \(token)\r\nContent-Type: application/pdf\r\nContent-Length: \(bytes.count)\r\n\r\n")
        raw.send(Array(bytes.prefix(half)))
        raw.shutdownWrite()
        // Wait until the server has written what was sent: watch the file, since asking for
        // the status takes the upload over and would stop bytes still in flight.
        let partial = server.data + "/media/partial"
        func written() -> [Int] {
            ((try? FileManager.default.contentsOfDirectory(atPath: partial)) ?? []).filter { $0.hasSuffix(".part") }.compactMap {
                (try? FileManager.default.attributesOfItem(atPath: partial + "/" + $0))?[.size] as? Int
            }
        }
        let deadline = Date().addingTimeInterval(10)
        while !written().contains(half) {
            try #require(Date() < deadline, "the server did not write the broken upload's \(half) bytes: \(written())")
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let kept = try await alice.uploadStatus(clientID: "report-7")
        #expect(kept?.state == .partial && kept?.receivedBytes == Int64(half) && kept?.totalBytes == Int64(bytes.count))

        let transfer = try await alice.upload(file: file, kind: .file, mimeType: "application/pdf", clientID: "report-7")
        var steps: [UploadProgress] = []
        for await step in transfer.progress { steps.append(step) }
        let info = try await transfer.value
        #expect(steps.allSatisfy { $0.sentBytes >= Int64(half) }, "progress starts where the server stopped: \(steps.prefix(3))")
        #expect(steps.last == UploadProgress(sentBytes: Int64(bytes.count), totalBytes: Int64(bytes.count)))
        #expect(info.sizeBytes == Int64(bytes.count) && info.name == "report.pdf")
        #expect(try Data(contentsOf: try await alice.download(info.id)) == bytes)
        let status = try await alice.uploadStatus(clientID: "report-7")
        #expect(status?.state == .complete && status?.attachment?.id == info.id)
        // The same id again returns the stored upload without sending anything.
        #expect(try await alice.upload(file: file, kind: .file, mimeType: "application/pdf", clientID: "report-7").value == info)
        do {
            try await alice.abandonUpload(clientID: "never-began")
            Issue.record("abandoning an upload that never began succeeded")
        } catch let error as ParleyError {
            #expect(error.code == "upload_not_found")
        }
    }
}
