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
    /// Writer limits (rows per transaction).
    public var limits = GroupCommitWriter.Limits()
    public var progress: (String) -> Void = { _ in }

    public init() {}

    public struct Result: Sendable {
        public var groupCommitEventsPerSecond: Double
        /// COPY into a table without indexes, rows formatted at the byte level: the ceiling.
        public var copyRowsPerSecond: Double
        /// The same COPY into a table with the log's indexes: a primary key on
        /// seq and the unique (app, notification_id, recipient_index) of rows that have a notification id.
        public var copyIndexedRowsPerSecond: Double
        /// The same COPY with rows formatted by String interpolation (the naive loader).
        public var copyStringFormattedRowsPerSecond: Double
        public var transactions: Int
        public var meanRowsPerTransaction: Double
        public var ackLatencyP50Ms: Double
        public var ackLatencyP99Ms: Double
        /// WAL fsyncs (pg_stat_wal.wal_sync, all processes) during the group-commit phase, per 1,000 events.
        public var walSyncsPerThousandEvents: Double
        /// WAL bytes written during the group-commit phase, per event.
        public var walBytesPerEvent: Double
        /// Round trips to PostgreSQL per event (`GroupCommitWriter.roundTrips`: one per pipelined
        /// transaction, two per COPY transaction, three when deliveries or acks share it).
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
        var latencies = Latencies()
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
                latencies.record(milliseconds: elapsedMs() - sent)
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
        let transactions = writer.transactionsCommitted
        let roundTrips = writer.roundTrips
        // Closing the writer's connection makes its backend report its WAL statistics.
        writer.connection.close()
        usleep(700_000)
        let walAfter = try Self.walCounters(stats)

        // 2. The baseline: one COPY of the same rows into a plain table (the ratio's denominator),
        //    then two references: the same COPY into a table with the indexes the log must keep
        //    (positions and the idempotency key), and the same COPY with rows formatted by Swift
        //    String interpolation (what a naive loader pays for formatting).
        let conn = try PGConnection.connect(databaseURL)
        progress("COPY baselines: \(events) rows")
        let copyRate = try Self.timedCopy(conn, table: "bench_copy_baseline", indexes: [], chunks: Self.copyChunks(rows))
        let indexedRate = try Self.timedCopy(conn, table: "bench_copy_indexed", indexes: Self.logIndexes("bench_copy_indexed"),
                                             chunks: Self.copyChunks(rows))
        let stringRate = try Self.timedCopy(conn, table: "bench_copy_strings", indexes: [], chunks: Self.stringCopyChunks(rows))

        func percentile(_ p: Double) -> Double { latencies.percentile(p) }
        return Result(
            groupCommitEventsPerSecond: Double(acked) / groupSeconds,
            copyRowsPerSecond: copyRate,
            copyIndexedRowsPerSecond: indexedRate,
            copyStringFormattedRowsPerSecond: stringRate,
            transactions: transactions,
            meanRowsPerTransaction: Double(acked) / Double(max(1, transactions)),
            ackLatencyP50Ms: percentile(0.50),
            ackLatencyP99Ms: percentile(0.99),
            walSyncsPerThousandEvents: Double(walAfter.syncs - walBefore.syncs) * 1000 / Double(max(1, acked)),
            walBytesPerEvent: Double(walAfter.bytes - walBefore.bytes) / Double(max(1, acked)),
            roundTripsPerEvent: Double(roundTrips) / Double(max(1, acked))
        )
    }

    /// Creates `table`, COPYs the chunks into it, drops it; returns rows per second (COPY only, formatting included).
    static func timedCopy(_ conn: PGConnection, table: String, indexes: [String],
                          chunks: some Sequence<[UInt8]>) throws -> Double {
        try conn.execute("DROP TABLE IF EXISTS \(table)")
        try conn.execute("""
            CREATE TABLE \(table) (seq bigint, user_id text, type text, app text,
                notification_id text, body json, engine_time timestamptz, recipient_index integer NOT NULL DEFAULT 0)
            """)
        for ddl in indexes { try conn.execute(ddl) }
        let clock = ContinuousClock()
        let start = clock.now
        let copied = try conn.copyIn("COPY \(table) (seq, user_id, type, app, notification_id, body, engine_time) FROM STDIN", chunks: chunks)
        let d = clock.now - start
        try conn.execute("DROP TABLE \(table)")
        return Double(copied) / (Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
    }

    /// COPY text rows formatted at the byte level, as a tuned loader would: the ceiling should
    /// measure the database, not String interpolation (which alone caps a COPY near 50k rows/s).
    static func copyChunks(_ rows: [EventRow]) -> some Sequence<[UInt8]> {
        stride(from: 0, to: rows.count, by: 1000).lazy.map { start -> [UInt8] in
            var buffer: [UInt8] = []
            buffer.reserveCapacity(400 * 1000)
            for i in start..<min(start + 1000, rows.count) {
                let r = rows[i]
                appendDecimal(Int64(i + 1), to: &buffer); buffer.append(9)
                appendCopyField(r.user, to: &buffer); buffer.append(9)
                appendCopyField(r.type, to: &buffer); buffer.append(9)
                appendCopyField(r.app, to: &buffer); buffer.append(9)
                appendCopyField(r.notificationId, to: &buffer); buffer.append(9)
                appendCopyField(r.body, to: &buffer); buffer.append(9)
                appendCopyField(r.engineTime.rfc3339, to: &buffer)
                buffer.append(10)
            }
            return buffer
        }
    }

    /// The rows as a naive loader formats them: String interpolation and per-scalar escaping.
    static func stringCopyChunks(_ rows: [EventRow]) -> some Sequence<[UInt8]> {
        stride(from: 0, to: rows.count, by: 1000).lazy.map { start -> [UInt8] in
            var buffer: [UInt8] = []
            buffer.reserveCapacity(400 * 1000)
            for i in start..<min(start + 1000, rows.count) {
                let r = rows[i]
                let line = "\(i + 1)\t\(r.user ?? "\\N")\t\(r.type)\t\(r.app ?? "\\N")\t\(r.notificationId ?? "\\N")\t\(copyEscaped(r.body))\t\(r.engineTime.rfc3339)\n"
                buffer += Array(line.utf8)
            }
            return buffer
        }
    }

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

    /// pg_stat_wal's fsync and byte counters (cluster-wide; backends report them at exit or every second).
    public static func walCounters(_ conn: PGConnection) throws -> (syncs: Int64, bytes: Int64) {
        let r = try conn.execute("SELECT wal_sync, wal_bytes::bigint FROM pg_stat_wal")
        return (r.int64(0, 0) ?? 0, r.int64(0, 1) ?? 0)
    }

    /// A COPY text field: `\N` for NULL; backslash, tab, newline and carriage return escaped.
    static func appendCopyField(_ value: String?, to buffer: inout [UInt8]) {
        guard var value else { buffer.append(92); buffer.append(78); return }
        value.withUTF8 { utf8 in
            if !utf8.contains(where: { $0 == 92 || $0 == 9 || $0 == 10 || $0 == 13 }) {
                buffer.append(contentsOf: utf8)
                return
            }
            for b in utf8 {
                switch b {
                case 92: buffer.append(92); buffer.append(92)
                case 9: buffer.append(92); buffer.append(116)
                case 10: buffer.append(92); buffer.append(110)
                case 13: buffer.append(92); buffer.append(114)
                default: buffer.append(b)
                }
            }
        }
    }

    static func appendDecimal(_ value: Int64, to buffer: inout [UInt8]) {
        var v = value.magnitude
        if value < 0 { buffer.append(45) }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        withUnsafeMutableBytes(of: &digits) { d in
            repeat { d[n] = UInt8(48 + v % 10); v /= 10; n += 1 } while v > 0
            while n > 0 { n -= 1; buffer.append(d[n]) }
        }
    }
}

extension StoreBenchmark {
    /// The physical ceiling for `rows`: one COPY (formatted at the byte level) into a plain table
    /// without indexes, and into one with the log's two indexes. Rows per second for each.
    public static func copyBaselines(databaseURL: String, rows: [EventRow]) throws -> (plain: Double, indexed: Double) {
        let conn = try PGConnection.connect(databaseURL)
        let plain = try timedCopy(conn, table: "bench_copy_baseline", indexes: [], chunks: copyChunks(rows))
        let indexed = try timedCopy(conn, table: "bench_copy_indexed", indexes: logIndexes("bench_copy_indexed"), chunks: copyChunks(rows))
        return (plain, indexed)
    }

    /// The indexes `events` keeps (schema/001_tables.sql), built on a baseline table.
    static func logIndexes(_ table: String) -> [String] {
        ["ALTER TABLE \(table) ADD PRIMARY KEY (seq)",
         "CREATE UNIQUE INDEX ON \(table) (app, notification_id, recipient_index) WHERE notification_id IS NOT NULL"]
    }
}

extension StoreBenchmark {
    /// What an ingest run stored, as fast as PostgreSQL alone stores it: the run's submit events
    /// and every delivery (an ingest run's deliveries are all decided for its submits), copied
    /// into tables like Herald's, the two COPYs at once (`storedAgain`). Nothing of Herald's is in
    /// the way (no parsing, no decisions, no small transactions, no load generator), so Herald's
    /// durable acks per second against this is how close it comes to what its own schema allows
    /// on the machine; the plain `COPY` baseline stores the events alone, without indexes. The
    /// rows are held in memory (~1.2 KB a submit), so a longer run copies its first `atMost`
    /// submits and as many deliveries (one each in an ingest run).
    public static func schemaCeiling(databaseURL: String, atMost: Int = 1_000_000) throws
        -> (submits: Int64, deliveries: Int64, submitsPerSecond: Double) {
        let r = try storedAgain(databaseURL: databaseURL, [
            ("SELECT \(EventCopy.columns) FROM events WHERE type = 'submit' ORDER BY seq LIMIT \(atMost)", "events", EventCopy.columns),
            ("SELECT \(DeliveryCopy.columns) FROM deliveries ORDER BY cursor LIMIT \(atMost)", "deliveries", DeliveryCopy.columns),
        ])
        return (r.rows[0], r.rows[1], Double(r.rows[0]) / r.seconds)
    }

    /// The submit events of a run (a peer run's enqueued jobs) stored again by PostgreSQL alone
    /// into a table like `events`, in two halves at once (`storedAgain`): jobs per second. At most
    /// the first `atMost` jobs (their rows are held in memory).
    public static func enqueueCeiling(databaseURL: String, atMost: Int = 1_000_000) throws -> (jobs: Int64, jobsPerSecond: Double) {
        let r = try storedAgain(databaseURL: databaseURL, (0...1).map {
            ("SELECT \(EventCopy.columns) FROM events WHERE type = 'submit' AND seq % 2 = \($0) ORDER BY seq LIMIT \(atMost / 2)",
             "events", EventCopy.columns)
        })
        let jobs = r.rows.reduce(0, +)
        return (jobs, Double(jobs) / r.seconds)
    }

    /// Rows of Herald's tables stored again, as a loader would: each `(select, table, columns)` is
    /// read out of `databaseURL` as binary COPY data, then all are copied at once — a connection,
    /// a COPY and a commit each — into `bench_ceiling_<table>`, made `LIKE <table>` with its
    /// indexes and constraints. Rows each COPY stored, and the seconds from the first COPY's start
    /// to the last one's commit. The tables are dropped after.
    static func storedAgain(databaseURL: String, _ copies: [(select: String, table: String, columns: String)]) throws
        -> (rows: [Int64], seconds: Double) {
        let conn = try PGConnection.connect(databaseURL)
        defer { conn.close() }
        let data = try copies.map { try conn.copyOutData("COPY (\($0.select)) TO STDOUT (FORMAT binary)") }
        let tables = Set(copies.map(\.table)).sorted()
        for table in tables {
            try conn.execute("DROP TABLE IF EXISTS bench_ceiling_\(table)")
            try conn.execute("CREATE TABLE bench_ceiling_\(table) (LIKE \(table) INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)")
        }
        defer { for table in tables { _ = try? conn.execute("DROP TABLE IF EXISTS bench_ceiling_\(table)") } }
        // Each connection is used by its one thread only, after it is handed over here.
        nonisolated(unsafe) let connections = try copies.map { _ in try PGConnection.connect(databaseURL) }
        defer { for c in connections { c.close() } }
        // One slot per thread; read after every thread has left the group.
        nonisolated(unsafe) let results = UnsafeMutableBufferPointer<Swift.Result<Int64, StoreError>>.allocate(capacity: copies.count)
        results.initialize(repeating: .success(0))
        defer { _ = results.deinitialize(); results.deallocate() }
        let done = DispatchGroup()
        let clock = ContinuousClock()
        let start = clock.now
        for (i, copy) in copies.enumerated() {
            let chunks = data[i]
            done.enter()
            Thread {
                results[i] = Swift.Result { () throws(StoreError) -> Int64 in
                    try connections[i].copyIn("COPY bench_ceiling_\(copy.table) (\(copy.columns)) FROM STDIN (FORMAT binary)", chunks: chunks)
                }
                done.leave()
            }.start()
        }
        done.wait()
        let d = clock.now - start
        return (try results.map { try $0.get() }, Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
    }
}
