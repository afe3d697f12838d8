// A binary COPY's data read out whole (`copyOutData`) goes back in through `copyIn` unchanged: the
// ingest benchmark's schema ceiling copies a run's rows that way.
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct CopyOutDataTests {
    @Test func binaryCopyDataReadOutGoesBackInAsItIs() throws {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        try conn.execute("CREATE TABLE source (n bigint, t text, at timestamptz)")
        try conn.execute("""
            INSERT INTO source SELECT i, CASE WHEN i % 5 = 0 THEN NULL ELSE repeat('x', i % 97) || E'\\t\\n' END,
                                      '2026-11-26T00:00:00Z'::timestamptz + i * interval '1 ms'
            FROM generate_series(1, 3000) i
            """)
        // Small chunks: the rows span chunk boundaries.
        let chunks = try conn.copyOutData("COPY (SELECT n, t, at FROM source ORDER BY n) TO STDOUT (FORMAT binary)", chunkBytes: 4_096)
        #expect(chunks.count > 10)
        try conn.execute("CREATE TABLE target (LIKE source)")
        #expect(try conn.copyIn("COPY target (n, t, at) FROM STDIN (FORMAT binary)", chunks: chunks) == 3_000)
        let differences = try conn.execute("""
            SELECT count(*) FROM (SELECT * FROM source EXCEPT ALL SELECT * FROM target) d
            """).int64(0, 0)
        #expect(differences == 0)
    }

    @Test func aFailingCopyOutSaysWhy() throws {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect(throws: StoreError.self) { try conn.copyOutData("COPY (SELECT * FROM no_such_table) TO STDOUT (FORMAT binary)") }
        #expect(try conn.execute("SELECT 1").int64(0, 0) == 1, "the connection is usable after the refusal")
    }
}
