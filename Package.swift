// swift-tools-version:6.0
import PackageDescription

// Module names carry a `Parley` prefix: the SDK product pulls these modules into every app
// that depends on it, and generic names (`Net`, `Wire`) would collide. See
// docs/decisions/0001-module-names.md.
let package = Package(
    name: "Parley",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "parley-server", targets: ["parley-server"]),
        .executable(name: "parley-bench", targets: ["parley-bench"]),
        .executable(name: "parley", targets: ["parley"]),
        .library(name: "ParleyNet", targets: ["ParleyNet"]),
        .library(name: "ParleyWire", targets: ["ParleyWire"]),
        .library(name: "Parley", targets: ["Parley"]),
    ],
    targets: [
        // epoll, eventfd, timerfd and accept4 are not in Swift's Glibc module.
        .systemLibrary(name: "CParleyLinux"),
        // libcrypto: SHA-1 for Sec-WebSocket-Accept, RAND_bytes for keys and masks.
        .systemLibrary(name: "CParleyCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libssl: TLS for the server (--tls-cert-file) and for wss:// clients.
        .systemLibrary(name: "CParleySSL", pkgConfig: "libssl", providers: [.apt(["libssl-dev"])]),

        // SQLite (WAL, FTS5) for the embedded store; libsodium for Argon2id and random ids.
        .systemLibrary(name: "CParleySQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CParleySodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // libvips through dlopen, on first use (issue 29): no build-time dependency on it.
        .target(name: "CParleyVips"),
        // libpq for the PostgreSQL engine (`--database-url`).
        .systemLibrary(name: "CParleyPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libcurl (with nghttp2) for push and webhooks: HTTP/2 over TLS to APNs and FCM (decision 0019).
        .systemLibrary(name: "CParleyCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        .target(name: "ParleyNet", dependencies: ["CParleyLinux", "CParleyCrypto", "CParleySSL", "ParleyLog", "ParleySync"]),
        .target(name: "ParleyWire"),
        // The one lock type; the logger (levels, metadata, text or JSON lines).
        .target(name: "ParleySync"),
        .target(name: "ParleyLog", dependencies: ["ParleySync"]),
        .target(name: "ParleyStore", dependencies: ["ParleySync"]),
        .target(name: "ParleyStoreSQLite", dependencies: ["ParleyStore", "CParleySQLite"]),
        .target(name: "ParleyStorePostgres", dependencies: ["ParleyStore", "CParleyPQ", "ParleyLog", "ParleySync"]),
        .target(name: "ParleyCrypto", dependencies: ["CParleySodium", "CParleyCrypto"]),
        .target(name: "ParleyChat", dependencies: ["ParleyWire", "ParleyStore", "ParleyCrypto", "ParleyLog", "ParleySync"]),
        .target(name: "ParleyMedia", dependencies: ["CParleyVips", "ParleyWire", "ParleyCrypto"]),
        // The Pusher Channels protocol (WebSocket and HTTP API) as an adapter over the event log.
        .target(name: "ParleyPusher", dependencies: ["ParleyNet", "ParleyChat", "ParleyCrypto", "ParleyWire", "ParleySync"]),
        // The bus between nodes: Redis Pub/Sub over a RESP client of our own (decision 0018).
        .target(name: "ParleyRedis", dependencies: ["ParleyChat", "ParleyWire", "ParleyCrypto", "ParleySync", "ParleyLog"]),
        // Outbound HTTP (libcurl): push providers and webhook receivers, with an address guard.
        .target(name: "ParleyOutbound", dependencies: ["CParleyCurl", "ParleyWire", "ParleySync"]),
        // Push notifications: APNs and FCM from the push outbox (docs/push.md).
        .target(name: "ParleyPush", dependencies: ["ParleyOutbound", "ParleyChat", "ParleyCrypto", "ParleyWire", "ParleyStore", "ParleyLog", "ParleySync"]),
        // Webhooks: signed deliveries from the webhook outbox, in order per endpoint (docs/webhooks.md).
        .target(name: "ParleyWebhooks", dependencies: ["ParleyOutbound", "ParleyChat", "ParleyCrypto", "ParleyWire", "ParleyLog", "ParleySync"]),
        // Command-line options declared once (flag, environment variable, help, parsing).
        .target(name: "ParleyOptions"),
        // Uploads and downloads over HTTP: streaming, verifying, storing, serving and collecting media.
        .target(name: "ParleyMediaService", dependencies: ["ParleyChat", "ParleyMedia", "ParleyNet", "ParleyWire", "ParleyCrypto", "ParleySync", "ParleyLog"]),
        // Link previews: the page reader (OpenGraph, oEmbed), the checked fetcher and the worker (docs/link-previews.md).
        .target(name: "ParleyLinkPreview", dependencies: ["ParleyChat", "ParleyMediaService", "ParleyMedia", "ParleyOutbound", "ParleyWire",
                                                          "ParleyCrypto", "ParleyLog", "ParleySync"]),
        .target(name: "ParleyServer", dependencies: ["ParleyLinkPreview", "ParleyMediaService", "ParleyNet", "ParleyChat", "ParleyStoreSQLite", "ParleyMedia", "ParleyCrypto", "ParleyOptions",
                                                     "ParleyPusher", "ParleyStorePostgres", "ParleyRedis", "ParleyPush", "ParleyWebhooks", "ParleyLog", "ParleySync", "ParleyOutbound"],
                resources: [.copy("Web")]),
        // The SDK: ParleyNet's WebSocket client on Linux, URLSessionWebSocketTask on Apple platforms.
        .target(name: "Parley", dependencies: ["ParleyWire", "ParleySync", .target(name: "ParleyNet", condition: .when(platforms: [.linux])),
                                             .target(name: "CParleySQLite", condition: .when(platforms: [.linux]))]),

        .executableTarget(name: "parley-server", dependencies: ["ParleyServer", "ParleyLog"]),
        // The terminal client; its screen layout and key decoding are a library so tests read them as data.
        .target(name: "ParleyTerminalUI"),
        .executableTarget(name: "parley", dependencies: ["Parley", "ParleyWire", "ParleyTerminalUI", "ParleyOptions"]),

        // Examples/: each tutorial's flow against Parley, run against a real server by `make test`.
        .target(name: "ExampleSupport", dependencies: ["Parley", "ParleyWire"], path: "Examples/Support"),
        .executableTarget(name: "MessageMe", dependencies: ["ExampleSupport", "Parley", "ParleyWire"], path: "Examples/MessageMe"),
        .executableTarget(name: "SyncanoChat", dependencies: ["ExampleSupport", "Parley", "ParleyWire"], path: "Examples/SyncanoChat"),
        .executableTarget(name: "DeliveryStatus", dependencies: ["ExampleSupport", "Parley", "ParleyWire"], path: "Examples/DeliveryStatus"),
        .executableTarget(name: "BackendlessChat", dependencies: ["ExampleSupport", "Parley", "ParleyWire"], path: "Examples/BackendlessChat"),
        .executableTarget(name: "TestModeSuite", dependencies: ["ExampleSupport", "Parley", "ParleyWire"], path: "Examples/TestModeSuite"),
        .executableTarget(name: "parley-bench", dependencies: ["ParleyNet", "ParleyWire", "ParleyStoreSQLite", "ParleyStorePostgres", "ParleyCrypto", "ParleyMedia",
                                                          "ParleyRedis", "ParleySync"]),

        // libFuzzer entry points. Built with `--sanitize=fuzzer -Xswiftc -DFUZZING` by
        // scripts/fuzz.sh; a plain build gets a replay `main` that runs saved inputs.
        .executableTarget(name: "fuzz-http", dependencies: ["ParleyNet", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "fuzz-websocket", dependencies: ["ParleyNet", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "fuzz-wire", dependencies: ["ParleyChat", "ParleyWire", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "fuzz-realtime", dependencies: ["ParleyServer", "ParleyChat", "ParleyNet", "ParleyWire", "ParleyNetTesting", "ParleySync"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .executableTarget(name: "fuzz-pusher", dependencies: ["ParleyPusher", "ParleyNet", "ParleyNetTesting", "ParleyWire"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .executableTarget(name: "fuzz-bus", dependencies: ["ParleyRedis", "ParleyChat", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .executableTarget(name: "fuzz-webhooks", dependencies: ["ParleyChat", "ParleyWebhooks", "ParleyWire", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .executableTarget(name: "fuzz-filter", dependencies: ["ParleyChat", "ParleyWire", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .executableTarget(name: "fuzz-linkpreview", dependencies: ["ParleyLinkPreview", "ParleyWire", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        // Test helpers as a module, shared by the test targets (STYLE.md rule 7).
        .executableTarget(name: "fuzz-media", dependencies: ["ParleyMedia", "ParleyNet", "ParleyNetTesting", "ParleyWire"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        .target(name: "ParleyTesting", dependencies: ["ParleySync"]),
        .target(name: "ParleyNetTesting", dependencies: ["ParleyNet", "ParleyTesting", "ParleySync"]),
        .target(name: "ParleyServerTesting", dependencies: ["ParleyServer", "ParleyChat", "ParleyChatTesting", "ParleyNet", "ParleyWire", "ParleyTesting", "ParleySync", "ParleyLog"]),
        .target(name: "ParleyChatTesting", dependencies: ["ParleyChat", "ParleyStore", "ParleyStoreSQLite", "ParleyStorePostgres", "ParleyCrypto", "ParleyWire", "ParleySync"]),

        .testTarget(name: "ParleyNetTests", dependencies: ["ParleySync", "ParleyNet", "ParleyNetTesting", "ParleyTesting"]),
        .testTarget(name: "ParleyStoreTests", dependencies: ["ParleySync", "ParleyStore", "ParleyStoreSQLite", "ParleyStorePostgres", "ParleyChatTesting", "ParleyNetTesting", "ParleyTesting"]),
        .testTarget(name: "ParleyChatTests", dependencies: ["ParleySync", "ParleyChat", "ParleyChatTesting", "ParleyWire", "ParleyCrypto", "ParleyStore", "ParleyStoreSQLite", "ParleyStorePostgres", "ParleyTesting"]),
        .testTarget(name: "ParleyMediaTests", dependencies: ["ParleySync", "ParleyMedia", "ParleyCrypto", "ParleyWire"]),
        .testTarget(name: "ParleyLinkPreviewTests", dependencies: ["ParleyLinkPreview", "ParleyWire", "ParleyOutbound"]),
        .testTarget(name: "ParleyServerTests", dependencies: ["ParleySync", "ParleyServer", "ParleyServerTesting", "ParleyChatTesting", "ParleyStore", "ParleyNet", "ParleyNetTesting", "ParleyTesting", "ParleyStoreSQLite", "ParleyStorePostgres", "ParleyOptions", "ParleyPush", "ParleyWebhooks", "ParleyLog", "ParleyMediaService"]),
        .testTarget(name: "ParleyRedisTests", dependencies: ["ParleySync", "ParleyRedis", "ParleyChat", "ParleyChatTesting", "ParleyStore", "ParleyWire"]),
        .testTarget(name: "ParleyWebhooksTests", dependencies: ["ParleySync", "ParleyWebhooks", "ParleyChat", "ParleyCrypto", "ParleyWire"]),
        .testTarget(name: "ParleyPusherTests", dependencies: ["ParleySync", "ParleyPusher", "ParleyChat", "ParleyCrypto", "ParleyNet"]),
        .testTarget(name: "ParleyTests", dependencies: ["ParleySync", "Parley", "ParleyWire", "ParleyNetTesting", "ParleyTesting", "ParleyTerminalUI"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
        .enableUpcomingFeature("InternalImportsByDefault"),
    ]
}
