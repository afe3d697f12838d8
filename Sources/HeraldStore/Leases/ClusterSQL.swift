// The membership statements: heartbeat, the cluster view, take and leave, judged on the database's clock.
import HeraldCore

/// SQL of instance membership and partition takes (schema/007_instances.sql), and the reading of
/// the cluster view into `ClusterView`. Each statement has its parameters' builder, for the
/// service's non-blocking `send`, and a blocking form for tools and tests.
public enum ClusterSQL {
    /// Writes instance $1's heartbeat (serving at $2), live for $3 milliseconds.
    public static let heartbeat = "SELECT herald_heartbeat($1, $2, $3::bigint)"

    public static func heartbeatParameters(instance: String, address: String, ttlMilliseconds: Int64) -> [String?] {
        [instance, address, String(ttlMilliseconds)]
    }

    /// Takes partition $1 for instance $2 (at $3) for $4 milliseconds iff its epoch is still $5
    /// and its lease is free: one row, the new epoch, NULL when it was not takeable.
    public static let take = "SELECT herald_take_partition($1::integer, $2, $3, $4::bigint, $5::bigint)"

    public static func takeParameters(partition: Int, instance: String, address: String, ttlMilliseconds: Int64,
                                      expectedEpoch: Int64) -> [String?] {
        [String(partition), instance, address, String(ttlMilliseconds), String(expectedEpoch)]
    }

    /// Deletes instance $1's row (a graceful stop, after its partitions were released).
    public static let leave = "SELECT herald_leave($1)"

    /// How long a take waits for the partition's row lock before it gives up. A take waits for the
    /// row while an append of the former owner holds it; an owner paused in the middle of an
    /// append (a zombie) holds it as long as it sleeps, and a take waiting that long would hold the
    /// taker's loop — its router with every client — with it. A take refused so is tried again a
    /// tick later (`MembershipStateMachine.takeFoundRowLocked`); a racing take or a release holds
    /// the row for a few milliseconds. On Citus the wait is on a worker, where the coordinator's
    /// lock timeout does not reach: there the take's statement timeout ends it.
    public static let takeLockWaitMilliseconds = 50
    public static let takeStatementMilliseconds = 200

    /// Whether `error` is a statement that gave up waiting for a lock (`take`'s lock wait).
    public static func isLockWaitTimeout(_ error: StoreError) -> Bool {
        // lock_not_available; query_canceled (the statement timeout, on Citus)
        if case .rejected(let sqlstate, _, _, _) = error { return sqlstate == "55P03" || sqlstate == "57014" }
        return false
    }

    public static func leaveParameters(instance: String) -> [String?] { [instance] }

    /// The cluster view in one statement (one now()): a row per partition (kind 'p': number,
    /// epoch, owner, address, lease live) and a row per instance (kind 'i': name, address, live).
    /// A lease is live exactly when `herald_take_partition` would refuse it for being held.
    public static let view = """
        SELECT 'p' AS kind, p.partition, p.epoch, p.owner, p.address,
               (p.owner IS NOT NULL AND p.lease_expires IS NOT NULL AND p.lease_expires >= now()) AS live
        FROM partitions p
        UNION ALL
        SELECT 'i', NULL, NULL, i.name, i.address, i.heartbeat_expires > now()
        FROM instances i
        """

    /// Reads the result of `view`.
    public static func clusterView(from result: PGResult) throws(StoreError) -> ClusterView {
        var live: [String] = []
        var partitions: [ClusterView.Partition] = []
        for row in 0..<result.rowCount {
            let isLive = result.bool(row, 5) ?? false
            switch result.string(row, 0) {
            case "p":
                guard let partition = result.int64(row, 1), let epoch = result.int64(row, 2) else {
                    throw Self.malformed("a partition row without a number or an epoch")
                }
                partitions.append(ClusterView.Partition(partition: Int(partition), epoch: epoch,
                                                        owner: result.string(row, 3), address: result.string(row, 4),
                                                        leaseLive: isLive))
            case "i":
                if isLive, let name = result.string(row, 3) { live.append(name) }
            default:
                throw Self.malformed("a row of unknown kind")
            }
        }
        return ClusterView(liveInstances: live, partitions: partitions)
    }

    private static func malformed(_ what: String) -> StoreError {
        .rejected(sqlstate: "XX000", message: "the cluster view has \(what)", detail: nil,
                  hint: "The database's schema is not the one this build expects: run herald migrate.")
    }

    /// The new epoch from the result of `take`, nil when the partition was not takeable.
    public static func takenEpoch(from result: PGResult) -> Int64? {
        result.rowCount > 0 ? result.int64(0, 0) : nil
    }

    // MARK: Blocking forms

    public static func heartbeat(_ connection: PGConnection, instance: String, address: String,
                                 ttlMilliseconds: Int64) throws(StoreError) {
        _ = try connection.execute(heartbeat, heartbeatParameters(instance: instance, address: address,
                                                                  ttlMilliseconds: ttlMilliseconds))
    }

    /// Takes the partition (see `take`), waiting at most `takeLockWaitMilliseconds` for its row.
    public static func take(_ connection: PGConnection, partition: Int, instance: String, address: String,
                            ttlMilliseconds: Int64, expectedEpoch: Int64) throws(StoreError) -> Int64? {
        try connection.execute("SET lock_timeout = '\(takeLockWaitMilliseconds)ms'")
        try connection.execute("SET statement_timeout = '\(takeStatementMilliseconds)ms'")
        defer {
            _ = try? connection.execute("RESET lock_timeout")
            _ = try? connection.execute("RESET statement_timeout")
        }
        return takenEpoch(from: try connection.execute(take, takeParameters(
            partition: partition, instance: instance, address: address, ttlMilliseconds: ttlMilliseconds,
            expectedEpoch: expectedEpoch)))
    }

    public static func leave(_ connection: PGConnection, instance: String) throws(StoreError) {
        _ = try connection.execute(leave, leaveParameters(instance: instance))
    }

    public static func view(_ connection: PGConnection) throws(StoreError) -> ClusterView {
        try clusterView(from: connection.execute(view))
    }
}
