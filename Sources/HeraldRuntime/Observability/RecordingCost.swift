// What metrics add to each request on the loop, measured alone (`herald bench metrics-cost`).
import CoreMetrics
import HeraldCore
import Prometheus

extension ServiceObservability {
    /// Nanoseconds per request, over `requests` submits on the calling thread: without `--http`
    /// (the reply's count alone); with it as it is (two clock reads and a sample into the op's
    /// plain-count histogram, `RequestMetrics`); and with the sample sent into a swift-prometheus
    /// histogram through swift-metrics' `Timer` instead (the alternative it replaced).
    public static func recordingCost(requests: Int) -> (without: Double, withHTTP: Double, withPrometheusHistogram: Double) {
        let registry = PrometheusCollectorRegistry()
        let histogram = registry.makeDurationHistogram(
            descriptor: MetricsPublisher.descriptor("herald_request_duration_seconds", "cost"), labels: [("op", "submit")],
            buckets: durationBuckets.map { .nanoseconds(Int64($0 * 1e9)) })
        let timer = CoreMetrics.Timer(label: "herald_request_duration_seconds", dimensions: [("op", "submit")], handler: histogram)
        func run(_ metrics: RequestMetrics, _ sample: ((Int64) -> Void)? = nil) -> Double {
            let t0 = RequestMetrics.nanoseconds()
            for _ in 0..<requests {
                let started = metrics.start()
                metrics.succeeded(.submit, startedAt: sample == nil ? started : 0)
                if let sample { sample(RequestMetrics.nanoseconds() - started) }
            }
            return Double(RequestMetrics.nanoseconds() - t0) / Double(requests)
        }
        let off = RequestMetrics()
        let on = RequestMetrics()
        on.timing = true
        let viaRegistry = RequestMetrics()
        viaRegistry.timing = true
        _ = run(off); _ = run(on); _ = run(viaRegistry) { timer.recordNanoseconds($0) }  // warm up
        return (run(off), run(on), run(viaRegistry) { timer.recordNanoseconds($0) })
    }
}
