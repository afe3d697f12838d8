// `herald bench ingest`: pipelined submits over TCP to a real service, acked after COMMIT, beside COPY of the same rows.
import ArgumentParser
import HeraldCommandLine
import Foundation
import Glibc
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport

struct IngestBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Producers pipelining submits over TCP to an in-process herald serve (acks after COMMIT), beside COPY of the same rows.",
        discussion: """
            Beside Herald's durable acks per second, the same run measures: the baseline (one COPY of the \
            submits' event rows into a table without indexes), a reference (the same COPY into a table \
            with the log's indexes), and the ceiling (the run's stored events and deliveries copied again \
            into tables like Herald's, two binary COPYs at once with nothing else running: what PostgreSQL \
            alone does for the rows Herald must store). The ceiling holds the rows' COPY data in memory, \
            ~1.2 KB a submit, so it copies at most the run's first 1,000,000 submits and as many deliveries.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Submits in all.") var events = 100_000
    @Option(help: "Producer connections.") var producers = 8
    @Option(help: "Outstanding submits per producer.") var window = 256
    @Option(help: "Distinct users (each authorized first).") var users = 10_000
    @Option(help: "The writer's largest transaction, in rows (default: the service's).") var maxRowsPerTransaction: Int?
    @OptionGroup var writer: WriterOptions
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Flag(help: "Metrics on, as serve --http: the HTTP side on a loopback port, scraped every second during the run.") var http = false
    @Flag(help: "Store content in clear (not erasable): the baseline of sealing's cost per submit.") var unsealed = false
    @Flag(help: "Segment the log first, as herald retain's first run does (decision 0042): the baseline of retention's cost per submit.")
    var segmented = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_ingest")
            if segmented {
                let c = try PGConnection.connect(url)
                defer { c.close() }
                _ = try c.execute("SELECT herald_segment_log()")
            }
            var load = IngestLoad()
            load.events = events; load.producers = producers; load.window = window; load.users = users
            var costs = IngestCosts()
            var scraper: MetricsScraper?
            let r = try withInProcessService(url: url, configure: {
                if let maxRowsPerTransaction { $0.writerLimits.maxRowsPerTransaction = maxRowsPerTransaction }
                writer.apply(to: &$0)
                if unsealed { $0.sealsContent = false }
            }, http: http ? { scraper = MetricsScraper(port: $0) } : nil) { port in
                defer { scraper?.stop() }
                Log.info("authorizing \(users) users")
                try load.prepare(port: port)
                Log.info("ingest: \(events) submits, \(producers) producers × \(window) outstanding")
                var before = try IngestCosts.Sample(port: port, url: url)
                try before.settleWALSyncs(url: url)  // the authorizations' syncs, published before the run
                let r = try load.run(port: port, progress: { n in Log.info("ingest: \(n)/\(events) acked") })
                // The deliveries of the last acks commit just after them: wait for the last one.
                let deadline = Date().addingTimeInterval(10)
                var after = try IngestCosts.Sample(port: port, url: url)
                while after.deliveries - before.deliveries < Int64(r.acked), Date() < deadline {
                    usleep(5_000)
                    after = try IngestCosts.Sample(port: port, url: url)
                }
                try after.settleWALSyncs(url: url)
                costs = IngestCosts(before: before, after: after, events: r.acked)
                return r
            }
            Log.info("COPY baselines: \(events) rows")
            let copy = try StoreBenchmark.copyBaselines(databaseURL: url, rows: load.rows())
            Log.info("schema ceiling: the run's submit events and deliveries copied into tables like Herald's")
            let ceiling = try StoreBenchmark.schemaCeiling(databaseURL: url)
            let ratio = r.acksPerSecond / copy.plain, ratioIndexed = r.acksPerSecond / copy.indexed
            let ratioCeiling = r.acksPerSecond / ceiling.submitsPerSecond
            if json {
                print(JSONValue.object([
                    "acksPerSecond": .int(Int64(r.acksPerSecond)), "ackP50Ms": .double(r.percentile(0.5)),
                    "ackP99Ms": .double(r.percentile(0.99)), "ackP999Ms": .double(r.percentile(0.999)),
                    "copyRowsPerSecond": .int(Int64(copy.plain)), "copyIndexedRowsPerSecond": .int(Int64(copy.indexed)),
                    "ratio": .double((ratio * 100).rounded() / 100), "ratioIndexed": .double((ratioIndexed * 100).rounded() / 100),
                    "ceilingSubmitsPerSecond": .int(Int64(ceiling.submitsPerSecond)),
                    "ratioCeiling": .double((ratioCeiling * 100).rounded() / 100),
                    "ceilingOverPlainCopy": .double((ceiling.submitsPerSecond / copy.plain * 100).rounded() / 100),
                    "walSyncsPer1000": .double((costs.walSyncsPer1000 * 100).rounded() / 100),
                    "roundTripsPerEvent": .double((costs.roundTripsPerEvent * 10_000).rounded() / 10_000),
                    "transactions": .int(costs.transactions), "transactionsOverlapped": .int(costs.overlapped),
                    "copiesSentWhileCompleting": .int(costs.sentWhileCompleting),
                    "deliveriesCopied": .int(costs.deliveriesCopied),
                    "loopCPUMicrosecondsPerEvent": .double((costs.loopMicrosecondsPerEvent * 10).rounded() / 10),
                    "loopPageFaultsPerEvent": .double((costs.loopFaultsPerEvent * 1000).rounded() / 1000),
                    "backendCPUMicrosecondsPerEvent": .double((costs.backendMicrosecondsPerEvent * 10).rounded() / 10),
                    "metricsScrapes": .int(Int64(scraper?.scrapes ?? 0)),
                ]).canonicalString)
            } else {
                print("ingest over TCP: \(events) submits of ~300 B to \(users) users, \(producers) producers × \(window) outstanding")
                print("  herald serve, acked after COMMIT   \(Int(r.acksPerSecond)) submits/s   ack p50 "
                      + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms", r.percentile(0.5), r.percentile(0.99), r.percentile(0.999)))
                print("  baseline: one COPY, no indexes    \(Int(copy.plain)) rows/s   ratio " + String(format: "%.2f×", ratio))
                print("  reference: COPY with the log's indexes  \(Int(copy.indexed)) rows/s   ratio " + String(format: "%.2f×", ratioIndexed))
                print("  ceiling: the same \(ceiling.submits) submits' events and \(ceiling.deliveries) deliveries, one COPY each at once into tables like Herald's (indexes, constraints)   "
                      + "\(Int(ceiling.submitsPerSecond)) submits/s   ratio " + String(format: "%.2f×", ratioCeiling))
                print(String(format: "  per event: %.2f WAL fsyncs per 1,000, %.4f round trips (%d transactions, %d overlapping the previous one's completions, %d given their data meanwhile; %d deliveries by COPY); CPU: herald loop %.1f µs (%.3f page faults), writer backends %.1f µs",
                             costs.walSyncsPer1000, costs.roundTripsPerEvent, costs.transactions, costs.overlapped, costs.sentWhileCompleting, costs.deliveriesCopied,
                             costs.loopMicrosecondsPerEvent, costs.loopFaultsPerEvent, costs.backendMicrosecondsPerEvent))
            }
        }
    }
}

struct LatencyBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "Submit → delivery line at a subscribed consumer, at a fixed offered load, through an in-process herald serve.")

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Submits in all.") var events = 20_000
    @Option(help: "Offered load, submits per second (default: half the maximum measured by an ingest run of --probe-events submits on the same service just before).") var rate: Double?
    @Option(help: "Submits of the ingest run that measures the maximum when --rate is not given.") var probeEvents = 50_000
    @Option(help: "The sender wakes every this many µs and writes the submits due by then in one write, each timed from its due time (0: a write and a sleep per submit, ~10 µs more of the load generator's CPU per submit on the same cores).") var tickMicroseconds = 500
    @Option(help: "Distinct users (each authorized first).") var users = 10_000
    @OptionGroup var writer: WriterOptions
    @Flag(help: "Print JSON instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_latency")
            var load = LatencyLoad()
            load.events = events; load.ingest.users = users; load.tickMicroseconds = tickMicroseconds
            var measuredMaximum: Double?
            var housekeeping = Housekeeping()
            var costs = IngestCosts()
            var machineBusy = 0.0, processBusy = 0.0   // cores busy on average while timed
            let r = try withInProcessService(url: url, configure: { writer.apply(to: &$0) }) { port in
                Log.info("authorizing \(users) users")
                try load.ingest.prepare(port: port)
                if let rate {
                    load.ratePerSecond = rate
                } else {
                    // The issue's default: half the maximum, measured here, on this service, now.
                    var probe = load.ingest
                    probe.events = probeEvents; probe.idPrefix = "probe"
                    Log.info("latency: measuring the ingest maximum (\(probeEvents) submits, \(probe.producers) producers × \(probe.window) outstanding)")
                    let maximum = try probe.run(port: port).acksPerSecond
                    measuredMaximum = maximum
                    load.ratePerSecond = (maximum / 2).rounded()
                }
                Log.info("latency: \(events) submits at \(Int(load.ratePerSecond))/s with a consumer subscribed")
                var costsBefore = try IngestCosts.Sample(port: port, url: url)
                try costsBefore.settleWALSyncs(url: url)  // the probe's syncs, published before the run
                let before = try Housekeeping.read(url)
                let machineBefore = BenchMachine.busyCPUSeconds(), processBefore = BenchMachine.cpuSeconds()
                let result = try load.run(port: port)
                machineBusy = (BenchMachine.busyCPUSeconds() - machineBefore) / result.seconds
                processBusy = (BenchMachine.cpuSeconds() - processBefore) / result.seconds
                var costsAfter = try IngestCosts.Sample(port: port, url: url)
                housekeeping = try Housekeeping.read(url) - before  // while timed, not while settling
                try costsAfter.settleWALSyncs(url: url)
                costs = IngestCosts(before: costsBefore, after: costsAfter, events: events)
                return result
            }
            let offered = load.ratePerSecond
            // The baseline in the same run: a bare durable commit per row at the same rate, on the
            // same database (10 s of the offered load, at most 20,000 commits), after Herald has stopped.
            let baselineCount = min(events, 20_000, max(100, Int(offered * 10)))
            Log.info("latency: baseline, \(baselineCount) single-row commits at \(Int(offered))/s on one connection")
            let (floor, reached) = try load.commitBaseline(databaseURL: url, count: baselineCount)
            let saturated = reached < offered * 0.95
            func pct(_ p: Double) -> Double { floor.percentile(p) }
            // The reference in the same run: PostgreSQL alone storing this run's rows in its own
            // transactions' size at the same rate — the ack latency of a perfect group commit here, now.
            let perTransaction = max(1, Int((Double(events) / Double(max(costs.transactions, 1))).rounded()))
            Log.info("latency: reference, \(baselineCount) of the run's submits and deliveries stored again by PostgreSQL alone, \(perTransaction) a transaction, at \(Int(offered))/s")
            let (reference, referenceReached) = try load.groupCommitReference(databaseURL: url, submitsPerTransaction: perTransaction,
                                                                               count: baselineCount)
            func ref(_ p: Double) -> Double { reference.percentile(p) }
            if json {
                print(JSONValue.object([
                    "offeredPerSecond": .double(offered), "tickMicroseconds": .int(Int64(tickMicroseconds)), "measuredMaximumPerSecond": measuredMaximum.map(JSONValue.double) ?? .null,
                    "delivered": .int(Int64(r.delivered)), "machineCoresBusy": .double(machineBusy), "processCoresBusy": .double(processBusy),
                    "baselineCommitP50Ms": .double(pct(0.5)), "baselineCommitP99Ms": .double(pct(0.99)),
                    "baselineCommitP999Ms": .double(pct(0.999)), "baselineReachedPerSecond": .double(reached),
                    "referenceAckP50Ms": .double(ref(0.5)), "referenceAckP99Ms": .double(ref(0.99)), "referenceAckP999Ms": .double(ref(0.999)),
                    "referenceSubmitsPerTransaction": .int(Int64(perTransaction)), "referenceReachedPerSecond": .double(referenceReached),
                    "p50Ms": .double(r.percentile(0.5)), "p99Ms": .double(r.percentile(0.99)), "p999Ms": .double(r.percentile(0.999)),
                    "ackP50Ms": .double(r.ackPercentile(0.5)), "ackP99Ms": .double(r.ackPercentile(0.99)),
                    "ackP999Ms": .double(r.ackPercentile(0.999)),
                    "transactions": .int(costs.transactions), "deliveriesChained": .int(costs.deliveriesChained), "walSyncsPer1000": .double(costs.walSyncsPer1000),
                    "loopMicrosecondsPerEvent": .double(costs.loopMicrosecondsPerEvent),
                    "backendMicrosecondsPerEvent": .double(costs.backendMicrosecondsPerEvent),
                    "autovacuumsDuring": .int(housekeeping.autovacuums), "autoanalyzesDuring": .int(housekeeping.autoanalyzes),
                    "checkpointsDuring": .int(housekeeping.checkpoints),
                ]).canonicalString)
            } else {
                print("end to end: \(events) submits at \(Int(offered))/s offered, one consumer at the tail"
                      + (measuredMaximum.map { " (half the \(Int($0))/s an ingest run of \(probeEvents) submits reached just before)" } ?? "")
                      + (tickMicroseconds > 0 ? "; sent every \(tickMicroseconds) µs, each timed from its due time" : "; one write per submit"))
                print("  submit → ack (COMMIT)    p50 " + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
                      r.ackPercentile(0.5), r.ackPercentile(0.99), r.ackPercentile(0.999), r.ackLatencies.maximumMs))
                print("  submit → delivery line   p50 " + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
                      r.percentile(0.5), r.percentile(0.99), r.percentile(0.999), r.latencies.maximumMs))
                print("  baseline: one-row COMMIT p50 " + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
                      pct(0.5), pct(0.99), pct(0.999), floor.maximumMs)
                      + "   (\(floor.count) autocommit INSERTs at the same rate, one connection; an ack needs one"
                      + " commit, a delivery line two in sequence)")
                print("  reference: PostgreSQL alone, ack p50 " + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
                      ref(0.5), ref(0.99), ref(0.999), reference.maximumMs)
                      + "   (\(reference.count) of this run's submits and their deliveries stored again, \(perTransaction) a transaction"
                      + " — BEGIN, two COPYs, COMMIT — on one connection at the same rate: a perfect group commit on this host, now"
                      + (referenceReached < offered * 0.95 ? String(format: "; it reached only %.0f/s", referenceReached) : "") + ")")
                print(String(format: "  at this rate: %d transactions (events' and deliveries'), %.1f submits each; %.2f WAL fsyncs per 1,000 events; CPU per submit: herald loop %.1f µs, writer backends %.1f µs; %lld deliveries in burst (chained) appends",
                             costs.transactions, Double(events) / Double(max(costs.transactions, 1)), costs.walSyncsPer1000,
                             costs.loopMicrosecondsPerEvent, costs.backendMicrosecondsPerEvent, costs.deliveriesChained))
                print(String(format: "  cores busy while timed: %.2f of %d (this process — loop, load generator, consumer — %.2f)",
                             machineBusy, sysconf(Int32(_SC_NPROCESSORS_ONLN)), processBusy))
                print("  PostgreSQL housekeeping while timed: \(housekeeping.autovacuums) autovacuum, "
                      + "\(housekeeping.autoanalyzes) autoanalyze runs of events/deliveries, \(housekeeping.checkpoints) checkpoints"
                      + (housekeeping.autoanalyzes + housekeeping.autovacuums + housekeeping.checkpoints > 0
                         ? " (each a burst of PostgreSQL CPU and I/O on the same cores: on a 2-core host the p99 includes them; BENCHMARKS.md)" : ""))
                if saturated {
                    print("    the baseline reached only \(Int(reached))/s: one connection commits one row at a time, so at this"
                          + " rate its latencies are queueing, not the floor; compare at a lower rate")
                }
            }
        }
    }
}

/// Autovacuum and autoanalyze runs PostgreSQL made of the log's two tables (`pg_stat_user_tables`),
/// and the cluster's checkpoints (`pg_stat_bgwriter`), read before and after a timed part: each
/// competes with Herald and the writers' backends for the same cores and disk.
struct Housekeeping {
    var autovacuums: Int64 = 0
    var autoanalyzes: Int64 = 0
    var checkpoints: Int64 = 0

    static func read(_ url: String) throws -> Housekeeping {
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let r = try conn.execute("""
            SELECT coalesce(sum(autovacuum_count), 0)::bigint, coalesce(sum(autoanalyze_count), 0)::bigint
            FROM pg_stat_user_tables WHERE relname IN ('events', 'deliveries')
            """)
        // PostgreSQL 15's view (17 moved the counters to pg_stat_checkpointer: then 0).
        let c = try? conn.execute("SELECT (checkpoints_timed + checkpoints_req)::bigint FROM pg_stat_bgwriter")
        return Housekeeping(autovacuums: r.int64(0, 0) ?? 0, autoanalyzes: r.int64(0, 1) ?? 0, checkpoints: c?.int64(0, 0) ?? 0)
    }

    static func - (a: Housekeeping, b: Housekeeping) -> Housekeeping {
        Housekeeping(autovacuums: a.autovacuums - b.autovacuums, autoanalyzes: a.autoanalyzes - b.autoanalyzes,
                     checkpoints: a.checkpoints - b.checkpoints)
    }
}

/// Runs `body` with the port of a `herald serve` started in this process on `url` (its loop on its
/// own thread, this thread free to generate load), then stops the service gracefully.
/// `configure` adjusts the configuration (e.g. a manual clock); `started` gets the seconds
/// `start()` took (connect, migrate, restore the log, listen).
func withInProcessService<T>(url: String, configure: (inout ServiceConfiguration) -> Void = { _ in },
                             started: (Double) -> Void = { _ in }, http: ((Int) -> Void)? = nil,
                             _ body: (Int) throws -> T) throws -> T {
    var config = ServiceConfiguration(databaseURL: url)
    config.port = 0
    config.handleSignals = false
    configure(&config)
    let service = HeraldService(configuration: config) { Log.info($0) }
    let clock = ContinuousClock()
    let t0 = clock.now
    let port = try service.start()
    let d = clock.now - t0
    started(Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
    // `http`: metrics on (`serve --http`), told the HTTP port.
    let observability = http.map { _ in ServiceObservability(service: service) }
    if let observability, let http { http(try observability.start(host: "127.0.0.1", port: 0)) }
    // From here the service is touched only by its loop thread (requestShutdown is thread-safe).
    nonisolated(unsafe) let loopService = service
    let stopped = DispatchSemaphore(value: 0)
    Thread {
        Thread.current.name = loopThreadName  // sets the kernel thread name too (seen in top and perf)
        loopService.run()
        stopped.signal()
    }.start()
    defer {
        service.requestShutdown()
        _ = stopped.wait(timeout: .now() + 30)
        observability?.stop()  // after the loop: its HTTP callbacks hold it unowned
    }
    return try body(port)
}

/// What the ingest run cost per event, from counters read before and after it: WAL fsyncs
/// (`pg_stat_wal`), the writer's round trips and transactions (the service's `stats`), CPU time of
/// the service's loop thread and of the writer's PostgreSQL backend (`/proc`, clock ticks).
struct IngestCosts {
    struct Sample {
        var walSyncs: Int64 = 0, roundTrips: Int64 = 0, transactions: Int64 = 0, deliveriesCopied: Int64 = 0
        var overlapped: Int64 = 0, sentWhileCompleting: Int64 = 0, deliveries: Int64 = 0, loopCpuMs: Int64 = 0
        /// The loop thread's minor page faults so far (`stats`).
        var loopMinorFaults: Int64 = 0
        /// Deliveries stored by chained appends (a burst spread over both delivery writers).
        var deliveriesChained: Int64 = 0
        /// The writers' backends' CPU so far; 0 when one of them could not be read.
        var backendSeconds = 0.0

        init() {}

        init(port: Int, url: String) throws {
            let c = try WireClient(port: port)
            _ = try c.request(#"{"op":"hello"}"#)
            let stats = try c.request(#"{"op":"stats"}"#)
            roundTrips = stats["storeRoundTrips"]?.intValue ?? 0
            transactions = stats["storeTransactions"]?.intValue ?? 0
            deliveriesCopied = stats["storeDeliveriesCopied"]?.intValue ?? 0
            overlapped = stats["storeTransactionsOverlapped"]?.intValue ?? 0
            sentWhileCompleting = stats["storeCopiesSentWhileCompleting"]?.intValue ?? 0
            deliveriesChained = stats["storeDeliveriesChained"]?.intValue ?? 0
            // The loop thread's own CPU clock, read by the loop (looking the thread up by name in
            // /proc sometimes found nothing and printed 0).
            loopCpuMs = stats["loopCpuMs"]?.intValue ?? 0
            loopMinorFaults = stats["loopMinorFaults"]?.intValue ?? 0
            deliveries = stats["deliveriesCommitted"]?.intValue ?? 0
            let conn = try PGConnection.connect(url)
            defer { conn.close() }
            walSyncs = try StoreBenchmark.walCounters(conn).syncs
            // The writers' backends (their PostgreSQL processes on this machine): events', deliveries'.
            let pids = ([stats["storeBackendPID"]].compactMap { $0 } + (stats["storeDeliveryBackendPIDs"]?.arrayValue ?? [])).compactMap(\.intValue)
            for pid in pids where pid > 0 { backendSeconds += BenchMachine.cpuSeconds(pid: String(pid)) }
        }

        /// Reads the WAL syncs again once PostgreSQL has published them: a backend adds its counts
        /// to `pg_stat_wal` at most once a second (PostgreSQL 15's PGSTAT_MIN_INTERVAL), so a sample
        /// taken as a run ends misses up to its last second of syncs (a 20,000-submit run read 0).
        mutating func settleWALSyncs(url: String) throws {
            usleep(1_500_000)
            let conn = try PGConnection.connect(url)
            defer { conn.close() }
            walSyncs = try StoreBenchmark.walCounters(conn).syncs
        }
    }

    var walSyncsPer1000 = 0.0, roundTripsPerEvent = 0.0, transactions: Int64 = 0, deliveriesCopied: Int64 = 0, overlapped: Int64 = 0
    var sentWhileCompleting: Int64 = 0, deliveriesChained: Int64 = 0
    var loopMicrosecondsPerEvent = 0.0, backendMicrosecondsPerEvent = 0.0
    /// The loop's minor page faults per event (first touches of fresh memory).
    var loopFaultsPerEvent = 0.0
    /// The loop's and the writers' backends' CPU between the samples, in all (ms).
    var loopMilliseconds = 0.0, backendMilliseconds = 0.0

    init() {}

    init(before: Sample, after: Sample, events: Int) {
        let n = Double(max(events, 1))
        loopMilliseconds = Double(after.loopCpuMs - before.loopCpuMs)
        backendMilliseconds = after.backendSeconds > 0 && before.backendSeconds > 0
            ? (after.backendSeconds - before.backendSeconds) * 1000 : 0
        walSyncsPer1000 = Double(after.walSyncs - before.walSyncs) / n * 1000
        roundTripsPerEvent = Double(after.roundTrips - before.roundTrips) / n
        transactions = after.transactions - before.transactions
        deliveriesCopied = after.deliveriesCopied - before.deliveriesCopied
        overlapped = after.overlapped - before.overlapped
        sentWhileCompleting = after.sentWhileCompleting - before.sentWhileCompleting
        deliveriesChained = after.deliveriesChained - before.deliveriesChained
        loopMicrosecondsPerEvent = loopMilliseconds * 1000 / n
        loopFaultsPerEvent = Double(after.loopMinorFaults - before.loopMinorFaults) / n
        backendMicrosecondsPerEvent = backendMilliseconds * 1000 / n
    }
}

/// The name of the in-process service's loop thread (`withInProcessService`), found in /proc by `IngestCosts`.
let loopThreadName = "herald-loop"
