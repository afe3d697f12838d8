// `herald bench peer`: N jobs due at one instant through Herald (deferred notifications) and through PgQueuer, same run, same PostgreSQL.
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Synchronization

struct PeerBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "peer",
        abstract: "The same scheduled-job workload through Herald and through PgQueuer (scripts/bench-peer), same run, same PostgreSQL.",
        discussion: """
            Workload: enqueue N jobs all due at one instant D (far enough ahead that every enqueue finishes \
            before it), then process each when due. Reported: enqueue throughput (each enqueue durably \
            committed), and for each job the latency from D to its processing, p50/p99/max.
            Herald: `submit` with "deliverAt": D (a deferred notification; SPEC §3 "Deferred"), pipelined over TCP \
            by 8 producers × 256 outstanding to an in-process service on the system clock (an honest \
            due-to-delivered latency: the timing wheel fires on real time); "processed" = the delivery line \
            arriving at a subscribed consumer. PgQueuer: scripts/bench-peer installs it in a throwaway \
            virtualenv (.herald/peer-venv) and enqueues in batches with execute_after, with a QueueManager \
            worker whose entrypoint records the time.
            The enqueue ceiling: after Herald's side, its jobs' rows are copied again into a table like \
            `events` (its indexes), two binary COPYs at once with nothing else running — what PostgreSQL \
            alone does for the rows Herald must store — and compared with PgQueuer's enqueue.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var fresh: FreshDatabaseOption
    @Option(help: "Jobs.") var jobs = 20_000
    @Option(help: "Distinct users the notifications go to (each authorized first).") var users = 1_000
    @Option(help: "Seconds from the start of enqueueing to the due instant (default: enough for both to finish enqueueing).")
    var leadSeconds: Double?
    @Option(help: "The peer script.") var script = "scripts/bench-peer"
    @Option(help: "Jobs per PgQueuer enqueue call (one INSERT, one transaction): 1000 is its best case, 1 is a request handler enqueueing one job.")
    var peerBatch = 1000
    @OptionGroup var firingOptions: FiringOptions
    @OptionGroup var writer: WriterOptions
    @Flag(help: "Only Herald's side (no Python).") var skipPeer = false
    @Flag(help: "Print JSON instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve(fresh: fresh)
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_peer")
            let lead = leadSeconds ?? max(10, Double(jobs) / 2_000)

            // Herald.
            var herald: PeerResult!
            try withInProcessService(url: url, configure: { firingOptions.apply(to: &$0); writer.apply(to: &$0) }) { port in
                var load = IngestLoad()
                load.users = users; load.app = "com.example.jobs"
                Log.info("peer: authorizing \(users) users")
                try load.prepare(port: port)
                herald = try Self.heraldSide(port: port, url: url, jobs: jobs, users: users, app: load.app, lead: lead)
            }
            Log.info("peer: enqueue ceiling: Herald's enqueued jobs stored again by PostgreSQL alone")
            let ceiling = try StoreBenchmark.enqueueCeiling(databaseURL: url)

            // The peer, in the same run on the same cluster (its own scratch database).
            var peer: PeerResult?
            if !skipPeer {
                let peerURL = try scratchDatabase(location, name: "herald_bench_peer_pgqueuer", migrate: false)
                peer = try Self.peerSide(script: script, url: peerURL, jobs: jobs, lead: lead, batch: peerBatch)
            }

            var report = BenchReport("peer: \(Fmt.int(jobs)) jobs due at one instant (\(Int(lead)) s after enqueueing starts)")
            func rows(_ name: String, _ r: PeerResult, _ key: String) {
                report.row("\(name): enqueue (durably committed)", "\(Fmt.int(r.enqueuePerSecond)) jobs/s", r.enqueueNote,
                           key: key + "EnqueuePerSecond", value: .int(Int64(r.enqueuePerSecond)))
                report.row("\(name): due → processed p50 / p99 / max",
                           "\(Fmt.ms(r.p50)) / \(Fmt.ms(r.p99)) / \(Fmt.ms(r.max))", "\(Fmt.int(r.processed)) processed",
                           key: key + "P99Ms", value: Fmt.j(r.p99))
                report.json[key + "P50Ms"] = Fmt.j(r.p50)
                report.json[key + "MaxMs"] = Fmt.j(r.max)
                report.json[key + "Processed"] = .int(Int64(r.processed))
            }
            rows("Herald", herald, "herald")
            if let first = herald.first, case .object(let f) = herald.firing {
                func i(_ k: String) -> Int64 { f[k]?.intValue ?? 0 }
                report.row("  first line / firing: slices, engine, encoding", "\(Fmt.ms(first)) / \(i("sliceMs")), \(i("engineMs")), \(i("encodeMs")) ms",
                           "\(i("usersFired")) users in \(i("slices")) slices; first → last slice \(i("firstToLastSliceMs")) ms, "
                           + "first slice → last commit \(i("firstSliceToLastCommitMs")) ms", key: "heraldFirstMs", value: Fmt.j(first))
                report.row("  appends: count / rows / sent → committed", "\(i("appends")) / \(i("appendRows")) / \(i("appendMs")) ms",
                           "completions (wire lines, ring, consumers) \(i("completionMs")) ms of loop time")
                report.json["heraldFiring"] = herald.firing
            }
            if let cpu = herald.cpuMs {
                report.row("  CPU from due − 0.3 s to the last line: loop / backends / machine",
                           "\(Fmt.int(Int(cpu.loop))) / \(Fmt.int(Int(cpu.backends))) / \(Fmt.int(Int(cpu.machine))) ms",
                           "the writers' PostgreSQL backends; the machine's busy time (2 cores: twice the wall time at most)",
                           key: "heraldMachineCpuMs", value: Fmt.j(cpu.machine))
                report.json["heraldLoopCpuMs"] = Fmt.j(cpu.loop)
                report.json["heraldBackendsCpuMs"] = Fmt.j(cpu.backends)
            }
            report.row("Herald: enqueue ceiling: its \(Fmt.int(Int(ceiling.jobs))) jobs' rows, stored again by PostgreSQL alone", "\(Fmt.int(ceiling.jobsPerSecond)) jobs/s",
                       "two COPYs at once into a table like events (its indexes): what the stored rows allow",
                       key: "heraldEnqueueCeilingPerSecond", value: .int(Int64(ceiling.jobsPerSecond)))
            if let peer {
                rows(peer.name, peer, "peer")
                let enqueueRatio = herald.enqueuePerSecond / peer.enqueuePerSecond
                let latencyRatio = peer.p99 / max(0.001, herald.p99)
                report.row("ratio: enqueue, Herald / peer", Fmt.x(enqueueRatio), "target ≥ 5×", key: "enqueueRatio", value: Fmt.j(enqueueRatio))
                let ceilingRatio = ceiling.jobsPerSecond / peer.enqueuePerSecond
                report.row("ratio: enqueue ceiling / peer", Fmt.x(ceilingRatio), "PostgreSQL alone storing Herald's rows, against the peer",
                           key: "ceilingEnqueueRatio", value: Fmt.j(ceilingRatio))
                report.row("ratio: p99 latency, peer / Herald", Fmt.x(latencyRatio), "target ≥ 10× lower for Herald",
                           key: "latencyRatio", value: Fmt.j(latencyRatio))
            }
            report.print(asJSON: json)
        }
    }

    struct PeerResult {
        var name: String
        var enqueuePerSecond: Double
        var enqueueNote: String
        var p50: Double, p99: Double, max: Double
        var processed: Int
        /// Herald only: the first delivery line after the due instant, and the service's firing
        /// phases (`stats.firing`: slices, engine, encoding, appends), to see where p99 goes.
        var first: Double? = nil
        var firing: JSONValue = .null
        /// Herald only: CPU from 0.3 s before the due instant to the last line (ms).
        var cpuMs: (loop: Double, backends: Double, machine: Double)? = nil
    }

    /// Herald's side: pipelined deferred submits, then a consumer times each delivery line against the due instant.
    static func heraldSide(port: Int, url: String, jobs: Int, users: Int, app: String, lead: Double) throws -> PeerResult {
        let tap = try DeliveryTap(port: port, consumer: "bench-peer")
        let startWall = Date().timeIntervalSince1970
        let dueMs = Int64((startWall + lead) * 1000)
        let due = Instant(millisecondsSinceEpoch: dueMs).rfc3339
        var load = IngestLoad()
        load.producers = 8; load.window = 256; load.events = jobs
        let total = jobs / load.producers * load.producers
        Log.info("peer: Herald: \(total) deferred submits due at \(due)")
        // The same producers as `bench ingest` (a thread each, lines encoded before the clock starts).
        let r = try load.run(port: port, makeLine: { i in
            #"{"op":"submit","id":"job-\#(i)","app":"\#(app)","user":"user-\#(i % users)","title":"Invoice due","body":"Invoice #\#(i) is due today. Pay it in the app to avoid a late fee.","hiddenPreviewsBodyPlaceholder":"Billing","threadId":"billing","deliverAt":"\#(due)"}"#
        })
        let enqueueSeconds = r.seconds
        let enqueueDoneWall = Date().timeIntervalSince1970
        if enqueueDoneWall * 1000 > Double(dueMs) {
            Log.info("peer: warning: Herald's enqueue finished after the due instant; raise --lead-seconds")
        }
        // CPU spent from just before the due instant until the last line: the loop thread, the
        // writers' backends, and the whole machine (the bench's own consumer included).
        let sampleAt = Double(dueMs) / 1000 - 0.3
        let wait = sampleAt - Date().timeIntervalSince1970
        if wait > 0 { usleep(UInt32(wait * 1e6)) }
        let before = try IngestCosts.Sample(port: port, url: url)
        let machineBefore = BenchMachine.busyCPUSeconds()
        var latencies = Latencies()
        try tap.read(idleTimeoutMilliseconds: Int32(lead * 1000) + 120_000) { line in
            if line.contains(#""notification":"job-"#) {
                latencies.record(milliseconds: Date().timeIntervalSince1970 * 1000 - Double(dueMs))
            }
            return latencies.count < total
        }
        let machineAfter = BenchMachine.busyCPUSeconds()
        var after = try IngestCosts.Sample(port: port, url: url)
        try after.settleWALSyncs(url: url)
        let costs = IngestCosts(before: before, after: after, events: total)
        func pct(_ p: Double) -> Double { latencies.percentile(p) }
        let admin = try WireClient(port: port)
        _ = try admin.request(#"{"op":"hello"}"#)
        let stats = try admin.request(#"{"op":"stats"}"#)
        return PeerResult(name: "Herald", enqueuePerSecond: Double(total) / enqueueSeconds,
                          enqueueNote: "8 producers × 256 outstanding submits, each acked after COMMIT",
                          p50: pct(0.5), p99: pct(0.99), max: latencies.maximumMs, processed: latencies.count,
                          first: latencies.minimumMs, firing: stats["firing"] ?? .null,
                          cpuMs: (loop: costs.loopMilliseconds, backends: costs.backendMilliseconds,
                                  machine: (machineAfter - machineBefore) * 1000))
    }

    /// Runs the peer script and reads its one JSON line.
    static func peerSide(script: String, url: String, jobs: Int, lead: Double, batch: Int) throws -> PeerResult {
        guard FileManager.default.isExecutableFile(atPath: script) else {
            throw StoreError.configuration("\(script) not found or not executable (run from the repository root, or pass --script)")
        }
        let r = try BenchMachine.lastJSONLine(running: script, ["--dsn", url, "--jobs", String(jobs), "--lead-seconds", String(lead),
                                                                "--batch", String(batch)])
        return PeerResult(name: r["name"]?.stringValue ?? "peer", enqueuePerSecond: r["enqueuePerSecond"]?.doubleValue ?? 0,
                          enqueueNote: r["note"]?.stringValue ?? "",
                          p50: r["p50Ms"]?.doubleValue ?? 0, p99: r["p99Ms"]?.doubleValue ?? 0, max: r["maxMs"]?.doubleValue ?? 0,
                          processed: Int(r["processed"]?.intValue ?? 0))
    }
}
