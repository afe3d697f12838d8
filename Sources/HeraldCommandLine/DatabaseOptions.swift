// The database flags every subcommand of `herald` and `herald-bench` shares.
import ArgumentParser
import Foundation
import HeraldStore

/// `--database-url` (or `HERALD_DATABASE_URL`); without either, the private cluster in `.herald/postgres`.
public struct DatabaseOptions: ParsableArguments, Sendable {
    public init() {}

    @Option(name: .customLong("database-url"),
            help: "libpq connection string or postgres:// URL. Default: $HERALD_DATABASE_URL, else a private cluster in .herald/postgres.")
    public var databaseURL: String?

    @Option(name: .customLong("private-database"),
            help: "Without a database URL: the database to use (created if missing) in the private cluster.")
    public var privateDatabase = "herald"

    /// The database to use; `fresh` (only where `FreshDatabaseOption` is offered) drops a private one first.
    public func resolve(fresh: FreshDatabaseOption? = nil) throws -> DatabaseLocation {
        let url = databaseURL ?? ProcessInfo.processInfo.environment["HERALD_DATABASE_URL"]
        return try DatabaseLocation.resolve(url: url, database: privateDatabase, fresh: fresh?.freshPrivateDatabase ?? false) { Log.info($0) }
    }
}

/// `--fresh-private-database`: offered only by the commands that write a log of their own (`serve`,
/// `import`, the benches). The read-only ones (`state`, `explain`, `pending`, `replay`, `export`) and
/// `migrate` do not have it: given there, it dropped the log an operator meant to read.
public struct FreshDatabaseOption: ParsableArguments, Sendable {
    public init() {}

    @Flag(name: .customLong("fresh-private-database"),
          help: "Without a database URL: drop the private database first, so this run starts from an empty log (scripts/demo).")
    public var freshPrivateDatabase = false
}
