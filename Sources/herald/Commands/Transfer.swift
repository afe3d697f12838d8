// `herald export` / `herald import`: the log as newline-delimited JSON, for audits on another machine.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldStore

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Write every event and delivery as NDJSON to stdout (stored bytes, sealed content opened; erased content stays erased).")
    @OptionGroup var database: DatabaseOptions
    @Option(help: "Only this partition of a partitioned database (0 … P-1); every partition without it.")
    var partition: Int?
    @Option(help: "The archive directory herald retain wrote: its segments are exported first (required once retention dropped anything).")
    var archive: String?

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            // Progress on a terminal: rows written of the events and deliveries there are.
            let only = partition.map { "WHERE partition = \($0)" } ?? ""
            let heads = try? conn.execute("SELECT (SELECT coalesce(sum(seq), 0) FROM partitions \(only)) + (SELECT coalesce(sum(cursor), 0) FROM delivery_heads \(only))")
            let progress = TerminalProgress(label: "export", unit: "rows", total: heads.flatMap { $0.string(0, 0) }.flatMap { Int($0) })
            var rows = 0
            let counts = try LogTransfer.export(conn, only: partition,
                                                archive: archive.map { ArchiveSegments(directory: URL(fileURLWithPath: $0, isDirectory: true)) }) {
                print($0)
                rows += 1
                if rows % 1024 == 0 { progress?.update(rows) }
            }
            progress?.finish()
            Log.info("exported \(counts.events) events and \(counts.deliveries) deliveries")
        }
    }
}

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Load an export from stdin into an empty database (migrated first; it takes the export's partitions).")
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
                // Progress on a terminal: bytes of a redirected file read, else lines.
                let size = TerminalProgress.standardInputBytes()
                let progress = TerminalProgress(label: "import", unit: size == nil ? "lines" : "bytes", total: size)
                var lines = 0, bytes = 0
                let counts: (events: Int, deliveries: Int)
                do {
                    defer { progress?.finish() }
                    counts = try LogTransfer.import(conn, lines: AnyIterator {
                        guard let line = readLine(strippingNewline: true) else { return nil }
                        lines += 1
                        bytes += line.utf8.count + 1
                        if lines % 1024 == 0 { progress?.update(size == nil ? lines : bytes) }
                        return line
                    }, allowMissingEnd: allowMissingEnd)
                }
                Log.info("imported \(counts.events) events and \(counts.deliveries) deliveries")
            } catch {
                Log.info("error: \(error)")
                throw ExitCode.error
            }
        }
    }
}
