// The writer's COPY fast path: rows of `events` in PostgreSQL's binary COPY format.
import HeraldCore

/// Binary `COPY events (…) FROM STDIN (FORMAT binary)` data for a batch whose positions are
/// known (base + 1 … base + n, claimed by `herald_claim_events` in the same transaction,
/// which also checks the writer's epoch). Binary: no escaping on either side; text fields still pass the server's encoding
/// check (a NUL byte is refused, not truncated). `body` is `text`: the server
/// does not parse it as JSON (Herald's parser accepted the request, its encoder wrote the bytes).
public enum EventCopy {
    /// The COPY's column list, in the order `encode` writes the fields.
    public static let columns = "seq, user_id, type, app, notification_id, body, engine_time, recipient_index, partition"

    /// The simple query that opens a COPY transaction for `count` rows: claims the positions, then
    /// starts the COPY. With `commit`, COMMIT follows the COPY in the same query (the server runs
    /// it once the data has ended). `count` is an integer Herald formats; nothing else varies.
    /// With `deliveries` > 0 the query also claims that many delivery cursors (after the positions)
    /// and runs a COPY into `deliveries` (`DeliveryCopy`) after the events'. With `count` 0 it
    /// copies deliveries alone (no position claimed, the event head's row lock not taken).
    static func startQuery(count: Int, deliveries: Int = 0, commit: Bool, scope: AppendScope = .unfenced) -> String {
        var copies: [String] = []
        if count > 0 { copies.append("COPY events (\(columns)) FROM STDIN (FORMAT binary)") }
        if deliveries > 0 { copies.append(DeliveryCopy.start) }
        return "BEGIN;"
            + (count > 0 ? "SELECT herald_claim_events(\(scope.sqlArguments), \(count));" : "")
            + (deliveries > 0 ? DeliveryCopy.claim(count: deliveries, scope: scope) : "")
            + copies.joined(separator: ";")
            + (commit ? ";COMMIT" : "")
    }

    /// The whole COPY data for `rows` at base + 1 …: header, one tuple per row, trailer.
    static func encode(_ rows: [EventRow], base: Int64, partition: Int32 = 0) -> CopyData {
        rows.withUnsafeBufferPointer { encode($0, base: base, partition: partition) }
    }

    /// Rows are read in place (`rs[i].field`): `for r in rows` would copy each row, retaining and
    /// releasing its five strings. Written into a buffer of the exact size (`BinaryCopy.data`):
    /// appending field by field to an array would cost ~14 capacity checks per row.
    private static func encode(_ rs: UnsafeBufferPointer<EventRow>, base: Int64, partition: Int32) -> CopyData {
        var total = BinaryCopy.framingSize
        for i in rs.indices {
            total += 2 + 9 * 4 + 8 + 8 + 4 + 4 + rs[i].bodyBytes.count + rs[i].type.utf8.count
                + (rs[i].user?.utf8.count ?? 0) + (rs[i].app?.utf8.count ?? 0) + (rs[i].notificationId?.utf8.count ?? 0)
        }
        return BinaryCopy.data(total: total, rows: rs.count) { w, positions in
            var seq = base
            for i in rs.indices {
                seq += 1
                w.be16(9)
                w.position(seq, notingIn: &positions)
                w.text(rs[i].user)
                w.text(rs[i].type)
                w.text(rs[i].app)
                w.text(rs[i].notificationId)
                w.text(bytes: rs[i].bodyBytes)
                w.timestamptz(rs[i].engineTime)
                w.int4(rs[i].recipientIndex)
                w.int4(partition)
            }
        }
    }
}

