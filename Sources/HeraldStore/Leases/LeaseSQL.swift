// The lease statements: take, renew and release a partition, judged on the database's clock.

/// SQL of the partition leases (schema/004_partitions.sql, table `partitions`).
public enum LeaseSQL {
    /// Takes partition $1 whoever holds it (`herald serve` on a database it serves alone: the
    /// instance lock keeps a second one out, and a stale owner name must not block the start).
    public static let takeOver = """
        UPDATE partitions SET epoch = epoch + 1, owner = $2, address = $3,
                              lease_expires = now() + $4::bigint * interval '1 millisecond'
        WHERE partition = $1::integer
        RETURNING epoch
        """

    /// Renews partition $1 held at epoch $2 for $3 milliseconds, publishing address $4 (the
    /// listener's port is known only once it is bound): one row while it is still ours. From
    /// `herald_clock()`, the time it is done: a renewal waits for the row while an append holds it.
    /// A released partition has no owner: a renewal still in flight when its owner released it
    /// must not extend the lease again.
    public static let renew = """
        UPDATE partitions SET lease_expires = herald_clock() + $3::bigint * interval '1 millisecond', address = $4
        WHERE partition = $1::integer AND epoch = $2::bigint AND owner IS NOT NULL
        RETURNING epoch
        """

    /// Gives partition $1 held at epoch $2 up at once (a graceful stop): another instance may take
    /// it without waiting for expiry. Clearing the owner also refuses any renewal of that epoch
    /// that reaches the database after the release (see `renew`).
    public static let release = """
        UPDATE partitions SET owner = NULL, lease_expires = now() - interval '1 millisecond'
        WHERE partition = $1::integer AND epoch = $2::bigint
        """

    /// Takes a partition by force (see `takeOver`), blocking: start-up.
    public static func takeOver(_ connection: PGConnection, partition: Int, instance: String, address: String,
                                ttlMilliseconds: Int64) throws(StoreError) -> Int64 {
        let r = try connection.execute(takeOver, [String(partition), instance, address, String(ttlMilliseconds)])
        guard let epoch = r.int64(0, 0) else {
            throw .configuration("partition \(partition) does not exist in this database: run herald migrate")
        }
        return epoch
    }
}
