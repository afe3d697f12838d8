// The writer's COPY fast path: rows of `events` in PostgreSQL's binary COPY format.
import HeraldCore

/// Binary `COPY events (…) FROM STDIN (FORMAT binary)` data for a batch whose positions are
/// known (base + 1 … base + n, claimed by `UPDATE event_head … RETURNING` in the same
/// transaction). Binary: no escaping on either side; text fields still pass the server's encoding
/// check (a NUL byte is refused, not truncated). `body` is `text` since migration 007: the server
/// no longer parses it as JSON (Herald's parser accepted the request, its encoder wrote the bytes).
enum EventCopy {
    /// The COPY's column list, in the order `encode` writes the fields.
    static let columns = "seq, user_id, type, app, notification_id, body, engine_time"

    /// The simple query that opens a COPY transaction for `count` rows: claims the positions, then
    /// starts the COPY. With `commit`, COMMIT follows the COPY in the same query (the server runs
    /// it once the data has ended). `count` is an integer Herald formats; nothing else varies.
    /// With `deliveries` > 0 the query also claims that many delivery cursors (after the positions)
    /// and runs a COPY into `deliveries` (`DeliveryCopy`) after the events'. With `count` 0 it
    /// copies deliveries alone (no position claimed, the event head's row lock not taken).
    static func startQuery(count: Int, deliveries: Int = 0, commit: Bool) -> String {
        var copies: [String] = []
        if count > 0 { copies.append("COPY events (\(columns)) FROM STDIN (FORMAT binary)") }
        if deliveries > 0 { copies.append(DeliveryCopy.start) }
        return "BEGIN;"
            + (count > 0 ? "UPDATE event_head SET seq = seq + \(count) RETURNING seq - \(count);" : "")
            + (deliveries > 0 ? DeliveryCopy.claim(count: deliveries) : "")
            + copies.joined(separator: ";")
            + (commit ? ";COMMIT" : "")
    }

    /// The whole COPY data for `rows` at base + 1 …: header, one tuple per row, trailer.
    static func encode(_ rows: [EventRow], base: Int64) -> [UInt8] {
        rows.withUnsafeBufferPointer { encode($0, base: base) }
    }

    /// Rows are read in place (`rs[i].field`): `for r in rows` copied each row, retaining and
    /// releasing its five strings.
    private static func encode(_ rs: UnsafeBufferPointer<EventRow>, base: Int64) -> [UInt8] {
        var capacity = 32
        for i in rs.indices {
            capacity += 2 + 7 * 4 + 8 + 8 + rs[i].body.utf8.count + rs[i].type.utf8.count
                + (rs[i].user?.utf8.count ?? 0) + (rs[i].app?.utf8.count ?? 0) + (rs[i].notificationId?.utf8.count ?? 0)
        }
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        out += BinaryCopy.signature
        be32(0, &out)          // flags: no OIDs
        be32(0, &out)          // header extension length
        var seq = base
        for i in rs.indices {
            seq += 1
            be16(7, &out)
            be32(8, &out); be64(UInt64(bitPattern: seq), &out)
            text(rs[i].user, &out)
            text(rs[i].type, &out)
            text(rs[i].app, &out)
            text(rs[i].notificationId, &out)
            text(rs[i].body, &out)
            be32(8, &out)
            be64(UInt64(bitPattern: (rs[i].engineTime.millisecondsSinceEpoch - PGBinaryParameters.postgresEpochMilliseconds) * 1000), &out)
        }
        be16(0xFFFF, &out)     // trailer: field count -1
        return out
    }

    @inline(__always) private static func text(_ value: String?, _ out: inout [UInt8]) {
        guard let value else { be32(UInt32(bitPattern: -1), &out); return }
        value.withUTF8Bytes { utf8 in
            be32(UInt32(utf8.count), &out)
            out.append(contentsOf: utf8)
        }
    }

    @inline(__always) private static func be16(_ v: UInt16, _ out: inout [UInt8]) {
        out.append(UInt8(v >> 8)); out.append(UInt8(v & 0xFF))
    }

    @inline(__always) private static func be32(_ v: UInt32, _ out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
    }

    @inline(__always) private static func be64(_ v: UInt64, _ out: inout [UInt8]) {
        withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
    }
}
