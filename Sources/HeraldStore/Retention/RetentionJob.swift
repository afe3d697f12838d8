// `herald retain`: archive the log's segments behind the retention horizon, verify them, then drop them (SPEC §14).
import Foundation
import HeraldCore

/// One run of retention (docs/retention.md). Blocking, on its own connection, beside a serving
/// instance. Per run:
/// 1. segments the log if it is not yet (`herald_segment_log`, once);
/// 2. per partition, the horizon: the last event older than `days` before the log's newest
///    engine time, no later than the latest complete snapshot's `through_seq`, and before every
///    event whose content that snapshot's users still refer to (pending, snoozable, snoozed);
/// 3. every closed segment whose rows are all at or behind their partition's horizon is written
///    to the archive (a file per partition and segment, in `herald export`'s line format), read
///    back and checked (rows, SHA-256), recorded in `archive_segments`; the horizon is recorded
///    (`retention_horizons`, what `cursor_expired` reads); then the segment's table is dropped;
/// 4. the open segment is closed at the head plus `cutMargin` positions, so the next run can drop it.
/// A crash anywhere leaves a state the next run completes: a segment is dropped only after its
/// files are recorded and verified, and a file already recorded is verified, not written again.
public struct RetentionJob {
    public var days: Int
    public var archive: URL
    /// Only this partition's horizon moves (nil: every partition's).
    public var partition: Int?
    /// How far past the head the open segment is closed (positions): appends meanwhile must stay below it.
    public var cutMargin: Int64 = 100_000
    public var progress: (String) -> Void = { _ in }

    public init(days: Int, archive: URL, partition: Int? = nil) {
        self.days = days
        self.archive = archive
        self.partition = partition
    }

    /// What a partition's horizon came to, and why.
    public struct Horizon: Sendable, Equatable {
        public var partition: Int
        /// Events at or below it may be dropped.
        public var seq: Int64
        /// Deliveries at or below it may be dropped.
        public var cursor: Int64
        /// The snapshot restart starts from (nil: none, nothing may be dropped).
        public var snapshotId: Int64?
        /// What held the horizon back from the time cut, if anything.
        public var limitedBy: String?
        /// Seqs whose content the snapshot's users still refer to.
        public var referenced: Set<Int64> = []
    }

    public struct Report: Sendable {
        public var segmented = false
        public var horizons: [Horizon] = []
        public var archivedSegments = 0
        public var archivedRows = 0
        public var droppedSegments: [String] = []
        public var closedSegments: [String] = []
        public var dropSeconds = 0.0
    }

    public enum Failure: Error, CustomStringConvertible {
        case busy
        case archive(String)
        public var description: String {
            switch self {
            case .busy: return "another herald retain is running on this database; nothing was done"
            case .archive(let why): return "the archive could not be written or verified (\(why)); nothing was dropped"
            }
        }
    }

    /// The advisory lock one retention run holds (beside `InstanceLock.key`).
    static let lockKey: Int64 = 7_271_003

    public func run(_ conn: PGConnection) throws -> Report {
        var report = Report()
        guard try conn.execute("SELECT pg_try_advisory_lock($1)", [String(Self.lockKey)]).string(0, 0) == "t" else { throw Failure.busy }
        defer { _ = try? conn.execute("SELECT pg_advisory_unlock($1)", [String(Self.lockKey)]) }
        report.segmented = try conn.execute("SELECT herald_segment_log()").string(0, 0) == "t"
        if report.segmented { progress("the log is now segmented (events and deliveries range-partitioned by position)") }

        let count = try EventReader.partitioning(conn).count
        let partitions = partition.map { [$0] } ?? Array(0..<count)
        let now = try newestEngineTime(conn, partitions: Array(0..<count))
        let cutoff = now.adding(.init(milliseconds: -Int64(days) * 86_400_000))
        for p in partitions {
            let h = try horizon(conn, partition: p, cutoff: cutoff)
            report.horizons.append(h)
            progress("partition \(p): horizon seq \(h.seq), cursor \(h.cursor)" + (h.limitedBy.map { " (held back by \($0))" } ?? ""))
        }
        var allowed: [Int: (seq: Int64, cursor: Int64)] = [:]
        for h in report.horizons { allowed[h.partition] = (h.seq, h.cursor) }
        // Partitions this run does not move keep their recorded horizons.
        for p in 0..<count where allowed[p] == nil {
            let r = try conn.execute("SELECT seq, cursor FROM retention_horizons WHERE partition = $1", [String(p)])
            allowed[p] = (r.int64(0, 0) ?? 0, r.int64(0, 1) ?? 0)
        }
        for table in ["events", "deliveries"] {
            let isEvents = table == "events"
            for segment in try segments(conn, table) where segment.end != nil {
                // Each partition's last position in the segment: droppable when every one is behind its horizon.
                let r = try conn.execute("SELECT partition, max(\(isEvents ? "seq" : "cursor")), count(*) FROM \(segment.name) GROUP BY partition")
                var lasts: [(partition: Int, last: Int64, rows: Int64)] = []
                for i in 0..<r.rowCount { lasts.append((Int(r.int64(i, 0) ?? 0), r.int64(i, 1) ?? 0, r.int64(i, 2) ?? 0)) }
                let droppable = lasts.allSatisfy { l in
                    guard let a = allowed[l.partition] else { return false }
                    return l.last <= (isEvents ? a.seq : a.cursor)
                }
                guard droppable else { break }  // segments are in position order: later ones are not either
                for l in lasts {
                    let rows = try archiveSegment(conn, table: table, segment: segment, partition: l.partition, last: l.last,
                                                  expectedRows: l.rows)
                    report.archivedSegments += 1
                    report.archivedRows += rows
                }
                // Content states still refer to outlives its event.
                if isEvents {
                    for l in lasts {
                        let keep = report.horizons.first { $0.partition == l.partition }?.referenced ?? []
                        guard !keep.isEmpty else { continue }
                        try conn.execute("""
                            INSERT INTO retained_content (partition, seq, user_id, body)
                            SELECT partition, seq, user_id, body FROM \(segment.name) WHERE partition = $1 AND seq = ANY($2::bigint[])
                            ON CONFLICT DO NOTHING
                            """, [String(l.partition), "{" + keep.map(String.init).joined(separator: ",") + "}"])
                    }
                }
                // The horizon first (consumers are told before the rows go), then the drop.
                for l in lasts {
                    try conn.execute("""
                        INSERT INTO retention_horizons AS h (partition, \(isEvents ? "seq" : "cursor"), updated_at) VALUES ($1, $2, now())
                        ON CONFLICT (partition) DO UPDATE SET \(isEvents ? "seq" : "cursor") = greatest(h.\(isEvents ? "seq" : "cursor"), EXCLUDED.\(isEvents ? "seq" : "cursor")), updated_at = now()
                        """, [String(l.partition), String(l.last)])
                }
                let t0 = Date()
                try conn.execute("DROP TABLE \(segment.name)")
                report.dropSeconds += Date().timeIntervalSince(t0)
                try conn.execute("""
                    UPDATE archive_segments SET dropped_at = now()
                    WHERE kind = $1 AND dropped_at IS NULL AND first_position >= $2 AND last_position < $3
                    """, [table, String(segment.first ?? 0), String(segment.end ?? 0)])
                report.droppedSegments.append(segment.name)
                progress("dropped \(segment.name) (\(lasts.reduce(0) { $0 + $1.rows }) rows, archived)")
            }
        }
        for h in report.horizons {
            try conn.execute("""
                INSERT INTO retention_horizons AS h (partition, snapshot_id, engine_time, updated_at) VALUES ($1, $2, $3, now())
                ON CONFLICT (partition) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id, engine_time = EXCLUDED.engine_time, updated_at = now()
                """, [String(h.partition), h.snapshotId.map(String.init), cutoff.rfc3339])
        }
        // Kept content no state refers to any more goes (a snapshot refers to older events only if
        // the one before it did: states drop references, they never take up old ones again).
        for h in report.horizons where h.snapshotId != nil {
            try conn.execute("DELETE FROM retained_content WHERE partition = $1 AND NOT (seq = ANY($2::bigint[]))",
                             [String(h.partition), "{" + h.referenced.map(String.init).joined(separator: ",") + "}"])
        }
        for table in ["events", "deliveries"] {
            if let closed = try closeOpenSegment(conn, table) {
                report.closedSegments.append(closed)
                progress("closed \(closed)")
            }
        }
        return report
    }

    // MARK: - Horizons

    /// The newest engine time of the log: the engine's "now" (a manual clock's too), read at each partition's head.
    func newestEngineTime(_ conn: PGConnection, partitions: [Int]) throws(StoreError) -> Instant {
        var newest = Instant.epoch
        for p in partitions {
            let r = try conn.execute("""
                SELECT (extract(epoch FROM engine_time) * 1000)::bigint FROM events
                WHERE partition = $1 AND seq = (SELECT seq FROM partitions WHERE partition = $1)
                """, [String(p)])
            if let ms = r.int64(0, 0) { newest = max(newest, Instant(millisecondsSinceEpoch: ms)) }
        }
        return newest
    }

    func horizon(_ conn: PGConnection, partition p: Int, cutoff: Instant) throws -> Horizon {
        let recorded = try conn.execute("SELECT seq, cursor FROM retention_horizons WHERE partition = $1", [String(p)])
        let fromSeq = recorded.int64(0, 0) ?? 0, fromCursor = recorded.int64(0, 1) ?? 0
        var seq = try conn.execute("SELECT max(seq) FROM events WHERE partition = $1 AND seq > $2 AND engine_time < $3",
                                   [String(p), String(fromSeq), cutoff.rfc3339]).int64(0, 0) ?? fromSeq
        var limitedBy: String?
        guard let snapshot = try SnapshotStore.latest(conn, partition: p) else {
            return Horizon(partition: p, seq: fromSeq, cursor: fromCursor, snapshotId: nil, limitedBy: "no complete snapshot")
        }
        if snapshot.throughSeq < seq {
            seq = snapshot.throughSeq
            limitedBy = "snapshot \(snapshot.id) through seq \(snapshot.throughSeq)"
        }
        // Content the snapshot's users refer to (read back by seq) is kept in `retained_content` when its event goes.
        var referenced: Set<Int64> = []
        try RetainedSnapshot.forEachState(conn, id: snapshot.id) { state in
            state.forEachContentReferenced { referenced.insert($0) }
            return true
        }
        seq = max(seq, fromSeq)
        // Deliveries decided before the first event kept: those at or before the last such cursor.
        let firstKeptTime = try conn.execute("SELECT engine_time FROM events WHERE partition = $1 AND seq = $2",
                                             [String(p), String(seq + 1)]).string(0, 0)
        var cursor = fromCursor
        if let firstKeptTime {
            let r = try conn.execute("""
                SELECT coalesce(min(cursor), (SELECT cursor FROM delivery_heads WHERE partition = $1) + 1) - 1 FROM deliveries
                WHERE partition = $1 AND cursor > $2 AND (at >= $3 OR cause_seq > $4)
                """, [String(p), String(fromCursor), firstKeptTime, String(seq)])
            cursor = max(fromCursor, r.int64(0, 0) ?? fromCursor)
        }
        return Horizon(partition: p, seq: seq, cursor: cursor, snapshotId: snapshot.id, limitedBy: limitedBy, referenced: referenced)
    }

    // MARK: - Segments

    struct Segment {
        var name: String
        var first: Int64?
        var end: Int64?
    }

    func segments(_ conn: PGConnection, _ table: String) throws(StoreError) -> [Segment] {
        let r = try conn.execute("SELECT segment, first_position, end_position FROM herald_segments($1)", [table])
        return (0..<r.rowCount).map { Segment(name: r.string($0, 0) ?? "", first: r.int64($0, 1), end: r.int64($0, 2)) }
    }

    /// Writes one partition's rows of a segment to `p<partition>/<table>-<first>-<last>.ndjson`
    /// (through a temporary file, synced, renamed), reads it back, and records it. A file already
    /// recorded is verified instead. Returns the rows archived.
    func archiveSegment(_ conn: PGConnection, table: String, segment: Segment, partition p: Int, last: Int64,
                        expectedRows: Int64) throws -> Int {
        let isEvents = table == "events"
        let first = try conn.execute("SELECT min(\(isEvents ? "seq" : "cursor")) FROM \(segment.name) WHERE partition = $1", [String(p)]).int64(0, 0) ?? 0
        let directory = archive.appendingPathComponent("p\(p)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let name = String(format: "%@-%012lld-%012lld.ndjson", table, first, last)
        let file = directory.appendingPathComponent(name)
        let recorded = try conn.execute("SELECT rows, sha256, file FROM archive_segments WHERE partition = $1 AND kind = $2 AND first_position = $3",
                                        [String(p), table, String(first)])
        if recorded.rowCount == 1 {
            let (rows, digest) = try Self.verify(file)
            guard Int64(rows) == recorded.int64(0, 0), digest == recorded.string(0, 1) else {
                throw Failure.archive("\(file.path) does not match what archive_segments recorded for it")
            }
            return rows
        }
        var writer = try ArchiveFileWriter(file)
        var after = first - 1
        while after < last {
            if isEvents {
                let page = try EventReader.events(conn, partition: p, after: after, limit: 10_000)
                if page.isEmpty { break }
                // Content as stored (sealed): an erasure after the archive reaches it too; export opens it.
                for e in page where e.seq <= last { try writer.append(LogTransfer.eventLine(e, keys: nil)) }
                after = page.last!.seq
            } else {
                let page = try EventReader.deliveries(conn, partition: p, after: after, limit: 10_000)
                if page.isEmpty { break }
                for d in page where d.cursor <= last { try writer.append(LogTransfer.deliveryLine(d, keys: nil)) }
                after = page.last!.cursor
            }
        }
        let rows = writer.lines
        guard Int64(rows) == expectedRows, Int64(rows) == last - first + 1 else {
            throw Failure.archive("\(segment.name) partition \(p): \(rows) rows read for positions \(first)…\(last), \(expectedRows) counted")
        }
        let written = try writer.finish()
        let (readRows, digest) = try Self.verify(file)
        guard readRows == rows, digest == written else { throw Failure.archive("\(file.path) reads back differently") }
        try conn.execute("""
            INSERT INTO archive_segments (partition, kind, first_position, last_position, rows, sha256, file)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """, [String(p), table, String(first), String(last), String(rows), digest, "p\(p)/\(name)"])
        progress("archived \(table) \(first)…\(last) of partition \(p): \(rows) rows, sha256 \(digest.prefix(12))…")
        return rows
    }

    /// Lines and SHA-256 of an archive file as stored.
    public static func verify(_ file: URL) throws -> (rows: Int, sha256: String) {
        try ArchiveFileReader.read(file)
    }

    /// Closes the open segment at the head plus `cutMargin` (when it holds rows) and opens the
    /// next: a CHECK added NOT VALID (a brief lock), validated (appends go on), then the swap in
    /// one short transaction (detach, attach with the bound the CHECK implies: no scan).
    func closeOpenSegment(_ conn: PGConnection, _ table: String) throws -> String? {
        guard let open = try segments(conn, table).last, open.end == nil else { return nil }
        guard try conn.execute("SELECT 1 FROM \(open.name) LIMIT 1").rowCount == 1 else { return nil }
        let column = table == "events" ? "seq" : "cursor"
        let head = try conn.execute(table == "events" ? "SELECT max(seq) FROM partitions" : "SELECT max(cursor) FROM delivery_heads").int64(0, 0) ?? 0
        let bound = head + cutMargin
        let lower = open.first.map { "\(column) >= \($0) AND " } ?? ""
        let check = "\(open.name)_bound"
        try conn.execute("ALTER TABLE \(open.name) DROP CONSTRAINT IF EXISTS \(check)")
        try conn.execute("ALTER TABLE \(open.name) ADD CONSTRAINT \(check) CHECK (\(lower)\(column) < \(bound)) NOT VALID")
        try conn.execute("ALTER TABLE \(open.name) VALIDATE CONSTRAINT \(check)")
        let next = "\(table)_s\(bound)"
        try conn.execute("BEGIN")
        do {
            try conn.execute("ALTER TABLE \(table) DETACH PARTITION \(open.name)")
            try conn.execute("ALTER TABLE \(table) ATTACH PARTITION \(open.name) FOR VALUES FROM (\(open.first.map(String.init) ?? "MINVALUE")) TO (\(bound))")
            try conn.execute("CREATE TABLE \(next) PARTITION OF \(table) FOR VALUES FROM (\(bound)) TO (MAXVALUE)")
            try conn.execute("SELECT herald_dress_segment($1, $2)", [table, next])
            try conn.execute("COMMIT")
        } catch {
            _ = try? conn.execute("ROLLBACK")
            throw error
        }
        return "\(open.name) at \(column) \(bound)"
    }
}
