// Snapshots hold the content of pending notifications in clear: an erasure deletes those captured before it.
import HeraldCore

extension SnapshotStore {
    /// Deletes every snapshot of `partition` whose capture began before the event at `seq` (its
    /// parts cascade). Start-up folds from an older snapshot or the whole log until the next one is taken.
    public static func deleteSnapshots(_ conn: PGConnection, partition: Int = 0, before seq: Int64) throws(StoreError) {
        _ = try conn.execute("DELETE FROM snapshots WHERE partition = $2 AND through_seq < $1::bigint", [String(seq), String(partition)])
    }

    /// On a partition whose log start `herald retain` dropped, where restart cannot fold from the
    /// log's start: deletes the snapshots captured before the event at `seq` but the latest
    /// complete one (the next snapshot's completion deletes that), and the retention horizon's
    /// claim on its snapshot (replay then starts from the latest). Returns whether the partition
    /// is such a one; nothing is deleted otherwise.
    public static func deleteSnapshotsOfRetainedPartition(_ conn: PGConnection, partition: Int, before seq: Int64) throws(StoreError) -> Bool {
        let r = try conn.execute("SELECT seq FROM retention_horizons WHERE partition = $1", [String(partition)])
        guard (r.int64(0, 0) ?? 0) > 0 else { return false }
        _ = try conn.execute("""
            WITH kept AS (SELECT max(id) AS id FROM snapshots WHERE partition = $2 AND completed_at IS NOT NULL AND format = $3),
                 released AS (UPDATE retention_horizons SET snapshot_id = NULL WHERE partition = $2
                              AND snapshot_id IN (SELECT id FROM snapshots WHERE partition = $2 AND through_seq < $1::bigint))
            DELETE FROM snapshots WHERE partition = $2 AND through_seq < $1::bigint AND id IS DISTINCT FROM (SELECT id FROM kept)
            """, [String(seq), String(partition), String(SnapshotFormat.version)])
        return true
    }
}
