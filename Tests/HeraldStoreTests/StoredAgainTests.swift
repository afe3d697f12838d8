// The benches' ceilings store a run's own rows again: every submit (up to the cap), in tables like
// Herald's that are gone afterwards.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct StoredAgainTests {
    @Test func theCeilingsCopyTheRunsSubmitsUpToTheirCapAndLeaveNoTable() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        var rows = (1...30).map { EventStoreTests.event($0, user: "u\($0 % 4)") }
        rows.append(EventRow(user: nil, type: "registerApp", body: #"{"app":"com.example.mail"}"#,
                             engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000)))
        _ = try EventStoreTests.appendAll(writer, rows)

        let all = try StoreBenchmark.schemaCeiling(databaseURL: url)
        #expect(all.submits == 30 && all.deliveries == 0, "only submits: \(all)")
        #expect(all.submitsPerSecond > 0)
        #expect(try StoreBenchmark.schemaCeiling(databaseURL: url, atMost: 10).submits == 10)
        #expect(try StoreBenchmark.enqueueCeiling(databaseURL: url).jobs == 30)
        #expect(try StoreBenchmark.enqueueCeiling(databaseURL: url, atMost: 10).jobs == 10)

        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect(try conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'bench_ceiling%'").int64(0, 0) == 0)
        #expect(try conn.execute("SELECT count(*) FROM events").int64(0, 0) == 31, "the log itself is untouched")
    }
}
