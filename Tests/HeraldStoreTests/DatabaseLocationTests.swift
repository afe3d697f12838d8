// Without a database URL Herald runs its private cluster and a database in it: kept from run to
// run, or (--fresh-private-database) dropped first.
import Foundation
import Synchronization
import HeraldStore
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
}
