// `herald bench storm`: N users' 08:00 summaries firing at one instant, committed and streamed to a consumer.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Synchronization

struct StormBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storm",
        abstract: "The 08:00 storm: every user's summary due at one instant; time until all are committed and streamed to a consumer.",
        discussion: """
            The history (per user: authorization, summary delivery for the app, a summary at 08:00 in one of \
            five zones that are all UTC+0 in November, K queued items) is built by SyntheticHistory — the \
            service's own admission and fold, written by COPY — then an in-process service starts on it with a \
            manual clock at 06:00Z (it folds the log), a consumer subscribes, and the admin clock op moves time \
            to 08:00Z. Measured from sending the clock op until the clock reply (every summary committed) and \
            until the consumer has received every summary line.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Users, each with a summary at 08:00 local time.") var users = 1_000_000
    @Option(help: "Queued items per user.") var items = 3
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Flag(help: "With --reuse: build and save the history, then stop (no storm).") var buildOnly = false
    @Option(help: "An SQL file run on the scratch database before the service starts (schema experiments: what a storm costs with another append or fewer indexes).")
    var setupSQL: String?
    @Flag(help: "The consumer subscribes only once every summary is committed, from the cursor before the storm: it reads the storm back (from PostgreSQL where the ring moved on) — a consumer that was away.")
    var lateConsumer = false
    @OptionGroup var firingOptions: FiringOptions
    @OptionGroup var writer: WriterOptions
    @Option(help: "The scratch database the run uses (dropped and recreated), e.g. to run two sizes at once.")
    var scratch = "herald_bench_storm"
    @Option(help: "Delivery lines the service keeps in memory for consumers (its default: 65,536); a small ring makes the consumer catch up from PostgreSQL.")
    var ring: Int?
    @Flag(help: """
        Reuse the history a previous run with the same --users and --items saved as a template database         (the first run with --reuse builds and saves it): each run starts on a fresh copy of it.
        """) var reuse = false

    /// Copies the saved template into `name` (dropped first); nil when no template was saved.
    static func copyTemplate(_ location: DatabaseLocation, template: String, to name: String) throws -> (String, SyntheticLog)? {
        let admin = try PGConnection.connect(location.url)
        defer { admin.close() }
        try admin.execute("SET client_min_messages = warning")
        let r = try admin.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", [template])
        guard r.rowCount == 1, let note = r.string(0, 0) else { return nil }
        let parts = note.split(separator: " ").compactMap { Double($0) }
        guard parts.count == 3 else { return nil }
        try admin.execute("DROP DATABASE IF EXISTS \(name)")
        try admin.execute("CREATE DATABASE \(name) TEMPLATE \(template)")
        let db = try admin.execute("SELECT current_database()").string(0, 0) ?? "postgres"
        let url = location.url.replacingOccurrences(of: "dbname=\(db)", with: "dbname=\(name)")
        return (url, SyntheticLog(seconds: parts[0], events: Int(parts[1]), deliveries: Int(parts[2]), copySeconds: 0, finishSeconds: 0))
    }

    /// Saves the freshly built history in `from` as the template `name` (its build numbers in the comment).
    static func saveTemplate(_ location: DatabaseLocation, from: String, as name: String, log: SyntheticLog) throws {
        let admin = try PGConnection.connect(location.url)
        defer { admin.close() }
        try admin.execute("SET client_min_messages = warning")
        try admin.execute("DROP DATABASE IF EXISTS \(name)")
        try admin.execute("CREATE DATABASE \(name) TEMPLATE \(from)")
        try admin.execute("COMMENT ON DATABASE \(name) IS '\(log.seconds) \(log.events) \(log.deliveries)'")
    }

    static let start = Instant(rfc3339: "2026-11-23T06:00:00Z")!
    static let storm = Instant(rfc3339: "2026-11-23T08:00:00Z")!

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            // The schema's latest migration is part of the name: a history saved by a binary with
            // another schema is not reused (the migrator would refuse it, or migrate it on every copy).
            let schema = Migrator.available.last.map { String($0.name.prefix(3)) } ?? "0"
            let template = "herald_bench_storm_u\(users)_i\(items)_m\(schema)"
            let log: SyntheticLog
            let url: String
            if reuse, let saved = try Self.copyTemplate(location, template: template, to: scratch) {
                (url, log) = saved
                Log.info("storm: reusing the history in \(template) (\(Fmt.int(log.events)) events)")
            } else {
                url = try scratchDatabase(location, name: scratch)
                // 1. The history.
                log = try SyntheticLog.build(url: url, label: "storm: building \(users) users", users: users, start: Self.start,
                                             time: { _ in Self.start }, requests: { SyntheticWorkloads.stormUser($0, items: items) })
                if reuse { try Self.saveTemplate(location, from: scratch, as: template, log: log) }
            }
            if buildOnly {
                Log.info("storm: history saved as \(template) (\(Fmt.s(log.seconds)))")
                return
            }
            if let setupSQL {
                let sql = try String(contentsOfFile: setupSQL, encoding: .utf8)
                let conn = try PGConnection.connect(url)
                try conn.executeScript(sql)
                conn.close()
                Log.info("storm: ran \(setupSQL) on the scratch database")
            }
            let loadSeconds = log.seconds
            let events = log.events, queued = log.deliveries

            // 2. Start-up on it, then the storm.
            var startup = 0.0
            let committed = Mutex(0.0)
            var streamedAt = 0.0, received = 0, firstAt = 0.0
            var firing: JSONValue = .null
            var overlapped: Int64 = 0, chained: Int64 = 0
            var loopCpuMs: Int64 = 0
            var pgCPU = 0.0, processCPU = 0.0
            var lateStart: Double?
            try withInProcessService(url: url, configure: {
                $0.clock = .manual(start: Self.start)
                // Start-up's fold would trigger a snapshot of every user, written while the storm runs:
                // a cost of starting the service just before, not of the storm (measured: it overlapped
                // the first second of the 100k storm).
                $0.snapshotEveryEvents = nil
                if let ring { $0.deliveryRingCapacity = ring }
                firingOptions.apply(to: &$0)
                writer.apply(to: &$0)
            }, started: { startup = $0 }) { port in
                var tap = lateConsumer ? nil : try DeliveryTap(port: port, consumer: "bench-storm")
                let admin = try WireClient(port: port)
                _ = try admin.request(#"{"op":"hello"}"#)
                Log.info("storm: \(users) summaries due at \(Self.storm.rfc3339); moving the clock")
                let watch = Stopwatch()
                let reply = Thread {
                    do {
                        let r = try admin.request(#"{"op":"clock","advanceTo":"\#(Self.storm.rfc3339)"}"#, timeoutMilliseconds: 3_600_000)
                        committed.withLock { $0 = watch.seconds }
                        if r["ok"] != true { Log.info("storm: clock refused: \(r.canonicalString)") }
                    } catch { Log.info("storm: clock op failed: \(error)"); committed.withLock { $0 = -1 } }
                }
                let before = try admin.request(#"{"op":"stats"}"#)
                // The scratch database's backends and the cluster's background processes (WAL writer,
                // checkpointer…): their CPU during the storm, beside this process's (service + consumer).
                let pg = try PGConnection.connect(url)
                let pids = try pg.execute("""
                    SELECT pid FROM pg_stat_activity
                    WHERE pid <> pg_backend_pid() AND (datname = current_database() OR datname IS NULL)
                    """)
                let pgPids = (0..<pids.rowCount).compactMap { pids.string($0, 0) }
                pg.close()
                let pgBefore = pgPids.reduce(0.0) { $0 + BenchMachine.cpuSeconds(pid: $1) }
                let selfBefore = BenchMachine.cpuSeconds()
                reply.start()
                if tap == nil {
                    while committed.withLock({ $0 }) == 0 { usleep(10_000) }
                    lateStart = watch.seconds
                    tap = try DeliveryTap(port: port, consumer: "bench-storm", from: before["deliveryHead"]?.intValue ?? 0)
                }
                let bar = ProgressBar("storm: summaries received", total: users)
                try tap!.read(idleTimeoutMilliseconds: 600_000) { line in
                    if line.contains(#""kind":"summary""#) {
                        received += 1
                        if received == 1 { firstAt = watch.seconds }
                        if received % 1000 == 0 { bar.update(received) }
                    }
                    return received < users
                }
                streamedAt = watch.seconds
                pgCPU = pgPids.reduce(0.0) { $0 + BenchMachine.cpuSeconds(pid: $1) } - pgBefore
                processCPU = BenchMachine.cpuSeconds() - selfBefore
                bar.update(received); bar.finish()
                while committed.withLock({ $0 }) == 0 { usleep(10_000) }
                let after = try admin.request(#"{"op":"stats"}"#)
                if let f = after["firing"] { firing = f }
                if let a = after["loopCpuMs"]?.intValue, let b = before["loopCpuMs"]?.intValue { loopCpuMs = a - b }
                if let a = after["storeTransactionsOverlapped"]?.intValue, let b = before["storeTransactionsOverlapped"]?.intValue { overlapped = a - b }
                if let a = after["storeDeliveriesChained"]?.intValue, let b = before["storeDeliveriesChained"]?.intValue { chained = a - b }
            }
            let rss = BenchMachine.memory()
            let committedAt = committed.withLock { $0 }

            var report = BenchReport("08:00 storm: \(Fmt.int(users)) users × \(items) queued items, summaries at one instant, one consumer")
            report.row("history built (SyntheticHistory, COPY)", Fmt.s(loadSeconds),
                       "\(Fmt.int(events)) events + \(Fmt.int(queued)) queued deliveries, \(Fmt.int(Double(events) / loadSeconds)) events/s",
                       key: "loadSeconds", value: Fmt.j(loadSeconds))
            report.row("  of which COPY / move into events + ANALYZE", "\(Fmt.s(log.copySeconds)) / \(Fmt.s(log.finishSeconds))",
                       "the rest: admission, fold, row formatting in Swift")
            report.json["events"] = .int(Int64(events))
            report.row("service start-up (fold of the log)", Fmt.s(startup),
                       "\(Fmt.int(Double(events) / startup)) events/s folded", key: "startupSeconds", value: Fmt.j(startup))
            report.row("clock op → every summary committed", Fmt.s(committedAt),
                       "\(Fmt.int(Double(users) / committedAt)) deliveries/s", key: "committedSeconds", value: Fmt.j(committedAt))
            report.row("clock op → first summary at the consumer", Fmt.s(firstAt), "", key: "firstReceivedSeconds", value: Fmt.j(firstAt))
            report.row("clock op → every summary at the consumer", Fmt.s(streamedAt),
                       "\(Fmt.int(Double(received) / streamedAt)) deliveries/s", key: "streamedSeconds", value: Fmt.j(streamedAt))
            report.json["deliveriesPerSecond"] = .int(Int64(Double(received) / streamedAt))
            if let lateStart {
                report.row("  late consumer: subscribe → every summary", Fmt.s(streamedAt - lateStart),
                           "\(Fmt.int(Double(received) / (streamedAt - lateStart))) deliveries/s read back",
                           key: "lateConsumerSeconds", value: Fmt.j(streamedAt - lateStart))
            }
            report.row("summaries received by the consumer", Fmt.int(received), "of \(Fmt.int(users))", key: "received", value: .int(Int64(received)))
            report.row("target: 1M summaries out within 20 s", Fmt.x(20 / (streamedAt * 1_000_000 / Double(users))),
                       "of the target rate (1M/20 s = 50,000/s), extrapolated linearly", key: "targetRatio",
                       value: Fmt.j(20 / (streamedAt * 1_000_000 / Double(users))))
            report.row("service loop CPU, clock op → consumer done", "\(Fmt.int(Int(loopCpuMs))) ms",
                       "\(Fmt.int(Double(loopCpuMs) * 1000 / Double(max(users, 1)))) µs per summary; of the wall clock: "
                       + Fmt.x(Double(loopCpuMs) / 1000 / streamedAt), key: "loopCpuMs", value: .int(loopCpuMs))
            report.row("CPU, clock op → consumer done: PostgreSQL / this process", "\(Fmt.s(pgCPU)) / \(Fmt.s(processCPU))",
                       "\(Fmt.int(pgCPU * 1e6 / Double(max(users, 1)))) / \(Fmt.int(processCPU * 1e6 / Double(max(users, 1)))) µs per summary "
                       + "(the process: service loop, writer, consumer); load \(BenchMachine.loadAverage())",
                       key: "postgresCpuSeconds", value: Fmt.j(pgCPU))
            report.json["processCpuSeconds"] = Fmt.j(processCPU)
            if case .object(let f) = firing {
                func i(_ k: String) -> Int64 { f[k]?.intValue ?? 0 }
                report.row("  firing: slices / engine / encoding", "\(i("sliceMs")) / \(i("engineMs")) / \(i("encodeMs")) ms",
                           "\(i("usersFired")) users in \(i("slices")) slices; first → last slice \(i("firstToLastSliceMs")) ms, "
                           + "first slice → last commit \(i("firstSliceToLastCommitMs")) ms")
                report.row("  appends: count / rows / sent → committed", "\(i("appends")) / \(i("appendRows")) / \(i("appendMs")) ms",
                           "completions (wire lines, ring, consumers) \(i("completionMs")) ms of loop time; "
                           + "\(overlapped) transactions sent before the previous one's completions ran; "
                           + "\(chained) rows stored by chained appends (two writers at once)")
                report.json["transactionsOverlapped"] = .int(overlapped)
                report.json["deliveriesChained"] = .int(chained)
                report.row("  consumer catch-up reads / rows / latency", "\(i("catchUpReads")) / \(i("catchUpRows")) / \(i("catchUpMs")) ms", "")
                report.json["firing"] = firing
            }
            report.row("process RSS after / peak", "\(Fmt.mib(rss.rss)) / \(Fmt.mib(rss.peak))", "generator and service in one process",
                       key: "rssKiB", value: .int(Int64(rss.rss)))
            report.json["peakRssKiB"] = .int(Int64(rss.peak))
            report.print(asJSON: json)
        }
    }
}

/// The service's firing knobs that `bench storm` and `bench peer` both offer, for A/B runs.
struct FiringOptions: ParsableArguments {
    @Option(help: "Users fired per loop turn at most (the service's timerSliceUsers).") var sliceUsers: Int?
    @Option(help: "Loop time per firing slice at most, in microseconds (timerSliceMicroseconds; 0: no bound).") var sliceMicroseconds: Int64?
    @Option(help: "Rows per delivery append at most (deliveryAppendRows).") var appendRows: Int?

    func apply(to configuration: inout ServiceConfiguration) {
        if let sliceUsers { configuration.timerSliceUsers = sliceUsers }
        if let sliceMicroseconds { configuration.timerSliceMicroseconds = sliceMicroseconds }
        if let appendRows { configuration.deliveryAppendRows = appendRows }
    }
}
