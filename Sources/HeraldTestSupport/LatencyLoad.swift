// A paced load with a subscribed consumer: latency from each submit's send to its delivery line at the consumer.
import Foundation
import HeraldCore
import HeraldStore
import Synchronization

/// The end-to-end scenario of `herald bench latency`: one producer sends submits at a fixed
/// offered rate (not as fast as it can), a consumer is subscribed at the tail, and each
/// notification's latency is the time from its send to its delivery line arriving.
public struct LatencyLoad: Sendable {
    public var events = 20_000
    public var ratePerSecond = 4_000.0
    /// The sender wakes every this many microseconds and writes every submit due by then in one
    /// `write`, each timed from its due time, so a submit that waited for its tick counts the wait
    /// (0: one sleep and one `write` per submit, each timed from its send).
    public var tickMicroseconds = 0
    public var ingest = IngestLoad()

    public init() { ingest.idPrefix = "lat" }

    public struct Result: Sendable {
        public var delivered: Int
        public var seconds: Double
        /// Send → delivery line at the consumer of each submit.
        public var latencies: Latencies
        /// Send → acknowledgement (after COMMIT) of each submit: the targets' "ack latency".
        public var ackLatencies: Latencies
        public func percentile(_ p: Double) -> Double { latencies.percentile(p) }
        public func ackPercentile(_ p: Double) -> Double { ackLatencies.percentile(p) }
    }

    public func run(port: Int) throws -> Result {
        // The consumer scans lines in place (`WireClient.readLine` + a JSON parse per line would add
        // the generator's own parsing to every latency measured).
        let consumer = try DeliveryTap(port: port, consumer: "bench-latency")
        let producer = try WireClient(port: port)
        _ = try producer.request(#"{"op":"hello"}"#)
        let lines = (0..<events).map { Array((ingest.line($0) + "\n").utf8) }

        let started = IngestLoad.monotonicNanoseconds()
        let sendTimes = Mutex([UInt64](repeating: 0, count: events))
        let failure = Mutex<String?>(nil)
        let ackLatencies = Mutex<Latencies?>(nil)
        let ackReader = Thread {
            // Replies come in request order: the i-th line answers the i-th submit.
            var acks = Latencies()
            do {
                for i in 0..<events {
                    _ = try producer.readLine(timeoutMilliseconds: 60_000)
                    let now = IngestLoad.monotonicNanoseconds()
                    acks.record(from: sendTimes.withLock { $0[i] }, to: now)
                }
            } catch { failure.withLock { $0 = "acks: \(error)" } }
            ackLatencies.withLock { $0 = acks }
        }
        ackReader.start()
        let tick = UInt64(max(0, tickMicroseconds)) * 1000
        let sender = Thread {
            func due(_ i: Int) -> UInt64 { started + UInt64(Double(i) / ratePerSecond * 1e9) }
            do {
                if tick == 0 {
                    for i in 0..<events {
                        let now = IngestLoad.monotonicNanoseconds()
                        if due(i) > now { usleep(UInt32((due(i) - now) / 1000)) }
                        sendTimes.withLock { $0[i] = IngestLoad.monotonicNanoseconds() }
                        try producer.sendRaw(lines[i])
                    }
                } else {
                    // Wake at the next tick boundary, then send everything due by now in one write.
                    var next = 0
                    var batch: [UInt8] = []
                    while next < events {
                        let now = IngestLoad.monotonicNanoseconds()
                        let wake = max(due(next), started + ((now - started) / tick + 1) * tick)
                        if due(next) > now { usleep(UInt32((wake - now) / 1000)) }
                        let sendAt = IngestLoad.monotonicNanoseconds()
                        batch.removeAll(keepingCapacity: true)
                        let first = next
                        while next < events, due(next) <= sendAt { batch += lines[next]; next += 1 }
                        sendTimes.withLock { for i in first..<next { $0[i] = due(i) } }
                        try producer.sendRaw(batch)
                    }
                }
            } catch { failure.withLock { $0 = "send: \(error)" } }
        }
        sender.start()

        var latencies = Latencies()
        let key: StaticString = "\"notification\":\"lat-"
        try consumer.read(idleTimeoutMilliseconds: 60_000) { line in
            let now = IngestLoad.monotonicNanoseconds()
            guard let i = line.intAfter(key), i < events else { return true }
            let sent = sendTimes.withLock { $0[i] }
            latencies.record(from: sent, to: now)
            return latencies.count < events
        }
        let seconds = Double(IngestLoad.monotonicNanoseconds() - started) / 1e9
        // Every delivery line follows its ack's COMMIT, so the acks are all read by now or soon.
        while ackLatencies.withLock({ $0 == nil }) && failure.withLock({ $0 }) == nil { usleep(1_000) }
        if let f = failure.withLock({ $0 }) { throw WireClient.Failure.io(f) }
        return Result(delivered: latencies.count, seconds: seconds, latencies: latencies,
                      ackLatencies: ackLatencies.withLock { $0 } ?? Latencies())
    }
}

extension LatencyLoad {
    /// The physical floor of an acknowledgement, measured beside Herald in the same run: one
    /// connection commits one `line`-sized row per transaction (autocommit `INSERT` into a table
    /// with a primary key, `synchronous_commit` as configured) at the same offered rate. Each
    /// latency runs from the transaction's due time to its COMMIT's reply, so a commit that is late
    /// because the previous one was slow counts its wait (as `pgbench --rate` does). The latencies
    /// and the rate reached: one connection commits one row at a time, so above a few thousand
    /// per second it falls behind and its latencies become queueing.
    public func commitBaseline(databaseURL: String, count: Int) throws -> (latencies: Latencies, reachedPerSecond: Double) {
        let conn = try PGConnection.connect(databaseURL)
        defer { conn.close() }
        try conn.execute("DROP TABLE IF EXISTS bench_latency_baseline")
        try conn.execute("CREATE TABLE bench_latency_baseline (id bigint PRIMARY KEY, body text NOT NULL)")
        var latencies = Latencies()
        let started = IngestLoad.monotonicNanoseconds()
        for i in 0..<count {
            let due = started + UInt64(Double(i) / ratePerSecond * 1e9)
            let now = IngestLoad.monotonicNanoseconds()
            if due > now { usleep(UInt32((due - now) / 1000)) }
            try conn.execute("INSERT INTO bench_latency_baseline (id, body) VALUES ($1, $2)", [String(i), ingest.line(i)])
            latencies.record(from: due, to: IngestLoad.monotonicNanoseconds())
        }
        let seconds = Double(IngestLoad.monotonicNanoseconds() - started) / 1e9
        try conn.execute("DROP TABLE bench_latency_baseline")
        return (latencies, Double(count) / seconds)
    }
}

extension LatencyLoad {
    /// What PostgreSQL alone does with this run's group commit, measured beside Herald in the same
    /// run (after it stopped): the run's first `count` submit events and their deliveries, read
    /// back as binary COPY data, stored again in transactions of `submitsPerTransaction` submits
    /// (`BEGIN; COPY` the events`; COPY` the deliveries`; COMMIT` in two queries, into tables
    /// `LIKE` Herald's, indexes included) on one connection, at the same offered rate. A transaction is sent when
    /// its last submit is due (or when the one before it commits, if later); each submit's latency
    /// runs from its own due time to its transaction's commit — Herald's ack latency with a perfect
    /// group commit and no service in between. The latencies and the submits per second reached.
    public func groupCommitReference(databaseURL: String, submitsPerTransaction: Int, count: Int) throws
        -> (latencies: Latencies, reachedPerSecond: Double) {
        let conn = try PGConnection.connect(databaseURL)
        defer { conn.close() }
        let prefix = ingest.idPrefix + "-"
        let k = max(1, submitsPerTransaction)
        let events = try conn.copyOutData("COPY (SELECT \(EventCopy.columns) FROM events WHERE type = 'submit' AND notification_id LIKE '\(prefix)%' ORDER BY seq LIMIT \(count)) TO STDOUT (FORMAT binary)")
        let deliveries = try conn.copyOutData("COPY (SELECT \(DeliveryCopy.columns) FROM deliveries WHERE kind = 'alert' AND notification_id LIKE '\(prefix)%' ORDER BY cursor LIMIT \(count)) TO STDOUT (FORMAT binary)")
        guard let eventBatches = BinaryCopyBatches.split(events, rowsPerBatch: k),
              let deliveryBatches = BinaryCopyBatches.split(deliveries, rowsPerBatch: k) else {
            throw StoreError.unavailable("the run's rows did not read back as binary COPY data")
        }
        for table in ["events", "deliveries"] {
            try conn.execute("DROP TABLE IF EXISTS bench_reference_\(table)")
            try conn.execute("CREATE TABLE bench_reference_\(table) (LIKE \(table) INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)")
        }
        defer { for table in ["events", "deliveries"] { _ = try? conn.execute("DROP TABLE IF EXISTS bench_reference_\(table)") } }
        var latencies = Latencies()
        let started = IngestLoad.monotonicNanoseconds()
        func due(_ i: Int) -> UInt64 { started + UInt64(Double(i) / ratePerSecond * 1e9) }
        var sent = 0
        for (b, batch) in eventBatches.enumerated() {
            let rows = batch.rows
            let last = due(sent + rows - 1), now = IngestLoad.monotonicNanoseconds()
            if last > now { usleep(UInt32((last - now) / 1000)) }
            // Two simple queries, each answered with its COPY_IN: BEGIN and the events' COPY, then
            // the deliveries' COPY and COMMIT (Herald puts both COPYs in one query: a round trip less).
            try conn.copyIn("BEGIN;COPY bench_reference_events (\(EventCopy.columns)) FROM STDIN (FORMAT binary)", chunks: [batch.payload])
            if b < deliveryBatches.count {
                try conn.copyIn("COPY bench_reference_deliveries (\(DeliveryCopy.columns)) FROM STDIN (FORMAT binary);COMMIT",
                                chunks: [deliveryBatches[b].payload])
            } else {
                try conn.execute("COMMIT")
            }
            let committed = IngestLoad.monotonicNanoseconds()
            for i in sent..<(sent + rows) { latencies.record(from: due(i), to: committed) }
            sent += rows
        }
        let seconds = Double(IngestLoad.monotonicNanoseconds() - started) / 1e9
        return (latencies, Double(sent) / max(seconds, 1e-9))
    }
}
