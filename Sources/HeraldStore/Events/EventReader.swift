// Reads the log back in position order (restart, replay, tests): blocking, paged.
import HeraldCore

/// Paged readers of events and deliveries. Blocking: for tools, start-up and tests.
public enum EventReader {
    /// A partition's events with `seq > after`, in order, at most `limit`.
    public static func events(_ connection: PGConnection, partition: Int = 0, after: Int64, limit: Int = 10_000) throws(StoreError) -> [StoredEventRow] {
        try rows(connection.execute(StoreSQL.readEvents, [String(after), String(limit), String(partition)]))
    }

    /// One user's events and the global ones (registerApp, clock), with `seq > after`, in order.
    /// `partition` must be the user's (`Partitioning.partition(of:)`).
    public static func events(_ connection: PGConnection, partition: Int = 0, user: String, after: Int64, limit: Int = 10_000) throws(StoreError) -> [StoredEventRow] {
        try rows(connection.execute(StoreSQL.readUserEvents, [String(after), String(limit), String(partition), user]))
    }

    /// Decodes rows in `StoreSQL.readEvents`' column order.
    private static func rows(_ r: PGResult) -> [StoredEventRow] {
        (0..<r.rowCount).map { i in
            StoredEventRow(seq: r.int64(i, 0) ?? 0, row: EventRow(
                user: r.string(i, 1), type: r.string(i, 2) ?? "", app: r.string(i, 3),
                notificationId: r.string(i, 4), bodyBytes: r.bytes(i, 5) ?? [],
                engineTime: Instant(millisecondsSinceEpoch: r.int64(i, 6) ?? 0),
                recipientIndex: Int32(truncatingIfNeeded: r.int64(i, 7) ?? 0)))
        }
    }

    /// A partition's deliveries with `cursor > after`, in order, at most `limit`.
    public static func deliveries(_ connection: PGConnection, partition: Int = 0, after: Int64, limit: Int = 10_000) throws(StoreError) -> [StoredDeliveryRow] {
        let r = try connection.execute(StoreSQL.readDeliveries, [String(after), String(limit), String(partition)])
        return (0..<r.rowCount).map { i in
            StoredDeliveryRow(cursor: r.int64(i, 0) ?? 0, row: DeliveryRow(
                user: r.string(i, 1) ?? "", userIndex: r.int64(i, 2) ?? 0, causeSeq: r.int64(i, 3) ?? 0,
                kind: r.string(i, 4) ?? "", app: r.string(i, 5), notificationId: r.string(i, 6),
                reason: r.string(i, 7) ?? "", at: Instant(millisecondsSinceEpoch: r.int64(i, 8) ?? 0),
                rulesVersion: r.string(i, 9) ?? "", traceBytes: r.bytes(i, 10) ?? [], bodyBytes: r.bytes(i, 11) ?? []))
        }
    }

    /// A partition's highest committed event position (0 when empty).
    public static func head(_ connection: PGConnection, partition: Int = 0) throws(StoreError) -> Int64 {
        try connection.execute("SELECT seq FROM partitions WHERE partition = $1", [String(partition)]).int64(0, 0) ?? 0
    }

    /// A partition's highest committed delivery cursor (0 when empty).
    public static func deliveryHead(_ connection: PGConnection, partition: Int = 0) throws(StoreError) -> Int64 {
        try connection.execute("SELECT cursor FROM delivery_heads WHERE partition = $1", [String(partition)]).int64(0, 0) ?? 0
    }

    /// The database's partitioning (P).
    public static func partitioning(_ connection: PGConnection) throws(StoreError) -> Partitioning {
        let count = try connection.execute("SELECT partitions FROM partitioning").int64(0, 0) ?? 1
        return Partitioning(count: Int(min(max(count, 1), Int64(Partitioning.maximumCount))))
    }

    /// A consumer's acknowledged cursor in a partition, nil when the consumer is unknown (0 when
    /// it is known but acknowledged nothing there).
    public static func consumerCursor(_ connection: PGConnection, name: String, partition: Int = 0) throws(StoreError) -> Int64? {
        let r = try connection.execute(ConsumerSQL.ackedCursor, [name, String(partition)])
        return r.rowCount == 0 ? nil : r.int64(0, 0)
    }
}
