// SPEC §14 "Retention": a log over 20 simulated days with 10 days kept — segments behind the
// horizon are archived, verified and dropped; archive + hot tables hold every position once;
// idempotency holds past the horizon; a re-run is safe.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct RetentionTests {
    static let day: Int64 = 86_400_000
    static let start: Int64 = 1_780_000_000_000

    static func submit(_ n: Int, day d: Int) -> EventRow {
        EventRow(user: "user\(n % 7)", type: "submit", app: "com.example.mail", notificationId: "n\(n)",
                 body: #"{"id":"n\#(n)","title":"T\#(n)"}"#,
                 engineTime: Instant(millisecondsSinceEpoch: start + Int64(d) * day + Int64(n % 100) * 1000))
    }

    /// Appends `perDay` submits for each day in `days` (the writer's COPY path), a delivery for each
    /// (the SQL path), and a completed snapshot through the head, as a serving instance would.
    static func appendDays(_ url: String, _ days: Range<Int>, perDay: Int, from first: inout Int) throws {
        let writer = try CopyAppendTests.writer(url)
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        for d in days {
            let rows = (first..<(first + perDay)).map { submit($0, day: d) }
            let outcomes = try EventStoreTests.appendAll(writer, rows)
            var seqs: [Int64] = []
            for outcome in outcomes {
                guard case .appended(let seq) = outcome else { Issue.record("not appended: \(outcome)"); continue }
                seqs.append(seq)
            }
            // One delivery per submit, the user's ordinal being the seq (unique per user).
            try conn.execute("""
                SELECT count(*) FROM herald_append_deliveries(0, NULL, $1::text[], $2::bigint[], $2::bigint[], array_fill('alert'::text, ARRAY[$3::int]),
                    array_fill('com.example.mail'::text, ARRAY[$3::int]), $4::text[], array_fill('default'::text, ARRAY[$3::int]), $5::timestamptz[],
                    array_fill('r1'::text, ARRAY[$3::int]), array_fill('[]'::text, ARRAY[$3::int]), array_fill('{}'::text, ARRAY[$3::int]))
                """, [Self.array(rows.map { $0.user }), Self.array(seqs.map(String.init)), String(rows.count),
                      Self.array(rows.map { $0.notificationId }), Self.array(rows.map { $0.engineTime.rfc3339 })])
            first += perDay
            try conn.execute("""
                INSERT INTO snapshots (partition, through_seq, format, header, completed_at, users, parts, bytes)
                VALUES (0, (SELECT seq FROM partitions WHERE partition = 0), $1, ''::bytea, now(), 0, 0, 0)
                """, [String(SnapshotFormat.version)])
        }
    }

    /// A PostgreSQL array literal of plain strings.
    static func array(_ values: [String?]) -> String {
        "{" + values.map { $0.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\"" } ?? "NULL" }
            .joined(separator: ",") + "}"
    }

    /// Every position of `table` from 1 to `head` once, between the archive's files and the hot table.
    static func positionsCovered(_ conn: PGConnection, archive: URL, table: String, head: Int64) throws -> [String] {
        var seen: [Int64: Int] = [:]
        let key = table == "events" ? "seq" : "cursor"
        let files = (try? FileManager.default.contentsOfDirectory(atPath: archive.appendingPathComponent("p0").path)) ?? []
        for f in files.sorted() where f.hasPrefix(table) && f.hasSuffix(".ndjson") {
            let text = try String(contentsOf: archive.appendingPathComponent("p0").appendingPathComponent(f), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let v = try JSONValue.parse(String(line))
                if let n = v[table == "events" ? "event" : "delivery"]?[key]?.intValue { seen[n, default: 0] += 1 }
            }
        }
        let r = try conn.execute("SELECT \(key) FROM \(table) WHERE partition = 0")
        for i in 0..<r.rowCount { seen[r.int64(i, 0)!, default: 0] += 1 }
        var problems: [String] = []
        for n in 1...head where seen[n] != 1 { problems.append("\(table) \(n) held \(seen[n] ?? 0) times") }
        return problems
    }

    @Test func retention_twentyDaysWithTenKeptLeavesTheLastTenHotAndTheRestArchived() throws {
        let url = try TestPostgres.freshDatabase()
        let archive = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("herald-archive-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: archive) }
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        var job = RetentionJob(days: 10, archive: archive)
        job.cutMargin = 1
        var next = 0
        // The job runs once a simulated day, as a periodic job would.
        for d in 0..<20 {
            try Self.appendDays(url, d..<(d + 1), perDay: 20, from: &next)
            _ = try job.run(conn)
        }
        let head = try EventReader.head(conn)
        #expect(head == 400)
        // Hot: only the last 10 days (segments are a day each: the oldest kept is at most a day older).
        let oldest = try conn.execute("SELECT (extract(epoch FROM min(engine_time)) * 1000)::bigint FROM events").int64(0, 0)!
        let newest = try conn.execute("SELECT (extract(epoch FROM max(engine_time)) * 1000)::bigint FROM events").int64(0, 0)!
        #expect(newest - oldest <= 11 * Self.day, "hot events span \((newest - oldest) / Self.day) days")
        #expect(newest - oldest >= 9 * Self.day, "the last 10 days stay hot")
        let hot = try conn.execute("SELECT count(*) FROM events").int64(0, 0)!
        #expect(hot <= 11 * 20, "the hot table is bounded: \(hot) rows")
        // Archive + hot hold every event and delivery once, and each archive file verifies.
        #expect(try Self.positionsCovered(conn, archive: archive, table: "events", head: head).isEmpty)
        #expect(try Self.positionsCovered(conn, archive: archive, table: "deliveries", head: EventReader.deliveryHead(conn)).isEmpty)
        let recorded = try conn.execute("SELECT file, rows, sha256, dropped_at IS NOT NULL FROM archive_segments")
        #expect(recorded.rowCount > 0)
        for i in 0..<recorded.rowCount {
            let (rows, digest) = try RetentionJob.verify(archive.appendingPathComponent(recorded.string(i, 0)!))
            #expect(Int64(rows) == recorded.int64(i, 1) && digest == recorded.string(i, 2) && recorded.string(i, 3) == "t")
        }
        // The horizon consumers are held to is recorded, and behind it nothing is hot.
        let horizon = try conn.execute("SELECT seq, cursor FROM retention_horizons WHERE partition = 0")
        let minHot = try conn.execute("SELECT min(seq) FROM events").int64(0, 0)!
        #expect(horizon.int64(0, 0)! == minHot - 1)
        #expect(try conn.execute("SELECT min(cursor) FROM deliveries").int64(0, 0)! == horizon.int64(0, 1)! + 1)
        // Idempotency past the horizon: the first notification's id is still used.
        let writer = try CopyAppendTests.writer(url)
        #expect(try EventStoreTests.appendAll(writer, [Self.submit(0, day: 20)]) == [.conflict(seq: 1)])
        #expect(try EventStoreTests.appendAll(writer, [Self.submit(next - 1, day: 19)]) == [.duplicate(seq: head)])
        // A re-run with nothing new drops nothing and loses nothing.
        let again = try job.run(conn)
        #expect(again.droppedSegments.isEmpty || again.droppedSegments.allSatisfy { $0.hasPrefix("deliveries") || $0.hasPrefix("events") })
        #expect(try Self.positionsCovered(conn, archive: archive, table: "events", head: head).isEmpty)
    }

    static var dropEvents: Int? { ProcessInfo.processInfo.environment["HERALD_RETENTION_DROP_EVENTS"].flatMap { Int($0) } }

    /// The bench (BENCHMARKS.md, scripts/retention-experiments): N events and their deliveries in one
    /// closed segment, 31 days old, archived and dropped by one run; prints what each step took.
    @Test(.enabled(if: dropEvents != nil, "set HERALD_RETENTION_DROP_EVENTS to run the drop-time bench"))
    func retention_dropTimeOfOneSegment() throws {
        let n = Self.dropEvents ?? 0
        let url = try TestPostgres.freshDatabase()
        let archive = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("herald-archive-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: archive) }
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        var job = RetentionJob(days: 30, archive: archive)
        job.cutMargin = 1
        var next = 0
        _ = try job.run(conn)                                  // segments the empty log
        let perDay = max(n / 10, 1)
        for d in 0..<10 { try Self.appendDays(url, d..<(d + 1), perDay: perDay, from: &next) }
        _ = try job.run(conn)                                  // closes the segment holding them
        try Self.appendDays(url, 41..<42, perDay: 10, from: &next)
        let bytes = try conn.execute("""
            SELECT sum(pg_total_relation_size(s.segment::regclass))::bigint FROM (
                SELECT segment FROM herald_segments('events') WHERE end_position IS NOT NULL
                UNION ALL SELECT segment FROM herald_segments('deliveries') WHERE end_position IS NOT NULL) s
            """).int64(0, 0) ?? 0
        let t0 = Date()
        let report = try job.run(conn)
        let total = Date().timeIntervalSince(t0)
        print("retention bench: \(report.archivedRows) rows (\(n) events and their deliveries, \(bytes / 1_048_576) MiB of tables) "
              + "archived, verified and dropped in \(String(format: "%.2f", total)) s; the DROPs took \(String(format: "%.3f", report.dropSeconds)) s "
              + "(\(report.droppedSegments.joined(separator: ", ")))")
        #expect(report.archivedRows == 2 * n)
        #expect(try Self.positionsCovered(conn, archive: archive, table: "events", head: EventReader.head(conn)).isEmpty)
    }

    @Test func retention_theCoverageCheckCatchesAnArchiveMissingALine() throws {
        let url = try TestPostgres.freshDatabase()
        let archive = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("herald-archive-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: archive) }
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        var job = RetentionJob(days: 2, archive: archive)
        job.cutMargin = 1
        var next = 0
        for d in 0..<6 {
            try Self.appendDays(url, d..<(d + 1), perDay: 5, from: &next)
            _ = try job.run(conn)
        }
        let head = try EventReader.head(conn)
        #expect(try Self.positionsCovered(conn, archive: archive, table: "events", head: head).isEmpty)
        // Planted fault: one archived line lost.
        let dir = archive.appendingPathComponent("p0")
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted().first { $0.hasPrefix("events") })
        let lines = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8).split(separator: "\n")
        try (lines.dropFirst().joined(separator: "\n") + "\n").write(to: dir.appendingPathComponent(file), atomically: true, encoding: .utf8)
        #expect(try Self.positionsCovered(conn, archive: archive, table: "events", head: head) == ["events 1 held 0 times"])
        let recorded = try conn.execute("SELECT rows, sha256 FROM archive_segments WHERE file = $1", ["p0/\(file)"])
        let (rows, digest) = try RetentionJob.verify(dir.appendingPathComponent(file))
        #expect(Int64(rows) != recorded.int64(0, 0) && digest != recorded.string(0, 1), "the recorded rows and digest no longer match")
    }
}
