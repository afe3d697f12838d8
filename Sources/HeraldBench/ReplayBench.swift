// `herald bench replay`: the Replayer over a log of N events, beside a binary COPY of the same rows in the same run.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport

struct ReplayBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay (re-derive and compare every delivery) over a log of N events, beside binary COPY of the log in the same run.",
        discussion: """
            The log is a realistic mix per user (authorization, some users on summary delivery, hidden previews or \
            a Focus; active, passive and Time Sensitive submits, opened and withdrawn notifications), built by \
            SyntheticHistory. Each run replays it with `Replayer` (what `herald replay` runs: read events and \
            deliveries, fold, compare byte for byte) and reads the same rows with one binary \
            `COPY (SELECT …) TO STDOUT` each for events and deliveries: the read-side ceiling.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Events in the log (approximately: whole users).") var events = 1_000_000
    @Option(help: "Events per user.") var eventsPerUser = 20
    @Option(help: "Replays to time (the median is reported).") var runs = 3
    @Flag(help: "Print JSON instead of a table.") var json = false

    static let start = Instant(rfc3339: "2026-11-23T06:00:00Z")!

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_replay")
            let users = max(1, events / eventsPerUser)

            let log = try SyntheticLog.build(url: url, label: "replay: building \(users) users", users: users, start: Self.start,
                                             time: { Self.start.adding(.milliseconds(Int64($0))) },
                                             requests: { SyntheticWorkloads.mixedUser($0, eventsPerUser: eventsPerUser) })
            let loadSeconds = log.seconds
            let written = log.events, deliveries = log.deliveries

            let conn = try PGConnection.connect(url)
            var replayRates: [Double] = [], copyRates: [Double] = [], copyEventsRates: [Double] = []
            var differences = 0, read = 0, compared = 0
            for r in 1...runs {
                var replayer = Replayer()
                let bar = ProgressBar("replay: run \(r)/\(runs)", total: written)
                replayer.progress = { n, _ in bar.update(n) }
                let report = try replayer.run(conn) { Date().timeIntervalSince1970 }
                bar.finish()
                replayRates.append(report.eventsPerSecond)
                differences = report.differences.count; read = report.eventsRead; compared = report.deliveriesCompared

                let w = Stopwatch()
                let e = try conn.copyOut("COPY (SELECT seq, user_id, type, app, notification_id, body, engine_time FROM events ORDER BY seq) TO STDOUT (FORMAT binary)")
                let eventsSeconds = w.seconds
                _ = try conn.copyOut("COPY (SELECT cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at, rules_version, trace, body FROM deliveries ORDER BY cursor) TO STDOUT (FORMAT binary)")
                let bothSeconds = w.seconds
                copyEventsRates.append(Double(e.rows) / eventsSeconds)
                copyRates.append(Double(written) / bothSeconds)
                Log.info(String(format: "replay: run %d: %.0f events/s; COPY of events and deliveries %.0f events/s", r, report.eventsPerSecond, Double(written) / bothSeconds))
            }
            let replay = median(replayRates), copy = median(copyRates), copyEvents = median(copyEventsRates)

            var report = BenchReport("replay: \(Fmt.int(written)) events (\(Fmt.int(users)) users, mixed ops), \(Fmt.int(deliveries)) stored deliveries")
            report.row("history built (SyntheticHistory, COPY)", Fmt.s(loadSeconds), "\(Fmt.int(Double(written) / loadSeconds)) events/s",
                       key: "loadSeconds", value: Fmt.j(loadSeconds))
            report.row("  of which COPY / move into events + ANALYZE", "\(Fmt.s(log.copySeconds)) / \(Fmt.s(log.finishSeconds))",
                       "the rest: admission, fold, row formatting in Swift")
            report.json["events"] = .int(Int64(written))
            report.row("Replayer (read, fold, compare)", "\(Fmt.int(replay)) events/s",
                       "median of \(runs): " + replayRates.map { Fmt.int($0) }.joined(separator: ", ") + "; \(Fmt.int(read)) events read, \(Fmt.int(compared)) deliveries compared, \(differences) differences",
                       key: "eventsPerSecond", value: .int(Int64(replay)))
            report.json["differences"] = .int(Int64(differences))
            report.row("baseline: binary COPY TO of events + deliveries", "\(Fmt.int(copy)) events/s", "the same rows replay reads",
                       key: "copyEventsPerSecond", value: .int(Int64(copy)))
            report.row("ratio", Fmt.x(replay / copy), "", key: "ratio", value: Fmt.j(replay / copy))
            report.row("reference: binary COPY TO of events alone", "\(Fmt.int(copyEvents)) rows/s", "",
                       key: "copyEventsOnlyRowsPerSecond", value: .int(Int64(copyEvents)))
            report.row("target: ≥ 200,000 events/s", Fmt.x(replay / 200_000), "of the target")
            report.print(asJSON: json)
            if differences > 0 { throw ExitCode.differences }
        }
    }
}
