// `herald bench ingest`: pipelined submits over TCP to a real service, acked after COMMIT, beside COPY of the same rows.
import ArgumentParser
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport

struct IngestBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Producers pipelining submits over TCP to an in-process herald serve (acks after COMMIT), beside COPY of the same rows.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Submits in all.") var events = 100_000
    @Option(help: "Producer connections.") var producers = 8
    @Option(help: "Outstanding submits per producer.") var window = 256
    @Option(help: "Distinct users (each authorized first).") var users = 10_000
    @Flag(help: "Print JSON instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_ingest")
            var load = IngestLoad()
            load.events = events; load.producers = producers; load.window = window; load.users = users
            let r = try withInProcessService(url: url) { port in
                Log.info("authorizing \(users) users")
                try load.prepare(port: port)
                Log.info("ingest: \(events) submits, \(producers) producers × \(window) outstanding")
                return try load.run(port: port, progress: { n in Log.info("ingest: \(n)/\(events) acked") })
            }
            Log.info("COPY baselines: \(events) rows")
            let copy = try StoreBenchmark.copyBaselines(databaseURL: url, rows: load.rows())
            let ratio = r.acksPerSecond / copy.plain, ratioIndexed = r.acksPerSecond / copy.indexed
            if json {
                print(JSONValue.object([
                    "acksPerSecond": .int(Int64(r.acksPerSecond)), "ackP50Ms": .double(r.percentile(0.5)),
                    "ackP99Ms": .double(r.percentile(0.99)), "ackP999Ms": .double(r.percentile(0.999)),
                    "copyRowsPerSecond": .int(Int64(copy.plain)), "copyIndexedRowsPerSecond": .int(Int64(copy.indexed)),
                    "ratio": .double((ratio * 100).rounded() / 100), "ratioIndexed": .double((ratioIndexed * 100).rounded() / 100),
                ]).canonicalString)
            } else {
                print("ingest over TCP: \(events) submits of ~300 B to \(users) users, \(producers) producers × \(window) outstanding")
                print("  herald serve, acked after COMMIT   \(Int(r.acksPerSecond)) submits/s   ack p50 "
                      + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms", r.percentile(0.5), r.percentile(0.99), r.percentile(0.999)))
                print("  baseline: one COPY, no indexes    \(Int(copy.plain)) rows/s   ratio " + String(format: "%.2f×", ratio))
                print("  reference: COPY with the log's indexes  \(Int(copy.indexed)) rows/s   ratio " + String(format: "%.2f×", ratioIndexed))
            }
        }
    }
}

struct LatencyBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency",
        abstract: "Submit → delivery line at a subscribed consumer, at a fixed offered load, through an in-process herald serve.")

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Submits in all.") var events = 20_000
    @Option(help: "Offered load, submits per second (default: about half the measured ingest maximum).") var rate = 4_000.0
    @Option(help: "Distinct users (each authorized first).") var users = 10_000
    @Flag(help: "Print JSON instead of a table.") var json = false

    func run() throws {
        try reportingErrors {
            let location = try database.resolve()
            defer { location.close() }
            let url = try scratchDatabase(location, name: "herald_bench_latency")
            var load = LatencyLoad()
            load.events = events; load.ratePerSecond = rate; load.ingest.users = users
            let r = try withInProcessService(url: url) { port in
                Log.info("authorizing \(users) users")
                try load.ingest.prepare(port: port)
                Log.info("latency: \(events) submits at \(Int(rate))/s with a consumer subscribed")
                return try load.run(port: port)
            }
            if json {
                print(JSONValue.object([
                    "offeredPerSecond": .double(rate), "delivered": .int(Int64(r.delivered)),
                    "p50Ms": .double(r.percentile(0.5)), "p99Ms": .double(r.percentile(0.99)), "p999Ms": .double(r.percentile(0.999)),
                ]).canonicalString)
            } else {
                print("end to end: \(events) submits at \(Int(rate))/s offered, one consumer at the tail")
                print("  submit → delivery line   p50 " + String(format: "%.1f ms, p99 %.1f ms, p99.9 %.1f ms, max %.1f ms",
                      r.percentile(0.5), r.percentile(0.99), r.percentile(0.999), r.latenciesMs.last ?? 0))
            }
        }
    }
}

/// Runs `body` with the port of a `herald serve` started in this process on `url` (its loop on its
/// own thread, this thread free to generate load), then stops the service gracefully.
/// `configure` adjusts the configuration (e.g. a manual clock); `started` gets the seconds
/// `start()` took (connect, migrate, restore the log, listen).
func withInProcessService<T>(url: String, configure: (inout ServiceConfiguration) -> Void = { _ in },
                             started: (Double) -> Void = { _ in }, _ body: (Int) throws -> T) throws -> T {
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
    // From here the service is touched only by its loop thread (requestShutdown is thread-safe).
    nonisolated(unsafe) let loopService = service
    let stopped = DispatchSemaphore(value: 0)
    Thread { loopService.run(); stopped.signal() }.start()
    defer {
        service.requestShutdown()
        _ = stopped.wait(timeout: .now() + 30)
    }
    return try body(port)
}
