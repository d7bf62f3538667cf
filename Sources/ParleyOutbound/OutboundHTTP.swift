import CParleyCurl
import Foundation
import ParleyWire

/// An answer from a push provider or a webhook receiver.
package struct OutboundResponse: Sendable {
    /// The HTTP status.
    package var status: Int
    /// Response headers, names lowercased.
    package var headers: [String: String]
    /// The body (at most ``OutboundHTTP/maxBody`` bytes are kept).
    package var body: [UInt8]
}

/// Why a request got no answer: the other side could not be reached (or its address is not
/// allowed), or did not answer in time.
package struct OutboundError: Error, Sendable, CustomStringConvertible {
    package var description: String
    package init(description: String) { self.description = description }
}

/// Where outbound TLS looks for trusted roots: the system's, plus the operator's extra CA
/// (`--outbound-ca-file`: tests and private gateways), as one PEM bundle.
package struct TrustStore: Sendable {
    let pem: [UInt8]?

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
        pem = Array(system ?? Data()) + Array("\n".utf8) + Array(extra)
    }
}

/// What an outbound connection may do.
package struct OutboundPolicy: Sendable {
    /// `https` (push) or `http,https` (webhooks).
    package var protocols: String
    /// Whether loopback, private and link-local addresses may be reached (``AddressPolicy``).
    package var allowPrivate: Bool

    /// Push providers: TLS only, any address (the operator names them).
    package static let push = OutboundPolicy(protocols: "https", allowPrivate: true)

    /// Webhook receivers: http or https, public addresses unless allowed.
    package static func webhooks(allowPrivate: Bool) -> OutboundPolicy {
        OutboundPolicy(protocols: "http,https", allowPrivate: allowPrivate)
    }
}

/// One connection (libcurl with nghttp2, over OpenSSL; HTTP/2 where TLS offers it) that one
/// sender uses for one request at a time, on its own thread: the easy handle keeps the
/// connection open between requests, as APNs asks and as a webhook receiver likes.
/// decisions/0019-push-over-libcurl.md says why libcurl.
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

    private static let initialised: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    /// A connection that trusts `trust`'s roots and gives up on a request after `timeout`.
    package init(trust: TrustStore, timeout: Duration, policy: OutboundPolicy = .push) throws {
        guard Self.initialised, let handle = curl_easy_init() else { throw OutboundError(description: "libcurl could not start") }
        self.handle = handle
        self.trust = trust
        self.timeout = timeout
        self.policy = policy
    }

    deinit { curl_easy_cleanup(handle) }

    /// Sends `body` to `url` with `headers` (`Name: value`); the answer whatever its status.
    ///
    /// - Throws: ``OutboundError`` when there is no answer (naming a refused address).
    package func post(_ url: String, headers: [String], body: [UInt8]) throws -> OutboundResponse {
        curl_easy_reset(handle)
        let collector = Collector(allowPrivate: policy.allowPrivate)
        let box = Unmanaged.passRetained(collector)
        defer { box.release() }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        var failed = CURLE_OK
        func set(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        set(parley_curl_set_string(handle, CURLOPT_URL, url))
        set(parley_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, policy.protocols))
        set(parley_curl_set_string(handle, CURLOPT_NOPROXY, "*"))
        set(parley_curl_set_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        set(parley_curl_set_long(handle, CURLOPT_NOSIGNAL, 1))
        set(parley_curl_set_long(handle, CURLOPT_TIMEOUT_MS, Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)))
        set(parley_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(min(timeout, .seconds(10)).components.seconds * 1000)))
        set(parley_curl_set_long(handle, CURLOPT_POST, 1))
        set(parley_curl_set_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)))
        set(parley_curl_set_socket(handle, { context, _, address in
            guard let context, let address else { return -1 }
            return Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue().open(address)
        }))
        set(parley_curl_set_pointer(handle, CURLOPT_OPENSOCKETDATA, box.toOpaque()))
        set(parley_curl_set_write(handle, CURLOPT_WRITEFUNCTION, { data, size, count, context in
            guard let data, let context else { return 0 }
            Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue().body(UnsafeRawBufferPointer(start: data, count: size * count))
            return size * count
        }))
        set(parley_curl_set_pointer(handle, CURLOPT_WRITEDATA, box.toOpaque()))
        set(parley_curl_set_write(handle, CURLOPT_HEADERFUNCTION, { data, size, count, context in
            guard let data, let context else { return 0 }
            Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue().header(UnsafeRawBufferPointer(start: data, count: size * count))
            return size * count
        }))
        set(parley_curl_set_pointer(handle, CURLOPT_HEADERDATA, box.toOpaque()))
        let result: CURLcode = body.withUnsafeBytes { bytes in
            set(parley_curl_set_long(handle, CURLOPT_POSTFIELDSIZE, bytes.count))
            set(parley_curl_set_pointer(handle, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress)))
            guard let pem = trust.pem else {
                guard failed == CURLE_OK else { return failed }
                return curl_easy_perform(handle)
            }
            return pem.withUnsafeBytes { certificates in
                var blob = curl_blob(data: UnsafeMutableRawPointer(mutating: certificates.baseAddress), len: certificates.count,
                                     flags: UInt32(CURL_BLOB_NOCOPY))
                set(parley_curl_set_blob(handle, CURLOPT_CAINFO_BLOB, &blob))
                guard failed == CURLE_OK else { return failed }
                return curl_easy_perform(handle)
            }
        }
        guard result == CURLE_OK else {
            if let refused = collector.refused {
                throw OutboundError(description: "\(refused) is a private address; the server runs without --webhooks-allow-private")
            }
            throw OutboundError(description: String(cString: curl_easy_strerror(result)))
        }
        var status = 0
        _ = parley_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return OutboundResponse(status: status, headers: collector.headers, body: collector.bytes)
    }

    /// What the callbacks gather, and the address check.
    private final class Collector {
        let allowPrivate: Bool
        var bytes: [UInt8] = []
        var headers: [String: String] = [:]
        /// An address the check refused, for the error.
        var refused: String?

        init(allowPrivate: Bool) { self.allowPrivate = allowPrivate }

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
                    if AddressPolicy.isPrivate(ipv4: bytes) {
                        refused = bytes.map(String.init).joined(separator: ".")
                        return -1
                    }
                case AF_INET6:
                    let socket = raw.loadUnaligned(as: sockaddr_in6.self)
                    let bytes = withUnsafeBytes(of: socket.sin6_addr) { Array($0) }
                    if AddressPolicy.isPrivate(ipv6: bytes) {
                        refused = stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
                            .joined(separator: ":")
                        return -1
                    }
                default:
                    refused = "an address of family \(family)"
                    return -1
                }
            }
            return socket(family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
        }

        func body(_ chunk: UnsafeRawBufferPointer) {
            guard bytes.count < OutboundHTTP.maxBody else { return }
            bytes.append(contentsOf: chunk.prefix(OutboundHTTP.maxBody - bytes.count))
        }

        func header(_ line: UnsafeRawBufferPointer) {
            let text = String(decoding: line, as: UTF8.self)
            guard let colon = text.firstIndex(of: ":"), headers.count < 64 else { return }
            let name = text[..<colon].lowercased()
            headers[name] = text[text.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}

extension DispatchQueue {
    /// Runs blocking work (a libcurl transfer) on this queue and waits for its result without
    /// holding a thread of the caller's: each push or webhook sender has a queue of its own.
    package func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in async { continuation.resume(returning: work()) } }
    }
}
