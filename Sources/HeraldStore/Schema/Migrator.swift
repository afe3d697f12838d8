// Applies the numbered migrations of schema/ (embedded at build time) once each, in order, recorded in herald_migrations.

/// Brings a database to the schema this build expects. Idempotent: applied migrations are
/// skipped; one whose text changed since it was applied is an error (fix forward with a new file).
/// A database whose recorded migrations this build cannot continue from (made by the pre-release
/// schema, or by a newer build) is refused before anything runs. Concurrent migrators
/// serialise on an advisory lock.
public enum Migrator {
    /// The migrations this build carries, in order.
    public static var available: [(name: String, sql: String)] { EmbeddedSchema.migrations }

    /// Applies what is missing; returns the names applied now (empty when up to date).
    @discardableResult
    public static func migrate(_ connection: PGConnection, progress: (String) -> Void = { _ in }) throws(StoreError) -> [String] {
        try connection.execute("SET client_min_messages = warning")
        try connection.execute("SELECT pg_advisory_lock(7271001)")
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock(7271001)") }
        try connection.execute("""
            CREATE TABLE IF NOT EXISTS herald_migrations (
                name text PRIMARY KEY,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let result = try connection.execute("SELECT name, checksum FROM herald_migrations")
        var applied: [String: String] = [:]
        for r in 0..<result.rowCount {
            if let name = result.string(r, 0), let sum = result.string(r, 1) { applied[name] = sum }
        }
        try checkHistory(recorded: Set(applied.keys))
        var appliedNow: [String] = []
        for migration in available {
            let checksum = try connection.execute("SELECT md5($1)", [migration.sql]).string(0, 0) ?? ""
            if let recorded = applied[migration.name] {
                guard recorded == checksum else {
                    throw .configuration("""
                        Migration \(migration.name) was changed after it was applied to this database \
                        (recorded checksum \(recorded), this build has \(checksum)). Applied migrations are \
                        history: restore the file and put the change in a new, higher-numbered migration.
                        """)
                }
                continue
            }
            progress("applying \(migration.name)")
            try connection.execute("BEGIN")
            do {
                try connection.executeScript(migration.sql)
                try connection.execute("INSERT INTO herald_migrations (name, checksum) VALUES ($1, $2)", [migration.name, checksum])
                try connection.execute("COMMIT")
            } catch {
                _ = try? connection.execute("ROLLBACK")
                throw error
            }
            appliedNow.append(migration.name)
        }
        return appliedNow
    }

    /// Refuses a database whose recorded migrations this build cannot continue from: one that
    /// lacks the baseline (the first migration) yet records others was made by the pre-release
    /// schema, whose files were replaced by the baseline and cannot be upgraded in place; one that
    /// records a migration this build does not carry was migrated by a newer build.
    static func checkHistory(recorded: Set<String>) throws(StoreError) {
        guard !recorded.isEmpty, let baseline = available.first?.name else { return }
        let known = Set(available.map(\.name))
        let unknown = recorded.subtracting(known).sorted()
        func range(_ names: [String]) -> String { names.count > 1 ? "\(names[0]) … \(names[names.count - 1])" : names.joined() }
        if !recorded.contains(baseline) {
            throw .configuration("""
                This database was made by a pre-release Herald schema (it records the migrations \
                \(range(recorded.sorted())), not this build's baseline \(baseline)) and cannot be \
                upgraded. Re-create it (an empty database: this build creates the schema), or move its log: \
                `herald export` with the build that made it, then `herald import` into an empty database with this one.
                """)
        }
        if !unknown.isEmpty {
            throw .configuration("""
                This database was migrated by a newer Herald build: it records the migration(s) \
                \(range(unknown)), which this build does not carry. Run that build \
                (or a newer one) against it.
                """)
        }
    }
}
