// `serve --instance --http`: a cluster member's /metrics (its own series and its partitions'), /healthz and /readyz.
import Foundation
import HeraldCore
import Prometheus

/// The HTTP side of a cluster member, on the member's loop. Each partition service publishes its
/// series into the member's registry every second from its own loop, labelled with its
/// `partition` (`ServiceObservability(memberPartition:)`), and its request durations into
/// `durations`; a scrape adds the member's own series (partitions held, the router's forwarding,
/// the process) and answers with the registry's exposition. A partition's series are at most a
/// second old; those of a partition handed over go with its service (its counters stay).
final class MemberObservability {
    let registry = PrometheusCollectorRegistry()
    let durations = MemberRequestDurations()
    private let publisher: MetricsPublisher
    private var endpoint: HTTPEndpoint?
    private let startedAt = Double(WheelDriver.systemNow().millisecondsSinceEpoch) / 1000
    /// The member's state when scraped.
    struct State {
        var held = 0, partitions = 0
        /// Partitions without a live owner in the member's view.
        var unowned = 0
        /// Client connections on the router; requests it forwarded, of them to other members, and
        /// requests waiting for an owner.
        var connections = 0, forwarded = 0, forwardedRemote = 0, parked = 0
        var stopping = false
    }
    var state: () -> State = { State() }

    init() { publisher = MetricsPublisher(registry: registry) }

    /// Serves HTTP on `host:port` on `loop`; returns the bound port.
    @discardableResult
    func start(loop: EventLoop, host: String, port: Int) throws(ServiceError) -> Int {
        let endpoint = try HTTPEndpoint(loop: loop, host: host, port: port) { [unowned self] path in self.answer(path) }
        self.endpoint = endpoint
        return endpoint.port
    }

    func stop() { endpoint = nil }

    func answer(_ path: String) -> HTTPEndpoint.Response {
        .herald(path, metrics: {
            publish()
            return registry.emitToBuffer() + Array(durations.exposition().utf8)
        }, notReady: {
            let s = state()
            if s.partitions == 0 { return "starting" }
            if s.stopping { return "stopping (goodbye sent to every connection)" }
            if s.unowned > 0 { return "\(s.unowned) of \(s.partitions) partitions have no live owner yet" }
            return nil
        })
    }

    private func publish() {
        let s = state()
        let p = publisher
        p.beginScrape()
        p.gauge("herald_build_info", "Always 1; the version of this Herald.", [("version", HeraldVersion.number)], 1)
        p.gauge("herald_partitions", "P: the database's number of partitions.", [], Double(s.partitions))
        p.gauge("herald_partitions_owned", "Partitions this instance holds the lease of.", [], Double(s.held))
        p.gauge("herald_partitions_unowned", "Partitions without a live owner in this member's view (a takeover under way).", [], Double(s.unowned))
        p.gauge("herald_router_connections_open", "Client connections open on this member's router.", [], Double(s.connections))
        p.count("herald_router_forwarded_total", "Requests the router sent to a partition's service (its own or another member's).", [], s.forwarded)
        p.count("herald_router_forwarded_remote_total", "Requests the router sent to another member.", [], s.forwardedRemote)
        p.gauge("herald_router_parked", "Requests waiting for their partition to have an owner.", [], Double(s.parked))
        ProcessMetrics.publish(into: p, startedAt: startedAt)
    }
}

/// The request-duration counts of a member's partition services, summed for its scrape. Each
/// service incarnation reports its running totals; when a partition's service is replaced (the
/// partition came back), the previous one's last totals are kept, so the sums never go down.
final class MemberRequestDurations: @unchecked Sendable {
    // Why @unchecked Sendable: every field is touched only while holding `lock`.
    private let lock = NSLock()
    private var current: [Int: (incarnation: ObjectIdentifier, counts: [Int], sums: [Int64])] = [:]
    private var past: (counts: [Int], sums: [Int64]) = ([], [])

    func update(partition: Int, incarnation: ObjectIdentifier, counts: [Int], sums: [Int64]) {
        lock.withLock {
            if let previous = current[partition], previous.incarnation != incarnation {
                past = (Self.add(past.counts, previous.counts), Self.add(past.sums, previous.sums))
            }
            current[partition] = (incarnation, counts, sums)
        }
    }

    func exposition() -> String {
        let (counts, sums) = lock.withLock {
            current.values.reduce(past) { (Self.add($0.counts, $1.counts), Self.add($0.sums, $1.sums)) }
        }
        return counts.isEmpty ? "" : RequestMetrics.durationExposition(counts: counts, sums: sums)
    }

    private static func add<T: AdditiveArithmetic>(_ a: [T], _ b: [T]) -> [T] {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        return zip(a, b).map { $0 + $1 }
    }
}
