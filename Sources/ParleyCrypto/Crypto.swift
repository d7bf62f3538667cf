import CParleySodium
import Foundation

/// Password hashing with Argon2id (libsodium's `crypto_pwhash_str`), random secrets, and
/// hashes of secrets. The only module that imports libsodium.
package enum Crypto: Sendable {
    /// Initialises libsodium once; safe to call from any thread, any number of times.
    private static let initialised: Bool = sodium_init() >= 0
    static var isReady: Bool { initialised }

    /// Argon2id cost settings. The defaults are libsodium's INTERACTIVE limits (2 passes,
    /// 64 MiB), the figure its documentation gives for interactive sign-in.
    package struct PasswordCost: Sendable, Hashable {
        /// Passes over memory (opslimit).
        package var passes: Int
        /// Memory in bytes (memlimit).
        package var memoryBytes: Int

        /// Creates a cost setting.
        package init(passes: Int, memoryBytes: Int) {
            self.passes = passes
            self.memoryBytes = memoryBytes
        }

        /// libsodium's interactive limits: 2 passes, 64 MiB.
        package static let interactive = PasswordCost(passes: Int(crypto_pwhash_OPSLIMIT_INTERACTIVE),
                                                     memoryBytes: Int(crypto_pwhash_MEMLIMIT_INTERACTIVE))
        /// The cheapest setting libsodium allows (1 pass, 8 KiB): for tests only, never for real passwords.
        package static let minimum = PasswordCost(passes: Int(crypto_pwhash_OPSLIMIT_MIN), memoryBytes: Int(crypto_pwhash_MEMLIMIT_MIN))
    }

    /// Hashes a password with Argon2id and a random salt into libsodium's self-describing
    /// string (`$argon2id$v=19$m=…,t=…,p=1$salt$hash`). Blocks for tens of milliseconds: call
    /// it off any event-loop thread.
    ///
    /// - Throws: ``CryptoError/outOfMemory`` when the memory cost cannot be allocated.
    package static func hashPassword(_ password: String, cost: PasswordCost = .interactive) throws -> String {
        precondition(initialised, "libsodium failed to initialise")
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        let status = crypto_pwhash_str_alg(&out, password, UInt64(password.utf8.count), UInt64(cost.passes),
                                           cost.memoryBytes, crypto_pwhash_ALG_ARGON2ID13)
        guard status == 0 else { throw CryptoError.outOfMemory }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Checks a password against a stored hash in constant time. False for a malformed hash.
    package static func verifyPassword(_ password: String, hash: String) -> Bool {
        precondition(initialised, "libsodium failed to initialise")
        return crypto_pwhash_str_verify(hash, password, UInt64(password.utf8.count)) == 0
    }

    /// True when a stored hash was made with other costs than `cost` (rehash on next sign-in).
    package static func passwordNeedsRehash(_ hash: String, cost: PasswordCost = .interactive) -> Bool {
        crypto_pwhash_str_needs_rehash(hash, UInt64(cost.passes), cost.memoryBytes) != 0
    }

    /// `count` bytes from the operating system's CSPRNG.
    package static func randomBytes(_ count: Int) -> [UInt8] {
        precondition(initialised, "libsodium failed to initialise")
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { randombytes_buf(base, buffer.count) }
        }
        return bytes
    }

    /// A random secret as URL-safe base64 without padding (`bytes` of entropy).
    package static func randomToken(bytes: Int = 32) -> String {
        base64URL(randomBytes(bytes))
    }

    /// A random identifier: `prefix` and `length` characters of lower-case base32 (5 bits each).
    package static func randomID(prefix: String, length: Int = 20) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
        let random = randomBytes(length)
        return prefix + String(decoding: random.map { alphabet[Int($0 & 31)] }, as: UTF8.self)
    }

    /// A time-ordered identifier: `prefix`, the milliseconds since 1970 in 10 characters of
    /// sortable base32, then `randomLength` random characters (like a ULID). Ids made later
    /// sort later, so a unique index on them grows at its right edge: each commit touches a
    /// few index pages instead of one page per new row, as fully random ids would.
    package static func timeOrderedID(prefix: String, milliseconds: Int64, randomLength: Int = 12) -> String {
        let alphabet = Array("234567abcdefghijklmnopqrstuvwxyz".utf8)  // ascending in ASCII
        var time = UInt64(max(0, milliseconds))
        var stamp = [UInt8](repeating: 0, count: 10)
        for index in stride(from: 9, through: 0, by: -1) {
            stamp[index] = alphabet[Int(time & 31)]
            time >>= 5
        }
        let random = randomBytes(randomLength).map { alphabet[Int($0 & 31)] }
        return prefix + String(decoding: stamp + random, as: UTF8.self)
    }

    /// BLAKE2b-256 of `text`: what is stored in place of a bearer token or app secret.
    package static func secretHash(_ text: String) -> [UInt8] {
        precondition(initialised, "libsodium failed to initialise")
        var out = [UInt8](repeating: 0, count: 32)
        let bytes = Array(text.utf8)
        crypto_generichash(&out, 32, bytes, UInt64(bytes.count), nil, 0)
        return out
    }

    /// Compares two byte strings in time that depends only on their length.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return sodium_memcmp(a, b, a.count) == 0
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A failure inside the cryptography library.
package enum CryptoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The password hash could not allocate its memory cost.
    case outOfMemory

    package var description: String {
        switch self {
        case .outOfMemory: "password hashing could not allocate its memory; lower the Argon2id memory cost or add RAM"
        }
    }
}
