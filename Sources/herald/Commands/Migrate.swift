// `herald migrate`: applies the schema migrations this build carries.
import ArgumentParser
import HeraldCommandLine
import HeraldStore

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the numbered migrations of schema/ that the database lacks (idempotent).")

    @OptionGroup var database: DatabaseOptions

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            let applied = try Migrator.migrate(conn) { Log.info($0) }
            Log.info(applied.isEmpty
                     ? "schema is up to date (\(Migrator.available.count) migrations)"
                     : "applied \(applied.count) migration(s): \(applied.joined(separator: ", "))")
        }
    }
}
