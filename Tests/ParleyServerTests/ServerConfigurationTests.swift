import Foundation
import Testing
@testable import ParleyServer
import ParleyNet
import ParleyOptions
import ParleyPush
import ParleyWebhooks
import ParleyStoreSQLite
@testable import ParleyStorePostgres
import ParleyMediaService

struct ServerConfigurationTests {
    @Test func defaults() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse([]) else {
            Issue.record("expected run")
            return
        }
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 8080)
        #expect(configuration.dataDirectory == "./data")
        #expect(!configuration.enableEcho)
    }

    @Test func optionsOverrideTheEnvironment() throws {
        let command = try ServerConfiguration.parse(
            ["--port", "9000", "--data-dir=/tmp/x", "--enable-echo"],
            environment: ["PARLEY_PORT": "7000", "PARLEY_HOST": "0.0.0.0", "PARLEY_THREADS": "3"])
        guard case .run(let configuration) = command else {
            Issue.record("expected run")
            return
        }
        #expect(configuration.port == 9000)
        #expect(configuration.host == "0.0.0.0")
        #expect(configuration.threads == 3)
        #expect(configuration.dataDirectory == "/tmp/x")
        #expect(configuration.enableEcho)
    }

    @Test func databaseRedisAndTLSOptionsAreCheckedWhereTheyAreRead() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse(
            ["--database-url", "postgres://u:p@db:5432/parley", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"],
            environment: ["PARLEY_REDIS_URL": "redis://:secret@cache:6380"]) else {
            Issue.record("not a run command")
            return
        }
        #expect(configuration.databaseURL == "postgres://u:p@db:5432/parley")
        #expect(configuration.redisURL == "redis://:secret@cache:6380")
        #expect(configuration.tlsCertificateFile == "c.pem" && configuration.tlsKeyFile == "k.pem")
        for bad in [["--database-url", "mysql://db/parley"], ["--redis-url", "rediss://cache:6379"], ["--redis-url", "redis://"],
                    ["--tls-cert-file", "c.pem"], ["--tls-key-file", "k.pem"]] {
            #expect(throws: ServerConfiguration.UsageError.self, "\(bad)") { try ServerConfiguration.parse(bad) }
        }
    }

    @Test func pushOptionsComeTogetherAndAppsSetWhatPushesSay() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse(
            ["--apns-key-file", "k.p8", "--apns-key-id", "KEY1234567", "--apns-team-id", "TEAM123456", "--apns-topic", "com.example.chat",
             "--apns-url", "https://127.0.0.1:9443", "--push-window", "3", "--push-concurrency", "500", "--push-connections", "2"],
            environment: ["PARLEY_FCM_CREDENTIALS_FILE": "sa.json", "PARLEY_OUTBOUND_CA_FILE": "ca.pem"]) else {
            Issue.record("not a run command")
            return
        }
        let push = configuration.push
        #expect(push.isOn && push.apnsTopic == "com.example.chat" && push.fcmCredentialsFile == "sa.json" && push.outboundCAFile == "ca.pem")
        #expect(push.confirmationWindow == .seconds(3) && push.apnsURL == "https://127.0.0.1:9443")
        #expect(push.concurrency == 500 && push.connections == 2)
        let parsedOff = try ServerConfiguration.parse([], environment: [:])
        guard case .run(let off) = parsedOff else { throw UnexpectedCommand(parsedOff) }
        #expect(!off.push.isOn && off.push.concurrency == 100 && off.push.connections == 4)
        for bad in [["--apns-key-file", "k.p8"], ["--apns-topic", "x", "--apns-key-id", "y"], ["--fcm-url", "https://x"],
                    ["--fcm-credentials-file", "sa.json", "--fcm-url", "http://plain"], ["--push-concurrency", "0"], ["--push-connections", "33"]] {
            #expect(throws: ServerConfiguration.UsageError.self, "\(bad)") { try ServerConfiguration.parse(bad) }
        }
        #expect(try ServerConfiguration.parse(["apps", "push-content", "default", "id-only"]) == .apps(.pushContent(app: "default", idOnly: true), ServerConfiguration()))
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["apps", "push-content", "default", "sometimes"]) }
    }

    @Test func webhookAndServerAPIOptionsAndTheAdminCommand() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse(
            ["--webhooks-allow-private", "--webhook-retry-window", "3600", "--webhook-first-retry", "250", "--webhook-concurrency", "4",
             "--webhook-timeout", "3", "--outbound-ca-file", "/tmp/ca.pem", "--server-api-requests-per-second", "7"],
            environment: ["PARLEY_SECRET_GRACE": "0"]) else {
            Issue.record("expected run")
            return
        }
        #expect(configuration.webhooks.allowPrivate && configuration.webhooks.retryWindow == .seconds(3600))
        #expect(configuration.webhooks.firstRetry == .milliseconds(250) && configuration.webhooks.concurrency == 4)
        #expect(configuration.webhooks.timeout == .seconds(3) && configuration.serverAPIRequestsPerSecond == 7)
        #expect(configuration.webhooks.outboundCAFile == "/tmp/ca.pem" && configuration.push.outboundCAFile == "/tmp/ca.pem")
        #expect(configuration.secretGrace == .zero)
        #expect(ServerConfiguration().webhooks.allowPrivate == false, "private addresses are refused unless allowed")
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["--webhook-concurrency", "0"]) }

        guard case .admin(let admin) = try ServerConfiguration.parse(["admin", "replay", "wh_1", "whd_2", "--json"],
                                                                     environment: ["PARLEY_APP_SECRET": "sk_x", "PARLEY_URL": "https://chat.example"]) else {
            Issue.record("expected admin")
            return
        }
        #expect(admin.words == ["replay", "wh_1", "whd_2"] && admin.json && admin.secret == "sk_x" && admin.url == "https://chat.example")
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["admin", "users"]) }  // no secret
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["admin", "frobnicate", "--secret", "sk_x"]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["admin", "user", "--secret", "sk_x"]) }
        let parsedHelp = try ServerConfiguration.parse(["admin", "help"])
        guard case .admin(let help) = parsedHelp else { throw UnexpectedCommand(parsedHelp) }
        #expect(help.words == ["help"])
    }

    @Test func traceAndTestModeOptions() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse(["--trace-retention", "0", "--node-name", "chat-1:8080", "--test-mode"]) else {
            Issue.record("not a run command")
            return
        }
        #expect(configuration.traceRetentionHours == 0 && configuration.nodeName == "chat-1:8080" && configuration.testMode)
        #expect(ServerConfiguration().traceRetentionHours == 24 && ServerConfiguration().nodeName == nil && !ServerConfiguration().testMode)
        // Test mode with TLS is for loopback only; plain HTTP anywhere (a CI container's address).
        _ = try ServerConfiguration.parse(["--test-mode", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"])
        _ = try ServerConfiguration.parse(["--test-mode", "--host", "0.0.0.0"])
        for bad in [["--trace-retention", "721"], ["--trace-retention", "-1"], ["--node-name", "chat 1"], ["--node-name", String(repeating: "n", count: 65)],
                    ["--node-name", ""], ["--test-mode", "--host", "0.0.0.0", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"]] {
            #expect(throws: ServerConfiguration.UsageError.self, "\(bad)") { try ServerConfiguration.parse(bad) }
        }
    }

    @Test func aDatabaseURLIsShownWithoutItsPassword() {
        #expect(PostgresStore.redact("postgres://parley:s3cret@db:5432/parley") == "postgres://parley:REDACTED@db:5432/parley")
        #expect(!PostgresStore.redact("host=db user=parley password=s3cret dbname=parley").contains("s3cret"))
        #expect(PostgresStore.redact("postgres://parley@db/parley") == "postgres://parley@db/parley")
    }

    @Test func realtimeOptions() throws {
        let command = try ServerConfiguration.parse(
            ["--presence-grace", "3", "--max-replay-events", "500", "--commands-per-second", "20", "--auth-timeout", "4",
             "--max-queued-bytes", "1048576"],
            environment: [:])
        guard case .run(let configuration) = command else {
            Issue.record("expected run")
            return
        }
        #expect(configuration.realtime.presenceGrace == .seconds(3))
        #expect(configuration.realtime.maxReplayEvents == 500)
        #expect(configuration.realtime.commandsPerSecond == 20 && configuration.realtime.commandBurst == 40)
        #expect(configuration.realtime.userCommandsPerSecond == 40 && configuration.realtime.userCommandBurst == 80)
        #expect(configuration.realtime.authTimeout == .seconds(4))
        #expect(configuration.realtime.maxQueuedBytes == 1 << 20)
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["--max-queued-bytes", "10"]) }
        #expect(ServerConfiguration.helpText.contains("--presence-grace"))
    }

    @Test func mediaOptionsAndTheirEnvironmentVariables() throws {
        let command = try ServerConfiguration.parse(
            ["--max-photo-bytes", "1000", "--max-video-bytes", "2000", "--max-audio-bytes", "3000", "--max-file-bytes", "4000",
             "--media-quota-bytes", "5000", "--max-image-pixels", "6000", "--thumbnail-size", "256", "--keep-photo-metadata",
             "--media-url-lifetime", "60", "--media-orphan-lifetime", "0", "--media-gc-interval", "7"],
            environment: ["PARLEY_MAX_FILE_BYTES": "9", "PARLEY_MEDIA_GC_INTERVAL": "8"])
        guard case .run(let configuration) = command else {
            Issue.record("expected run")
            return
        }
        let media = configuration.media
        #expect([media.maxPhotoBytes, media.maxVideoBytes, media.maxAudioBytes, media.maxFileBytes, media.quotaBytes] == [1000, 2000, 3000, 4000, 5000])
        #expect(media.maxImagePixels == 6000 && media.thumbnailSide == 256 && media.keepPhotoMetadata)
        #expect(media.urlLifetimeSeconds == 60 && media.orphanLifetimeSeconds == 0 && media.collectionIntervalSeconds == 7)
        #expect(media.largestUpload == 4000)
        guard case .run(let noCollector) = try ServerConfiguration.parse(["--media-gc-interval", "0"], environment: [:]) else {
            Issue.record("0 turns this node's collector off (several nodes collect on one)")
            return
        }
        #expect(noCollector.media.collectionIntervalSeconds == 0)
        guard case .run(let fromEnvironment) = try ServerConfiguration.parse([], environment: ["PARLEY_MAX_FILE_BYTES": "9",
                                                                                                "PARLEY_KEEP_PHOTO_METADATA": "yes"]) else {
            Issue.record("expected run")
            return
        }
        #expect(fromEnvironment.media.maxFileBytes == 9 && fromEnvironment.media.keepPhotoMetadata)
        #expect(ServerConfiguration().media.keepPhotoMetadata == false, "location metadata is removed by default")
        for bad in [["--thumbnail-size", "8"], ["--max-photo-bytes", "0"], ["--media-url-lifetime", "86401"], ["--keep-photo-metadata=maybe"]] {
            #expect(throws: ServerConfiguration.UsageError.self, "\(bad)") { try ServerConfiguration.parse(bad) }
        }
        #expect(ServerConfiguration.helpText.contains("--keep-photo-metadata") && ServerConfiguration.helpText.contains("PARLEY_MAX_PHOTO_BYTES"))
    }

    @Test func helpAndVersion() throws {
        #expect(try ServerConfiguration.parse(["--help"]) == .help)
        #expect(try ServerConfiguration.parse(["-h"]) == .help)
        #expect(try ServerConfiguration.parse(["--version"]) == .version)
        let help = ServerConfiguration.helpText
        for option in ["--host", "--port", "--data-dir", "--threads", "--max-body-bytes", "--enable-echo", "PARLEY_PORT"] {
            #expect(help.contains(option), "help mentions \(option)")
        }
    }

    @Test(arguments: [
        (["--port", "70000"], "--port must be a whole number from 0 to 65535"),
        (["--port"], "--port needs a value"),
        (["--bogus"], "unknown option '--bogus'"),
        (["--threads", "0"], "--threads must be a whole number from 1 to 256"),
        (["--host", ""], "--host must not be empty"),
    ])
    func mistakesNameTheOption(_ arguments: [String], _ message: String) {
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments) }
        do {
            _ = try ServerConfiguration.parse(arguments)
        } catch {
            #expect(error.message.hasPrefix(message), "\(error.message)")
            #expect(error.description.contains("--help"))
        }
    }

    @Test func badEnvironmentValuesSayWhereTheyCameFrom() {
        do {
            _ = try ServerConfiguration.parse([], environment: ["PARLEY_PORT": "eighty"])
            Issue.record("expected an error")
        } catch {
            #expect(error.message.contains("environment value for --port"))
        }
    }

    @Test func appsSubcommands() throws {
        #expect(try ServerConfiguration.parse(["apps", "list"]) == .apps(.list, ServerConfiguration()))
        guard case .apps(.create(let name), let configuration) = try ServerConfiguration.parse(["apps", "create", "shop", "--data-dir", "/srv/p"]) else {
            Issue.record("expected apps create")
            return
        }
        #expect(name == "shop" && configuration.dataDirectory == "/srv/p")
        #expect(try ServerConfiguration.parse(["apps", "rotate-secret", "pk_x"]) == .apps(.rotateSecret(app: "pk_x"), ServerConfiguration()))
        for wrong in [["apps"], ["apps", "create"], ["apps", "delete", "x"], ["apps", "list", "extra"]] {
            #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(wrong) }
        }
    }

    @Test func storageAndPasswordOptions() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse(
            ["--sqlite-synchronous", "NORMAL", "--argon2-passes", "3", "--argon2-memory-mib", "128", "--password-hashes", "1"],
            environment: ["PARLEY_SIGNUPS_PER_HOUR": "10"]) else {
            Issue.record("expected run")
            return
        }
        #expect(configuration.sqliteSynchronous == .normal)
        #expect(configuration.argon2Passes == 3 && configuration.argon2MemoryMiB == 128 && configuration.passwordHashes == 1)
        #expect(configuration.signUpsPerHour == 10)
        #expect(ServerConfiguration().sqliteSynchronous == .full, "the default survives power loss")
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["--sqlite-synchronous", "off"]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(["--argon2-passes", "0"]) }
    }
}

/// `Content-Range` of a resumed upload: only `bytes first-(total-1)/total`, digits only.
struct ContentRangeTests {
    @Test func theRestOfAFileParses() {
        #expect(ContentRange.parse("bytes 100-999/1000") == ContentRange(first: 100, last: 999, total: 1000))
        #expect(ContentRange.parse("bytes 0-0/1") == ContentRange(first: 0, last: 0, total: 1))
    }

    @Test(arguments: ["bytes 100-998/1000", "bytes=100-999/1000", "bytes 100-999/*", "bytes */1000", "bytes -1-999/1000",
                      "bytes 1000-999/1000", "bytes +1-999/1000", "bytes 1 -999/1000", "bytes 100-999/1000/1", "bytes ١-999/1000",
                      "bytes 0-9999999999999999999/10000000000000000000", "", "bytes "])
    func anythingElseIsRefused(_ header: String) {
        #expect(ContentRange.parse(header) == nil)
    }
}

/// The options are declared once; help, environment and parsing come from the declarations.
struct OptionDeclarationTests {
    @Test func everyOptionHasItsEnvironmentVariableAndAHelpLine() throws {
        let parser = ServerConfiguration.parser
        let help = ServerConfiguration.helpText
        for option in parser.options {
            let expected = "PARLEY_" + option.flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
            #expect(option.environment == expected, "\(option.flag) is read from \(expected)")
            #expect(help.contains(option.flag) && help.contains("[\(expected)]"), "\(option.flag) in --help")
            #expect(option.help.hasSuffix(".") && option.help.count > 10)
        }
        #expect(parser.options.count >= 29)
    }

    @Test func theEnvironmentSetsWhatTheFlagSetsAndTheFlagWins() throws {
        let parser = ServerConfiguration.parser
        for option in parser.options where option.valueName == "<s>" || option.valueName == "<n>" {
            // One valid value for each: the lowest of its range is always accepted.
            var fromFlag = ServerConfiguration(), fromEnvironment = ServerConfiguration()
            var value = option.flag == "--max-message-bytes" ? "125" : option.flag == "--max-queued-bytes" ? "65536"
                : option.flag == "--thumbnail-size" ? "16" : option.flag == "--link-preview-cache" ? "60" : "1"
            _ = try parser.parse([option.flag, value], environment: [:], into: &fromFlag)
            if fromFlag == ServerConfiguration() {
                // The lowest value is this option's default (--delivery-update-interval): the next one is not.
                value = "2"
                _ = try parser.parse([option.flag, value], environment: [:], into: &fromFlag)
            }
            _ = try parser.parse([], environment: [try #require(option.environment): value], into: &fromEnvironment)
            #expect(fromFlag == fromEnvironment, "\(option.flag)")
            #expect(fromFlag != ServerConfiguration(), "\(option.flag) \(value) changed nothing: pick a value that is not the default")
        }
        guard case .run(let both) = try ServerConfiguration.parse(["--port", "9001"], environment: ["PARLEY_PORT": "9002"]) else {
            Issue.record("expected run")
            return
        }
        #expect(both.port == 9001)
    }

    @Test func typedValuesAreParsedOnceAtTheEdge() throws {
        guard case .run(let configuration) = try ServerConfiguration.parse(
            ["--sqlite-synchronous", "NORMAL", "--shutdown-timeout", "3", "--ping-interval=7"]) else {
            Issue.record("expected run")
            return
        }
        #expect(configuration.sqliteSynchronous == .normal)
        #expect(configuration.shutdownTimeout == .seconds(3) && configuration.pingInterval == .seconds(7))
        #expect(throws: ServerConfiguration.UsageError(message: "--sqlite-synchronous must be one of full, normal, not 'fast'")) {
            try ServerConfiguration.parse(["--sqlite-synchronous", "fast"])
        }
        #expect(throws: ServerConfiguration.UsageError(message: "environment value for --ping-interval must be a whole number from 1 to 3600, not '0'")) {
            try ServerConfiguration.parse([], environment: ["PARLEY_PING_INTERVAL": "0"])
        }
        #expect(throws: ServerConfiguration.UsageError(message: "unknown argument 'serve'")) { try ServerConfiguration.parse(["serve"]) }
    }
}

/// A command other than the one a test parsed for: the test fails with it (never ends as a pass).
struct UnexpectedCommand: Error, CustomStringConvertible {
    let command: ServerConfiguration.Command
    init(_ command: ServerConfiguration.Command) { self.command = command }
    var description: String { "parsed as \(command)" }
}
