// What the log says about a user's erasures: for `herald state` and `explain`.
import HeraldCore

/// A user's `erase` events, read from the log.
public enum ErasureRecord {
    /// The seq and engine time of each of `user`'s erasures, oldest first.
    public static func erasures(_ connection: PGConnection, user: String) throws(StoreError) -> [(seq: Int64, at: Instant)] {
        let r = try connection.execute("""
            SELECT seq, (extract(epoch FROM engine_time) * 1000)::bigint FROM events
            WHERE user_id = $1 AND type = 'erase' ORDER BY seq
            """, [user])
        return (0..<r.rowCount).map { (r.int64($0, 0) ?? 0, Instant(millisecondsSinceEpoch: r.int64($0, 1) ?? 0)) }
    }

    /// The note `state` and `explain` show for a user with erasures; nil for one without.
    public static func note(_ erasures: [(seq: Int64, at: Instant)]) -> JSONValue? {
        guard let last = erasures.last else { return nil }
        return .object([
            "erasures": .int(Int64(erasures.count)),
            "lastErasureSeq": .int(last.seq),
            "lastErasureAt": .string(last.at.rfc3339),
            "note": .string("content erased: the user's notification content stored before seq \(last.seq) was erased (its key deleted); decisions are kept"),
        ])
    }
}
