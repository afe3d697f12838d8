// Snapshots in PostgreSQL (tables `snapshots`, `snapshot_parts`): begin, parts by binary COPY, complete, find the latest, read back.
import CLibPQ
import HeraldCore

/// Blocking reads and writes of the `snapshots` and `snapshot_parts` tables (start-up, tools,
/// benches); the service writes its snapshots without blocking through `SnapshotUpload`, with
/// the same statements. A snapshot counts only once `complete` committed (docs/restart.md).
public enum SnapshotStore {
    /// The latest complete snapshot.
    public struct Latest: Sendable {
        public var id: Int64
        public var throughSeq: Int64
        public var format: Int
        public var header: [UInt8]
        public var users: Int64
        public var parts: Int
        public var bytes: Int64

        /// Its header: when it was captured and the apps registered then.
        public func decodedHeader() throws -> SnapshotHeader {
            try header.withUnsafeBytes { b throws(SnapshotFormatError) in
                var reader = SnapshotReader(b)
                return try SnapshotHeader(reading: &reader)
            }
        }
    }

    // The statements, shared by these blocking helpers and the service's non-blocking `SnapshotUpload`.
    static let beginSQL = "INSERT INTO snapshots (partition, through_seq, format, header) VALUES ($4, $1, $2, decode($3, 'hex')) RETURNING id"
    static let copyPartsSQL = "COPY snapshot_parts (snapshot_id, part, users, data) FROM STDIN (FORMAT binary)"
    /// Completion and the deletion of every older snapshot of its partition in one statement (one
    /// transaction), but the one the partition's retention horizon was set by: `herald replay`
    /// starts there on a log whose start `herald retain` dropped.
    static let completeSQL = """
        WITH done AS (
            UPDATE snapshots SET completed_at = now(), users = $2, parts = $3, bytes = $4,
                   through_seq = coalesce($5::bigint, through_seq) WHERE id = $1 RETURNING id, partition)
        DELETE FROM snapshots WHERE id < $1 AND partition = (SELECT partition FROM done)
            AND id IS DISTINCT FROM (SELECT snapshot_id FROM retention_horizons WHERE partition = (SELECT partition FROM done))
        """
    static let abandonSQL = "DELETE FROM snapshots WHERE id = $1 AND completed_at IS NULL"

    /// The binary COPY framing around one part's data: the file header and the row's first three
    /// fields and the data's length before it, the trailer after it.
    static func copyFraming(snapshotId id: Int64, part: Int, users: Int, dataCount: Int) -> (head: [UInt8], tail: [UInt8]) {
        var head: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
        head += be16(4)
        head += be32(8) + be64(UInt64(bitPattern: id))
        head += be32(4) + be32(UInt32(truncatingIfNeeded: part))
        head += be32(4) + be32(UInt32(truncatingIfNeeded: users))
        head += be32(UInt32(dataCount))
        return (head, be16(0xFFFF))
    }

    /// Starts a snapshot at `throughSeq`; returns its id.
    public static func begin(_ conn: PGConnection, partition: Int = 0, throughSeq: Int64, header: [UInt8]) throws(StoreError) -> Int64 {
        let r = try conn.execute(beginSQL, [String(throughSeq), String(SnapshotFormat.version), hex(header), String(partition)])
        guard let id = r.int64(0, 0) else { throw .rejected(sqlstate: "", message: "no snapshot id returned", detail: nil, hint: nil) }
        return id
    }

    /// Stores parts of snapshot `id` with one binary COPY.
    public static func writeParts(_ conn: PGConnection, id: Int64, parts: [(part: Int, users: Int, data: [UInt8])]) throws(StoreError) {
        guard !parts.isEmpty else { return }
        var chunks: [[UInt8]] = []
        var head: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00] + [0, 0, 0, 0] + [0, 0, 0, 0]
        for p in parts {
            head += be16(4)
            head += be32(8) + be64(UInt64(bitPattern: id))
            head += be32(4) + be32(UInt32(truncatingIfNeeded: p.part))
            head += be32(4) + be32(UInt32(truncatingIfNeeded: p.users))
            head += be32(UInt32(p.data.count))
            chunks.append(head)
            chunks.append(p.data)
            head = []
        }
        chunks.append(head + be16(0xFFFF))
        try conn.copyIn(copyPartsSQL, chunks: chunks)
    }

    /// Marks snapshot `id` complete and deletes every older snapshot (complete or not), in one transaction.
    /// `throughSeq`, when given, replaces the position set at `begin` (a bench that builds the
    /// history and the snapshot together learns it only at the end).
    public static func complete(_ conn: PGConnection, id: Int64, users: Int, parts: Int, bytes: Int,
                                throughSeq: Int64? = nil) throws(StoreError) {
        try conn.execute(completeSQL, [String(id), String(users), String(parts), String(bytes), throughSeq.map(String.init)])
    }

    /// Deletes an incomplete snapshot (a writer that gave up).
    public static func abandon(_ conn: PGConnection, id: Int64) throws(StoreError) {
        try conn.execute(abandonSQL, [String(id)])
    }

    /// The latest complete snapshot of a partition in this build's format, if any.
    public static func latest(_ conn: PGConnection, partition: Int = 0) throws(StoreError) -> Latest? {
        try completeSnapshot(conn, partition: partition, id: nil)
    }

    /// Snapshot `id` of `partition` if it is complete and in this build's format.
    public static func complete(_ conn: PGConnection, partition: Int, id: Int64) throws(StoreError) -> Latest? {
        try completeSnapshot(conn, partition: partition, id: id)
    }

    /// Snapshot `id` (nil: the latest) of `partition`, complete and in this build's format.
    private static func completeSnapshot(_ conn: PGConnection, partition: Int, id: Int64?) throws(StoreError) -> Latest? {
        let r = try conn.execute("""
            SELECT id, through_seq, format, encode(header, 'hex'), users, parts, bytes FROM snapshots
            WHERE partition = $2 AND ($3::bigint IS NULL OR id = $3::bigint) AND completed_at IS NOT NULL AND format = $1
            ORDER BY id DESC LIMIT 1
            """, [String(SnapshotFormat.version), String(partition), id.map(String.init)])
        guard r.rowCount == 1, let id = r.int64(0, 0), let through = r.int64(0, 1) else { return nil }
        return Latest(id: id, throughSeq: through, format: Int(r.int64(0, 2) ?? 0), header: unhex(r.string(0, 3) ?? ""),
                      users: r.int64(0, 4) ?? 0, parts: Int(r.int64(0, 5) ?? 0), bytes: r.int64(0, 6) ?? 0)
    }

    /// Streams the parts of snapshot `id` in order; `body` gets each part's bytes (valid during the call).
    public static func readParts(_ conn: PGConnection, id: Int64,
                                 _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let copy = try PGCopyOut(conn, sql: "COPY (SELECT data FROM snapshot_parts WHERE snapshot_id = \(id) ORDER BY part) TO STDOUT (FORMAT binary)")
        while let row = try copy.next() {
            try body(row.bytes(0) ?? UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    /// The stored submit bodies at `seqs` (canonical JSON; any order), 10,000 per statement.
    /// With `keys`, sealed bodies are opened (the erased form when the key is gone).
    public static func readBodies(_ conn: PGConnection, partition: Int = 0, seqs: [Int64], keys: KeyRing? = nil,
                                  _ body: (Int64, UnsafeRawBufferPointer) -> Void) throws(StoreError) {
        var i = 0
        while i < seqs.count {
            let slice = seqs[i..<min(seqs.count, i + 10_000)]
            i += slice.count
            let list = slice.map(String.init).joined(separator: ",")
            // `retained_content`: what `herald retain` kept of dropped events that states still refer to.
            let copy = try PGCopyOut(conn, sql: "COPY (SELECT seq, body, user_id FROM herald_bodies(\(partition), '{\(list)}'::bigint[])) TO STDOUT (FORMAT binary)")
            while let row = try copy.next() {
                guard let seq = row.int64(0) else { continue }
                let stored = row.bytes(1) ?? UnsafeRawBufferPointer(start: nil, count: 0)
                switch keys?.open(stored, user: row.string(2)) ?? .clear {
                case .clear: body(seq, stored)
                case .opened(let b), .erased(let b): b.withUnsafeBytes { body(seq, $0) }
                }
            }
        }
    }

    static func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func be32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
    static func be64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * $0)) } }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    static func unhex(_ s: String) -> [UInt8] {
        func v(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x61 + 10 }
        let u = Array(s.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i + 1 < u.count { out.append(v(u[i]) << 4 | v(u[i + 1])); i += 2 }
        return out
    }
}
