// The database flags every subcommand shares.
import ArgumentParser
import Foundation
import HeraldStore

/// `--database-url` (or `HERALD_DATABASE_URL`); without either, the private cluster in `.herald/postgres`.
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"),
            help: "libpq connection string or postgres:// URL. Default: $HERALD_DATABASE_URL, else a private cluster in .herald/postgres.")
    var databaseURL: String?

    @Option(name: .customLong("private-database"),
            help: "Without a database URL: the database to use (created if missing) in the private cluster.")
    var privateDatabase = "herald"

    /// The database to use; `fresh` (only where `FreshDatabaseOption` is offered) drops a private one first.
    func resolve(fresh: FreshDatabaseOption? = nil) throws -> DatabaseLocation {
        let url = databaseURL ?? ProcessInfo.processInfo.environment["HERALD_DATABASE_URL"]
        return try DatabaseLocation.resolve(url: url, database: privateDatabase, fresh: fresh?.freshPrivateDatabase ?? false) { Log.info($0) }
    }
}

/// `--fresh-private-database`: offered only by the commands that write a log of their own (`serve`,
/// `import`, the benches). The read-only ones (`state`, `explain`, `pending`, `replay`, `export`) and
/// `migrate` do not have it: given there, it dropped the log an operator meant to read.
struct FreshDatabaseOption: ParsableArguments {
    @Flag(name: .customLong("fresh-private-database"),
          help: "Without a database URL: drop the private database first, so this run starts from an empty log (scripts/demo).")
    var freshPrivateDatabase = false
}

/// Progress and errors go to stderr; stdout carries only results.
enum Log {
    static func info(_ message: String) {
        FileHandle.standardError.write(Data(("herald: " + message + "\n").utf8))
    }
}

/// Exit codes: 0 success, 1 a check found a difference, 2 an error (bad input or usage, unreachable
/// database, unknown user). `Herald.main` turns ArgumentParser's own codes (64 for a usage error,
/// 1 for any other thrown error) into 2, so 1 always means differences.
extension ExitCode {
    static let differences = ExitCode(1)
    static let error = ExitCode(2)
}

/// Runs `body`, turning store errors into a readable message on stderr and exit code 2. The process
/// then ends, so the message says what to do and never that Herald retries (the running service's
/// own reconnect messages say that: `StoreError.description`). `serve` too: an error that reaches
/// here ended its start-up or its loop.
func reportingErrors(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as StoreError {
        Log.info("error: \(error.oneShotDescription)")
        throw ExitCode.error
    }
}

/// Says on stderr that `what` has no events in the log, and fails with exit code 2: a name with no
/// history is a mistake to report (a typo would otherwise print an empty state or a clean replay).
func noEvents(_ what: String, plural: Bool = false,
              hint: String = "check the name (SELECT DISTINCT user_id FROM events lists every user)") -> ExitCode {
    Log.info("error: \(what) \(plural ? "have" : "has") no events in the log; \(hint)")
    return ExitCode.error
}
