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
        .library(name: "ParleyNet", targets: ["ParleyNet"]),
    ],
    targets: [
        // epoll, eventfd, timerfd and accept4 are not in Swift's Glibc module.
        .systemLibrary(name: "CParleyLinux"),
        // libcrypto: SHA-1 for Sec-WebSocket-Accept, RAND_bytes for keys and masks.
        .systemLibrary(name: "CParleyCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),

        .target(name: "ParleyNet", dependencies: ["CParleyLinux", "CParleyCrypto"]),
        .target(name: "ParleyServer", dependencies: ["ParleyNet"]),

        .executableTarget(name: "parley-server", dependencies: ["ParleyServer"]),
        .executableTarget(name: "parley-bench", dependencies: ["ParleyNet"]),

        // libFuzzer entry points. Built with `--sanitize=fuzzer -Xswiftc -DFUZZING` by
        // scripts/fuzz.sh; a plain build gets a replay `main` that runs saved inputs.
        .executableTarget(name: "fuzz-http", dependencies: ["ParleyNet", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "fuzz-websocket", dependencies: ["ParleyNet", "ParleyNetTesting"],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),

        // Test helpers as a module, shared by the test targets (STYLE.md rule 7).
        .target(name: "ParleyNetTesting", dependencies: ["ParleyNet"]),

        .testTarget(name: "ParleyNetTests", dependencies: ["ParleyNet", "ParleyNetTesting"]),
        .testTarget(name: "ParleyServerTests", dependencies: ["ParleyServer", "ParleyNet", "ParleyNetTesting"]),
    ]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
        .enableUpcomingFeature("InternalImportsByDefault"),
    ]
}
