// Plain counts read on the loop, published into a Prometheus registry when scraped: counters by their increase, gauges by value.
import Prometheus

/// Keeps the registry's counters and gauges by name and labels, so each scrape publishes what the
/// service counted since the last one. A count that went down (a writer connection's counters
/// restart after a reconnect) is taken as counting again from zero: the counter never decreases.
final class MetricsPublisher {
    let registry: PrometheusCollectorRegistry
    private var counters: [String: (counter: Counter, published: Int)] = [:]
    private var gauges: [String: Gauge] = [:]
    /// Gauges set during the current scrape (`forgetUnset` drops the others of a family).
    private var setThisScrape: Set<String> = []

    /// Labels every series gets (a cluster member's partition service: its `partition`), before
    /// its own; a series that names one of them itself keeps its own.
    var constantLabels: [(String, String)] = []

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    private func labelled(_ labels: [(String, String)]) -> [(String, String)] {
        guard !constantLabels.isEmpty else { return labels }
        return constantLabels.filter { c in !labels.contains { $0.0 == c.0 } } + labels
    }

    static func key(_ name: String, _ labels: [(String, String)]) -> String {
        labels.isEmpty ? name : name + "{" + labels.map { $0.0 + "=" + $0.1 }.joined(separator: ",") + "}"
    }

    static func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// A counter at `value` (the service's running total).
    func count(_ name: String, _ help: String, _ labels: [(String, String)] = [], _ value: Int) {
        let labels = labelled(labels)
        let key = Self.key(name, labels)
        var entry = counters[key] ?? (registry.makeCounter(descriptor: Self.descriptor(name, help), labels: labels), 0)
        let increase = value >= entry.published ? value - entry.published : value
        if increase > 0 { entry.counter.increment(by: Int64(increase)) }
        entry.published = value
        counters[key] = entry
    }

    /// A counter in seconds (a float total, e.g. CPU time).
    func countSeconds(_ name: String, _ help: String, _ labels: [(String, String)] = [], milliseconds: Int64) {
        let labels = labelled(labels)
        let key = Self.key(name, labels)
        var entry = counters[key] ?? (registry.makeCounter(descriptor: Self.descriptor(name, help), labels: labels), 0)
        let value = Int(milliseconds)
        let increase = value >= entry.published ? value - entry.published : value
        if increase > 0 { entry.counter.increment(by: Double(increase) / 1000) }
        entry.published = value
        counters[key] = entry
    }

    func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = [], _ value: Double) {
        let labels = labelled(labels)
        let key = Self.key(name, labels)
        let gauge = gauges[key] ?? registry.makeGauge(descriptor: Self.descriptor(name, help), labels: labels)
        gauges[key] = gauge
        gauge.set(value)
        setThisScrape.insert(key)
    }

    /// Starts a scrape.
    func beginScrape() { setThisScrape.removeAll(keepingCapacity: true) }

    /// Drops the gauges of family `name` not set in this scrape (a consumer that went away).
    func forgetUnset(_ name: String) {
        for (key, gauge) in gauges where key.hasPrefix(name + "{") && !setThisScrape.contains(key) {
            registry.unregisterGauge(gauge)
            gauges[key] = nil
        }
    }

    /// Drops every gauge this publisher set (a partition service that stopped: its state is
    /// another member's to show). Counters stay: they only ever grow.
    func forgetAllGauges() {
        for gauge in gauges.values { registry.unregisterGauge(gauge) }
        gauges.removeAll()
    }
}
