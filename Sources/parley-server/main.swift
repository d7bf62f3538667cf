import Foundation
import ParleyServer

// parley-server: parse the command line, start, wait for SIGINT/SIGTERM, stop gracefully.

/// Prints a line and flushes at once, so scripts and tests reading stdout see it now.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

let command: ServerConfiguration.Command
do {
    command = try ServerConfiguration.parse(Array(CommandLine.arguments.dropFirst()),
                                            environment: ProcessInfo.processInfo.environment)
} catch {
    FileHandle.standardError.write(Data("parley-server: \(error)\n".utf8))
    exit(64)  // EX_USAGE
}

switch command {
case .help:
    print(ServerConfiguration.helpText)
    exit(0)
case .version:
    print("parley-server \(ParleyVersion.current)")
    exit(0)
case .run(let configuration):
    let server: ParleyServer
    do {
        server = try ParleyServer.start(configuration)
    } catch {
        FileHandle.standardError.write(Data("parley-server: \(error)\n".utf8))
        exit(69)  // EX_UNAVAILABLE
    }
    say("Parley \(ParleyVersion.current) listening on \(server.url) (data in \(configuration.dataDirectory))")
    say("Health: \(server.url)/healthz   Metrics: \(server.url)/metrics   Stop: Ctrl-C")

    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    let signals = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
    let stopping = DispatchSemaphore(value: 0)
    for source in signals {
        source.setEventHandler { stopping.signal() }
        source.resume()
    }
    stopping.wait()
    say("Shutting down: finishing in-flight requests (at most \(configuration.shutdownTimeoutSeconds) s)")
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await server.shutdown()
        done.signal()
    }
    done.wait()
    say("Stopped.")
    exit(0)
}
