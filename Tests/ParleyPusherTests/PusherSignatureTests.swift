import Testing
import ParleyCrypto
@testable import ParleyPusher

/// Pusher's signatures, against the worked examples in Pusher's own documentation
/// ("Generating the authentication string" and the HTTP API's "Worked authentication example").
@Suite struct PusherSignatureTests {
    let key = "278d425bdf160c739803"
    let secret = "7ad3773142a6692b25b8"

    @Test func privateChannelAuthMatchesPushersWorkedExample() {
        let auth = "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"
        #expect(PusherSignature.sign("1234.1234:private-foobar", secret: secret) == String(auth.split(separator: ":")[1]))
        #expect(PusherSignature.verifyAuth(auth, message: "1234.1234:private-foobar", key: key, secret: secret))
        // Another socket, channel, key or secret: refused.
        #expect(!PusherSignature.verifyAuth(auth, message: "1234.1235:private-foobar", key: key, secret: secret))
        #expect(!PusherSignature.verifyAuth(auth, message: "1234.1234:private-foobaz", key: key, secret: secret))
        #expect(!PusherSignature.verifyAuth(auth, message: "1234.1234:private-foobar", key: "other", secret: secret))
        #expect(!PusherSignature.verifyAuth(auth, message: "1234.1234:private-foobar", key: key, secret: "other"))
        #expect(!PusherSignature.verifyAuth(String(auth.dropLast()), message: "1234.1234:private-foobar", key: key, secret: secret))
        #expect(!PusherSignature.verifyAuth("no-colon", message: "1234.1234:private-foobar", key: key, secret: secret))
    }

    @Test func theHTTPAPIsWorkedExampleVerifies() throws {
        let body = Array(#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#.utf8)
        #expect(Crypto.md5(body).hexString == "ec365a775a4cd0599faeb73354201b6f")
        let parameters = ["auth_key": key, "auth_timestamp": "1353088179", "auth_version": "1.0",
                          "body_md5": "ec365a775a4cd0599faeb73354201b6f"]
        let signed = PusherSignature.stringToSign(method: "POST", path: "/apps/3/events", parameters: parameters)
        #expect(signed == "POST\n/apps/3/events\nauth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f")
        let signature = PusherSignature.sign(signed, secret: secret)
        #expect(signature == "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c")
        let query = "auth_key=\(key)&auth_timestamp=1353088179&auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f&auth_signature=\(signature)"
        try PusherSignature.verifyRequest(method: "POST", path: "/apps/3/events", query: Substring(query), body: body, key: key,
                                          secret: secret, now: 1_353_088_179 + 599)
    }

    @Test func refusalsNameTheProblem() {
        let body = Array("{}".utf8)
        let md5 = Crypto.md5(body).hexString
        func query(timestamp: Int64 = 1_000, md5: String? = nil, signWith: String? = nil, version: String = "1.0") -> Substring {
            var parameters = ["auth_key": key, "auth_timestamp": String(timestamp), "auth_version": version]
            if let md5 { parameters["body_md5"] = md5 }
            let signature = PusherSignature.sign(PusherSignature.stringToSign(method: "POST", path: "/apps/1/events", parameters: parameters),
                                                 secret: signWith ?? secret)
            parameters["auth_signature"] = signature
            return Substring(parameters.map { "\($0.key)=\($0.value)" }.joined(separator: "&"))
        }
        func verify(_ query: Substring, body: [UInt8] = Array("{}".utf8), now: Int64 = 1_000) throws(PusherSignature.Refusal) {
            try PusherSignature.verifyRequest(method: "POST", path: "/apps/1/events", query: query, body: body, key: key, secret: secret, now: now)
        }
        #expect(throws: Never.self) { try verify(query(md5: md5)) }
        #expect(throws: PusherSignature.Refusal.stale(601)) { try verify(query(md5: md5), now: 1_601) }
        #expect(throws: PusherSignature.Refusal.missing("body_md5")) { try verify(query()) }
        #expect(throws: PusherSignature.Refusal.bodyMismatch) { try verify(query(md5: md5), body: Array("{ }".utf8)) }
        #expect(throws: PusherSignature.Refusal.wrongVersion("2.0")) { try verify(query(md5: md5, version: "2.0")) }
        #expect(throws: PusherSignature.Refusal.missing("auth_signature")) { try verify("auth_key=\(key)") }
        #expect(throws: PusherSignature.Refusal.badQuery("the form body has a '%' not followed by two hex digits")) { try verify("a=%zz") }
        do {
            try verify(query(md5: md5, signWith: "wrong"))
            Issue.record("a signature made with another secret was accepted")
        } catch {
            guard case .badSignature(let over) = error else { Issue.record("\(error)"); return }
            #expect(over.hasPrefix("POST\n/apps/1/events\nauth_key="))
        }
        _ = body
    }

    @Test func channelNamesAndSocketIDs() {
        #expect(PusherProtocol.channelNameProblem("private-chat_room-1=@,.;") == nil)
        #expect(PusherProtocol.channelNameProblem("") != nil)
        #expect(PusherProtocol.channelNameProblem(String(repeating: "a", count: 165)) != nil)
        #expect(PusherProtocol.channelNameProblem("room 1") != nil)
        #expect(PusherProtocol.channelNameProblem("#server-to-user-1") != nil)
        #expect(PusherProtocol.kind(of: "presence-x") == .presence)
        #expect(PusherProtocol.kind(of: "private-encrypted-x") == .private)
        #expect(PusherProtocol.kind(of: "x") == .public)
        #expect(PusherService.isSocketID("123.456"))
        #expect(!PusherService.isSocketID("123"))
        #expect(!PusherService.isSocketID("1.2.3"))
        #expect(!PusherService.isSocketID("a.1"))
    }
}
