// `--http`: /metrics (Prometheus text), /healthz and /readyz, served on the service's own loop.
import CoreMetrics
import Glibc
import HeraldCore
import HeraldStore
import Prometheus

/// The service's HTTP side. Everything runs on the service's loop: an answer to `/healthz` shows
/// that the loop turns. The hot path only adds to plain integers (`RequestMetrics`, the
/// service's own counters) and records into a few histograms; `/metrics` reads the rest from
/// the service's state when scraped and publishes it into the Prometheus registry
/// (`MetricsPublisher`), whose text exposition is the answer.
public final class ServiceObservability {
    unowned let service: HeraldService
    public let registry: PrometheusCollectorRegistry
    /// swift-metrics' view of the registry (its `Timer` and `Recorder` write its histograms).
    public let factory: PrometheusMetricsFactory
    private let publisher: MetricsPublisher
    private var endpoint: HTTPEndpoint?
    private var loopProbe: LoopEvent?
    private var loopProbeArmedAt: Int64 = 0
    private var loopLagSeconds = 0.0
    /// The latest completed snapshot's time (seconds since 1970) found at start-up.
    private var snapshotAtStart: Double?
    private let startedAt = Double(WheelDriver.systemNow().millisecondsSinceEpoch) / 1000

    /// COMMIT durations' buckets, in seconds (the requests' own: `RequestMetrics.bucketBounds`).
    static let durationBuckets: [Double] = RequestMetrics.bucketBounds
    /// Rows per committed transaction.
    static let batchBuckets: [Double] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]

    /// A cluster member's partition service: its series carry `partition`, and the member serves
    /// them with its own (`MemberObservability`); what is the process's or the member's is left to it.
    let ofMemberPartition: Bool
    private var publishTimer: LoopEvent?

    public init(service: HeraldService, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.service = service
        self.registry = registry
        self.factory = PrometheusMetricsFactory(registry: registry)
        self.publisher = MetricsPublisher(registry: registry)
        ofMemberPartition = false
    }

    /// A cluster member's partition service publishing into the member's `registry`.
    init(memberPartition service: HeraldService, registry: PrometheusCollectorRegistry) {
        self.service = service
        self.registry = registry
        self.factory = PrometheusMetricsFactory(registry: registry)
        self.publisher = MetricsPublisher(registry: registry)
        publisher.constantLabels = [("partition", String(service.partition))]
        ofMemberPartition = true
    }

    /// A member's partition service (on its loop, after `service.start()`): publishes its state
    /// into the member's registry every `milliseconds`, and its request durations into
    /// `durations`, so that the member's scrape, on another thread, reads them from there.
    func startPublishing(everyMilliseconds milliseconds: Int64, durations: MemberRequestDurations) {
        installRecorders()
        loopProbe = service.loop.timer { [unowned self] in self.loopProbed() }
        armLoopProbe()
        let incarnation = ObjectIdentifier(self)
        let partition = service.partition
        publishTimer = service.loop.timer { [unowned self] in
            self.publish()
            durations.update(partition: partition, incarnation: incarnation,
                             counts: self.service.requestMetrics.durationCounts, sums: self.service.requestMetrics.durationSums)
            self.publishTimer?.arm(afterMilliseconds: milliseconds)
        }
        publishTimer?.arm(afterMilliseconds: 0)
    }

    /// Starts serving HTTP on `host:port` (after `service.start()`: the service's state is
    /// restored and its loop about to run). Returns the bound port.
    @discardableResult
    public func start(host: String, port: Int) throws(ServiceError) -> Int {
        snapshotAtStart = Self.latestSnapshotTime(service.configuration.databaseURL)
        installRecorders()
        let endpoint = try HTTPEndpoint(loop: service.loop, host: host, port: port) { [unowned self] path in self.answer(path) }
        self.endpoint = endpoint
        loopProbe = service.loop.timer { [unowned self] in self.loopProbed() }
        armLoopProbe()
        service.log("HTTP on \(host):\(endpoint.port): /metrics, /healthz, /readyz")
        return endpoint.port
    }

    /// Stops serving HTTP (before the loop goes). A member's partition service also takes its
    /// gauges away: the partition's state is its next owner's to show.
    public func stop() {
        endpoint = nil
        loopProbe = nil
        publishTimer = nil
        if ofMemberPartition { publisher.forgetAllGauges() }
    }

    // MARK: Answers

    func answer(_ path: String) -> HTTPEndpoint.Response {
        .herald(path, metrics: metricsText, notReady: notReady)
    }

    /// Why the service is not ready for requests, or nil when it is: start-up's restore is done
    /// (it precedes the HTTP server), it is not stopping, and PostgreSQL's writer is connected.
    func notReady() -> String? {
        if !service.lifecycle.isServing { return "stopping (goodbye sent to every connection)" }
        if service.lease.epoch == nil { return "does not hold its partition's lease (another instance took it over)" }
        if !service.store.isReady { return "PostgreSQL is unreachable; reconnecting" }
        if service.appendsInFlight.unknownCommitSince != nil { return "reading back appends of unknown outcome after a reconnect" }
        return nil
    }

    // MARK: Hot-path recorders

    private func installRecorders() {
        service.requestMetrics.timing = true
        for (writer, links) in [("events", [service.store]), ("deliveries", service.deliveryStores)] {
            let rows = registry.makeValueHistogram(
                descriptor: MetricsPublisher.descriptor("herald_commit_batch_rows", "Rows (events, deliveries, consumer acks) per committed transaction, by writer connection."),
                labels: [("writer", writer)], buckets: Self.batchBuckets)
            let seconds = registry.makeDurationHistogram(
                descriptor: MetricsPublisher.descriptor("herald_commit_duration_seconds", "Seconds from sending a transaction's COMMIT to its outcome (bound by PostgreSQL's WAL flush), by writer connection."),
                labels: [("writer", writer)], buckets: Self.durationBuckets.map { .nanoseconds(Int64($0 * 1e9)) })
            let rowsRecorder = CoreMetrics.Recorder(label: "herald_commit_batch_rows", dimensions: [("writer", writer)], aggregate: true, handler: rows)
            let timer = CoreMetrics.Timer(label: "herald_commit_duration_seconds", dimensions: [("writer", writer)], handler: seconds)
            for link in links {
                link.onCommitted = { _, rowCount, nanoseconds in
                    rowsRecorder.record(rowCount)
                    timer.recordNanoseconds(nanoseconds)
                }
            }
        }
    }

    // MARK: The loop's lag

    static let loopProbeMilliseconds: Int64 = 1_000

    private func armLoopProbe() {
        loopProbeArmedAt = RequestMetrics.nanoseconds()
        loopProbe?.arm(afterMilliseconds: Self.loopProbeMilliseconds)
    }

    /// How much later than asked the probe ran: the time the loop was busy past its turn.
    private func loopProbed() {
        let late = RequestMetrics.nanoseconds() - loopProbeArmedAt - Self.loopProbeMilliseconds * 1_000_000
        loopLagSeconds = Double(max(0, late)) / 1e9
        armLoopProbe()
    }

    // MARK: /metrics

    /// The registry's exposition, then the request durations' histogram, which the loop keeps in
    /// plain counts (`RequestMetrics`) and Herald writes out itself.
    func metricsText() -> [UInt8] {
        publish()
        var text = registry.emitToBuffer()
        text += Array(service.requestMetrics.durationExposition().utf8)
        return text
    }

    /// Reads the service's counts and state into the registry.
    func publish() {
        let s = service
        let p = publisher
        p.beginScrape()
        if !ofMemberPartition {
            p.gauge("herald_build_info", "Always 1; the version of this Herald.", [("version", HeraldVersion.number)], 1)
        }
        p.gauge("herald_ready", "1 while /readyz answers ready (restored, not stopping, PostgreSQL connected), else 0.", [], notReady() == nil ? 1 : 0)

        // Requests.
        for op in Op.allCases where s.requestMetrics.replies[Int(op.rawValue)] > 0 {
            p.count("herald_requests_total", "Requests answered, by op (errors included). Hello and ping, answered by the session, are not counted.",
                    [("op", op.name)], s.requestMetrics.replies[Int(op.rawValue)])
        }
        for (key, n) in s.requestMetrics.errors {
            p.count("herald_request_errors_total", "Error replies, by op and error code (docs/protocol.md).", [("op", key.op.name), ("code", key.code)], n)
        }
        p.count("herald_hellos_refused_total", "Hellos refused (a wrong, missing or revoked token): token guessing shows here.", [], s.connections.hellosRefused)
        p.count("herald_events_appended_total", "Events committed to the log.", [], s.eventsCommitted)
        p.count("herald_deliveries_appended_total", "Deliveries (decisions) committed.", [], s.deliveriesCommitted)

        // Connections.
        var byRole: [String: Int] = ["none": 0]
        for role in Role.allCases { byRole[role.rawValue] = 0 }
        for c in s.connections.open.values {
            guard let grant = c.session.grant else { byRole["none", default: 0] += 1; continue }
            for role in grant.roles { byRole[role.rawValue, default: 0] += 1 }
        }
        for (role, n) in byRole.sorted(by: { $0.key < $1.key }) {
            p.gauge("herald_connections", "Open client connections, by role of their grant (none: before hello; a connection with several roles counts in each).",
                    [("role", role)], Double(n))
        }
        p.gauge("herald_connections_open", "Open client connections (each once).", [], Double(s.connections.count))
        p.gauge("herald_connection_limit", "Connections served at most (--max-connections, bounded by the open-file limit).", [], Double(s.connections.limit))
        p.count("herald_connections_evicted_total", "Connections without hello closed to make room at the connection limit.", [], s.connections.evictedBeforeHello)
        p.count("herald_accept_failures_total", "Times accept() failed (out of file descriptors or memory).", [],
                (s.listener?.acceptFailures ?? 0) + (s.plaintextListener?.acceptFailures ?? 0))

        // Time: the wheel and the loop.
        let now = s.now()
        p.gauge("herald_timers_pending", "Timers in the wheel (deferred, expiring, summary and Focus wake-ups).", [], Double(s.timers.wheel.count))
        var oldestDue: Instant? = s.dueUsers.first?.horizon
        if let next = s.timers.wheel.nextDeadline, next <= now { oldestDue = min(oldestDue ?? next, next) }
        let lag = oldestDue.map { max(0, now.millisecondsSinceEpoch - $0.millisecondsSinceEpoch) } ?? 0
        p.gauge("herald_timer_wheel_lag_seconds", "How far engine time is past the oldest due timer not yet fired (0: the wheel keeps up).", [], Double(lag) / 1000)
        p.gauge("herald_loop_lag_seconds", "How late the loop ran a 1 s timer at its last turn: time spent busy past its turn.", [], loopLagSeconds)
        p.countSeconds("herald_loop_cpu_seconds_total", "CPU time of the service's loop thread.", milliseconds: HeraldService.threadCPUMilliseconds())

        // Consumers.
        p.gauge("herald_consumers", "Consumers subscribed now.", [], Double(s.consumers.count))
        p.gauge("herald_delivery_head", "The cursor of the newest committed delivery.", [], Double(s.deliveryHead))
        for (name, stream) in s.consumers.streams {
            p.gauge("herald_consumer_lag_deliveries", "Committed deliveries not yet sent to a subscribed consumer (the delivery head less its position), by consumer.",
                    [("consumer", name)], Double(max(0, s.deliveryHead - stream.position)))
        }
        p.forgetUnset("herald_consumer_lag_deliveries")
        p.gauge("herald_consumer_queued_bytes_max", "The most output bytes queued in the server for one consumer.", [], Double(s.consumers.maxQueuedBytes))

        // The store.
        for (writer, links) in [("events", [s.store]), ("deliveries", s.deliveryStores)] {
            p.count("herald_store_reconnects_total", "Times a writer connection to PostgreSQL was lost and connected again, by writer.",
                    [("writer", writer)], links.reduce(0) { $0 + $1.reconnects })
            p.count("herald_store_disconnects_total", "Times a writer connection to PostgreSQL was lost, by writer.",
                    [("writer", writer)], links.reduce(0) { $0 + $1.disconnects })
            p.count("herald_store_transactions_total", "Transactions committed, by writer.", [("writer", writer)],
                    links.reduce(0) { $0 + ($1.writer?.transactionsCommitted ?? 0) })
        }
        p.gauge("herald_store_connected", "1 while the events writer's connection to PostgreSQL is up.", [], s.store.isReady ? 1 : 0)
        if !ofMemberPartition {
            p.gauge("herald_instance_lock_held", "1 while this service holds the database's instance lock (0: a second serve could start on it).", [],
                    s.instanceLockMissing ? 0 : 1)
            p.gauge("herald_partitions", "P: the database's number of partitions.", [], Double(s.partitioning.count))
            p.gauge("herald_partitions_owned", "Partitions this instance holds the lease of.", [], s.lease.epoch == nil ? 0 : 1)
        }

        // The lease (SPEC §9).
        p.gauge("herald_lease_epoch", "The epoch of the lease this instance holds, by partition (0: none).", [("partition", String(s.partition))],
                Double(s.lease.epoch ?? 0))
        p.count("herald_lease_renewals_total", "Lease renewals that committed.", [], s.leaseRenewals)
        p.count("herald_lease_renewal_failures_total", "Lease renewals that could not reach PostgreSQL (the lease is kept: appends stay fenced by the epoch).", [],
                s.leaseRenewalFailures)

        // Snapshots.
        let writer = s.restart.writer
        p.count("herald_snapshots_written_total", "Snapshots of every user's state completed by this process.", [], writer?.completed ?? 0)
        p.count("herald_snapshot_failures_total", "Snapshots this process gave up (start-up folds from the previous one).", [], writer?.failed ?? 0)
        p.gauge("herald_events_since_snapshot", "Events committed since the last snapshot began: what a restart folds on top of it.", [],
                Double(max(0, s.eventsCommitted - s.restart.eventsAtLastSnapshot)))
        if let last = writer?.lastCompletedAt ?? snapshotAtStart {
            p.gauge("herald_snapshot_last_completed_timestamp_seconds", "When the latest snapshot completed (seconds since 1970).", [], last)
            p.gauge("herald_snapshot_age_seconds", "Seconds since the latest snapshot completed.", [],
                    max(0, Double(WheelDriver.systemNow().millisecondsSinceEpoch) / 1000 - last))
        }

        // Users and memory.
        p.gauge("herald_users", "Users with state in memory.", [], Double(s.users.count))
        p.gauge("herald_delivery_ring_bytes", "Bytes of recent delivery lines kept in memory for consumers.", [], Double(s.ring.bytes))
        guard !ofMemberPartition else { return }
        p.count("herald_token_reloads_total", "Tokens file reloads on SIGHUP, by result.", [("result", "ok")], s.credentials.tokenReloads)
        p.count("herald_token_reloads_total", "Tokens file reloads on SIGHUP, by result.", [("result", "failed")], s.credentials.tokenReloadFailures)
        ProcessMetrics.publish(into: p, startedAt: startedAt)
    }

    /// The latest completed snapshot's time in the database, read once at start (nil: none, or unreadable).
    static func latestSnapshotTime(_ url: String) -> Double? {
        guard let conn = try? PGConnection.connect(url) else { return nil }
        defer { conn.close() }
        guard let r = try? conn.execute("SELECT extract(epoch FROM max(completed_at))::float8 FROM snapshots"),
              let text = r.string(0, 0) else { return nil }
        return Double(text)
    }
}
