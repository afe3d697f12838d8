// Without a database URL Herald runs its private cluster and a database in it: kept from run to
// run, or (--fresh-private-database) dropped first.
import Foundation
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
}
