// `bench ingest --http`: the service's metrics on, scraped every second while the load runs (what `serve --http` costs).
import ArgumentParser
import Foundation
import HeraldWireTesting
import HeraldRuntime

/// GETs /metrics on `port` every `intervalSeconds` on a thread of its own until `stop()`.
final class MetricsScraper: @unchecked Sendable {
    private let port: Int
    private let intervalSeconds: Double
    private let done = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private(set) var scrapes = 0
    private(set) var bytes = 0

    init(port: Int, intervalSeconds: Double = 1) {
        self.port = port
        self.intervalSeconds = intervalSeconds
        Thread { [self] in
            while done.wait(timeout: .now() + intervalSeconds) == .timedOut {
                if let r = try? HTTPProbe.get(host: "127.0.0.1", port: port, path: "/metrics"), r.status == 200 {
                    scrapes += 1
                    bytes = r.body.utf8.count
                }
            }
            finished.signal()
        }.start()
    }

    func stop() {
        done.signal()
        finished.wait()
    }
}

/// `herald bench metrics-cost`: the nanoseconds `serve --http` adds to each request on the loop.
struct MetricsCostBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics-cost",
        abstract: "What metrics (serve --http) add to each request on the loop: clock reads, counts and a histogram sample, timed alone.")
    @Option(help: "Requests timed.") var requests = 5_000_000
    @Option(help: "Rounds (the median is reported).") var rounds = 5

    func run() throws {
        var on: [Double] = [], off: [Double] = [], registry: [Double] = []
        for _ in 0..<rounds {
            let r = ServiceObservability.recordingCost(requests: requests)
            on.append(r.withHTTP)
            off.append(r.without)
            registry.append(r.withPrometheusHistogram)
        }
        let median = { (v: [Double]) in v.sorted()[v.count / 2] }
        print(String(format: "per request: %.1f ns without --http (the count alone); %.1f ns with it (+%.1f ns); "
                     + "%.1f ns (+%.1f ns) if the duration went into a swift-prometheus histogram instead",
                     median(off), median(on), median(on) - median(off), median(registry), median(registry) - median(off)))
    }
}
