// Measures the event store's group-commit append rate beside raw COPY of the same rows, in one run.
import Foundation
import HeraldCore
import HeraldStore

/// The store benchmark behind `herald bench store`: `producers` simulated clients each keep
/// `window` single-event appends outstanding (a new one as soon as one is acknowledged after
/// COMMIT), through one `GroupCommitWriter`; then the same rows go through one `COPY` into a
/// plain table without indexes or constraints — the physical ceiling on this machine.
public struct StoreBenchmark {
    public var events = 200_000
    public var producers = 8
    public var window = 128
    public var users = 10_000
    /// Writer limits (transactions in flight, rows per transaction).
    public var limits = GroupCommitWriter.Limits()
    public var progress: (String) -> Void = { _ in }

    public init() {}

    public struct Result: Sendable {
        public var groupCommitEventsPerSecond: Double
        public var copyRowsPerSecond: Double
        public var transactions: Int
        public var meanRowsPerTransaction: Double
        public var ackLatencyP50Ms: Double
        public var ackLatencyP99Ms: Double
        /// WAL fsyncs (pg_stat_wal.wal_sync, all processes) during the group-commit phase, per 1,000 events.
        public var walSyncsPerThousandEvents: Double
        /// WAL bytes written during the group-commit phase, per event.
        public var walBytesPerEvent: Double
        /// Round trips to PostgreSQL per event: one per transaction (each is one pipelined write and one wait).
        public var roundTripsPerEvent: Double
        public var ratio: Double { groupCommitEventsPerSecond / copyRowsPerSecond }
    }

    /// A realistic ~300-byte notification body, canonical JSON.
    public static func body(_ i: Int, user: String) -> String {
        #"{"app":"com.example.mail","body":"Your order #\#(i) has shipped and will arrive on Tuesday between 9 and 12. Track it in the app.","id":"n-\#(i)","interruptionLevel":"active","threadId":"orders","title":"Order shipped","user":"\#(user)"}"#
    }

    public func run(databaseURL: String) throws -> Result {
        let rows = (0..<events).map { i -> EventRow in
            let user = "user-\(i % users)"
            return EventRow(user: user, type: "submit", app: "com.example.mail", notificationId: "n-\(i)",
                            body: Self.body(i, user: user), engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000 + Int64(i)))
        }

        // 1. Group commit through the writer, closed loop.
        let stats = try PGConnection.connect(databaseURL)
        let walBefore = try Self.walCounters(stats)
        let writer = try GroupCommitWriter(connection: PGConnection.connect(databaseURL), limits: limits)
        var next = 0, acked = 0
        var latencies: [Double] = []
        latencies.reserveCapacity(events)
        let clock = ContinuousClock()
        let origin = clock.now
        func elapsedMs() -> Double {
            let d = clock.now - origin
            return Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
        }
        func issue() {
            guard next < rows.count else { return }
            let row = rows[next]
            next += 1
            let sent = elapsedMs()
            writer.append(events: [row]) { result in
                if case .success = result { acked += 1 }
                latencies.append(elapsedMs() - sent)
                issue()
            }
        }
        for _ in 0..<(producers * window) { issue() }
        var lastReport = 0
        while !writer.isIdle {
            guard writer.runUntilIdle(timeoutMilliseconds: 60_000) || writer.failure == nil else { break }
            if acked - lastReport >= events / 10 { progress("group commit: \(acked)/\(events)"); lastReport = acked }
        }
        if let failure = writer.failure { throw failure }
        let groupSeconds = elapsedMs() / 1000
        latencies.sort()
        let transactions = writer.transactionsCommitted
        // Closing the writer's connection makes its backend report its WAL statistics.
        writer.connection.close()
        usleep(700_000)
        let walAfter = try Self.walCounters(stats)

        // 2. The baseline: one COPY of the same rows into a plain table.
        let conn = try PGConnection.connect(databaseURL)
        try conn.execute("DROP TABLE IF EXISTS bench_copy_baseline")
        try conn.execute("""
            CREATE TABLE bench_copy_baseline (seq bigint, user_id text, type text, app text,
                notification_id text, body json, engine_time timestamptz)
            """)
        progress("COPY baseline: \(events) rows")
        let copyStart = clock.now
        let chunks = stride(from: 0, to: rows.count, by: 1000).lazy.map { start -> [UInt8] in
            var buffer: [UInt8] = []
            buffer.reserveCapacity(400 * 1000)
            for i in start..<min(start + 1000, rows.count) {
                let r = rows[i]
                let line = "\(i + 1)\t\(r.user ?? "\\N")\t\(r.type)\t\(r.app ?? "\\N")\t\(r.notificationId ?? "\\N")\t\(Self.copyEscaped(r.body))\t\(r.engineTime.rfc3339)\n"
                buffer += Array(line.utf8)
            }
            return buffer
        }
        try conn.copyIn("COPY bench_copy_baseline FROM STDIN", chunks: chunks)
        let d = clock.now - copyStart
        let copySeconds = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        try conn.execute("DROP TABLE bench_copy_baseline")

        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        return Result(
            groupCommitEventsPerSecond: Double(acked) / groupSeconds,
            copyRowsPerSecond: Double(events) / copySeconds,
            transactions: transactions,
            meanRowsPerTransaction: Double(acked) / Double(max(1, transactions)),
            ackLatencyP50Ms: percentile(0.50),
            ackLatencyP99Ms: percentile(0.99),
            walSyncsPerThousandEvents: Double(walAfter.syncs - walBefore.syncs) * 1000 / Double(max(1, acked)),
            walBytesPerEvent: Double(walAfter.bytes - walBefore.bytes) / Double(max(1, acked)),
            roundTripsPerEvent: Double(transactions) / Double(max(1, acked))
        )
    }

    /// pg_stat_wal's fsync and byte counters (cluster-wide; backends report them at exit or every second).
    static func walCounters(_ conn: PGConnection) throws -> (syncs: Int64, bytes: Int64) {
        let r = try conn.execute("SELECT wal_sync, wal_bytes::bigint FROM pg_stat_wal")
        return (r.int64(0, 0) ?? 0, r.int64(0, 1) ?? 0)
    }

    /// COPY text format: backslash, tab, newline and carriage return are escaped.
    static func copyEscaped(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
