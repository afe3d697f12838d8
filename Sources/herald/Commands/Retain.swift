// `herald retain --days N --archive DIR`: move the log older than N days into archive segments, then drop them (SPEC §14).
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldStore

struct Retain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Archive the events and deliveries older than --days into --archive, verify the files, then drop them from the hot tables.",
        discussion: """
            Runs beside a serving instance (docs/retention.md). The first run segments the log (range-partitions \
            events and deliveries by position; one exclusive lock and scan of each). A segment is dropped only when \
            every row of it is behind its partition's horizon, its archive files are written, synced, read back and \
            recorded (rows, SHA-256) in archive_segments. Restart needs a complete snapshot at or after the horizon: \
            without one nothing is dropped. Exit 0: done (also when nothing was old enough); 2: an error (nothing \
            unverified was dropped; run it again).
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Keep this many days of the log in the hot tables (by engine time, before the newest event).") var days: Int
    @Option(help: "Directory of the archive segments (created if missing).") var archive: String = "herald-archive"
    @Option(help: "Move only this partition's horizon (default: every partition).") var partition: Int?
    @Option(name: .customLong("cut-margin"), help: "Positions past the head at which the open segment is closed; appends during the run must stay below it.")
    var cutMargin: Int64 = 100_000

    func run() throws {
        guard days >= 1 else { throw ValidationError("--days must be at least 1") }
        guard cutMargin >= 1 else { throw ValidationError("--cut-margin must be at least 1") }
        let tty = isatty(2) == 1
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let conn = try PGConnection.connect(location.url)
            try Migrator.migrate(conn)
            let count = try EventReader.partitioning(conn).count
            if let partition, partition < 0 || partition >= count {
                throw ValidationError("--partition \(partition) is not one of this database's \(count) partition(s) (0 … \(count - 1))")
            }
            var job = RetentionJob(days: days, archive: URL(fileURLWithPath: archive, isDirectory: true), partition: partition)
            job.cutMargin = cutMargin
            if tty { job.progress = { FileHandle.standardError.write(Data("retain: \($0)\n".utf8)) } }
            do {
                let report = try job.run(conn)
                for h in report.horizons {
                    print("partition \(h.partition): horizon seq \(h.seq), cursor \(h.cursor)" + (h.limitedBy.map { " (held back by \($0))" } ?? ""))
                }
                print("archived \(report.archivedSegments) segment file(s), \(report.archivedRows) rows; dropped \(report.droppedSegments.count) segment(s) "
                      + "in \(String(format: "%.3f", report.dropSeconds)) s; closed \(report.closedSegments.count)")
            } catch let failure as RetentionJob.Failure {
                Log.info("error: \(failure)")
                throw ExitCode.error
            }
        }
    }
}
