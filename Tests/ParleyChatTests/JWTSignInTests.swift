import Foundation
@testable import ParleyChat
import ParleyChatTesting
import ParleyCrypto
import ParleyStore
import ParleyWire
import Testing

/// Signing in with the app's own JWTs, on both engines (RS256 and ES256 with real keys are in
/// Tests/Interop/test_trust_and_safety.py, signed by PyJWT).
struct JWTSignInTests {
    static let secret = "a shared secret of at least thirty-two bytes"

    static func token(_ claims: String, secret: String = JWTSignInTests.secret, header: String = #"{"alg":"HS256","typ":"JWT"}"#) -> String {
        func encode(_ bytes: [UInt8]) -> String {
            Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let input = encode(Array(header.utf8)) + "." + encode(Array(claims.utf8))
        return input + "." + encode(Crypto.hmacSHA256(key: Array(secret.utf8), message: Array(input.utf8)))
    }

    @Test func theVerifierTakesOnlyWhatTheAppConfigured() throws {
        let keys = JWTKeys(hs256: Array(Self.secret.utf8), keys: [], issuer: "https://id.example", audience: "chat")
        let now: Int64 = 1_800_000_000_000
        let good = #"{"sub":"ana","name":"Ana","exp":1800000600,"iss":"https://id.example","aud":["web","chat"]}"#
        #expect(try JWTVerifier.verify(Self.token(good), keys: keys, now: now) == VerifiedToken(subject: "ana", name: "Ana", expiresAt: 1_800_000_600_000))
        let refusals: [(String, String)] = [
            (Self.token(good, secret: "another secret of at least thirty-two bytes"), "signature"),
            (Self.token(#"{"sub":"ana","exp":1799999000,"iss":"https://id.example","aud":"chat"}"#), "expired"),
            (Self.token(#"{"sub":"ana","iss":"https://id.example","aud":"chat"}"#), "exp"),
            (Self.token(#"{"sub":"ana","exp":1800000600,"iss":"https://evil.example","aud":"chat"}"#), "iss"),
            (Self.token(#"{"sub":"ana","exp":1800000600,"iss":"https://id.example","aud":"other"}"#), "aud"),
            (Self.token(#"{"exp":1800000600,"iss":"https://id.example","aud":"chat"}"#), "sub"),
            (Self.token(#"{"sub":"ana","exp":1800000600,"nbf":1800000300,"iss":"https://id.example","aud":"chat"}"#), "nbf"),
            (Self.token(good, header: #"{"alg":"none"}"#), "not accepted"),
            (Self.token(good, header: #"{"alg":"RS256","kid":"k1"}"#), "kid"),
            ("eyJhbGciOiJIUzI1NiJ9.e30", "three"),
        ]
        for (token, problem) in refusals {
            #expect(throws: JWTError.self, "\(problem)") { try JWTVerifier.verify(token, keys: keys, now: now) }
            do { _ = try JWTVerifier.verify(token, keys: keys, now: now) } catch { #expect(error.description.contains(problem), "\(error)") }
        }
        #expect(JWTVerifier.looksLikeJWT(Self.token(good)) && !JWTVerifier.looksLikeJWT("pt_" + String(repeating: "a", count: 43)))
    }

    @Test func aTokenSignsInMakesTheUserOnceAndWorksAsTheBearerToo() async throws {
        let harness = try await ChatHarness.make()
        defer { harness.tearDown() }
        let chat = harness.chat
        let server = ServerApp(app: harness.app, name: "test", caller: try await chat.backend.systemCaller(app: harness.app.id))
        let expires = Int64(harness.clock.now.timeIntervalSince1970) + 3600
        await #expect(throws: ChatError.self) {
            try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(#"{"sub":"ana","exp":\#(expires)}"#)), app: harness.app)
        }
        let settings = try await chat.jwt.set(server, SetJWTSettingsRequest(hs256Secret: Self.secret, audience: "chat"))
        #expect(settings.algorithms == ["HS256"] && settings.audience == "chat")
        await #expect(throws: ChatError.self) { try await chat.jwt.set(server, SetJWTSettingsRequest(hs256Secret: "short")) }

        let first = try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(#"{"sub":"ana","name":"Ana Lima","exp":\#(expires),"aud":"chat"}"#)),
                                          app: harness.app)
        #expect(first.user.username == "ana" && first.user.displayName == "Ana Lima")
        let again = try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(#"{"sub":"ana","exp":\#(expires),"aud":"chat"}"#)), app: harness.app)
        #expect(again.user.id == first.user.id, "the same sub is the same user")
        // A sub that is no valid username gets a made-up one, stable for that sub.
        let apple = #"{"sub":"001234.abcdef0123456789abcdef0123456789.0123","exp":\#(expires),"aud":"chat"}"#
        let odd = try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(apple)), app: harness.app)
        #expect(odd.user.username.hasPrefix("u-") && odd.user.displayName == odd.user.username)
        // The JWT itself as the bearer: a session that lives as long as the token.
        let bearer = Self.token(#"{"sub":"ana","exp":\#(expires),"aud":"chat","jti":"1"}"#)
        let caller = try await chat.authenticate(token: bearer, app: harness.app)
        #expect(caller.userID == first.user.id && caller.sessionKey != 0)
        #expect(try await chat.authenticate(token: bearer, app: harness.app) == caller, "the same session on the next use")
        await #expect(throws: ChatError.self) {
            try await chat.authenticate(token: Self.token(#"{"sub":"ana","exp":\#(expires),"aud":"web"}"#), app: harness.app)
        }
        // A deactivated user's token is refused; a deleted user's sub signs up anew.
        _ = try await chat.backend.setDeactivated(server, username: "ana", true)
        await #expect(throws: ChatError.userDeactivated) {
            try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(#"{"sub":"ana","exp":\#(expires),"aud":"chat"}"#)), app: harness.app)
        }
        try await chat.backend.deleteUser(server, username: "ana", erase: false)
        let fresh = try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(#"{"sub":"ana","exp":\#(expires),"aud":"chat"}"#)), app: harness.app)
        #expect(fresh.user.id != first.user.id && fresh.user.username == "ana")
        // Refused tokens spend the address's sign-in budget, as wrong passwords do.
        let forged = Self.token(#"{"sub":"eve","exp":\#(expires),"aud":"chat"}"#, secret: "not the app's key but thirty-two bytes long")
        for _ in 0..<50 {
            await #expect(throws: ChatError.self) { try await chat.signIn(jwt: JWTSignInRequest(token: forged), app: harness.app, address: "10.9.9.9") }
        }
        do {
            _ = try await chat.signIn(jwt: JWTSignInRequest(token: forged), app: harness.app, address: "10.9.9.9")
            Issue.record("the 51st refused token was checked")
        } catch let error as ChatError {
            #expect(error.code == "rate_limited" && error.retryAfterSeconds != nil)
        }
        try await chat.jwt.remove(server)
        await #expect(throws: ChatError.self) {
            try await chat.signIn(jwt: JWTSignInRequest(token: Self.token(#"{"sub":"ana","exp":\#(expires),"aud":"chat"}"#)), app: harness.app)
        }
    }
}
