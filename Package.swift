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
        // The async producer and consumer for other packages: `.package(url:from:)`, then `HeraldClient`.
        .library(name: "HeraldClient", targets: ["HeraldClient"]),
        .executable(name: "herald-roundtrip", targets: ["HeraldRoundtrip"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
        // `/metrics`: the Prometheus registry and its text exposition (swift-metrics' API on top).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
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
        // libpq: event store, migrations, private cluster management; libcrypto for content keys.
        .target(
            name: "HeraldStore",
            dependencies: ["HeraldCore", "CLibPQ", "CCrypto", .product(name: "DequeModule", package: "swift-collections")],
            plugins: ["EmbedSchema"]
        ),
        // libevent only: the loop, listener, connections, wiring core ↔ store.
        .target(
            name: "HeraldRuntime",
            dependencies: [
                "HeraldCore", "HeraldStore", "CLibEvent", "CLibEventSSL",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // OpenSSL alone (libssl, libcrypto): TLS for the client library, without libevent.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // The client library: async producer and consumer over POSIX sockets, self-contained (no HeraldCore).
        .target(name: "HeraldClient", dependencies: ["COpenSSL"]),
        // The shortest example of the client, and its round trip: `herald-roundtrip`.
        .executableTarget(name: "HeraldRoundtrip", dependencies: ["HeraldClient"]),
        // One blocking HTTP GET (`herald health --http`, the tests and benches of /metrics): no curl needed in the image.
        .target(name: "HeraldHTTPProbe"),
        // A blocking client of the line protocol (plain TCP or TLS) for tests and benches: raw lines, time-outs.
        .target(name: "HeraldWireTesting", dependencies: ["HeraldCore", "HeraldHTTPProbe", "CLibEventSSL"]),
        // Shared by tests and benchmarks: private Postgres, manual clock, seeded RNG, load generators.
        .target(
            name: "HeraldTestSupport",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldWireTesting",
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
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // Downstream brokers: a Herald consumer that publishes to NATS JetStream (SPEC §13).
        .target(name: "HeraldBridge", dependencies: ["HeraldCore", "HeraldClient", "CNats"]),
        // The shipped executable: argument parsing only.
        .executableTarget(
            name: "herald",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldRuntime", "HeraldClient", "HeraldHTTPProbe", "HeraldCommandLine", "HeraldBridge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Load generators beside their baselines (`herald bench` runs it): ingest, latency, storm, peer, restart, replay.
        .executableTarget(
            name: "HeraldBench",
            dependencies: [
                "HeraldCore", "HeraldStore", "HeraldRuntime", "HeraldTestSupport", "HeraldCommandLine", "HeraldClient", "HeraldBridge",
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
        .testTarget(name: "HeraldClientTests", dependencies: ["HeraldClient", "HeraldTestSupport", "HeraldStore"]),
    ],
    swiftLanguageModes: [.v6]
)
