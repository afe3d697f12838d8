// Migration 010 rewrites traces stored in the old object form to the compact form, step for step.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct CompactTraceMigrationTests {
    @Test func migration010RewritesOldTracesStepForStep() throws {
        let conn = try PGConnection.connect(TestPostgres.freshDatabase(migratedBefore: "010"))
        let old = [
            #"[{"outcome":"pass","rule":"withdrawn"},{"outcome":"downgraded","rule":"critical"},{"outcome":"decided","rule":"focus"}]"#,
            "[]",
            #"[{"outcome":"applied","rule":"snooze"},{"outcome":"decided","rule":"normal"}]"#,
        ]
        for (i, trace) in old.enumerated() {
            try conn.execute("""
                INSERT INTO deliveries (cursor, user_id, user_index, cause_seq, kind, reason, at, rules_version, trace, body)
                VALUES ($1, 'u', $1, 1, 'alert', 'normal', now(), '1', $2, '{}')
                """, [String(i + 1), trace])
        }
        #expect(try Migrator.migrate(conn) == Migrator.available.filter { $0.name >= "010" }.map(\.name))
        let r = try conn.execute("SELECT trace FROM deliveries ORDER BY cursor")
        let now = (0..<r.rowCount).map { r.string($0, 0) ?? "" }
        #expect(now == [#"["withdrawn","critical:downgraded","focus:decided"]"#, "[]", #"["snooze:applied","normal:decided"]"#])
        for (before, after) in zip(old, now) {
            #expect(RuleStep.steps(storedTrace: before) == RuleStep.steps(storedTrace: after))
        }
        #expect(throws: StoreError.self) { try conn.execute("UPDATE deliveries SET trace = '[]'") }
    }
}
