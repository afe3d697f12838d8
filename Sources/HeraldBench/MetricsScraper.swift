// `bench ingest --http`: the service's metrics on, scraped every second while the load runs (what `serve --http` costs).
import Foundation
import HeraldClient
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
