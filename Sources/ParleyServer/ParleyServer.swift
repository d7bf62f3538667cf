import Foundation
public import ParleyNet

/// A running Parley server: its loops, its HTTP listener and its routes.
///
/// ```swift
/// let server = try ParleyServer.start(configuration)   // binds; returns once listening
/// print(server.url)
/// await server.shutdown()
/// ```
public final class ParleyServer: Sendable {
    /// The configuration it runs with.
    public let configuration: ServerConfiguration
    /// The base URL, with the real port.
    public let url: String
    /// The bound address.
    public var localAddress: SocketAddress { http.localAddress }
    private let group: EventLoopGroup
    private let http: HTTPServer
    private let startedAt = ContinuousClock.now

    private init(configuration: ServerConfiguration, group: EventLoopGroup, http: HTTPServer) {
        self.configuration = configuration
        self.group = group
        self.http = http
        let host = http.localAddress.description.hasPrefix("[") ? "[\(configuration.host)]" : configuration.host
        url = "http://\(host):\(http.localAddress.port)"
    }

    /// Creates the data directory, starts the loops and binds.
    ///
    /// - Throws: ``StartError`` saying what to change (a busy port, an unwritable directory).
    public static func start(_ configuration: ServerConfiguration) throws -> ParleyServer {
        ProcessSetup.prepare()
        do {
            try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        } catch {
            throw StartError(message: "cannot create the data directory \(configuration.dataDirectory): \(error.localizedDescription); choose another with --data-dir")
        }
        let group: EventLoopGroup
        do {
            group = try EventLoopGroup(loopCount: configuration.threads ?? EventLoopGroup.coreCount)
        } catch {
            throw StartError(message: "cannot start event loops: \(error)")
        }
        var httpConfiguration = HTTPServerConfiguration()
        httpConfiguration.host = configuration.host
        httpConfiguration.port = configuration.port
        httpConfiguration.limits.maxBodySize = configuration.maxBodyBytes
        let startedAt = ContinuousClock.now
        let router = Routes.make(configuration: configuration, group: group, startedAt: startedAt)
        do {
            let http = try HTTPServer(configuration: httpConfiguration, router: router, group: group)
            return ParleyServer(configuration: configuration, group: group, http: http)
        } catch let error as IOError where error.code == EADDRINUSE {
            group.shutdown()
            throw StartError(message: "port \(configuration.port) on \(configuration.host) is already in use; stop the other process or pass --port")
        } catch {
            group.shutdown()
            throw StartError(message: "cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
    }

    /// Open connections (HTTP and WebSocket).
    public var connectionCount: Int { http.connectionCount }

    /// Graceful stop: see ``HTTPServer/shutdown(timeout:)``; then the loops stop.
    public func shutdown() async {
        await http.shutdown(timeout: .seconds(configuration.shutdownTimeoutSeconds))
        group.shutdown()
    }
}

/// A start-up failure with a message that says what to do.
public struct StartError: Error, CustomStringConvertible {
    /// What went wrong and how to fix it.
    public var message: String
    public var description: String { message }
}
