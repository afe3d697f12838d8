// The snapshot a retained log starts from, read outside the service: its users' states, one at a time.
import HeraldCore

/// Decoding of a stored snapshot for the tools that need it once the log's start is archived:
/// `herald retain` (what states refer to), `state`/`pending`/`explain` (a user's starting state) and
/// the name lookups (users whose every event is archived).
public enum RetainedSnapshot {
    /// Calls `body` with each user's state of snapshot `id`, in capture order, until it returns false.
    public static func forEachState(_ conn: PGConnection, id: Int64, _ body: (UserState) throws -> Bool) throws {
        var going = true
        var interned: [String: String] = [:]
        try SnapshotStore.readParts(conn, id: id) { part in
            guard going else { return }
            var reader = SnapshotReader(part)
            reader.interned = interned
            while going && !reader.isAtEnd {
                let length = try reader.count()
                let end = reader.position + length
                _ = try reader.int()  // the user's delivery count
                let state = try UserState(snapshot: &reader)
                guard reader.position == end else { throw SnapshotFormatError("a user's state does not end where its length says") }
                going = try body(state)
            }
            interned = reader.interned
        }
    }

    /// The users of the latest snapshot of every partition whose start `herald retain` dropped:
    /// their events may all be in the archive. Empty when nothing was dropped.
    public static func users(_ conn: PGConnection) throws(StoreError) -> Set<String> {
        let r = try conn.execute("SELECT partition FROM retention_horizons WHERE seq > 0 ORDER BY 1")
        var names = Set<String>()
        for i in 0..<r.rowCount {
            guard let p = r.int64(i, 0), let latest = try SnapshotStore.latest(conn, partition: Int(p)) else { continue }
            do {
                try forEachState(conn, id: latest.id) { names.insert($0.user); return true }
            } catch let error as StoreError {
                throw error
            } catch {
                throw .configuration("snapshot \(latest.id) of partition \(p) cannot be read: \(error)")
            }
        }
        return names
    }
}
