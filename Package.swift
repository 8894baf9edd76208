// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Huddle",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "huddle", targets: ["huddle"]),
        .library(name: "HuddleControl", targets: ["HuddleControl"]),
        .library(name: "HuddleKit", targets: ["HuddleKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket", from: "2.8.1"),
        // The node's state in its data directory (CONTROL.md, Restart): SQLite, crash-safe transactions.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // `huddle run --config FILE`: TOML 1.0 through toml++ (Sources/HuddleNode/Settings/SettingsFile.swift).
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // prctl (variadic in C, so not callable from Swift) behind two plain functions.
        .target(name: "CHuddleSystem"),
        // One malloc arena per process, for the `huddle` executable alone (Sources/CHuddleMalloc/malloc.c).
        .target(name: "CHuddleMalloc"),
        .target(name: "HuddleErrors"),
        .target(name: "HuddleCrypto", dependencies: ["CSodium", "HuddleErrors"]),
        .target(name: "HuddleCore", dependencies: ["HuddleCrypto", "HuddleErrors"]),
        .target(name: "HuddleControl", dependencies: [
            "HuddleErrors",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // SharePlay's GroupActivities API (GroupSession, GroupSessionMessenger, GroupSessionJournal)
        // on the control protocol: what a Swift program links to use a Huddle session.
        .target(name: "HuddleKit", dependencies: ["HuddleControl"]),
        .target(name: "HuddleNode", dependencies: [
            "HuddleCore", "HuddleCrypto", "HuddleControl", "HuddleErrors", "CHuddleSystem",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "TOMLKit", package: "TOMLKit"),
        ]),
        .target(name: "HuddleSim", dependencies: ["HuddleCore"]),
        // A hostile member built from our own codec: the hostile-member tests and the bench's attacker.
        .target(name: "HuddleAdversary", dependencies: ["HuddleCore", "HuddleCrypto"]),
        // What the tests share to keep long waits and long work off Swift's cooperative pool.
        .target(name: "HuddleTestSupport", dependencies: ["HuddleControl", "HuddleCore"]),
        .executableTarget(name: "huddle-sim", dependencies: [
            "HuddleSim",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // Sources/huddle-bench/Lab links to the NAT lab of Tests/hosts (its `reach` scenario), which needs HuddleTestSupport.
        .executableTarget(name: "huddle-bench", dependencies: [
            "HuddleControl", "HuddleSim", "HuddleCore", "HuddleCrypto", "HuddleAdversary", "HuddleTestSupport",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .executableTarget(name: "huddle", dependencies: [
            "HuddleNode", "HuddleControl", "HuddleCrypto", "CHuddleMalloc",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
        ]),
        // The showcase example (examples/DrawTogether): Apple's DrawTogether sample on HuddleKit, with a web page per participant.
        .target(name: "DrawTogetherKit", dependencies: ["HuddleKit"], path: "examples/DrawTogether/Sources/DrawTogetherKit"),
        .executableTarget(name: "drawtogether", dependencies: [
            "DrawTogetherKit", "HuddleKit",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
        ], path: "examples/DrawTogether/Sources/drawtogether"),
        .testTarget(name: "DrawTogetherTests", dependencies: ["DrawTogetherKit", "HuddleKit", "HuddleTestSupport"]),
        .testTarget(name: "HuddleKitTests", dependencies: [
            "HuddleKit", "HuddleControl", "HuddleTestSupport",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        // Apple's GroupActivities code for DrawTogether, compiled with only `import HuddleKit` (issue 38).
        .testTarget(name: "HuddleKitAppleCodeTests", dependencies: ["HuddleKit", "HuddleControl", "HuddleTestSupport"]),
        .testTarget(name: "HuddleCryptoTests", dependencies: ["HuddleCrypto", "HuddleTestSupport"]),
        .testTarget(name: "HuddleCoreTests", dependencies: [
            "HuddleCore", "HuddleTestSupport", .product(name: "PropertyBased", package: "swift-property-based"),
        ]),
        .testTarget(name: "HuddleSimTests", dependencies: ["HuddleSim", "HuddleCore", "HuddleTestSupport"]),
        .testTarget(name: "HuddleControlTests", dependencies: ["HuddleControl", "HuddleTestSupport"]),
        .testTarget(name: "HuddleNodeTests", dependencies: ["HuddleNode", "HuddleControl", "HuddleTestSupport"]),
        .testTarget(name: "HuddleIntegrationTests", dependencies: [
            "HuddleControl", "HuddleCrypto", "HuddleCore", "HuddleSim", "HuddleAdversary", "HuddleTestSupport",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),
        .testTarget(name: "HuddleHostTests", dependencies: [
            "HuddleControl", "HuddleCrypto", "HuddleSim", "HuddleTestSupport",
        ], path: "Tests/hosts"),
    ],
    swiftLanguageModes: [.v6]
)
