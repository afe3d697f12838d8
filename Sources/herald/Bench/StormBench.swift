// `herald bench storm`: N users' 08:00 summaries firing at one instant, committed and streamed to a consumer.
import ArgumentParser
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
    @Option(help: "Users, each with a summary at 08:00 local time.") var users = 1_000_000
    @Option(help: "Queued items per user.") var items = 3
    @Flag(help: "Print JSON instead of a table.") var json = false

    static let start = Instant(rfc3339: "2026-11-23T06:00:00Z")!
    static let storm = Instant(rfc3339: "2026-11-23T08:00:00Z")!

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_storm")

            // 1. The history.
            let log = try SyntheticLog.build(url: url, label: "storm: building \(users) users", users: users, start: Self.start,
                                             time: { _ in Self.start }, requests: { SyntheticWorkloads.stormUser($0, items: items) })
            let loadSeconds = log.seconds
            let events = log.events, queued = log.deliveries

            // 2. Start-up on it, then the storm.
            var startup = 0.0
            let committed = Mutex(0.0)
            var streamedAt = 0.0, received = 0, firstAt = 0.0
            try withInProcessService(url: url, configure: { $0.clock = .manual(start: Self.start) }, started: { startup = $0 }) { port in
                let tap = try DeliveryTap(port: port, consumer: "bench-storm")
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
                reply.start()
                let bar = ProgressBar("storm: summaries received", total: users)
                try tap.read(idleTimeoutMilliseconds: 600_000) { line in
                    if line.contains(#""kind":"summary""#) {
                        received += 1
                        if received == 1 { firstAt = watch.seconds }
                        if received % 1000 == 0 { bar.update(received) }
                    }
                    return received < users
                }
                streamedAt = watch.seconds
                bar.update(received); bar.finish()
                while committed.withLock({ $0 }) == 0 { usleep(10_000) }
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
            report.row("summaries received by the consumer", Fmt.int(received), "of \(Fmt.int(users))", key: "received", value: .int(Int64(received)))
            report.row("target: 1M summaries out within 20 s", Fmt.x(20 / (streamedAt * 1_000_000 / Double(users))),
                       "of the target rate (1M/20 s = 50,000/s), extrapolated linearly", key: "targetRatio",
                       value: Fmt.j(20 / (streamedAt * 1_000_000 / Double(users))))
            report.row("process RSS after / peak", "\(Fmt.mib(rss.rss)) / \(Fmt.mib(rss.peak))", "generator and service in one process",
                       key: "rssKiB", value: .int(Int64(rss.rss)))
            report.json["peakRssKiB"] = .int(Int64(rss.peak))
            report.print(asJSON: json)
        }
    }
}
