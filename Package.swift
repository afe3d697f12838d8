// swift-tools-version:6.0
// Herald: an event-sourced notification scheduler on libevent and libpq.
// Layers (dependency direction →): HeraldCore ← HeraldStore ← HeraldRuntime ← herald.
import PackageDescription

/// Swift 6.3 lowers copies and destroys of multi-field values through "type layouts": an
/// outlined copy of a `String`, a `String?` or a struct of them calls the type's value-witness
/// table (~130 instructions) instead of retaining inline (~20). The request path copies such
/// values ~40 times a submit (drafts, rows, keys, deliveries): ~5,000 instructions of value
/// witnesses a submit (callgrind, docs/service-profile.md, session 17). This hidden frontend
/// option keeps the classic inline lowering; it changes how copies are emitted, not any layout.
let releaseWithDirectCopies: [SwiftSetting] = [
    .unsafeFlags(["-Xfrontend", "-disable-type-layout"], .when(configuration: .release)),
]

/// The service's loop and writer are classes whose stored properties Swift checks for
/// overlapping access at run time on every read and write (`swift_beginAccess`): ~2,400
/// instructions per submit and 17 checks per summary (docs/service-profile.md, session 6).
/// Release builds of those two modules skip the run-time check; debug builds — every test
/// run — keep it, so an overlapping access still traps there.
let releaseWithoutExclusivityChecks: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
] + releaseWithDirectCopies

let package = Package(
    name: "Herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
        .library(name: "HeraldCore", targets: ["HeraldCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
    ],
    targets: [
        // C libraries, bound through module maps and pkg-config.
        .systemLibrary(name: "CLibEvent", pkgConfig: "libevent", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // libevent's OpenSSL bufferevents and OpenSSL itself: TLS for client connections.
        .systemLibrary(name: "CLibEventSSL", pkgConfig: "libevent_openssl", providers: [.apt(["libevent-dev", "libssl-dev"])]),

        // Pure core: domain, engine, calendars, timing wheel, JSON. No C, no I/O, no clock reads.
        .target(
            name: "HeraldCore",
            dependencies: [.product(name: "Collections", package: "swift-collections")],
            swiftSettings: releaseWithDirectCopies
        ),
        // libpq only: event store, migrations, private cluster management.
        .target(
            name: "HeraldStore",
            dependencies: ["HeraldCore", "CLibPQ", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: releaseWithoutExclusivityChecks,
            plugins: ["EmbedSchema"]
        ),
        // libevent only: the loop, listener, connections, wiring core ↔ store.
        .target(
            name: "HeraldRuntime",
            dependencies: [
                "HeraldCore", "HeraldStore", "CLibEvent", "CLibEventSSL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: releaseWithoutExclusivityChecks
        ),
        // Shared by tests and benchmarks: private Postgres, manual clock, seeded RNG, TCP client.
        .target(
            name: "HeraldTestSupport",
            dependencies: [
                "HeraldCore", "HeraldStore", "CLibEventSSL",
                // The benches' latency percentiles (`Latencies`).
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: releaseWithDirectCopies
        ),
        .executableTarget(
            name: "herald",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldRuntime", "HeraldTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: releaseWithDirectCopies
        ),
        // Micro-benchmarks of the pure core (timing wheel vs heap, engine), side by side with baselines.
        .executableTarget(
            name: "HeraldBenchmarks",
            dependencies: [
                "HeraldCore", "HeraldTestSupport",
                .product(name: "Collections", package: "swift-collections"),
            ],
            swiftSettings: releaseWithDirectCopies
        ),

        // libFuzzer target for framing, the session and admission (scripts/fuzz; docs/hostile-input.md).
        // A regular build links a replay main instead of libFuzzer's.
        .executableTarget(name: "HeraldFuzz", dependencies: ["HeraldCore"]),

        // Build-time: embeds schema/*.sql into HeraldStore as Swift string constants.
        .executableTarget(name: "SchemaEmbedder", path: "Sources/SchemaEmbedder"),
        .plugin(name: "EmbedSchema", capability: .buildTool(), dependencies: ["SchemaEmbedder"]),

        .testTarget(name: "HeraldCoreTests", dependencies: [
            "HeraldCore", "HeraldTestSupport",
            .product(name: "Collections", package: "swift-collections"),
        ]),
        .testTarget(name: "HeraldStoreTests", dependencies: ["HeraldStore", "HeraldTestSupport", "CLibPQ"]),
        .testTarget(name: "HeraldRuntimeTests", dependencies: ["HeraldRuntime", "HeraldTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
