// `herald migrate --citus`: distributes a freshly migrated database over a Citus cluster (SPEC §9, decision 0039).
import Foundation

/// Turns a migrated database on a Citus coordinator into a distributed one, without changing the
/// schema: every table keyed by `partition` becomes a distributed table on that column, all
/// co-located with `events` (one partition's rows, heads and lease are on one worker, so each
/// append transaction is a single-shard, single-node one); the small global tables become reference
/// tables; the append and claim functions are distributed by their `p_partition` argument, so a
/// call runs on the partition's worker. Tables that stay on the coordinator are read at start-up or
/// written off the request path (see `coordinatorTables`).
///
/// Idempotent: what is distributed already is left alone. Refused on a database that holds events
/// or deliveries in tables not yet distributed (Citus would copy them; `herald export` and
/// `import` into a fresh distributed database move a log).
public enum CitusDistribution {
    /// Distributed by `partition`, co-located with `events` (the first is the co-location anchor).
    public static let distributedTables = ["events", "deliveries", "partitions", "delivery_heads", "consumer_cursors"]

    /// Replicated to every node: read by the request path's joins, written rarely (a write is a
    /// two-phase commit over every node). `partitioning`: P, set once. `consumers`: names and filters.
    public static let referenceTables = ["partitioning", "consumers"]

    /// Left on the coordinator, with why:
    /// - `snapshots`, `snapshot_parts`: megabytes a part, written by a background connection every
    ///   snapshot interval and read at start-up; `snapshot_parts` has no `partition` column (its
    ///   key is the snapshot's id), so it cannot be co-located.
    /// - `rules_versions`: one row per start-up, keyed by an identity column.
    /// - `user_keys`: keyed by user, not partition; read once at start-up, one insert per new user.
    /// - `herald_migrations`: the migrator's own record.
    /// - `retention_horizons`, `archive_segments`, `notification_keys`, `retained_content` (schema 009): retention's,
    ///   which Citus does not run yet (`herald_segment_log` refuses; decision 0042); they stay empty.
    public static let coordinatorTables = ["snapshots", "snapshot_parts", "rules_versions", "user_keys", "herald_migrations",
                                           "retention_horizons", "archive_segments", "notification_keys", "retained_content"]

    /// A function distributed by its first argument, `p_partition`. `forced`: delegated to the
    /// partition's worker inside a transaction block too (Citus's `force_delegation`), because its
    /// body catches a unique violation, which Citus cannot catch for an INSERT … SELECT it runs from
    /// the coordinator; the rest of such a transaction may still touch other partitions.
    public struct PartitionFunction: Sendable {
        public var signature: String
        public var forced: Bool
    }

    public static let partitionFunctions = [
        PartitionFunction(signature: "herald_claim_events(integer, bigint, bigint)", forced: false),
        PartitionFunction(signature: "herald_claim_deliveries(integer, bigint, bigint)", forced: false),
        PartitionFunction(signature: "herald_advance_deliveries(integer, bigint, bigint, bigint)", forced: false),
        PartitionFunction(signature: "herald_append_events(integer, bigint, text[], text[], text[], text[], text[], timestamptz[], integer[])",
                          forced: true),
        PartitionFunction(signature: """
            herald_append_deliveries(integer, bigint, text[], bigint[], bigint[], text[], text[], text[], text[], \
            timestamptz[], text[], text[], text[])
            """, forced: true),
    ]

    /// Functions the distributed ones call, propagated to every node as they are.
    public static let helperFunctions = ["herald_refuse_fenced(integer, bigint)", "herald_refuse_change()"]

    /// What `distribute` did (empty lists when everything was distributed already).
    public struct Report: Sendable, Equatable {
        public var distributed: [String] = []
        public var referenced: [String] = []
        public var functions: [String] = []
        public var workers = 0
        /// Shard groups moved so that each worker holds as many partitions (within one).
        public var moved = 0

        public var summary: String {
            let moves = moved > 0 ? "; \(moved) shard group(s) moved to spread the partitions evenly" : ""
            if distributed.isEmpty && referenced.isEmpty && functions.isEmpty {
                return "already distributed over \(workers) worker(s)" + moves
            }
            return "distributed over \(workers) worker(s): \(distributed.count) table(s) by partition, "
                + "\(referenced.count) reference table(s), \(functions.count) function(s)" + moves
        }
    }

    /// Distributes the database `connection` is on (migrated already, P set). Creates the citus
    /// extension when it is missing and the role may.
    @discardableResult
    public static func distribute(_ connection: PGConnection, log: (String) -> Void = { _ in }) throws(StoreError) -> Report {
        try connection.execute("SET client_min_messages = warning")
        try ensureExtension(connection)
        var report = Report()
        report.workers = Int(try connection.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").int64(0, 0) ?? 0)
        let nodesWithShards = try connection.execute("SELECT count(*) FROM pg_dist_node WHERE shouldhaveshards AND isactive").int64(0, 0) ?? 0
        guard report.workers > 0 || nodesWithShards > 0 else {
            throw .configuration("""
                The Citus coordinator has no worker nodes, so there is nowhere to put the shards. Add \
                the workers first, on the coordinator in this database: SELECT citus_set_coordinator_host('<host>', <port>); \
                SELECT citus_add_node('<worker host>', <port>); (docs/citus.md, "On Citus").
                """)
        }
        let existing = try distributionOf(connection)
        try refuseStoredLog(connection, existing: existing)

        try connection.execute("BEGIN")
        do {
            // The append-only triggers of events and deliveries (statement-level, refusing UPDATE,
            // DELETE, TRUNCATE) are kept: Citus copies them to every shard, where they fire as on
            // one PostgreSQL. Citus refuses to distribute a table with triggers unless told that
            // it has seen them.
            try connection.execute("SET LOCAL citus.enable_unsafe_triggers = on")
            // A shard per partition up to 32 (Citus's default shard count): rows of different
            // partitions may share a shard, never a partition's rows two.
            for (i, table) in distributedTables.enumerated() where existing[table] == nil {
                let colocate = i == 0 ? "'none'" : "'\(distributedTables[0])'"
                try connection.execute("SELECT create_distributed_table('\(table)', 'partition', colocate_with := \(colocate))")
                report.distributed.append(table)
            }
            for table in referenceTables where existing[table] == nil {
                try connection.execute("SELECT create_reference_table('\(table)')")
                report.referenced.append(table)
            }
            // The rows the heads and `partitioning` held were copied into their shards; the
            // coordinator's own copies are no longer visible, and are removed (the log's tables
            // are empty, and refuse TRUNCATE).
            for table in report.distributed + report.referenced where table != "events" && table != "deliveries" {
                try connection.execute("SELECT truncate_local_data_after_distributing_table('\(table)')")
            }
            try connection.execute("COMMIT")
        } catch {
            _ = try? connection.execute("ROLLBACK")
            throw explained(error)
        }

        let functions = try distributedFunctions(connection)
        for name in helperFunctions where !functions.keys.contains(normalized(name)) {
            try connection.execute("SELECT create_distributed_function('\(name)')")
            report.functions.append(name)
        }
        for f in partitionFunctions {
            if let d = functions[normalized(f.signature)], d.byPartition, d.forced == f.forced { continue }
            try connection.execute("""
                SELECT create_distributed_function('\(f.signature)', 'p_partition', colocate_with := '\(distributedTables[0])', \
                force_delegation := \(f.forced))
                """)
            report.functions.append(f.signature)
        }
        report.moved = try balancePartitions(connection, log: log)
        log("citus: " + report.summary)
        return report
    }

    /// A node that holds shards.
    struct Node: Hashable {
        var host: String
        var port: Int
    }

    /// Spreads the partitions evenly over the workers by moving shard groups, on a database whose
    /// log is empty: Citus places a partition by its hash among `citus.shard_count` ranges, and
    /// 16 partitions over two workers came out 11 and 5. While the fullest and the emptiest node
    /// differ by more than one partition, the shard group of the fullest that narrows the gap most
    /// moves to the emptiest (`citus_move_shard_placement`, writes blocked; ~0.5 s a group).
    /// Returns the shard groups moved.
    static func balancePartitions(_ connection: PGConnection, log: (String) -> Void) throws(StoreError) -> Int {
        let nodeRows = try connection.execute("""
            SELECT nodename, nodeport FROM pg_dist_node WHERE isactive AND shouldhaveshards AND noderole = 'primary' ORDER BY nodeid
            """)
        let nodes = (0..<nodeRows.rowCount).map { Node(host: nodeRows.string($0, 0) ?? "", port: Int(nodeRows.int64($0, 1) ?? 0)) }
        guard nodes.count > 1 else { return 0 }
        let rows = try connection.execute("""
            SELECT s.shardid, s.nodename, s.nodeport, count(*)
            FROM generate_series(0, (SELECT partitions FROM partitioning) - 1) g
            JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('\(distributedTables[0])', g)
                               AND s.table_name = '\(distributedTables[0])'::regclass
            GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1
            """)
        var groups: [(shard: Int64, node: Node, partitions: Int)] = []
        for i in 0..<rows.rowCount {
            groups.append((rows.int64(i, 0) ?? 0, Node(host: rows.string(i, 1) ?? "", port: Int(rows.int64(i, 2) ?? 0)),
                           Int(rows.int64(i, 3) ?? 0)))
        }
        var now: [Node: Int] = Dictionary(uniqueKeysWithValues: nodes.map { ($0, 0) })
        for g in groups { now[g.node, default: 0] += g.partitions }
        guard let most = now.values.max(), let least = now.values.min(), most - least > 1 else { return 0 }
        guard try connection.execute("SELECT 1 FROM \(distributedTables[0]) LIMIT 1").rowCount == 0 else {
            log("citus: the partitions are spread unevenly over the workers (\(least) to \(most) a node); "
                + "the log is not empty, so no shard is moved (citus_move_shard_placement moves one)")
            return 0
        }
        var load = now
        var moves: [(shard: Int64, from: Node, to: Node)] = []
        while true {
            guard let hi = nodes.max(by: { load[$0]! < load[$1]! }), let lo = nodes.min(by: { load[$0]! < load[$1]! }) else { break }
            let gap = load[hi]! - load[lo]!
            // A group of s partitions moved from hi to lo narrows the gap when 0 < s < gap; the one
            // closest to half the gap narrows it most.
            guard gap > 1, let pick = groups.indices.filter({ groups[$0].node == hi && groups[$0].partitions < gap })
                .min(by: { abs(2 * groups[$0].partitions - gap) < abs(2 * groups[$1].partitions - gap) }) else { break }
            moves.append((groups[pick].shard, hi, lo))
            groups[pick].node = lo
            load[hi]! -= groups[pick].partitions
            load[lo]! += groups[pick].partitions
        }
        for m in moves {
            try connection.execute("""
                SELECT citus_move_shard_placement(\(m.shard), $1, \(m.from.port), $2, \(m.to.port), shard_transfer_mode := 'block_writes')
                """, [m.from.host, m.to.host])
        }
        return moves.count
    }

    /// Whether the database has the citus extension (a Citus coordinator or worker).
    public static func isCitus(_ connection: PGConnection) throws(StoreError) -> Bool {
        try connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").rowCount == 1
    }

    /// Each table's Citus distribution: `h` hash-distributed, `n` reference (a table Citus does not
    /// know is absent).
    public static func distributionOf(_ connection: PGConnection) throws(StoreError) -> [String: String] {
        let r = try connection.execute("""
            SELECT c.relname, p.partmethod FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()
            """)
        var out: [String: String] = [:]
        for i in 0..<r.rowCount { if let name = r.string(i, 0) { out[name] = r.string(i, 1) } }
        return out
    }

    private static func ensureExtension(_ connection: PGConnection) throws(StoreError) {
        if try isCitus(connection) { return }
        let available = try connection.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'citus'").rowCount == 1
        guard available else {
            throw .configuration("""
                herald migrate --citus needs a Citus coordinator: this PostgreSQL has no citus extension \
                (pg_available_extensions). Install Citus on every node (docs/citus.md, "On Citus"), or run \
                herald migrate without --citus on one PostgreSQL.
                """)
        }
        do {
            try connection.execute("CREATE EXTENSION citus")
        } catch {
            throw .configuration("""
                herald migrate --citus could not create the citus extension in this database (\(error)). \
                Citus must be in shared_preload_libraries, and CREATE EXTENSION citus needs a superuser: run it \
                in this database on the coordinator and every worker, add the workers, then run herald migrate --citus again \
                (docs/citus.md, "On Citus").
                """)
        }
    }

    /// Refuses to distribute a stored log: Citus would copy it into the shards, under locks, and
    /// the tables' local copies would need clearing; a log moves by export and import instead.
    private static func refuseStoredLog(_ connection: PGConnection, existing: [String: String]) throws(StoreError) {
        for table in ["events", "deliveries"] where existing[table] == nil {
            guard try connection.execute("SELECT 1 FROM \(table) LIMIT 1").rowCount == 0 else {
                throw .configuration("""
                    herald migrate --citus distributes a fresh database, and this one already stores \(table). \
                    Export the log (herald export), migrate an empty database with --citus (and the same --partitions), \
                    and import it there (herald import).
                    """)
            }
        }
    }

    /// The functions Citus knows (it propagates every function created once the extension is
    /// there): their signature (as `normalized`), whether their calls go to the worker of a
    /// distribution argument, and whether also inside transaction blocks.
    private static func distributedFunctions(_ connection: PGConnection) throws(StoreError) -> [String: (byPartition: Bool, forced: Bool)] {
        let r = try connection.execute("""
            SELECT p.oid::regprocedure::text, o.distribution_argument_index IS NOT NULL, coalesce(o.force_delegation, false)
            FROM pg_dist_object o JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
            """)
        var out: [String: (byPartition: Bool, forced: Bool)] = [:]
        for i in 0..<r.rowCount {
            if let sig = r.string(i, 0) { out[normalized(sig)] = (r.string(i, 1) == "t", r.string(i, 2) == "t") }
        }
        return out
    }

    /// A signature compared without spaces, and with `timestamptz` spelt as regprocedure does.
    static func normalized(_ signature: String) -> String {
        signature.replacingOccurrences(of: "timestamptz", with: "timestamp with time zone")
            .replacingOccurrences(of: " ", with: "")
    }

    private static func explained(_ error: StoreError) -> StoreError {
        .configuration("herald migrate --citus could not distribute the database: \(error)")
    }
}
