#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    enum Storage: Sendable, Hashable {
        case v4(host: UInt32, port: UInt16)  // both in host byte order
        case v6(host: [UInt8], port: UInt16, scope: UInt32)
    }

    let storage: Storage

    init(storage: Storage) { self.storage = storage }

    /// The port number.
    public var port: UInt16 {
        switch storage {
        case .v4(_, let port), .v6(_, let port, _): port
        }
    }

    /// The address without the port (IPv6 without brackets).
    public var host: String {
        switch storage {
        case .v4(let host, _): "\(host >> 24).\((host >> 16) & 0xff).\((host >> 8) & 0xff).\(host & 0xff)"
        case .v6(let host, _, _): Self.ntop(AF_INET6, host)
        }
    }

    /// `host:port`, with brackets for IPv6.
    public var description: String {
        switch storage {
        case .v4(let host, let port):
            "\(host >> 24).\((host >> 16) & 0xff).\((host >> 8) & 0xff).\(host & 0xff):\(port)"
        case .v6(let host, let port, _):
            "[\(Self.ntop(AF_INET6, host))]:\(port)"
        }
    }

    /// Resolves `host` (a name or a literal) with `getaddrinfo`. Blocking: never call on a loop.
    ///
    /// - Throws: ``ResolveError`` when the name does not resolve.
    public static func resolve(host: String, port: UInt16) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else { throw ResolveError(host: host, reason: String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            if let address = info.pointee.ai_addr.flatMap({ SocketAddress(sockaddr: $0) }), !addresses.contains(address) {
                addresses.append(address)
            }
            cursor = info.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw ResolveError(host: host, reason: "no addresses") }
        return addresses
    }

    init?(sockaddr pointer: UnsafePointer<sockaddr>) {
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET:
            let address = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in.self)
            storage = .v4(host: UInt32(bigEndian: address.sin_addr.s_addr), port: UInt16(bigEndian: address.sin_port))
        case AF_INET6:
            let address = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in6.self)
            let bytes = withUnsafeBytes(of: address.sin6_addr) { Array($0) }
            storage = .v6(host: bytes, port: UInt16(bigEndian: address.sin6_port), scope: address.sin6_scope_id)
        default:
            return nil
        }
    }

    var family: Int32 {
        switch storage {
        case .v4: AF_INET
        case .v6: AF_INET6
        }
    }

    /// Calls `body` with this address as a C `sockaddr`.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch storage {
        case .v4(let host, let port):
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = host.bigEndian
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        case .v6(let host, let port, let scope):
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_scope_id = scope
            withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: host) }
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
    }

    /// The local address a socket is bound to.
    static func local(of fd: CInt) -> SocketAddress? { read(fd, getsockname) }

    /// The remote address a socket is connected to.
    static func peer(of fd: CInt) -> SocketAddress? { read(fd, getpeername) }

    private static func read(
        _ fd: CInt, _ call: (CInt, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> CInt
    ) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                call(fd, address, &length) == 0 ? SocketAddress(sockaddr: address) : nil
            }
        }
    }

    private static func ntop(_ family: Int32, _ bytes: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        _ = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A host name that did not resolve.
public struct ResolveError: Error, CustomStringConvertible {
    /// The name looked up.
    public var host: String
    /// `gai_strerror`'s text.
    public var reason: String
    public var description: String { "cannot resolve \(host): \(reason)" }
}

enum Sock {
    static let streamFlags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    static let acceptFlags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)

    static func setOption(_ fd: CInt, _ level: CInt, _ name: CInt, _ value: CInt) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<CInt>.size))
    }
}
