// Without a database URL Herald runs its private cluster and a database in it: kept from run to
// run, or (--fresh-private-database) dropped first.
import Foundation
import Synchronization
@testable import HeraldStore
import Testing

@Suite struct DatabaseLocationTests {
    @Test func aPrivateDatabaseIsKeptAcrossRunsAndAFreshOneStartsEmpty() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-location-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func open(fresh: Bool = false) throws -> DatabaseLocation {
            try DatabaseLocation.resolve(url: nil, privateFolder: folder + "/pgdata", database: "demo", fresh: fresh) { _ in }
        }
        func tables(_ location: DatabaseLocation) throws -> Int64? {
            try PGConnection.connect(location.url).execute("SELECT count(*) FROM pg_tables WHERE tablename = 'kept'").int64(0, 0)
        }
        var location = try open()
        defer { location.close() }
        try PGConnection.connect(location.url).execute("CREATE TABLE kept (x int)")
        location.close()
        location = try open()
        #expect(try tables(location) == 1, "the same database again")
        location.close()
        location = try open(fresh: true)
        #expect(try tables(location) == 0, "dropped and created again")
        #expect(location.url.contains("dbname=demo") || location.url.contains("/demo"), "\(location.url)")
    }

    /// A database name is used exactly as given: `--private-database "Demo Log"` was created as
    /// `demo` … (unquoted; a space failed outright) and then connected to as given.
    @Test func aPrivateDatabaseNameWithCapitalsAndASpaceIsUsedAsGiven() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-location-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for fresh in [false, true] {
            let location = try DatabaseLocation.resolve(url: nil, privateFolder: folder + "/pgdata", database: "Demo Log", fresh: fresh) { _ in }
            defer { location.close() }
            #expect(try PGConnection.connect(location.url).execute("SELECT current_database()").string(0, 0) == "Demo Log")
        }
    }

    /// Several Herald processes started at once on one private cluster folder (a `serve` and a
    /// `state`, two `serve`s on two databases): they raced on initdb, pg_ctl start and CREATE
    /// DATABASE, and the first to exit stopped the server under the others. Each resolver here has
    /// its own lock descriptor, as a process would.
    @Test func severalHeraldProcessesShareOnePrivateClusterAndTheLastStopsIt() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-location-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let names = ["a", "b", "a", "c"]  // two want the same database
        let results = Mutex<[Int: Result<DatabaseLocation, StoreError>]>([:])
        DispatchQueue.concurrentPerform(iterations: names.count) { i in
            let r = Result { () throws(StoreError) -> DatabaseLocation in
                try DatabaseLocation.resolve(url: nil, privateFolder: folder + "/pgdata", database: names[i]) { _ in }
            }
            results.withLock { $0[i] = r }
        }
        var locations: [DatabaseLocation] = []
        for i in names.indices {
            switch results.withLock({ $0[i]! }) {
            case .success(let l): locations.append(l)
            case .failure(let e): Issue.record("resolver \(i) failed: \(e)")
            }
        }
        try #require(locations.count == names.count)
        for l in locations {
            #expect(try PGConnection.connect(l.url).execute("SELECT 1").rowCount == 1)
        }
        var said: [String] = []
        for l in locations.dropLast() { l.close { said.append($0) } }
        #expect(said.count == names.count - 1 && said.allSatisfy { $0.contains("another Herald process uses it") }, "\(said)")
        #expect(try PGConnection.connect(locations.last!.url).execute("SELECT 1").rowCount == 1, "still running for the last one")
        locations.last!.close()
        #expect(!FileManager.default.fileExists(atPath: folder + "/pgdata/postmaster.pid"), "the last one stopped it")
    }

    /// Herald stops only the server it started, known by the postmaster's pid it records: a
    /// server stopped and started again by hand, while the lock file still says "started by
    /// Herald", is left running by the next Herald process to exit.
    @Test func aServerStartedByHandAfterHeraldsIsNeverStopped() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-location-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let data = folder + "/pgdata"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let location = try DatabaseLocation.resolve(url: nil, privateFolder: data, database: "h") { _ in }
        let bin = try LocalCluster.findBinaries()
        func pgCtl(_ args: [String]) -> Int32 {
            let argv = [bin + "/pg_ctl", "-D", data] + args
            return ChildProcess.run(geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + argv : argv).status
        }
        #expect(pgCtl(["-m", "fast", "-w", "stop"]) == 0)
        let port = LocalCluster.freePort()
        #expect(pgCtl(["-o", "-c listen_addresses=127.0.0.1 -c port=\(port) -c unix_socket_directories=''", "-l", data + "/by-hand.log", "-w", "start"]) == 0)
        defer { _ = pgCtl(["-m", "immediate", "-w", "stop"]) }
        var said: [String] = []
        location.close { said.append($0) }
        #expect(FileManager.default.fileExists(atPath: data + "/postmaster.pid"), "the server started by hand still runs")
        #expect(said.contains { $0.contains("not started by Herald") }, "\(said)")
    }

    /// A Herald killed during initdb left a half-built folder that the next start took for a
    /// cluster (PG_VERSION is written first), and a server crashing in a loop on it. initdb now
    /// builds beside the folder and renames it into place; what a dead process left is removed.
    @Test func aClusterHalfBuiltByAKilledInitdbIsNotUsed() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-location-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var dead: Int32 = 4_000_000
        while kill(dead, 0) == 0 || errno != ESRCH { dead -= 1 }
        let stale = folder + "/pgdata.initdb-\(dead)"
        try FileManager.default.createDirectory(atPath: stale, withIntermediateDirectories: true)
        try "15\n".write(toFile: stale + "/PG_VERSION", atomically: false, encoding: .utf8)
        let location = try DatabaseLocation.resolve(url: nil, privateFolder: folder + "/pgdata", database: "h") { _ in }
        defer { location.close() }
        #expect(try PGConnection.connect(location.url).execute("SELECT 1").rowCount == 1)
        #expect(!FileManager.default.fileExists(atPath: stale), "the dead initdb's folder is removed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".initdb-") }.isEmpty)
    }

    /// A Herald process stuck while it holds the set-up lock (stopped, or a hung pg_ctl) must not
    /// make every later one wait forever, naming no one: the wait names the holder's pid and gives up
    /// after `setUpLockTimeout` with an error saying what to do. (The lock is held here by this
    /// process through a second open file, which `flock` treats as another holder.)
    @Test func aStuckSetUpIsNamedAndGivenUpOn() throws {
        let folder = FileManager.default.temporaryDirectory.path + "/herald-location-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let held = open(folder + "/pgdata.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0)
        defer { close(held) }
        let cluster = try LocalCluster(dataDirectory: folder + "/pgdata")
        cluster.setUpLockTimeout = 0.3
        var said: [String] = []
        #expect(LocalCluster.flockHolder(of: held) == getpid())
        do {
            try cluster.start { said.append($0) }
            Issue.record("started although the set-up lock is held")
        } catch {
            #expect("\(error)".contains("Waited 0 s for \(folder)/pgdata.lock, which process \(getpid())"), "\(error)")
            #expect("\(error)".contains("(kill \(getpid()))"), "\(error)")
        }
        #expect(said.first?.contains("waiting for another Herald process (pid \(getpid()): ") == true, "\(said)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/pgdata/PG_VERSION"), "nothing was created")
    }
}
