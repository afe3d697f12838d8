// The key columns compare bytes (COLLATE "C") whatever the database's locale (schema/001_tables.sql).
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct KeyColumnsCompareBytesTests {
    static let keyColumns = ["deliveries.app", "deliveries.notification_id", "deliveries.user_id",
                             "events.app", "events.notification_id", "events.user_id"]

    /// The six columns' collations, `table.column` → collation name.
    static func collations(_ conn: PGConnection) throws -> [String: String] {
        let r = try conn.execute("""
            SELECT c.relname || '.' || a.attname, coalesce(l.collname, '')
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_collation l ON l.oid = a.attcollation
            WHERE c.relname IN ('events', 'deliveries') AND a.attname IN ('user_id', 'app', 'notification_id')
            """)
        return Dictionary(uniqueKeysWithValues: (0..<r.rowCount).map { (r.string($0, 0) ?? "", r.string($0, 1) ?? "") })
    }

    /// In a database whose default collation is a language's (ICU en-US here, as a glibc en_US
    /// database would be), the key columns and their unique indexes compare bytes: an ORDER BY of
    /// a key column is byte order, the unique index still refuses a stored key, and the operator
    /// views read the rows.
    @Test func theKeyColumnsCompareBytesInALanguageCollatedDatabase() throws {
        let url = try TestPostgres.freshDatabase(
            createOptions: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'")
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect(try Self.collations(conn) == Dictionary(uniqueKeysWithValues: Self.keyColumns.map { ($0, "C") }))
        let language = try conn.execute("SELECT x FROM (VALUES ('b'), ('B'), ('a')) v(x) ORDER BY x")
        #expect((0..<language.rowCount).compactMap { language.string($0, 0) } == ["a", "b", "B"], "the database's own order")
        for (i, user) in ["b", "B", "a"].enumerated() {
            try conn.execute("""
                INSERT INTO deliveries (partition, cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at, rules_version, trace, body)
                VALUES (0, $1, $2, 1, 1, 'suppressed', 'com.example', $2, 'muted', now(), '1', '[]', '{}')
                """, [String(i + 1), user])
        }
        let bytes = try conn.execute("SELECT user_id FROM deliveries ORDER BY user_id")
        #expect((0..<bytes.rowCount).compactMap { bytes.string($0, 0) } == ["B", "a", "b"], "byte order")
        #expect(try conn.execute("SELECT sum(suppressed) FROM herald_suppressions_daily").int64(0, 0) == 3)
        // The unique indexes refuse a stored key, compared as bytes.
        #expect(throws: StoreError.self) {
            try conn.execute("""
                INSERT INTO deliveries (partition, cursor, user_id, user_index, cause_seq, kind, reason, at, rules_version, trace, body)
                VALUES (0, 4, 'a', 1, 1, 'alert', 'normal', now(), '1', '[]', '{}')
                """)
        }
    }
}
