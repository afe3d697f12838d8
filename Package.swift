// swift-tools-version:6.0
// Herald: an event-sourced notification scheduler on libevent and libpq.
// Layers (dependency direction →): HeraldCore ← HeraldStore ← HeraldRuntime ← herald.
import PackageDescription

let package = Package(
    name: "Herald",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "herald", targets: ["herald"]),
        .executable(name: "herald-bench", targets: ["HeraldBench"]),
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
        // OpenSSL's libcrypto alone: SHA-256 for token digests in the core (a pure function, no I/O).
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CLibEventSSL", pkgConfig: "libevent_openssl", providers: [.apt(["libevent-dev", "libssl-dev"])]),
        // NATS's C client: the JetStream bridge (`herald bridge nats`).
        .systemLibrary(name: "CNats", pkgConfig: "libnats", providers: [.apt(["libnats-dev"])]),

        // Pure core: domain, engine, calendars, timing wheel, JSON. No I/O, no clock reads; the one C
        // library it calls is libcrypto's stateless SHA-256.
        .target(
            name: "HeraldCore",
            dependencies: ["CCrypto", .product(name: "Collections", package: "swift-collections")]
        ),
        // libpq only: event store, migrations, private cluster management.
        .target(
            name: "HeraldStore",
            dependencies: ["HeraldCore", "CLibPQ", .product(name: "DequeModule", package: "swift-collections")],
            plugins: ["EmbedSchema"]
        ),
        // libevent only: the loop, listener, connections, wiring core ↔ store.
        .target(
            name: "HeraldRuntime",
            dependencies: [
                "HeraldCore", "HeraldStore", "CLibEvent", "CLibEventSSL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // A blocking client of the line protocol (plain TCP or TLS): `herald tail`, tests, benches.
        .target(name: "HeraldClient", dependencies: ["HeraldCore", "CLibEventSSL"]),
        // Shared by tests and benchmarks: private Postgres, manual clock, seeded RNG, load generators.
        .target(
            name: "HeraldTestSupport",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldClient",
                // The benches' latency percentiles (`Latencies`).
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        // What the two command-line tools share: database flags, logging to stderr, exit codes.
        .target(
            name: "HeraldCommandLine",
            dependencies: [
                "HeraldStore", "HeraldRuntime",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Downstream brokers: a Herald consumer that publishes to NATS JetStream (SPEC §13).
        .target(name: "HeraldBridge", dependencies: ["HeraldCore", "HeraldClient", "CNats"]),
        // The shipped executable: argument parsing only.
        .executableTarget(
            name: "herald",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldRuntime", "HeraldClient", "HeraldCommandLine", "HeraldBridge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Load generators beside their baselines (`herald bench` runs it): ingest, latency, storm, peer, restart, replay.
        .executableTarget(
            name: "HeraldBench",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldRuntime", "HeraldTestSupport", "HeraldCommandLine", "HeraldBridge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Micro-benchmarks of the pure core (timing wheel vs heap, engine), side by side with baselines.
        .executableTarget(
            name: "HeraldBenchmarks",
            dependencies: [
                "HeraldCore", "HeraldTestSupport",
                .product(name: "Collections", package: "swift-collections"),
            ]
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
