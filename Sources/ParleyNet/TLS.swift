#if canImport(Glibc)
import Glibc
#endif
import CParleySSL
import ParleySync

/// A TLS setup that could not be made (a file that is not a certificate, a key that does not
/// match), or a connection's TLS failure. The message says which file or what the peer did.
public struct TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public var description: String

    /// An error that says `description`.
    public init(description: String) { self.description = description }

    /// The error and OpenSSL's reasons for it, oldest first (the queue is emptied).
    static func openSSL(_ what: String) -> TLSError {
        TLSError(description: what + TLSContext.drainErrors())
    }
}

/// An OpenSSL context (libssl, TLS 1.2 and 1.3): a server's certificate chain and key, or a
/// client's trust. Shared by many connections; immutable once made.
public final class TLSContext: @unchecked Sendable {
    // @unchecked: an SSL_CTX is safe to share once configured (OpenSSL locks internally).
    let context: OpaquePointer
    /// True for a server context.
    public let isServer: Bool

    private init(context: OpaquePointer, isServer: Bool) {
        self.context = context
        self.isServer = isServer
    }

    deinit { SSL_CTX_free(context) }

    /// A server context from PEM files: `certificateFile` holds the certificate and its chain
    /// (leaf first), `keyFile` the private key.
    ///
    /// - Throws: ``TLSError`` naming the file that could not be used and why.
    public static func server(certificateFile: String, keyFile: String) throws(TLSError) -> TLSContext {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw .openSSL("cannot make a TLS context") }
        let made = TLSContext(context: context, isServer: true)
        configure(context)
        // Mozilla's "intermediate" TLS 1.2 suites, narrowed to ECDHE: forward secrecy and AEAD
        // only (no static-RSA key exchange, no CBC), in the server's order. TLS 1.3's suites
        // are all AEAD with forward secrecy; OpenSSL's default list stands.
        guard SSL_CTX_set_cipher_list(context, TLSContext.tls12Ciphers) == 1 else { throw .openSSL("cannot set the TLS 1.2 cipher suites") }
        _ = parley_ssl_ctx_prefer_server_ciphers(context)
        _ = parley_ssl_ctx_set_session_cache_server(context)
        // No TLS 1.3 session tickets: the server would write them in the middle of its first
        // read after the handshake, and clients reconnect rarely enough to do without resumption.
        SSL_CTX_set_num_tickets(context, 0)
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            throw .openSSL("cannot use \(certificateFile) as the certificate chain (PEM, leaf first)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyFile, parley_ssl_filetype_pem()) == 1 else {
            let reasons = drainErrors()
            throw TLSError(description: reasons.contains("mismatch")
                ? "the key in \(keyFile) does not belong to the certificate in \(certificateFile)\(reasons)"
                : "cannot use \(keyFile) as the private key (PEM, unencrypted)\(reasons)")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw .openSSL("the key in \(keyFile) does not belong to the certificate in \(certificateFile)")
        }
        return made
    }

    /// The TLS 1.2 cipher suites a server offers, strongest first (docs/operations.md, "TLS").
    public static let tls12Ciphers = [
        "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    ].joined(separator: ":")

    /// A client context that verifies servers against the system's trusted roots (OpenSSL's
    /// default paths, which `SSL_CERT_FILE` and `SSL_CERT_DIR` override) and, if given, the
    /// certificates in `caFile`.
    ///
    /// - Throws: ``TLSError`` when `caFile` cannot be read.
    public static func client(caFile: String? = nil) throws(TLSError) -> TLSContext {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .openSSL("cannot make a TLS context") }
        let made = TLSContext(context: context, isServer: false)
        configure(context)
        SSL_CTX_set_default_verify_paths(context)
        if let caFile, SSL_CTX_load_verify_locations(context, caFile, nil) != 1 {
            throw .openSSL("cannot read trusted certificates from \(caFile)")
        }
        SSL_CTX_set_verify(context, parley_ssl_verify_peer(), nil)
        return made
    }

    /// The default client context, made once.
    public static let defaultClient: Result<TLSContext, TLSError> = Result { () throws(TLSError) in try client() }

    private static func configure(_ context: OpaquePointer) {
        _ = parley_ssl_ctx_set_min_tls12(context)
        _ = parley_ssl_ctx_set_modes(context)
        _ = parley_ssl_ctx_ignore_unexpected_eof(context)
    }

    /// OpenSSL's queued reasons as text (": reason; reason"), emptying the queue.
    static func drainErrors() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")
    }
}

/// A server's certificate that can be replaced while it runs: connections accepted after
/// ``reload()`` use the new files, open ones keep theirs. `parley-server` reloads on SIGHUP.
public final class TLSCertificateStore: Sendable {
    /// The certificate chain file.
    public let certificateFile: String
    /// The private key file.
    public let keyFile: String
    private let current: LockedValue<TLSContext>

    /// Loads the files.
    ///
    /// - Throws: ``TLSError`` naming what could not be used.
    public init(certificateFile: String, keyFile: String) throws(TLSError) {
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        current = LockedValue(try TLSContext.server(certificateFile: certificateFile, keyFile: keyFile))
    }

    /// Loads the files again. When they cannot be used, the current certificate stays and the
    /// error says why.
    public func reload() throws(TLSError) {
        let fresh = try TLSContext.server(certificateFile: certificateFile, keyFile: keyFile)
        current.withLock { $0 = fresh }
    }

    /// The context new connections use.
    public var context: TLSContext { current.withLock { $0 } }
}

/// One connection's TLS state over its non-blocking socket. Loop thread only.
final class TLSSession {
    enum Outcome {
        case processed(Int)
        case wantRead
        case wantWrite
        case closed
        case failed(IOError)
    }

    let ssl: OpaquePointer
    private let context: TLSContext  // kept alive as long as the session
    private var shutDown = false

    init(context: TLSContext, fd: CInt, serverName: String?) throws(TLSError) {
        guard let ssl = SSL_new(context.context) else { throw .openSSL("cannot make a TLS session") }
        self.ssl = ssl
        self.context = context
        SSL_set_fd(ssl, fd)
        if context.isServer {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            if let serverName {
                // SNI, and the name the certificate must carry (an IP address is checked as one).
                if serverName.contains(where: { $0.isLetter }) { _ = parley_ssl_set_server_name(ssl, serverName) }
                guard SSL_set1_host(ssl, serverName) == 1 else { throw .openSSL("cannot check certificates for \(serverName)") }
            }
        }
    }

    deinit { SSL_free(ssl) }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        ERR_clear_error()
        let count = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        return count > 0 ? .processed(Int(count)) : outcome(count, call: "TLS read")
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        ERR_clear_error()
        let count = SSL_write(ssl, bytes.baseAddress, Int32(min(bytes.count, Int(Int32.max))))
        return count > 0 ? .processed(Int(count)) : outcome(count, call: "TLS write")
    }

    /// Decrypted bytes waiting in OpenSSL (the socket may have none left).
    var hasDecrypted: Bool { SSL_pending(ssl) > 0 }

    /// Whether OpenSSL holds record bytes it took off the socket and has not returned: after
    /// the handshake's last message it can answer "want read" with the first application
    /// record already in its buffer, and the socket then signals nothing more. (It may also be
    /// the first part of a record whose rest is still coming.)
    var hasBuffered: Bool { SSL_pending(ssl) > 0 || SSL_has_pending(ssl) == 1 }

    /// Sends close_notify once, if the handshake finished; never waits for the peer's.
    func shutdown() {
        guard !shutDown, SSL_is_init_finished(ssl) == 1 else { return }
        shutDown = true
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    private func outcome(_ result: Int32, call: String) -> Outcome {
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            let number = errno
            if number == 0 || number == ECONNRESET || number == EPIPE { return .closed }
            if number == EAGAIN || number == EWOULDBLOCK { return .wantRead }
            return .failed(IOError(code: number, call: call))
        default:
            return .failed(IOError(code: EPROTO, call: call + TLSContext.drainErrors()))
        }
    }
}
