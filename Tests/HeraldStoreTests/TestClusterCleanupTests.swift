// Test runs that crash leave their private PostgreSQL behind; the next run stops and removes it.
import Foundation
import Glibc
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct TestClusterCleanupTests {
    /// The pid of a process that has exited (and been reaped).
    static func deadPid() throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/true")
        try p.run()
        p.waitUntilExit()
        return p.processIdentifier
    }

    /// Running, not exited: a stopped server's postmaster may stay a zombie until its parent reaps it.
    static func isRunning(_ pid: Int32) -> Bool {
        guard Glibc.kill(pid, 0) == 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let state = stat.split(separator: ")").last?.split(separator: " ").first else { return false }
        return state != "Z" && state != "X"
    }

    @Test func theClusterOfACrashedTestProcessIsStoppedAndRemovedAndLiveOnesAreKept() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/herald-sweep-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let dead = try Self.deadPid()
        let fm = FileManager.default
        // A crashed run whose server still runs, one whose server is gone, a live process's, this one's, and a stranger.
        let running = "herald-test-\(dead)-1", stopped = "herald-test-\(dead)-2"
        let live = "herald-test-\(getppid())-3", mine = "herald-test-\(getpid())-4", other = "herald-test-notapid"
        for name in [stopped, live, mine, other] {
            try fm.createDirectory(atPath: dir + "/" + name + "/pgdata", withIntermediateDirectories: true)
        }
        let server = try LocalCluster(dataDirectory: dir + "/" + running + "/pgdata")
        try server.start()
        let postmaster = try #require(Int32(String(contentsOfFile: dir + "/" + running + "/pgdata/postmaster.pid", encoding: .utf8)
            .split(separator: "\n").first.map(String.init) ?? ""))
        #expect(Self.isRunning(postmaster))

        let removed = TestPostgres.removeClustersOfDeadProcesses(in: dir)

        #expect(Set(removed) == [running, stopped])
        #expect(!fm.fileExists(atPath: dir + "/" + running) && !fm.fileExists(atPath: dir + "/" + stopped))
        #expect(!Self.isRunning(postmaster), "the abandoned server is stopped, not only its folder removed")
        for name in [live, mine, other] { #expect(fm.fileExists(atPath: dir + "/" + name), "\(name) is kept") }
    }
}
