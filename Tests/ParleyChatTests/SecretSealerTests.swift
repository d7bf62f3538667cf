import ParleyCrypto
import Testing

/// Issue 31, item 4: secrets sealed with a key outside the database.
struct SecretSealerTests {
    @Test func aSealedSecretOpensWithItsKeyOnlyAndNeverShowsItsText() throws {
        let sealer = try #require(SecretSealer(key: SecretSealer.newKey()))
        let secret = "whsec_" + String(repeating: "k", count: 43)
        let sealed = sealer.seal(secret)
        #expect(SecretSealer.isSealed(sealed) && !sealed.contains(secret))
        #expect(sealer.seal(secret) != sealed, "a fresh nonce each time")
        #expect(try sealer.open(sealed) == secret)
        let other = try #require(SecretSealer(key: SecretSealer.newKey()))
        #expect(throws: SealError.self) { try other.open(sealed) }
        // A damaged box is refused, not misread.
        var damaged = Array(sealed)
        damaged[damaged.count - 3] = damaged[damaged.count - 3] == "A" ? "B" : "A"
        #expect(throws: SealError.self) { try sealer.open(String(damaged)) }
        #expect(throws: SealError.self) { try sealer.open("sealed:v1:not base64!") }
        // A secret stored before sealing reads as it is (an upgraded database, until sealed).
        #expect(try sealer.open("sk_plain") == "sk_plain")
        #expect(SecretSealer(key: [1, 2, 3]) == nil, "a key is 32 bytes")
    }
}
