// Snapshots hold the content of pending notifications in clear: an erasure deletes those captured before it.
import HeraldCore

extension SnapshotStore {
    /// Deletes every snapshot of `partition` whose capture began before the event at `seq` (its
    /// parts cascade). Start-up folds from an older snapshot or the whole log until the next one is taken.
    public static func deleteSnapshots(_ conn: PGConnection, partition: Int = 0, before seq: Int64) throws(StoreError) {
        _ = try conn.execute("DELETE FROM snapshots WHERE partition = $2 AND through_seq < $1::bigint", [String(seq), String(partition)])
    }
}
