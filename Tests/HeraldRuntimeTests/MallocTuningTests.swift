// `herald` executes itself once more with glibc's per-thread cache enlarged (Sources/herald/MallocTuning.swift).
import Foundation
import Glibc
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct MallocTuningTests {
    /// The environment `pid` was last executed with (`/proc/<pid>/environ`), one variable per element.
    static func executedEnvironment(_ pid: pid_t) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Starts the built `herald serve` with `changes` to the inherited environment and returns the
    /// environment it ended up executed with, once it answers a ping under the pid it was spawned as.
    static func servedEnvironment(_ changes: [String: String?]) throws -> [String] {
        let url = try TestPostgres.freshDatabase()
        let log = FileManager.default.temporaryDirectory.path + "/herald-malloc-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let serve = try ServeProcess(databaseURL: url, logPath: log)
        serve.environmentChanges = ["GLIBC_TUNABLES": nil, "HERALD_MALLOC_TUNING": nil, "HERALD_MALLOC_TUNED": nil]
        for (name, value) in changes { serve.environmentChanges[name] = value }
        try serve.start()
        defer { #expect(serve.terminate(), "SIGTERM reaches the re-executed process") }
        let name = try String(contentsOfFile: "/proc/\(serve.pid)/comm", encoding: .utf8)
        #expect(name == "herald\n", "ps and top show the executable's name, not the link it was executed through")
        return try executedEnvironment(serve.pid)
    }

    @Test func heraldServeRunsWithTheLargerCacheUnderThePidItWasStartedAs() throws {
        let env = try Self.servedEnvironment([:])
        #expect(env.contains("GLIBC_TUNABLES=glibc.malloc.tcache_count=4096"), "\(env.filter { $0.contains("MALLOC") || $0.contains("GLIBC") })")
    }

    @Test func aCallersOwnTunablesAreKeptAndExtended() throws {
        let env = try Self.servedEnvironment(["GLIBC_TUNABLES": "glibc.malloc.arena_max=2"])
        #expect(env.contains("GLIBC_TUNABLES=glibc.malloc.arena_max=2:glibc.malloc.tcache_count=4096")
                || env.contains("GLIBC_TUNABLES=glibc.malloc.arena_max=2"),  // glibc may rewrite the string it parsed
                "\(env.filter { $0.contains("GLIBC") })")
        #expect(env.contains("HERALD_MALLOC_TUNED==glibc.malloc.arena_max=2"), "what to give children back")
    }

    @Test func aCallersTcacheSettingAndTheOptOutAreLeftAlone() throws {
        let own = try Self.servedEnvironment(["GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"])
        #expect(own.contains("GLIBC_TUNABLES=glibc.malloc.tcache_count=7"))
        #expect(!own.contains { $0.hasPrefix("HERALD_MALLOC_TUNED=") }, "not executed again")
        let off = try Self.servedEnvironment(["HERALD_MALLOC_TUNING": "off"])
        #expect(!off.contains { $0.hasPrefix("GLIBC_TUNABLES=") || $0.hasPrefix("HERALD_MALLOC_TUNED=") })
    }
}
