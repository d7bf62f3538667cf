import Foundation
import ParleyLog
import ParleyServer

// parley-server: parse the command line, start, wait for SIGINT/SIGTERM, stop gracefully.

// Block SIGINT, SIGTERM and SIGHUP before any other thread exists, so every thread inherits
// the mask and the signals stay pending until `sigwait` below takes them. A signal sent the
// instant the server says it is listening is therefore never lost, whichever thread the
// kernel picks. SIGHUP reloads the TLS certificate; the other two stop the server.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
sigaddset(&stopSignals, SIGHUP)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

// Everything this process creates — the data directory, the database and its WAL, backups,
// media — is for this user alone: it holds every message and the apps' secrets (0700/0600).
umask(0o077)

/// Prints a line and flushes at once, so scripts and tests reading stdout see it now.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("parley-server: \(message)\n".utf8))
    exit(code)
}


let command: ServerConfiguration.Command
do {
    command = try ServerConfiguration.parse(Array(CommandLine.arguments.dropFirst()),
                                            environment: ProcessInfo.processInfo.environment)
} catch {
    fail("\(error)", code: 64)  // EX_USAGE
}

switch command {
case .help:
    print(ServerConfiguration.helpText)
    exit(0)
case .version:
    print("parley-server \(ParleyVersion.current)")
    exit(0)
case .apps(let apps, let configuration):
    switch runBlocking({ try await ParleyServer.runApps(apps, configuration: configuration) }) {
    case .success(let text): say(text)
    case .failure(let error): fail("\(error)", code: 65)  // EX_DATAERR
    }
    exit(0)
case .admin(let admin):
    let password: @Sendable () -> String? = {
        ProcessInfo.processInfo.environment["PARLEY_PASSWORD"] ?? readLine(strippingNewline: true).flatMap { $0.isEmpty ? nil : $0 }
    }
    switch runBlocking({ try await Admin.run(admin, password: password) }) {
    case .success(let text): say(text)
    case .failure(let error as AdminError): fail(error.description, code: error.exitCode)
    case .failure(let error): fail("\(error)", code: 1)
    }
    exit(0)
case .backup(let file, let overwrite, let configuration):
    switch runBlocking({ try await ParleyServer.runBackup(to: file, overwrite: overwrite, configuration: configuration) }) {
    case .success(let text): say(text)
    case .failure(let error): fail("\(error)", code: 74)  // EX_IOERR
    }
    exit(0)
case .restore(let file, let configuration):
    switch runBlocking({ try await ParleyServer.runRestore(from: file, configuration: configuration) }) {
    case .success(let text): say(text)
    case .failure(let error): fail("\(error)", code: 65)  // EX_DATAERR
    }
    exit(0)
case .run(let configuration):
    let server: ParleyServer
    switch runBlocking({ try await ParleyServer.start(configuration) }) {
    case .success(let started): server = started
    case .failure(let error):
        Logger.process.handler.flush()  // what the failed start logged, before the process ends
        fail("\(error)", code: 69)  // EX_UNAVAILABLE
    }
    say("Parley \(ParleyVersion.current) listening on \(server.url) (data in \(configuration.dataDirectory))")
    if configuration.testMode {
        say("*** TEST MODE: for an app's CI, never production. Tests move this server's clock (POST /v1/test/clock); "
            + "every response says Parley-Test-Mode: on. docs/test-mode.md ***")
    }
    // The first app's secret goes to the screen only when a person is there to read it.
    for line in server.appsBanner(toTerminal: isatty(STDOUT_FILENO) == 1) { say(line) }
    say(server.pushBanner)
    say("Web client: \(server.url)/app/")
    say("Health: \(server.url)/healthz   Metrics: \(server.url)/metrics   Stop: Ctrl-C")

    var received: Int32 = 0
    while true {
        sigwait(&stopSignals, &received)
        guard received == SIGHUP else { break }
        switch server.reloadTLS() {
        case .none: say("SIGHUP: no TLS certificate to reload (start with --tls-cert-file and --tls-key-file)")
        case .success:
            say("SIGHUP: reloaded the TLS certificate; new connections use it")
            server.logger.info("TLS certificate reloaded")
        case .failure(let error):
            server.logger.error("TLS reload failed; kept the current certificate", metadata: ["error": .string("\(error)")])
        }
    }
    say("Shutting down: finishing in-flight requests (at most \(configuration.shutdownTimeout.components.seconds) s)")
    _ = runBlocking { await server.shutdown() }
    say("Stopped.")
    exit(0)
}
