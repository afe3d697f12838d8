// schema/ says what a migrated database holds: the objects its files create are exactly those in
// the database, and the migrator refuses a database whose history it cannot continue from.
import Foundation
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct SchemaBaselineTests {
    /// Every table (with its columns), index, function (with its argument types), trigger, view,
    /// type and free-standing sequence that the schema files create, as "kind name" strings, in
    /// both directions: nothing the files name is missing from a migrated database, and the
    /// database holds nothing they do not name (besides the migrator's own `herald_migrations`).
    /// Indexes that back a PRIMARY KEY or UNIQUE constraint, and sequences owned by a column
    /// (bigserial, identity), come with their table and are not counted.
    @Test func aMigratedDatabaseHasExactlyTheObjectsTheSchemaFilesCreate() throws {
        var declared = SchemaObjects()
        for migration in Migrator.available {
            declared.apply(script: migration.sql, file: migration.name)
        }
        #expect(declared.unparsed.isEmpty, "statements this test does not understand: \(declared.unparsed)")
        #expect(declared.objects.contains("table events"), "the parser found the tables")
        #expect(declared.objects.contains("view herald_log_time"), "the parser found the views")

        let conn = try PGConnection.connect(TestPostgres.freshDatabase())
        defer { conn.close() }
        let inDatabase = try Self.catalogObjects(conn)
        let bookkeeping: Set<String> = ["table herald_migrations", "column herald_migrations.name",
                                        "column herald_migrations.checksum", "column herald_migrations.applied_at"]
        #expect(declared.objects.subtracting(inDatabase).sorted() == [], "named by schema/ but not in the database")
        #expect(inDatabase.subtracting(declared.objects).subtracting(bookkeeping).sorted() == [],
                "in the database but named by no file of schema/")
    }

    /// A database made by the pre-release schema (its 18 migrations, replaced by the baseline) is
    /// refused with an error that says so and what to do, and nothing is applied to it.
    @Test func aDatabaseMadeByThePreReleaseSchemaIsRefusedWithAClearError() throws {
        let conn = try PGConnection.connect(TestPostgres.freshDatabase(migrated: false))
        defer { conn.close() }
        let preRelease = [
            "001_event_store.sql", "002_fast_append.sql", "003_operator_views.sql", "004_copy_append.sql",
            "005_snapshots.sql", "006_delivery_copy.sql", "007_text_bodies.sql", "008_no_delivery_notification_index.sql",
            "009_idempotency_by_notification.sql", "010_compact_trace.sql", "011_no_delivery_cause_index.sql",
            "012_append_table_statistics.sql", "013_append_table_vacuum.sql", "014_byte_order_keys.sql",
            "015_rules_versions.sql", "016_operator_views_current.sql", "017_idempotency_per_notification.sql",
            "018_pending_views_end_at_any_later_delivery.sql",
        ]
        try conn.execute("""
            CREATE TABLE herald_migrations (name text PRIMARY KEY, checksum text NOT NULL,
                                            applied_at timestamptz NOT NULL DEFAULT now())
            """)
        for name in preRelease {
            try conn.execute("INSERT INTO herald_migrations (name, checksum) VALUES ($1, md5($1))", [name])
        }
        let message = Self.configurationError { try Migrator.migrate(conn) }
        #expect(message.contains("pre-release Herald schema"), "\(message)")
        #expect(message.contains("001_event_store.sql … 018_pending_views_end_at_any_later_delivery.sql"), "\(message)")
        #expect(message.contains("Re-create it"), "\(message)")
        #expect(message.contains("herald export") && message.contains("herald import"), "\(message)")
        #expect(try conn.execute("SELECT count(*) FROM herald_migrations").int64(0, 0) == Int64(preRelease.count))
        #expect(try conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'events'").int64(0, 0) == 0,
                "nothing was applied")
    }

    /// A database that records a migration this build does not carry (a newer build migrated it)
    /// is refused, rather than served with a schema this build does not know.
    @Test func aDatabaseMigratedByANewerBuildIsRefused() throws {
        let conn = try PGConnection.connect(TestPostgres.freshDatabase())
        defer { conn.close() }
        try conn.execute("INSERT INTO herald_migrations (name, checksum) VALUES ('999_from_the_future.sql', 'x')")
        let message = Self.configurationError { try Migrator.migrate(conn) }
        #expect(message.contains("newer Herald build") && message.contains("999_from_the_future.sql"), "\(message)")
    }

    /// An applied migration is history: a file changed after it ran is refused (the change
    /// belongs in a new, higher-numbered file).
    @Test func aMigrationChangedAfterItWasAppliedIsRefused() throws {
        let conn = try PGConnection.connect(TestPostgres.freshDatabase())
        defer { conn.close() }
        let last = try #require(Migrator.available.last?.name)
        try conn.execute("UPDATE herald_migrations SET checksum = 'edited' WHERE name = $1", [last])
        let message = Self.configurationError { try Migrator.migrate(conn) }
        #expect(message.contains("\(last) was changed after it was applied"), "\(message)")
    }

    /// The message of the `.configuration` error `body` throws ("" after recording an issue otherwise).
    static func configurationError(_ body: () throws -> Void) -> String {
        do {
            try body()
            Issue.record("expected a configuration error")
        } catch {
            if case .configuration(let message)? = error as? StoreError { return message }
            Issue.record("expected a configuration error, got \(error)")
        }
        return ""
    }

    /// The objects of the current schema as pg_catalog lists them, in `SchemaObjects`' notation.
    static func catalogObjects(_ conn: PGConnection) throws -> Set<String> {
        let r = try conn.execute("""
            WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
            SELECT 'table ' || c.relname FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('r', 'p')
            UNION ALL
            SELECT 'column ' || c.relname || '.' || a.attname
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
            UNION ALL
            SELECT 'view ' || c.relname FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind IN ('v', 'm')
            UNION ALL
            SELECT 'index ' || i.relname || ' on ' || t.relname
            FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
            WHERE i.relnamespace = (SELECT oid FROM ns)
              AND NOT EXISTS (SELECT 1 FROM pg_constraint k
                              WHERE k.conindid = x.indexrelid AND k.conrelid = x.indrelid AND k.contype IN ('p', 'u', 'x'))
            UNION ALL
            SELECT 'function ' || p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM ns)
            UNION ALL
            SELECT 'trigger ' || g.tgname || ' on ' || t.relname
            FROM pg_trigger g JOIN pg_class t ON t.oid = g.tgrelid
            WHERE t.relnamespace = (SELECT oid FROM ns) AND NOT g.tgisinternal
            UNION ALL
            SELECT 'sequence ' || c.relname FROM pg_class c
            WHERE c.relnamespace = (SELECT oid FROM ns) AND c.relkind = 'S'
              AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                                          AND d.deptype IN ('a', 'i'))
            UNION ALL
            SELECT 'type ' || y.typname FROM pg_type y LEFT JOIN pg_class c ON c.oid = y.typrelid
            WHERE y.typnamespace = (SELECT oid FROM ns)
              AND (y.typtype IN ('e', 'd', 'r', 'm') OR (y.typtype = 'c' AND c.relkind = 'c'))
            """)
        return Set((0..<r.rowCount).compactMap { r.string($0, 0) })
    }
}

/// The objects a sequence of SQL scripts creates, read from their text: enough SQL to follow the
/// statements schema/ uses (CREATE and DROP of tables, views, indexes, functions, triggers, types
/// and sequences; ALTER TABLE … ADD / DROP COLUMN). Anything else that creates, drops or renames
/// lands in `unparsed`, so a migration this reader cannot follow fails the test instead of passing
/// it unchecked.
struct SchemaObjects {
    private(set) var objects: Set<String> = []
    private(set) var unparsed: [String] = []

    mutating func apply(script: String, file: String) {
        for statement in Self.statements(script) {
            if !apply(statement) { unparsed.append("\(file): \(statement)") }
        }
    }

    /// Applies one statement (lowercase, single-spaced, strings and bodies blanked); false when it
    /// changes the set of objects in a way this reader does not follow.
    private mutating func apply(_ s: String) -> Bool {
        if let m = s.firstMatch(of: #/^create (?:unlogged )?table (?:if not exists )?(\w+) ?\(/#) {
            let table = String(m.1)
            objects.insert("table \(table)")
            for column in Self.columns(Self.parenthesized(s, from: m.range.upperBound)) {
                objects.insert("column \(table).\(column)")
            }
            return true
        }
        if let m = s.firstMatch(of: #/^create (?:unique )?index (?:concurrently )?(?:if not exists )?(\w+) on (?:only )?(\w+)/#) {
            objects.insert("index \(m.1) on \(m.2)")
            return true
        }
        if let m = s.firstMatch(of: #/^create (?:or replace )?function (\w+) ?\(/#) {
            objects.insert("function \(m.1)(\(Self.argumentTypes(Self.parenthesized(s, from: m.range.upperBound))))")
            return true
        }
        if let m = s.firstMatch(of: #/^create (?:or replace )?(?:materialized )?view (?:if not exists )?(\w+)/#) {
            objects.insert("view \(m.1)")
            return true
        }
        if let m = s.firstMatch(of: #/^create (?:or replace )?trigger (\w+) .* on (?:only )?(\w+) (?:for|execute|referencing|from|not|deferrable|initially|when)/#) {
            objects.insert("trigger \(m.1) on \(m.2)")
            return true
        }
        if let m = s.firstMatch(of: #/^create (type|domain) (\w+)/#) {
            objects.insert("type \(m.2)")
            return true
        }
        if let m = s.firstMatch(of: #/^create sequence (?:if not exists )?(\w+)/#) {
            objects.insert("sequence \(m.1)")
            return true
        }
        if let m = s.firstMatch(of: #/^drop (table|view|materialized view|index|sequence|type|domain) (?:concurrently )?(?:if exists )?([\w, ]+?)(?: cascade| restrict)?$/#) {
            let kind = m.1 == "materialized view" ? "view" : m.1 == "domain" ? "type" : String(m.1)
            for name in m.2.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                let removed = objects.filter { $0 == "\(kind) \(name)" || $0.hasPrefix("\(kind) \(name) on ") }
                if removed.isEmpty && !s.contains(" if exists ") { return false }
                objects.subtract(removed)
                if kind == "table" {
                    objects = objects.filter { !$0.hasPrefix("column \(name).") && !$0.hasSuffix(" on \(name)") }
                }
            }
            return true
        }
        if let m = s.firstMatch(of: #/^drop function (?:if exists )?(\w+) ?\(/#) {
            let signature = "function \(m.1)(\(Self.argumentTypes(Self.parenthesized(s, from: m.range.upperBound))))"
            return objects.remove(signature) != nil || s.contains(" if exists ")
        }
        if let m = s.firstMatch(of: #/^drop trigger (?:if exists )?(\w+) on (\w+)/#) {
            return objects.remove("trigger \(m.1) on \(m.2)") != nil || s.contains(" if exists ")
        }
        if let m = s.firstMatch(of: #/^alter table (?:if exists )?(?:only )?(\w+) (.*)$/#) {
            let table = String(m.1)
            if m.2.contains("rename") { return false }
            for a in m.2.matches(of: #/\badd (?:column )?(?:if not exists )?(\w+)/#) where !["constraint", "primary", "unique", "check", "foreign", "exclude"].contains(String(a.1)) {
                objects.insert("column \(table).\(a.1)")
            }
            for d in m.2.matches(of: #/\bdrop (?:column )?(?:if exists )?(\w+)/#) where d.1 != "constraint" && d.1 != "default" && d.1 != "not" && d.1 != "identity" && d.1 != "expression" {
                objects.remove("column \(table).\(d.1)")
            }
            return true
        }
        return !s.hasPrefix("create ") && !s.hasPrefix("drop ") && !s.contains(" rename ")
    }

    /// The statements of a script: comments removed, quoted strings and dollar-quoted bodies
    /// blanked (`''`, `$$`), lowercase, whitespace collapsed.
    static func statements(_ script: String) -> [String] {
        var out = ""
        var chars = Array(script)[...]
        while let c = chars.first {
            if c == "-", chars.dropFirst().first == "-" {
                while let n = chars.first, n != "\n" { chars = chars.dropFirst() }
            } else if c == "'" {
                chars = chars.dropFirst()
                while let n = chars.first {
                    chars = chars.dropFirst()
                    if n == "'" { if chars.first == "'" { chars = chars.dropFirst() } else { break } }
                }
                out += "''"
            } else if c == "$", let close = chars.dropFirst().firstIndex(of: "$"),
                      chars[chars.index(after: chars.startIndex)..<close].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) {
                let tag = String(chars[chars.startIndex...close])
                let rest = String(chars[chars.index(after: close)...])
                if let end = rest.range(of: tag) {
                    chars = Array(rest[end.upperBound...])[...]
                } else {
                    chars = []
                }
                out += "$$"
            } else {
                out.append(c)
                chars = chars.dropFirst()
            }
        }
        return out.split(separator: ";").map {
            $0.lowercased().split(whereSeparator: \.isWhitespace).joined(separator: " ")
                .replacingOccurrences(of: "( ", with: "(").replacingOccurrences(of: " )", with: ")")
        }.filter { !$0.isEmpty }
    }

    /// The text inside the parenthesis that opens just before `start`, up to its matching close.
    static func parenthesized(_ s: String, from start: String.Index) -> String {
        var depth = 1
        var i = start
        while i < s.endIndex {
            if s[i] == "(" { depth += 1 }
            if s[i] == ")" { depth -= 1; if depth == 0 { return String(s[start..<i]) } }
            i = s.index(after: i)
        }
        return String(s[start...])
    }

    /// The items of a comma-separated list, split only outside parentheses.
    static func topLevelItems(_ list: String) -> [String] {
        var items: [String] = []
        var depth = 0
        var current = ""
        for c in list {
            if c == "(" { depth += 1 }
            if c == ")" { depth -= 1 }
            if c == ",", depth == 0 { items.append(current); current = "" } else { current.append(c) }
        }
        items.append(current)
        return items.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// The column names of a CREATE TABLE body (table constraints skipped).
    static func columns(_ body: String) -> [String] {
        topLevelItems(body).compactMap { item in
            let first = String(item.prefix { $0 != " " }).replacingOccurrences(of: "\"", with: "")
            return ["constraint", "check", "unique", "primary", "foreign", "exclude", "like"].contains(first) ? nil : first
        }
    }

    /// The argument types of a function's parameter list, as `regprocedure` prints them.
    static func argumentTypes(_ list: String) -> String {
        let names: [String: String] = [
            "timestamptz": "timestamp with time zone", "timestamp": "timestamp without time zone",
            "int": "integer", "int4": "integer", "int8": "bigint", "int2": "smallint", "bool": "boolean",
            "float8": "double precision", "float4": "real", "varchar": "character varying",
        ]
        return topLevelItems(list).map { item in
            var words = item.split(separator: " ").map(String.init)
            if words.first.map({ ["in", "out", "inout", "variadic"].contains($0) }) == true { words.removeFirst() }
            if words.count > 1 { words.removeFirst() }  // the parameter's name
            if let d = words.firstIndex(where: { $0 == "default" || $0 == "=" }) { words = Array(words[..<d]) }
            var type = words.joined(separator: " ")
            var suffix = ""
            while type.hasSuffix("[]") { type.removeLast(2); suffix += "[]" }
            return (names[type] ?? type) + suffix
        }.joined(separator: ",")
    }
}
