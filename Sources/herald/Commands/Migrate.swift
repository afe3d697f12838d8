// `herald migrate`: applies the schema migrations this build carries, and fixes P on a new database.
import ArgumentParser
import HeraldCommandLine
import HeraldCore
import HeraldStore

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the numbered migrations of schema/ that the database lacks (idempotent).")

    @OptionGroup var database: DatabaseOptions

    @Option(help: ArgumentHelp("The number of partitions (1 … \(Partitioning.maximumCount)), fixed for good while the log is empty (SPEC §9).",
                               valueName: "P"))
    var partitions: Int?

    @Flag(help: ArgumentHelp("Distribute the database over the Citus cluster whose coordinator --database-url names: partitioned tables by partition, global ones as reference tables (a fresh database; docs/citus.md, \"On Citus\")."))
    var citus = false

    func validate() throws {
        if let partitions, !(1...Partitioning.maximumCount).contains(partitions) {
            throw ValidationError("--partitions \(partitions) is out of range: use 1 … \(Partitioning.maximumCount).")
        }
    }

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            let applied = try Migrator.migrate(conn) { Log.info($0) }
            Log.info(applied.isEmpty
                     ? "schema is up to date (\(Migrator.available.count) migrations)"
                     : "applied \(applied.count) migration(s): \(applied.joined(separator: ", "))")
            if let partitions {
                _ = try conn.execute("SELECT herald_set_partitions($1::integer)", [String(partitions)])
            }
            Log.info("partitions: \(try EventReader.partitioning(conn).count)")
            if citus { try CitusDistribution.distribute(conn) { Log.info($0) } }
        }
    }
}
