// `herald export` / `herald import`: the log as newline-delimited JSON, for audits on another machine.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldStore

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write every event and delivery as NDJSON to stdout (stored bytes, sealed content opened; erased content stays erased).")
    @OptionGroup var database: DatabaseOptions

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let counts = try LogTransfer.export(PGConnection.connect(location.url)) { print($0) }
            Log.info("exported \(counts.events) events and \(counts.deliveries) deliveries")
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Load an export from stdin into an empty database (migrated first).")
    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Flag(help: "Import an export that has no end line (an earlier Herald wrote none). Without it such an export is refused: it may have been cut.")
    var allowMissingEnd = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            try Migrator.migrate(conn)
            do {
                let counts = try LogTransfer.import(conn, lines: AnyIterator { readLine(strippingNewline: true) }, allowMissingEnd: allowMissingEnd)
                Log.info("imported \(counts.events) events and \(counts.deliveries) deliveries")
            } catch {
                Log.info("error: \(error)")
                throw ExitCode.error
            }
        }
    }
}
