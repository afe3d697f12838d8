// `herald bench restart`: a log with N users and M pending timers; a fresh `herald serve` process's time to serving, and its RSS.
import ArgumentParser
import HeraldCommandLine
import Foundation
import Glibc
import HeraldCore
import HeraldStore
import HeraldTestSupport

struct RestartBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restart",
        abstract: "Time from `herald serve` process start to the first hello answered, on a log of N users and M pending timers; RSS after.",
        discussion: """
            The history (per user: an authorization and M/N notifications deferred to instants over the next \
            48 hours) is built by SyntheticHistory (the service's own admission and fold, written by COPY). Then a \
            child `herald serve --clock manual` starts on it --runs times; each run is timed from spawning the \
            process until a hello is answered (start-up loads the latest snapshot and folds the events after it, or \
            the whole log without one), and the child's VmRSS/VmHWM are read from /proc. With --snapshot service the \
            first start has no snapshot: it folds the whole log, is timed, and writes one while serving. Reference in \
            the same run: a binary COPY of the events table (what reading the log alone costs).
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Users.") var users = 1_000_000
    @Option(help: "Pending timers (deferred notifications) in all, spread evenly over the users.") var timers = 10_000_000
    @Option(help: "Restarts to time (the median is reported).") var runs = 3
    @Option(help: """
        How the snapshot comes to be: `service` (the first start folds the whole log, is timed, and writes the \
        snapshot the timed restarts then load), `direct` (written while the history is built, from the same \
        states: for sizes whose whole-log fold would take minutes), `none` (every start folds the whole log).
        """) var snapshot = "service"
    @Flag(help: "Reuse the history (and snapshot) a previous run left in the scratch database: only the restarts are timed.")
    var reuse = false
    @Option(help: "The scratch database the run builds (dropped and recreated) or, with --reuse, reads: one per size keeps each reusable.")
    var scratch = "herald_bench_restart"
    @Flag(help: "Print JSON instead of a table.") var json = false

    static let start = Instant(rfc3339: "2026-11-23T06:00:00Z")!

    func run() throws {
        try reportingErrors {
            guard ["service", "direct", "none"].contains(snapshot) else {
                throw StoreError.configuration("--snapshot is service, direct or none (got \(snapshot))")
            }
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = reuse ? try Self.existingDatabase(location, name: scratch)
                            : try scratchDatabase(location, name: scratch)
            let perUser = max(0, timers / max(1, users))

            // --snapshot direct: every user's state as the service would snapshot it after folding this log.
            var parts: [(part: Int, users: Int, data: [UInt8])] = []
            var part = SnapshotWriter(capacity: 4 << 20)
            var partUsers = 0, snapshotUsers = 0, snapshotBytes = 0
            func closePart() {
                guard partUsers > 0 else { return }
                parts.append((parts.count, partUsers, part.bytes))
                snapshotBytes += part.bytes.count
                part = SnapshotWriter(capacity: 4 << 20)
                partUsers = 0
            }
            var lastHistory: SyntheticHistory?
            let each: ((UserState, Int64, SyntheticHistory) throws -> Void)? = snapshot != "direct" ? nil : { state, deliveries, history in
                state.encodeSnapshotRecord(deliveryCount: deliveries, to: &part)
                partUsers += 1
                snapshotUsers += 1
                if part.bytes.count >= 4 << 20 { closePart() }
                lastHistory = history
            }
            let log = reuse ? try Self.existing(url, users: users, perUser: perUser) : try SyntheticLog.build(url: url, label: "restart: building \(users) users × \(perUser) timers", users: users,
                                             start: Self.start, time: { _ in Self.start },
                                             requests: { SyntheticWorkloads.timersUser($0, timers: perUser, from: Self.start) },
                                             each: each)
            let loadSeconds = log.seconds
            let events = log.events
            var snapshotWriteSeconds = 0.0
            if snapshot == "direct", let history = lastHistory {
                closePart()
                let watch = Stopwatch()
                let conn = try PGConnection.connect(url)
                var header = SnapshotWriter()
                SnapshotHeader(capturedAt: Self.start, apps: history.apps).encode(to: &header)
                let id = try SnapshotStore.begin(conn, throughSeq: 0, header: header.bytes)
                var i = 0
                while i < parts.count {
                    try SnapshotStore.writeParts(conn, id: id, parts: Array(parts[i..<min(parts.count, i + 16)]))
                    i += 16
                }
                try SnapshotStore.complete(conn, id: id, users: snapshotUsers, parts: parts.count, bytes: snapshotBytes,
                                           throughSeq: history.seq)
                conn.close()
                parts = []
                snapshotWriteSeconds = watch.seconds
                Log.info("restart: snapshot written directly: \(snapshotUsers) users, \(Fmt.mib(snapshotBytes / 1024)) in \(Fmt.s(snapshotWriteSeconds))")
            }

            // The floor of any restart that reads the log: one binary COPY of it.
            let reader = try PGConnection.connect(url)
            let copyWatch = Stopwatch()
            let copied = try reader.copyOut("COPY (SELECT seq, user_id, type, app, notification_id, body, engine_time FROM events ORDER BY seq) TO STDOUT (FORMAT binary)")
            let copySeconds = copyWatch.seconds

            var first: (serving: Double, rss: Int, peak: Int, stats: JSONValue?, snapshotSeconds: Double)?
            if snapshot == "service" && !reuse {
                Log.info("restart: first start (no snapshot yet): folding \(Fmt.int(events)) events, then writing the snapshot")
                let f = try Self.timeRestart(url: url, extra: ["--snapshot-every", "1"], waitForSnapshot: reader)
                first = (f.serving, f.rss, f.peak, f.stats, f.snapshotSeconds)
                Log.info("restart: first start serving after \(Fmt.s(f.serving)), RSS \(Fmt.mib(f.rss)); snapshot complete \(Fmt.s(f.snapshotSeconds)) later")
            }
            let snapshotRow = try reader.execute("SELECT coalesce(max(users), 0), coalesce(max(parts), 0), coalesce(max(bytes), 0) FROM snapshots WHERE completed_at IS NOT NULL")
            reader.close()

            var samples: [(serving: Double, rss: Int, peak: Int, stats: JSONValue?, snapshotSeconds: Double)] = []
            for r in 1...runs {
                Log.info("restart: run \(r)/\(runs): starting herald serve on \(Fmt.int(events)) events\(snapshot == "none" ? "" : " (from the snapshot)")")
                samples.append(try Self.timeRestart(url: url, extra: ["--snapshot-every", "0"], waitForSnapshot: nil))
                Log.info("restart: run \(r): serving after \(Fmt.s(samples.last!.serving)), RSS \(Fmt.mib(samples.last!.rss))")
            }
            let serving = median(samples.map(\.serving))
            let rss = Int(median(samples.map { Double($0.rss) })), peak = Int(median(samples.map { Double($0.peak) }))
            let stats = samples.last?.stats

            var report = BenchReport("restart: \(Fmt.int(users)) users, \(Fmt.int(perUser * users)) pending timers (deferred notifications), \(Fmt.int(events)) events")
            report.row("history built (SyntheticHistory, COPY)", Fmt.s(loadSeconds), "\(Fmt.int(Double(events) / loadSeconds)) events/s",
                       key: "loadSeconds", value: Fmt.j(loadSeconds))
            report.row("  of which COPY / move into events + ANALYZE", "\(Fmt.s(log.copySeconds)) / \(Fmt.s(log.finishSeconds))",
                       "the rest: admission, fold, row formatting in Swift")
            report.json["events"] = .int(Int64(events))
            report.json["users"] = .int(Int64(users))
            report.json["timers"] = .int(Int64(perUser * users))
            report.json["snapshotMode"] = .string(snapshot)
            if snapshot == "direct" {
                report.row("snapshot written with the history", Fmt.s(snapshotWriteSeconds), "binary COPY of the parts",
                           key: "snapshotWriteSeconds", value: Fmt.j(snapshotWriteSeconds))
            }
            if let first {
                report.row("first start: whole log folded → first hello", Fmt.s(first.serving),
                           "\(Fmt.int(Double(events) / first.serving)) events/s; RSS \(Fmt.mib(first.rss)) / peak \(Fmt.mib(first.peak))",
                           key: "firstServingSeconds", value: Fmt.j(first.serving))
                report.row("  then the snapshot written while serving", Fmt.s(first.snapshotSeconds), "until its completion row committed",
                           key: "snapshotSeconds", value: Fmt.j(first.snapshotSeconds))
                report.json["firstRssKiB"] = .int(Int64(first.rss))
            }
            if snapshot != "none" {
                let users = snapshotRow.int64(0, 0) ?? 0, parts = snapshotRow.int64(0, 1) ?? 0, bytes = snapshotRow.int64(0, 2) ?? 0
                report.row("snapshot", "\(Fmt.mib(Int(bytes / 1024)))", "\(Fmt.int(Double(users))) users in \(parts) parts, \(bytes / max(1, Int64(perUser * self.users))) B per pending timer",
                           key: "snapshotBytes", value: .int(bytes))
            }
            report.row(snapshot == "none" ? "process start → first hello answered" : "process start → first hello (from the snapshot)", Fmt.s(serving),
                       "median of \(runs): " + samples.map { String(format: "%.2f", $0.serving) }.joined(separator: ", ") + " s",
                       key: "servingSeconds", value: Fmt.j(serving))
            report.row("RSS after start-up / peak (VmRSS / VmHWM)", "\(Fmt.mib(rss)) / \(Fmt.mib(peak))",
                       "\(Fmt.int(Double(rss) * 1024 / Double(max(1, users)))) B per user, \(Fmt.int(Double(rss) * 1024 / Double(max(1, perUser * users)))) B per pending timer",
                       key: "rssKiB", value: .int(Int64(rss)))
            report.json["peakRssKiB"] = .int(Int64(peak))
            if let stats {
                report.row("restored (stats)", "\(stats["users"]?.intValue ?? 0) users",
                           "\(stats["timers"]?.intValue ?? 0) user wake-ups in the wheel (one per user: its earliest deadline)")
            }
            report.row("reference: binary COPY of the log", Fmt.s(copySeconds),
                       "\(Fmt.int(Double(copied.rows) / copySeconds)) rows/s, \(Fmt.int(Double(copied.bytes) / 1_048_576)) MiB",
                       key: "copySeconds", value: Fmt.j(copySeconds))
            let scale = (1_000_000 / Double(max(1, users)) + 10_000_000 / Double(max(1, perUser * users))) / 2
            report.row("target: 1M users / 10M timers serving ≤ 15 s, RSS ≤ 2 GiB",
                       "×\(String(format: "%.0f", scale)) scale",
                       String(format: "linear extrapolation: %.0f s, %.1f GiB", serving * scale, Double(peak) * scale / 1_048_576))
            report.print(asJSON: json)
        }
    }

    /// Spawns `herald serve` on `url` and polls until a hello is answered; reads the child's memory, asks for stats, stops it.
    /// With `waitForSnapshot`, also waits (polling that connection) until a snapshot is complete and reports how long after serving.
    static func timeRestart(url: String, extra: [String], waitForSnapshot: PGConnection?) throws
        -> (serving: Double, rss: Int, peak: Int, stats: JSONValue?, snapshotSeconds: Double) {
        let port = LocalCluster.freePort()
        let child = Process()
        child.executableURL = URL(fileURLWithPath: BenchMachine.heraldPath())
        child.arguments = ["serve", "--database-url", url, "--listen", "127.0.0.1:\(port)",
                           "--clock", "manual", "--start", start.rfc3339] + extra
        let logPath = "/tmp/herald-bench-restart-\(getpid()).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        child.standardError = FileHandle(forWritingAtPath: logPath)
        child.standardOutput = FileHandle.nullDevice
        let watch = Stopwatch()
        try child.run()
        defer {
            if child.isRunning { child.terminate(); child.waitUntilExit() }
        }
        while true {
            if !child.isRunning {
                throw StoreError.configuration("herald serve exited during start-up (status \(child.terminationStatus)); see \(logPath)")
            }
            if let client = try? WireClient(port: port) {
                let reply = try client.request(#"{"op":"hello"}"#, timeoutMilliseconds: 600_000)
                let serving = watch.seconds
                guard reply["ok"] == true else { throw StoreError.configuration("hello refused: \(reply.canonicalString)") }
                let memory = BenchMachine.memory(pid: String(child.processIdentifier))
                let stats = try? client.request(#"{"op":"stats"}"#)
                var snapshotSeconds = 0.0
                if let conn = waitForSnapshot {
                    while (try conn.execute("SELECT count(*) FROM snapshots WHERE completed_at IS NOT NULL").int64(0, 0) ?? 0) == 0 {
                        guard child.isRunning else { throw StoreError.configuration("herald serve exited before its snapshot completed; see \(logPath)") }
                        usleep(20_000)
                    }
                    snapshotSeconds = watch.seconds - serving
                }
                return (serving, memory.rss, memory.peak, stats, snapshotSeconds)
            }
            usleep(5_000)
        }
    }

    /// The scratch database of a previous run, as it was left.
    static func existingDatabase(_ location: DatabaseLocation, name: String) throws -> String {
        let admin = try PGConnection.connect(location.url)
        let db = try admin.execute("SELECT current_database()").string(0, 0) ?? "postgres"
        admin.close()
        return location.url.replacingOccurrences(of: "dbname=\(db)", with: "dbname=\(name)")
    }

    /// What a previous run built, read back (the build times are not known: zero). Refused when it
    /// is not the size asked for: a smaller run in the same scratch database since would otherwise
    /// be timed as the large one (found by `bench suite --quick` before a full `--reuse` run).
    static func existing(_ url: String, users: Int, perUser: Int) throws -> SyntheticLog {
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let events = try EventReader.head(conn)
        guard events > 0 else { throw StoreError.configuration("--reuse: the scratch database holds no history; run once without --reuse") }
        // What `SyntheticLog.build` appends for this size: the app's registration, then each user's requests.
        let expected = 1 + Int64(users) * Int64(SyntheticWorkloads.timersUser(0, timers: perUser, from: Self.start).count)
        guard events == expected else {
            throw StoreError.configuration("""
                --reuse: the scratch database holds a history of \(events) events, not the \(expected) that \
                --users \(users) with \(perUser) timers each build (another size ran there since). Run once \
                without --reuse, or pass the --scratch that size used.
                """)
        }
        return SyntheticLog(seconds: 0.001, events: Int(events), deliveries: 0, copySeconds: 0, finishSeconds: 0)
    }
}
