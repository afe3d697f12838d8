// Migration 014: the key columns compare bytes (COLLATE "C") whatever the database's locale.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ByteOrderKeysMigrationTests {
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
    /// database would be), an older log keeps its rows and operator views, and its key columns and
    /// their unique indexes compare bytes after the migration: the views answer as before, and an
    /// ORDER BY of a key column is byte order.
    @Test func aLogInALanguageCollatedDatabaseGetsByteOrderKeysAndKeepsItsViews() throws {
        // Every migration before 014, as an older Herald left the database.
        let url = try TestPostgres.freshDatabase(
            migratedBefore: "014", createOptions: "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'")
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect(Set(try Self.collations(conn).values) == ["default"])
        for (i, user) in ["b", "B", "a"].enumerated() {
            try conn.execute("""
                INSERT INTO deliveries (cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at, rules_version, trace, body)
                VALUES ($1, $2, 1, 1, 'suppressed', 'com.example', $2, 'muted', now(), '1', '[]', '{}')
                """, [String(i + 1), user])
        }
        let language = try conn.execute("SELECT user_id FROM deliveries ORDER BY user_id")
        #expect((0..<language.rowCount).compactMap { language.string($0, 0) } == ["a", "b", "B"], "the locale's order before")

        #expect(try Migrator.migrate(conn) == Migrator.available.filter { $0.name >= "014" }.map(\.name))
        #expect(try Self.collations(conn) == Dictionary(uniqueKeysWithValues: Self.keyColumns.map { ($0, "C") }))
        let bytes = try conn.execute("SELECT user_id FROM deliveries ORDER BY user_id")
        #expect((0..<bytes.rowCount).compactMap { bytes.string($0, 0) } == ["B", "a", "b"], "byte order after")
        // The views came back (from their definitions before), and read the rows as before.
        // (Counted by name: later migrations add views of their own, 016 three.)
        let views = try conn.execute("""
            SELECT count(*) FROM pg_views WHERE viewname IN ('herald_settings_current', 'herald_authorizations_current',
                'herald_pending_summary_items', 'herald_held_notifications', 'herald_manual_focus_on',
                'herald_deliveries_hourly', 'herald_suppressions_daily', 'herald_consumer_lag')
            """)
        #expect(views.int64(0, 0) == 8)
        #expect(try conn.execute("SELECT sum(suppressed) FROM herald_suppressions_daily").int64(0, 0) == 3)
        // The unique indexes still refuse a stored key, now compared as bytes.
        #expect(throws: StoreError.self) {
            try conn.execute("""
                INSERT INTO deliveries (cursor, user_id, user_index, cause_seq, kind, reason, at, rules_version, trace, body)
                VALUES (4, 'a', 1, 1, 'alert', 'normal', now(), '1', '[]', '{}')
                """)
        }
        // A fresh log is the same.
        let fresh = try PGConnection.connect(TestPostgres.freshDatabase())
        defer { fresh.close() }
        #expect(try Self.collations(fresh) == Dictionary(uniqueKeysWithValues: Self.keyColumns.map { ($0, "C") }))
    }
}
