// The writer's COPY path for deliveries: rows of `deliveries` in PostgreSQL's binary COPY format.

/// Binary `COPY deliveries (…) FROM STDIN (FORMAT binary)` data for a batch whose cursors are
/// known (base + 1 … base + n, claimed by `herald_claim_deliveries` in the same
/// transaction, as `herald_append_deliveries` does). Sent in the same simple query as the events'
/// COPY (`EventCopy`), so a transaction with both takes three round trips, as it would through
/// the append function, without that function's eleven arrays, `unnest` and row-at-a-time insert
/// on the server; or alone (`BEGIN; SELECT herald_claim_deliveries(…); COPY
/// deliveries …; COMMIT`, two round trips), as a summary storm's appends are. A (user, user_index)
/// stored already (a delivery re-derived after a restart) aborts the COPY with a unique violation;
/// the writer then sends the whole transaction through the append functions, whose careful path
/// skips it. `trace` and `body` are `text`: binary COPY sends their bytes as they
/// are, and the server checks only their encoding (Herald wrote them as canonical JSON).
public enum DeliveryCopy {
    /// The COPY's column list, in the order `encode` writes the fields.
    public static let columns = "cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at, rules_version, trace, body, partition"

    /// Claims `count` cursors; its one row is the cursor before the batch.
    static func claim(count: Int, scope: AppendScope = .unfenced) -> String {
        "SELECT herald_claim_deliveries(\(scope.sqlArguments), \(count));"
    }

    static let start = "COPY deliveries (\(columns)) FROM STDIN (FORMAT binary)"

    /// The simple query of a chained append (`GroupCommitWriter.append(deliveries:after:)`): the
    /// rows at cursors `base + 1 … end`, then the head moved from `base` to `end`. The head moves
    /// last, after waiting for the chained transaction that ends at `base` (each takes an advisory
    /// lock on its end first, the next waits on it): so it commits after that one, cursors stay in
    /// commit order, and two chained appends store their rows at the same time. When the head is
    /// not at `base` then (that transaction rolled back, or it had not yet started — rare — or
    /// another writer moved the head) it fails with SQLSTATE 40001 and stores nothing.
    static func chainedQuery(after base: Int64, count: Int, scope: AppendScope = .unfenced) -> String {
        let end = base + Int64(count)
        return "BEGIN;DO $herald$BEGIN PERFORM pg_advisory_xact_lock(\(lockSpace), \(lockKey(end))); END$herald$;\(start);"
            + "DO $herald$BEGIN PERFORM pg_advisory_xact_lock_shared(\(lockSpace), \(lockKey(base))); "
            + "PERFORM herald_advance_deliveries(\(scope.sqlArguments), \(base), \(end)); END$herald$;COMMIT"
    }

    /// The advisory locks' first key ("HE" and a number; other applications' advisory locks on this
    /// database should not use it) and the second, a cursor's low 31 bits (chained transactions in
    /// flight at once are never 2^31 cursors apart).
    static let lockSpace: Int32 = 0x4845_0001
    static func lockKey(_ cursor: Int64) -> Int32 { Int32(truncatingIfNeeded: cursor & 0x7FFF_FFFF) }

    /// The whole COPY data for `rows` at base + 1 …: header, one tuple per row, trailer, written
    /// into a buffer of the exact size.
    static func encode(_ rows: [DeliveryRow], base: Int64, partition: Int32 = 0) -> CopyData {
        rows.withUnsafeBufferPointer { encode($0, base: base, partition: partition) }
    }

    /// Rows are read in place (`rs[i].field`): `for r in rows` copied each row, retaining and
    /// releasing its eight reference-counted fields.
    private static func encode(_ rs: UnsafeBufferPointer<DeliveryRow>, base: Int64, partition: Int32) -> CopyData {
        var total = BinaryCopy.framingSize
        for i in rs.indices {
            total += 2 + 13 * 4 + 8 * 4 + 4
                + rs[i].user.utf8.count + rs[i].kind.utf8.count + (rs[i].app?.utf8.count ?? 0) + (rs[i].notificationId?.utf8.count ?? 0)
                + rs[i].reason.utf8.count + rs[i].rulesVersion.utf8.count + rs[i].traceBytes.count + rs[i].bodyBytes.count
        }
        return BinaryCopy.data(total: total, rows: rs.count) { w, positions in
            var cursor = base
            for i in rs.indices {
                cursor += 1
                w.be16(13)
                w.position(cursor, notingIn: &positions)
                w.text(rs[i].user)
                w.int8(rs[i].userIndex)
                w.int8(rs[i].causeSeq)
                w.text(rs[i].kind)
                w.text(rs[i].app)
                w.text(rs[i].notificationId)
                w.text(rs[i].reason)
                w.timestamptz(rs[i].at)
                w.text(rs[i].rulesVersion)
                w.text(bytes: rs[i].traceBytes)
                w.text(bytes: rs[i].bodyBytes)
                w.int4(partition)
            }
        }
    }
}
