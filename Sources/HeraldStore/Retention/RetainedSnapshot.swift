// The snapshot a retained log starts from, read outside the service: its users' states, one at a time.
import HeraldCore

/// Decoding of a stored snapshot for the tools that need it once the log's start is archived:
/// `herald retain` (what states refer to), `state`/`pending`/`explain` (a user's starting state) and
/// the name lookups (users whose every event is archived).
public enum RetainedSnapshot {
    /// Calls `body` with each user's state of snapshot `id`, in capture order, until it returns false.
    public static func forEachState(_ conn: PGConnection, id: Int64, _ body: (UserState) throws -> Bool) throws {
        try forEachState(conn, id: id) { state, _ in try body(state) }
    }

    /// Calls `body` with each user's state of snapshot `id` and the user's delivery count then, in
    /// capture order, until it returns false.
    public static func forEachState(_ conn: PGConnection, id: Int64, _ body: (UserState, Int64) throws -> Bool) throws {
        var going = true
        var interned: [String: String] = [:]
        try SnapshotStore.readParts(conn, id: id) { part in
            guard going else { return }
            var reader = SnapshotReader(part)
            reader.interned = interned
            while going && !reader.isAtEnd {
                let length = try reader.count()
                let end = reader.position + length
                let deliveries = try reader.int()
                let state = try UserState(snapshot: &reader)
                guard reader.position == end else { throw SnapshotFormatError("a user's state does not end where its length says") }
                going = try body(state, Int64(deliveries))
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

    /// Where a replay of a partition whose start `herald retain` dropped begins: the snapshot the
    /// retention horizon was set by (the latest one if that is gone), the apps registered then,
    /// and the first delivery cursor still stored. Nil when nothing was dropped.
    public struct HorizonStart: Sendable {
        public var snapshotId: Int64
        public var throughSeq: Int64
        public var capturedAt: Instant
        public var apps: AppRegistry
        /// Deliveries up to this cursor were dropped.
        public var droppedThroughCursor: Int64
    }

    public static func horizonStart(_ conn: PGConnection, partition: Int) throws(StoreError) -> HorizonStart? {
        let r = try conn.execute("SELECT seq, cursor, snapshot_id FROM retention_horizons WHERE partition = $1", [String(partition)])
        guard r.rowCount == 1, (r.int64(0, 0) ?? 0) > 0 || (r.int64(0, 1) ?? 0) > 0 else { return nil }
        var snapshot = try r.int64(0, 2).flatMap { id throws(StoreError) in try SnapshotStore.complete(conn, partition: partition, id: id) }
        if snapshot == nil { snapshot = try SnapshotStore.latest(conn, partition: partition) }
        guard let snapshot else { throw .configuration("partition \(partition)'s start was dropped by herald retain but no complete snapshot is stored") }
        do {
            let header = try snapshot.decodedHeader()
            return HorizonStart(snapshotId: snapshot.id, throughSeq: snapshot.throughSeq, capturedAt: header.capturedAt, apps: header.apps,
                                droppedThroughCursor: r.int64(0, 1) ?? 0)
        } catch {
            throw .configuration("snapshot \(snapshot.id) of partition \(partition) cannot be read: \(error)")
        }
    }
}
