import CParleyCurl
import Foundation

/// An answer from a push provider.
struct OutboundResponse: Sendable {
    /// The HTTP status.
    var status: Int
    /// Response headers, names lowercased.
    var headers: [String: String]
    /// The body (at most ``OutboundHTTP/maxBody`` bytes are kept).
    var body: [UInt8]
}

/// Why a request got no answer: the provider could not be reached, or did not answer in time.
struct OutboundError: Error, Sendable, CustomStringConvertible {
    var description: String
}

/// Where outbound TLS looks for trusted roots: the system's, plus the operator's extra CA
/// (`--outbound-ca-file`: tests and private gateways), as one PEM bundle.
struct TrustStore: Sendable {
    let pem: [UInt8]?

    /// The system's roots, with `extraFile` added when given.
    init(extraFile: String?) throws {
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

/// One HTTP/2 connection (libcurl with nghttp2, over OpenSSL) that a push sender uses for one
/// request at a time, on its own thread: the easy handle keeps the connection open between
/// requests, as APNs asks (one connection for many notifications, not one each).
/// decisions/0019-push-over-libcurl.md says why libcurl.
final class OutboundHTTP: @unchecked Sendable {
    // @unchecked: used by one sender thread at a time.

    /// Bytes of a response body kept (providers answer small JSON).
    static let maxBody = 64 * 1024

    private let handle: UnsafeMutableRawPointer
    private let trust: TrustStore
    private let timeout: Duration

    private static let initialised: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    /// A connection that trusts `trust`'s roots and gives up on a request after `timeout`.
    init(trust: TrustStore, timeout: Duration) throws {
        guard Self.initialised, let handle = curl_easy_init() else { throw OutboundError(description: "libcurl could not start") }
        self.handle = handle
        self.trust = trust
        self.timeout = timeout
    }

    deinit { curl_easy_cleanup(handle) }

    /// Sends `body` to `url` (HTTPS only) with `headers` (`Name: value`); the answer whatever
    /// its status.
    func post(_ url: String, headers: [String], body: [UInt8]) throws -> OutboundResponse {
        curl_easy_reset(handle)
        let collector = Collector()
        let box = Unmanaged.passRetained(collector)
        defer { box.release() }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        var failed = CURLE_OK
        func set(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        set(parley_curl_set_string(handle, CURLOPT_URL, url))
        set(parley_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "https"))
        set(parley_curl_set_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)))
        set(parley_curl_set_long(handle, CURLOPT_NOSIGNAL, 1))
        set(parley_curl_set_long(handle, CURLOPT_TIMEOUT_MS, Int(timeout.components.seconds * 1000)))
        set(parley_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(min(timeout, .seconds(10)).components.seconds * 1000)))
        set(parley_curl_set_long(handle, CURLOPT_POST, 1))
        set(parley_curl_set_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)))
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
            throw OutboundError(description: String(cString: curl_easy_strerror(result)))
        }
        var status = 0
        _ = parley_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return OutboundResponse(status: status, headers: collector.headers, body: collector.bytes)
    }

    /// What the callbacks gather.
    private final class Collector {
        var bytes: [UInt8] = []
        var headers: [String: String] = [:]

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
