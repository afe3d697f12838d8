// herald migrate --citus on a coordinator and two workers: what is distributed, and every request-path statement on one shard.
import Foundation
@testable import HeraldStore
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestCitus.isInstalled, Comment(rawValue: TestCitus.missingReason ?? "")))
struct CitusDistributionTests {
    /// P = 4, distributed: partition 3 is the one whose statements are explained.
    static let partition: Int32 = 3

    /// One distributed database of P = 4 for the tests that only read it or write partition 3
    /// (each new database costs ~2 s on three nodes).
    static let shared = Result<String, any Error> { try TestCitus.freshDatabase(partitions: 4) }

    @Test func everyPartitionedTableIsDistributedByPartitionColocatedWithEventsAndGlobalOnesAreReference() throws {
        let url = try Self.shared.get()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let tables = try conn.execute("""
            SELECT c.relname, p.partmethod, '', p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass)
            FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
            ORDER BY 1
            """)
        var found: [String: (method: String, colocated: Bool)] = [:]
        for i in 0..<tables.rowCount { found[tables.string(i, 0) ?? ""] = (tables.string(i, 1) ?? "", tables.string(i, 3) == "t") }
        for table in CitusDistribution.distributedTables {
            #expect(found[table]?.method == "h", "\(table) is hash-distributed: \(found)")
            #expect(found[table]?.colocated == true, "\(table) is co-located with events")
            let column = try conn.execute("SELECT column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition WHERE logicalrelid = $1::regclass", [table])
            #expect(column.string(0, 0) == "partition", "\(table) is distributed by partition")
        }
        for table in CitusDistribution.referenceTables { #expect(found[table]?.method == "n", "\(table) is a reference table") }
        for table in CitusDistribution.coordinatorTables { #expect(found[table] == nil, "\(table) stays on the coordinator") }
        // Every table with a partition column is distributed or named as staying on the coordinator.
        let withPartition = try conn.execute("""
            SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
            WHERE a.attname = 'partition' AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace ORDER BY 1
            """)
        for i in 0..<withPartition.rowCount {
            let name = withPartition.string(i, 0) ?? ""
            #expect(CitusDistribution.distributedTables.contains(name) || CitusDistribution.coordinatorTables.contains(name), "\(name)")
        }
        // The request path's functions go to the worker of their partition.
        let functions = try conn.execute("""
            SELECT p.proname, o.distribution_argument_index, o.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass)
            FROM pg_dist_object o JOIN pg_proc p ON o.classid = 'pg_proc'::regclass AND o.objid = p.oid
            WHERE o.distribution_argument_index IS NOT NULL ORDER BY 1
            """)
        let names = (0..<functions.rowCount).map { functions.string($0, 0) ?? "" }
        #expect(names == ["herald_advance_deliveries", "herald_append_deliveries", "herald_append_events",
                          "herald_claim_deliveries", "herald_claim_events"])
        #expect((0..<functions.rowCount).allSatisfy { functions.string($0, 1) == "0" && functions.string($0, 2) == "t" })
        // Each partition's lease row is on a worker, one row per partition, and the workers hold
        // as many partitions each (within one).
        #expect(try conn.execute("SELECT count(*) FROM partitions").int64(0, 0) == 4)
        let spread = try conn.execute("""
            SELECT s.nodeport, count(*) FROM generate_series(0, 3) g
            JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('partitions', g) AND s.table_name = 'partitions'::regclass
            GROUP BY 1
            """)
        let perWorker = (0..<spread.rowCount).map { spread.int64($0, 1) ?? 0 }
        #expect(perWorker.count == 2 && (perWorker.max() ?? 0) - (perWorker.min() ?? 0) <= 1, "partitions per worker: \(perWorker)")

        // Idempotent: a second run changes nothing.
        let again = try CitusDistribution.distribute(conn)
        #expect(again.distributed.isEmpty && again.referenced.isEmpty && again.functions.isEmpty, "\(again)")
        #expect(again.workers == 2)
    }

    @Test func everyRequestPathStatementOfAPartitionTouchesOneShard() throws {
        let url = try Self.shared.get()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let scope = AppendScope(partition: Self.partition, epoch: 1)
        let p = String(Self.partition)
        let now = "2026-03-27T07:00:00Z"
        let statements: [(name: String, sql: String, parameters: [String?])] = [
            ("append events", StoreSQL.appendEvents(scope),
             ["{u}", "{submit}", "{a}", "{n1}", #"{"{\"x\":1}"}"#, "{\(now)}", "{0}"]),
            ("append deliveries", StoreSQL.appendDeliveries(scope),
             ["{u}", "{1}", "{1}", "{direct}", "{a}", "{n1}", "{r}", "{\(now)}", "{v}", "{\"[]\"}", "{\"{}\"}"]),
            ("ack a consumer", StoreSQL.ackConsumer, [p, "c", "5"]),
            ("read events", StoreSQL.readEvents, ["0", "100", p]),
            ("read a user's events", StoreSQL.readUserEvents, ["0", "100", p, "u"]),
            ("read deliveries", StoreSQL.readDeliveries, ["0", "100", p]),
            ("a consumer's acked cursor", ConsumerSQL.ackedCursor, ["c", p]),
            ("a consumer's acked cursor and filter", ConsumerSQL.ackedCursorAndFilter, ["c", p]),
            ("take a lease", LeaseSQL.takeOver, [p, "i", "127.0.0.1:1", "5000"]),
            ("renew a lease", LeaseSQL.renew, [p, "1", "5000", "127.0.0.1:1"]),
            ("release a lease", LeaseSQL.release, [p, "1"]),
            // As EventReader.head and deliveryHead read them.
            ("the event head", "SELECT seq FROM partitions WHERE partition = $1", [p]),
            ("the delivery head", "SELECT cursor FROM delivery_heads WHERE partition = $1", [p]),
        ] + Self.claims(in: EventCopy.startQuery(count: 10, deliveries: 5, commit: true, scope: scope), "COPY transaction")
          + Self.claims(in: DeliveryCopy.chainedQuery(after: 10, count: 5, scope: scope), "chained deliveries")
        #expect(statements.count == 16)
        for s in statements {
            let plan = try Self.explain(conn, s.sql, s.parameters)
            #expect(plan.contains("Task Count: 1"), "\(s.name) touches one shard:\n\(plan)")
        }
    }

    /// The position claims of a COPY transaction's simple query (PERFORM in a DO block as SELECT).
    static func claims(in query: String, _ name: String) -> [(name: String, sql: String, parameters: [String?])] {
        query.split(separator: ";").compactMap { part -> (String, String, [String?])? in
            guard let start = part.range(of: "herald_"), let end = part[start.lowerBound...].firstIndex(of: ")") else { return nil }
            let call = part[start.lowerBound...end]
            guard call.contains("herald_claim") || call.contains("herald_advance") else { return nil }
            let name = "\(name): \(call.prefix { $0 != "(" })"
            return (name, "SELECT " + call, [])
        }
    }

    static func explain(_ conn: PGConnection, _ sql: String, _ parameters: [String?]) throws -> String {
        let r = try conn.execute("EXPLAIN " + sql, parameters)
        return (0..<r.rowCount).compactMap { r.string($0, 0) }.joined(separator: "\n")
    }

    @Test func theSnapshotStatementsStayOnTheCoordinator() throws {
        let url = try Self.shared.get()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        for sql in [SnapshotStore.beginSQL, SnapshotStore.completeSQL, SnapshotStore.abandonSQL] {
            let parameters: [String?] = sql == SnapshotStore.beginSQL ? ["1", "1", "00", "3"]
                : sql == SnapshotStore.completeSQL ? ["1", "1", "1", "1", nil] : ["1"]
            let plan = try Self.explain(conn, sql, parameters)
            #expect(!plan.contains("Citus"), "a snapshot statement runs on the coordinator alone:\n\(plan)")
        }
    }

    @Test func theAppendOnlyLogAndTheFencedAppendHoldOnTheShards() throws {
        let url = try Self.shared.get()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let epoch = try LeaseSQL.takeOver(conn, partition: Int(Self.partition), instance: "i", address: "127.0.0.1:1", ttlMilliseconds: 5_000)
        let append = StoreSQL.appendEvents(AppendScope(partition: Self.partition, epoch: epoch))
        let row: [String?] = ["{u}", "{submit}", "{a}", "{n1}", #"{"{\"x\":1}"}"#, "{2026-03-27T07:00:00Z}", "{0}"]
        #expect(try conn.execute(append, row).string(0, 2) == "batch")
        // The same row again, in a transaction block as the writer sends it: the function runs on
        // the worker, where its unique-violation handler answers the duplicate.
        try conn.execute("BEGIN")
        let again = try conn.execute(append, row)
        try conn.execute("COMMIT")
        #expect(again.string(0, 2) == "duplicate" && again.int64(0, 1) == 1, "\(again.string(0, 2) ?? "no row")")
        // A stale epoch is refused on the worker, with Herald's SQLSTATE.
        let stale = StoreSQL.appendEvents(AppendScope(partition: Self.partition, epoch: epoch - 1))
        #expect(throws: StoreError.self) { try conn.execute(stale, ["{v}", "{submit}", "{a}", "{n2}", #"{"{}"}"#, "{2026-03-27T07:00:00Z}", "{0}"]) }
        do {
            _ = try conn.execute(stale, ["{v}", "{submit}", "{a}", "{n2}", #"{"{}"}"#, "{2026-03-27T07:00:00Z}", "{0}"])
        } catch {
            guard case .fenced = error else { Issue.record("a fenced append fails as fenced: \(error)"); return }
        }
        // UPDATE, DELETE and TRUNCATE are refused on the shards as on one PostgreSQL.
        for sql in ["UPDATE events SET type = 'x'", "DELETE FROM deliveries", "TRUNCATE events"] {
            do {
                try conn.execute(sql)
                Issue.record("\(sql) was not refused")
            } catch {
                guard case .appendOnly = error else { Issue.record("\(sql): \(error)"); continue }
            }
        }
        #expect(try conn.execute("SELECT partition, seq FROM events").int64(0, 0) == Int64(Self.partition))
    }

    @Test func aDatabaseWithALogIsRefused() throws {
        let url = try TestCitus.freshDatabase(migrated: false)
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        try Migrator.migrate(conn)
        try conn.execute(StoreSQL.appendEvents(.unfenced), ["{u}", "{submit}", "{a}", "{n1}", #"{"{}"}"#, "{2026-03-27T07:00:00Z}", "{0}"])
        #expect {
            try CitusDistribution.distribute(conn)
        } throws: { error in
            "\(error)".contains("distributes a fresh database") && "\(error)".contains("herald export")
        }
        #expect(try CitusDistribution.distributionOf(conn).isEmpty, "nothing was distributed")
    }
}

/// Runs everywhere: a unique violation Citus relays from a worker's COPY is a stored key.
@Suite struct CitusRelayedErrorTests {
    @Test func aUniqueViolationRelayedWithoutItsSQLStateIsADuplicate() {
        let relayed = StoreError.fromServer(
            sqlstate: "XX000", message: #"duplicate key value violates unique constraint "events_notification_once_102021""#,
            detail: "Key (partition, app, notification_id, user_id)=(0, a, n-1, alice) already exists.", hint: nil, constraint: nil)
        #expect(relayed == .duplicate(constraint: "events_notification_once_102021",
                                      message: #"duplicate key value violates unique constraint "events_notification_once_102021""#))
        let other = StoreError.fromServer(sqlstate: "XX000", message: "cache lookup failed", detail: nil, hint: nil, constraint: nil)
        #expect(other == .rejected(sqlstate: "XX000", message: "cache lookup failed", detail: nil, hint: nil))
    }
}

/// Runs everywhere: on one PostgreSQL without Citus, --citus says what is missing.
@Suite struct CitusAbsentTests {
    @Test func distributingADatabaseWithoutCitusSaysWhatIsMissing() throws {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        #expect {
            try CitusDistribution.distribute(conn)
        } throws: { error in
            // No extension at all, or one the plain test cluster does not preload (or whose library is gone).
            let text = "\(error)"
            return (text.contains("no citus extension") || text.contains("could not create the citus extension"))
                && text.contains("On Citus")
        }
    }
}
