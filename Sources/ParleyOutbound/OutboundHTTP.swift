import CParleyCurl
import Foundation
import ParleyWire
import ParleySync

/// An answer from a push provider or a webhook receiver.
package struct OutboundResponse: Sendable {
    /// The HTTP status.
    package var status: Int
    /// Response headers, names lowercased.
    package var headers: [String: String]
    /// The body (at most ``OutboundHTTP/maxBody`` bytes are kept, or the limit the request gave).
    package var body: [UInt8]
    /// The body went on past the limit and the transfer was stopped there (``OutboundHTTP/get(_:headers:maxBody:)``).
    package var truncated = false

    /// An answer; each argument sets the property of the same name.
    package init(status: Int, headers: [String: String], body: [UInt8], truncated: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.truncated = truncated
    }
}

/// Why a request got no answer: the other side could not be reached (or its address is not
/// allowed), or did not answer in time.
package struct OutboundError: Error, Sendable, CustomStringConvertible {
    package var description: String
    /// The attempt never left this server: it had no file descriptor for a socket. Not the
    /// receiver's failure, so it should not count against the receiver's retries.
    package var local: Bool
    package init(description: String, local: Bool = false) {
        self.description = description
        self.local = local
    }
}

/// Where outbound TLS looks for trusted roots: the system's, plus the operator's extra CA
/// (`--outbound-ca-file`: tests and private gateways), as one PEM bundle kept in memory that
/// does not move, so every handle points at it instead of copying it.
package struct TrustStore: Sendable {
    let pem: PEMBundle?

    /// The system's roots, with `extraFile` added when given.
    package init(extraFile: String?) throws {
        guard let extraFile else {
            pem = nil
            return
        }
        guard let extra = FileManager.default.contents(atPath: extraFile), String(decoding: extra, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            throw OutboundError(description: "cannot read a PEM certificate from \(extraFile) (--outbound-ca-file)")
        }
        let system = ["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt"].lazy.compactMap { FileManager.default.contents(atPath: $0) }.first
        pem = PEMBundle(Array(system ?? Data()) + Array("\n".utf8) + Array(extra))
    }
}

/// PEM bytes at an address that stays put for the bundle's lifetime (`CURL_BLOB_NOCOPY`).
final class PEMBundle: @unchecked Sendable {
    // @unchecked: written once, in init.
    let bytes: UnsafeMutableRawBufferPointer

    init(_ pem: [UInt8]) {
        bytes = .allocate(byteCount: pem.count, alignment: 1)
        pem.withUnsafeBytes { bytes.copyMemory(from: $0) }
    }

    deinit { bytes.deallocate() }
}

/// What an outbound connection may do.
package struct OutboundPolicy: Sendable {
    /// `https` (push) or `http,https` (webhooks).
    package var protocols: String
    /// Whether loopback, private and link-local addresses may be reached (``AddressPolicy``).
    package var allowPrivate: Bool
    /// Private addresses that may be reached all the same, as `address:port` (`127.0.0.1:8080`,
    /// `[fd00::1]:443`): one internal site, not the whole network.
    package var allowedPrivate: Set<String> = []
    /// The option that lets private addresses be reached, named when one is refused.
    package var privateOption = "--webhooks-allow-private"

    /// Link previews: http or https, public addresses and the listed private ones only.
    package static func linkPreviews(allowedPrivate: Set<String>) -> OutboundPolicy {
        var policy = OutboundPolicy(protocols: "http,https", allowPrivate: false)
        policy.allowedPrivate = allowedPrivate
        policy.privateOption = "--link-previews-allow-private"
        return policy
    }

    /// Creates a policy; each argument sets the property of the same name.
    package init(protocols: String, allowPrivate: Bool) {
        self.protocols = protocols
        self.allowPrivate = allowPrivate
    }

    /// Push providers: TLS only, any address (the operator names them).
    package static let push = OutboundPolicy(protocols: "https", allowPrivate: true)

    /// Webhook receivers: http or https, public addresses unless allowed.
    package static func webhooks(allowPrivate: Bool) -> OutboundPolicy {
        OutboundPolicy(protocols: "http,https", allowPrivate: allowPrivate)
    }
}

/// One connection (libcurl with nghttp2, over OpenSSL; HTTP/2 where TLS offers it) that one
/// sender uses for one request at a time, on its own thread: the easy handle keeps the
/// connection open between requests, as a webhook receiver likes (a webhook endpoint's
/// deliveries go one at a time, in order). Push, which has no order to keep, multiplexes
/// instead (``OutboundMultiplexer``). decisions/0019-push-over-libcurl.md says why libcurl.
///
/// Every connection goes through an address check at the moment of connecting
/// (`CURLOPT_OPENSOCKETFUNCTION`): the address libcurl resolved is the one checked, so a name
/// that resolves to a private address (or changes to one after a check) is never reached
/// unless the policy allows it. Redirects are not followed and proxies from the environment
/// are not used.
package final class OutboundHTTP: @unchecked Sendable {
    // @unchecked: used by one sender thread at a time.

    /// Bytes of a response body kept (providers answer small JSON).
    package static let maxBody = 64 * 1024

    private let handle: UnsafeMutableRawPointer
    private let trust: TrustStore
    private let timeout: Duration
    private let policy: OutboundPolicy

    /// A connection that trusts `trust`'s roots and gives up on a request after `timeout`.
    package init(trust: TrustStore, timeout: Duration, policy: OutboundPolicy = .push) throws {
        guard OutboundTransfer.initialised, let handle = curl_easy_init() else { throw OutboundError(description: "libcurl could not start") }
        self.handle = handle
        self.trust = trust
        self.timeout = timeout
        self.policy = policy
    }

    deinit { curl_easy_cleanup(handle) }

    /// Fetches `url` with `headers` (`Name: value`); the answer whatever its status (at most
    /// `maxBody` bytes of it: a longer body is cut there and the transfer stopped,
    /// ``OutboundResponse/truncated``).
    ///
    /// - Throws: ``OutboundError`` when there is no answer (naming a refused address).
    package func get(_ url: String, headers: [String], maxBody: Int = OutboundHTTP.maxBody) throws -> OutboundResponse {
        curl_easy_reset(handle)
        let transfer = OutboundTransfer(policy: policy, trust: trust)
        transfer.limit = maxBody
        let configured = transfer.configure(handle, url: url, headers: headers, body: [], timeout: timeout, get: true)
        guard configured == CURLE_OK else { throw OutboundError(description: String(cString: curl_easy_strerror(configured))) }
        return try transfer.response(handle, withResult: curl_easy_perform(handle)).get()
    }

    /// Sends `body` to `url` with `headers` (`Name: value`); the answer whatever its status.
    ///
    /// - Throws: ``OutboundError`` when there is no answer (naming a refused address).
    package func post(_ url: String, headers: [String], body: [UInt8]) throws -> OutboundResponse {
        curl_easy_reset(handle)
        let transfer = OutboundTransfer(policy: policy, trust: trust)
        let configured = transfer.configure(handle, url: url, headers: headers, body: body, timeout: timeout)
        guard configured == CURLE_OK else { throw OutboundError(description: String(cString: curl_easy_strerror(configured))) }
        return try transfer.response(handle, withResult: curl_easy_perform(handle)).get()
    }
}

/// One request's settings, what its callbacks gather, and the address check: what a request
/// needs while libcurl works on it, whether one sender performs it (``OutboundHTTP``) or a
/// multiplexer does (``OutboundMultiplexer``).
final class OutboundTransfer {
    static let initialised: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    let allowPrivate: Bool
    let policy: OutboundPolicy
    let trust: TrustStore
    var bytes: [UInt8] = []
    /// The most body bytes kept; past it the transfer stops (``OutboundResponse/truncated``).
    var limit = OutboundHTTP.maxBody
    var truncated = false
    var headers: [String: String] = [:]
    /// An address the check refused, for the error.
    var refused: String?
    /// socket() failed for want of a descriptor (EMFILE, ENFILE).
    var outOfDescriptors = false
    private var list: UnsafeMutablePointer<curl_slist>?
    /// For a multiplexed request: who waits for the answer.
    var continuation: CheckedContinuation<OutboundResponse, any Error>?

    init(policy: OutboundPolicy, trust: TrustStore) {
        self.policy = policy
        self.allowPrivate = policy.allowPrivate
        self.trust = trust
    }

    deinit { curl_slist_free_all(list) }

    /// Sets up `handle` for a POST of `body` to `url`; the first failure, or `CURLE_OK`. The
    /// body is copied (`CURLOPT_COPYPOSTFIELDS`); the headers and the trusted roots live as
    /// long as this transfer, which must outlive the request.
    func configure(_ handle: UnsafeMutableRawPointer, url: String, headers: [String], body: [UInt8], timeout: Duration,
                   get: Bool = false) -> CURLcode {
        curl_slist_free_all(list)
        list = nil
        for header in headers { list = curl_slist_append(list, header) }
        let context = Unmanaged.passUnretained(self).toOpaque()
        var failed = CURLE_OK
        func set(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        let milliseconds = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        set(parley_curl_set_string(handle, CURLOPT_URL, url))
        set(parley_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, policy.protocols))
        set(parley_curl_set_string(handle, CURLOPT_NOPROXY, "*"))
        set(parley_curl_set_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        set(parley_curl_set_long(handle, CURLOPT_NOSIGNAL, 1))
        set(parley_curl_set_long(handle, CURLOPT_TIMEOUT_MS, milliseconds))
        set(parley_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, min(milliseconds, 10_000)))
        if get {
            set(parley_curl_set_long(handle, CURLOPT_HTTPGET, 1))
        } else {
            set(parley_curl_set_long(handle, CURLOPT_POST, 1))
            set(parley_curl_set_long(handle, CURLOPT_POSTFIELDSIZE, body.count))
            if body.isEmpty {
                set(parley_curl_set_string(handle, CURLOPT_COPYPOSTFIELDS, ""))
            } else {
                body.withUnsafeBytes { bytes in set(parley_curl_set_pointer(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))) }
            }
        }
        set(parley_curl_set_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)))
        set(parley_curl_set_socket(handle, { context, _, address in
            guard let context, let address else { return -1 }
            return Unmanaged<OutboundTransfer>.fromOpaque(context).takeUnretainedValue().open(address)
        }))
        set(parley_curl_set_pointer(handle, CURLOPT_OPENSOCKETDATA, context))
        set(parley_curl_set_write(handle, CURLOPT_WRITEFUNCTION, { data, size, count, context in
            guard let data, let context else { return 0 }
            let transfer = Unmanaged<OutboundTransfer>.fromOpaque(context).takeUnretainedValue()
            transfer.body(UnsafeRawBufferPointer(start: data, count: size * count))
            return transfer.truncated ? 0 : size * count
        }))
        set(parley_curl_set_pointer(handle, CURLOPT_WRITEDATA, context))
        set(parley_curl_set_write(handle, CURLOPT_HEADERFUNCTION, { data, size, count, context in
            guard let data, let context else { return 0 }
            Unmanaged<OutboundTransfer>.fromOpaque(context).takeUnretainedValue().header(UnsafeRawBufferPointer(start: data, count: size * count))
            return size * count
        }))
        set(parley_curl_set_pointer(handle, CURLOPT_HEADERDATA, context))
        if let pem = trust.pem {
            var blob = curl_blob(data: pem.bytes.baseAddress, len: pem.bytes.count, flags: UInt32(CURL_BLOB_NOCOPY))
            set(parley_curl_set_blob(handle, CURLOPT_CAINFO_BLOB, &blob))
        }
        return failed
    }

    /// The answer once libcurl finished with `result`, or why there is none.
    func response(_ handle: UnsafeMutableRawPointer, withResult result: CURLcode) -> Result<OutboundResponse, OutboundError> {
        guard result == CURLE_OK || (truncated && result == CURLE_WRITE_ERROR) else {
            if let refused {
                return .failure(OutboundError(description: "\(refused) is a private address; the server runs without \(policy.privateOption)"))
            }
            if outOfDescriptors {
                return .failure(OutboundError(description: "this server is out of file descriptors (raise LimitNOFILE, or lower --max-connections)",
                                              local: true))
            }
            return .failure(OutboundError(description: String(cString: curl_easy_strerror(result))))
        }
        var status = 0
        _ = parley_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .success(OutboundResponse(status: status, headers: headers, body: bytes, truncated: truncated))
    }

    /// Opens the socket libcurl asks for, unless its address is private and not allowed.
    func open(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        let family = address.pointee.family
        guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr) else { return -1 }
        let raw = UnsafeRawPointer(address) + offset
        if !allowPrivate {
            switch family {
            case AF_INET:
                let socket = raw.loadUnaligned(as: sockaddr_in.self)
                let bytes = withUnsafeBytes(of: socket.sin_addr) { Array($0) }
                let text = bytes.map(String.init).joined(separator: ".")
                if AddressPolicy.isPrivate(ipv4: bytes), !policy.allowedPrivate.contains("\(text):\(UInt16(bigEndian: socket.sin_port))") {
                    refused = text
                    return -1
                }
            case AF_INET6:
                let socket = raw.loadUnaligned(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: socket.sin6_addr) { Array($0) }
                let text = stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                    .joined(separator: ":")
                if AddressPolicy.isPrivate(ipv6: bytes), !policy.allowedPrivate.contains("[\(text)]:\(UInt16(bigEndian: socket.sin6_port))") {
                    refused = text
                    return -1
                }
            default:
                refused = "an address of family \(family)"
                return -1
            }
        }
        let opened = socket(family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
        if opened < 0, errno == EMFILE || errno == ENFILE { outOfDescriptors = true }
        return opened
    }

    func body(_ chunk: UnsafeRawBufferPointer) {
        guard bytes.count < limit else { return }
        bytes.append(contentsOf: chunk.prefix(limit - bytes.count))
        // Push and webhook answers are cut quietly (the rest is read and dropped); a caller
        // that set its own limit (link previews) stops the transfer at it.
        if limit != OutboundHTTP.maxBody, chunk.count > 0, bytes.count >= limit { truncated = true }
    }

    func header(_ line: UnsafeRawBufferPointer) {
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":"), headers.count < 64 else { return }
        let name = text[..<colon].lowercased()
        headers[name] = text[text.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// Many requests at once over few connections: one libcurl multi handle, driven by a thread of
/// its own, multiplexing HTTP/2 streams (`CURLPIPE_MULTIPLEX`; each request waits for a
/// connection it can share, `CURLOPT_PIPEWAIT`). A slow answer holds up only its own stream,
/// so a sender keeps many requests in flight without a connection, a thread or a queue each.
/// APNs asks for exactly this: few connections kept open, many notifications on each.
///
/// Requests go through the same settings and address check as ``OutboundHTTP``.
package final class OutboundMultiplexer: @unchecked Sendable {
    // @unchecked: `multi` is a raw libcurl handle, used by the loop's thread only, except
    // `curl_multi_wakeup`, which libcurl allows from any thread; everything else is a constant
    // or `queue`'s (a LockedValue).

    private let multi: UnsafeMutableRawPointer
    private let trust: TrustStore
    private let timeout: Duration
    private let policy: OutboundPolicy
    /// Requests waiting for the loop, and whether it stopped.
    private let queue = LockedValue((pending: [(UnsafeMutableRawPointer, OutboundTransfer)](), stopped: false))
    private let finished = DispatchSemaphore(value: 0)

    /// A multiplexer trusting `trust`'s roots that gives up on a request after `timeout` and
    /// opens at most `connections` connections per host, each carrying at most `streams`
    /// requests at once (fewer if the server says so).
    package init(trust: TrustStore, timeout: Duration, policy: OutboundPolicy = .push, connections: Int = 4, streams: Int = 100) throws {
        guard OutboundTransfer.initialised, let multi = curl_multi_init() else { throw OutboundError(description: "libcurl could not start") }
        self.multi = multi
        self.trust = trust
        self.timeout = timeout
        self.policy = policy
        _ = parley_curl_multi_set_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = parley_curl_multi_set_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, connections))
        _ = parley_curl_multi_set_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, max(1, streams))
        let thread = Thread { [self] in loop() }
        thread.name = "parley-outbound"
        thread.start()
    }

    /// Stops the loop and frees the multi handle: requests in flight or waiting end with an
    /// ``OutboundError``. Call it once the multiplexer is no longer needed (its thread keeps
    /// it alive until then).
    package func stop() {
        let first = queue.withLock { queue in
            defer { queue.stopped = true }
            if !queue.stopped { curl_multi_wakeup(multi) }
            return !queue.stopped
        }
        guard first else { return }
        finished.wait()
        curl_multi_cleanup(multi)
    }

    /// Sends `body` to `url` with `headers` (`Name: value`) on a shared connection; the answer
    /// whatever its status.
    ///
    /// - Throws: ``OutboundError`` when there is no answer (naming a refused address), or when
    ///   the multiplexer is stopped.
    package func post(_ url: String, headers: [String], body: [UInt8]) async throws -> OutboundResponse {
        guard let handle = curl_easy_init() else { throw OutboundError(description: "libcurl could not start a request") }
        let transfer = OutboundTransfer(policy: policy, trust: trust)
        var configured = transfer.configure(handle, url: url, headers: headers, body: body, timeout: timeout)
        if configured == CURLE_OK { configured = parley_curl_set_long(handle, CURLOPT_PIPEWAIT, 1) }
        guard configured == CURLE_OK else {
            curl_easy_cleanup(handle)
            throw OutboundError(description: String(cString: curl_easy_strerror(configured)))
        }
        return try await withCheckedThrowingContinuation { continuation in
            transfer.continuation = continuation
            // Woken inside the lock: once `stopped` is set nobody touches the multi handle but
            // the loop, so stop() may free it.
            let accepted = queue.withLock { queue in
                guard !queue.stopped else { return false }
                queue.pending.append((handle, transfer))
                curl_multi_wakeup(multi)
                return true
            }
            guard accepted else {
                curl_easy_cleanup(handle)
                continuation.resume(throwing: OutboundError(description: "the server is stopping"))
                return
            }
        }
    }

    /// The loop: takes new requests, lets libcurl work, hands each finished one its answer,
    /// and sleeps in `curl_multi_poll` until a socket is ready, a timer is due or a request comes.
    private func loop() {
        var active: [UnsafeMutableRawPointer: OutboundTransfer] = [:]
        while true {
            let (added, stopping) = queue.withLock { queue in
                defer { queue.pending.removeAll() }
                return (queue.pending, queue.stopped)
            }
            if stopping {
                let error = OutboundError(description: "the server is stopping")
                for (handle, transfer) in added { finish(handle, transfer, .failure(error)) }
                for (handle, transfer) in active {
                    curl_multi_remove_handle(multi, handle)
                    finish(handle, transfer, .failure(error))
                }
                finished.signal()
                return
            }
            for (handle, transfer) in added {
                if curl_multi_add_handle(multi, handle) == CURLM_OK {
                    active[handle] = transfer
                } else {
                    finish(handle, transfer, .failure(OutboundError(description: "libcurl refused a request")))
                }
            }
            var running: Int32 = 0
            _ = curl_multi_perform(multi, &running)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                      let transfer = active.removeValue(forKey: handle) else { continue }
                let result = message.pointee.data.result  // read before the handle is removed
                curl_multi_remove_handle(multi, handle)
                finish(handle, transfer, transfer.response(handle, withResult: result))
            }
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
    }

    private func finish(_ handle: UnsafeMutableRawPointer, _ transfer: OutboundTransfer, _ result: Result<OutboundResponse, OutboundError>) {
        curl_easy_cleanup(handle)
        let continuation = transfer.continuation
        transfer.continuation = nil
        continuation?.resume(with: result.mapError { $0 as any Error })
    }
}

extension DispatchQueue {
    /// Runs blocking work (a libcurl transfer) on this queue and waits for its result without
    /// holding a thread of the caller's: each webhook sender has a queue of its own.
    package func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in async { continuation.resume(returning: work()) } }
    }
}
