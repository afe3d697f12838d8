// The event store against a real PostgreSQL: ordering, gap-free positions, immutability, idempotency, durability.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Synchronization
import Testing

@Suite struct EventStoreTests {
    static func event(_ i: Int, user: String = "u1", app: String = "com.example.mail", id: String? = nil, body: String? = nil) -> EventRow {
        EventRow(user: user, type: "submit", app: app, notificationId: id ?? "n\(i)",
                 body: body ?? #"{"body":"hello \"\#(i)\" \\ ü","title":"T\#(i)"}"#,
                 engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000 + Int64(i)))
    }

    static func appendAll(_ writer: GroupCommitWriter, _ rows: [EventRow]) throws -> [AppendOutcome] {
        var outcome: Result<[AppendOutcome], StoreError>?
        writer.append(events: rows) { outcome = $0 }
        #expect(writer.runUntilIdle())
        return try #require(outcome).get()
    }

    @Test func appendThenReadBackInOrder() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        let rows = (1...50).map { Self.event($0) }
        let outcomes = try Self.appendAll(writer, rows)
        #expect(outcomes == (1...50).map { AppendOutcome.appended(seq: Int64($0)) })

        let reader = try PGConnection.connect(url)
        let stored = try EventReader.events(reader, after: 0)
        #expect(stored.map(\.seq) == Array(1...50))
        #expect(stored.map(\.row) == rows, "bodies, users and engine times come back byte for byte")
        #expect(try EventReader.head(reader) == 50)
    }

    @Test func migrationsRunTwiceAreANoOp() throws {
        let url = try TestPostgres.freshDatabase(migrated: false)
        let conn = try PGConnection.connect(url)
        let first = try Migrator.migrate(conn)
        #expect(first == Migrator.available.map(\.name))
        let second = try Migrator.migrate(conn)
        #expect(second.isEmpty)
        let count = try conn.execute("SELECT count(*) FROM herald_migrations").int64(0, 0)
        #expect(count == Int64(Migrator.available.count))
    }

    /// Every index on the two append tables costs the single writer's backend a B-tree insert per
    /// row; each one here is read by something Herald runs (schema/001_tables.sql says which).
    /// Adding one is a decision about append speed: measure it (`herald bench store`, BENCHMARKS.md).
    @Test func theAppendTablesKeepOnlyTheIndexesHeraldReads() throws {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        let r = try conn.execute("""
            SELECT tablename || '.' || indexname FROM pg_indexes
            WHERE schemaname = 'public' AND tablename IN ('events', 'deliveries') ORDER BY 1
            """)
        let indexes = (0..<r.rowCount).compactMap { r.string($0, 0) }
        #expect(indexes == [
            "deliveries.deliveries_pkey",                     // consumers and catch-up, by cursor
            "deliveries.deliveries_user_index",               // per-user order; explain, restore, the views
            "events.events_notification_once",                // (app, id, user) unique forever; withdraw's recipients
            "events.events_pkey",                             // the log, by seq
        ])
    }

    /// A young log is analyzed, and vacuumed for its inserts, every million rows rather than every
    /// 10–20% of growth (each run a burst of PostgreSQL's CPU beside the writer's commits).
    @Test func theAppendTablesAreAnalyzedAndVacuumedForInsertsEveryMillionRows() throws {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        for table in ["events", "deliveries"] {
            let r = try conn.execute("SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = $1", [table])
            let options = Set((r.string(0, 0) ?? "").split(separator: ",").map(String.init))
            #expect(options == ["autovacuum_analyze_threshold=1000000", "autovacuum_vacuum_insert_threshold=1000000"], "\(table)")
        }
    }

    @Test func updateDeleteAndTruncateOnTheLogAreRefused() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        _ = try Self.appendAll(writer, [Self.event(1)])
        let conn = try PGConnection.connect(url)
        for sql in ["UPDATE events SET type = 'x'", "DELETE FROM events", "TRUNCATE events",
                    "UPDATE deliveries SET kind = 'x'", "DELETE FROM deliveries"] {
            #expect(throws: StoreError.self, "\(sql) must be refused") { try conn.execute(sql) }
            do { try conn.execute(sql) } catch {
                guard case .appendOnly = error else { Issue.record("\(sql): expected appendOnly, got \(error)"); continue }
            }
        }
        #expect(try EventReader.events(conn, after: 0).count == 1)
    }

    @Test func duplicateIdempotencyKeyIsReportedWithTheOriginalSeq() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        _ = try Self.appendAll(writer, [Self.event(1), Self.event(2)])
        let again = try Self.appendAll(writer, [Self.event(3), Self.event(2), Self.event(2, body: #"{"other":true}"#)])
        #expect(again == [.appended(seq: 3), .duplicate(seq: 2), .conflict(seq: 2)])
        let conn = try PGConnection.connect(url)
        let stored = try EventReader.events(conn, after: 0)
        #expect(stored.map(\.seq) == [1, 2, 3], "a duplicate leaves no gap and stores nothing")
        #expect(stored[1].row == Self.event(2), "the first event is unchanged")
    }

    @Test func aStoredKeyInALargeBatchTakesTheCarefulPathWithoutAGap() throws {
        // The append function's fast path inserts the whole batch; a stored key rolls that back and
        // the careful path must number only the fresh rows, in input order.
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        let first = try Self.appendAll(writer, (1...100).map { Self.event($0) })
        #expect(first == (1...100).map { AppendOutcome.appended(seq: Int64($0)) }, "fast path: base + ord")
        let batch = (101...140).map { Self.event($0) } + [Self.event(7), Self.event(50, body: #"{"x":1}"#)]
            + (141...160).map { Self.event($0) }
        let outcomes = try Self.appendAll(writer, batch)
        let expected: [AppendOutcome] = (101...140).map { .appended(seq: Int64($0)) } + [.duplicate(seq: 7), .conflict(seq: 50)]
            + (141...160).map { .appended(seq: Int64($0)) }
        #expect(outcomes == expected)
        let stored = try EventReader.events(PGConnection.connect(url), after: 0, limit: 1000)
        #expect(stored.map(\.seq) == (1...160).map(Int64.init), "positions stay 1…N with no gap")
        #expect(stored.map(\.row) == (1...160).map { Self.event($0) })
    }

    @Test func groupCommitPutsEverythingQueuedDuringATransactionIntoTheNext() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        // Once the session set-up is done (a COPY transaction cannot start while it is in flight:
        // appends queued before then all share the first commit).
        _ = try Self.appendAll(writer, [Self.event(0)])
        var acked = 0
        for i in 1...200 {
            writer.append(events: [Self.event(i)]) { if case .success = $0 { acked += 1 } }
        }
        #expect(writer.runUntilIdle())
        #expect(acked == 200)
        #expect(writer.transactionsCommitted == 3, "the first append goes alone; the 199 queued behind it share one commit")
    }

    @Test func concurrentAppendersGetGapFreeCommitOrderedPositions() throws {
        let url = try TestPostgres.freshDatabase()
        let writers = 8, batches = 40, perBatch = 5
        let total = writers * batches * perBatch
        let done = Mutex(0)
        let skipped = Mutex<[String]>([])
        let readerThread = Thread {
            guard let conn = try? PGConnection.connect(url) else { return }
            var cursor: Int64 = 0
            while cursor < Int64(total) {
                guard let rows = try? EventReader.events(conn, after: cursor, limit: 1000) else { return }
                for r in rows {
                    if r.seq != cursor + 1 { skipped.withLock { $0.append("saw \(r.seq) after \(cursor)") } }
                    cursor = r.seq
                }
                if done.withLock({ $0 }) == writers && rows.isEmpty { break }
            }
        }
        readerThread.start()
        DispatchQueue.concurrentPerform(iterations: writers) { w in
            defer { done.withLock { $0 += 1 } }
            guard let writer = try? GroupCommitWriter(connection: PGConnection.connect(url)) else { return }
            for b in 0..<batches {
                let rows = (0..<perBatch).map { i in Self.event(i, user: "w\(w)", id: "w\(w)-b\(b)-\(i)") }
                writer.append(events: rows) { _ in }
                writer.runUntilIdle()
            }
        }
        let conn = try PGConnection.connect(url)
        let stored = try EventReader.events(conn, after: 0, limit: total + 10)
        #expect(stored.map(\.seq) == (1...total).map(Int64.init), "positions are 1…N with no gap")
        // Give the reader its last poll, then check it never saw a position before a lower one.
        for _ in 0..<200 where done.withLock({ $0 }) == writers && readerThread.isExecuting { usleep(10_000) }
        #expect(skipped.withLock { $0 }.isEmpty, "a reader polling seq > cursor skipped committed events")
    }

    /// A writer whose first transaction waits on the event head's row lock (another session
    /// holds it) and whose backend is killed there, before COMMIT. `append` queues the work under
    /// test; `whileWaiting` runs once PostgreSQL shows the writer waiting on the lock.
    static func killedBeforeCommit(_ url: String, append: (GroupCommitWriter) -> Void,
                                   whileWaiting: () -> Void) throws -> GroupCommitWriter {
        let blocker = try PGConnection.connect(url)
        try blocker.execute("BEGIN")
        try blocker.execute("SELECT seq FROM partitions WHERE partition = 0 FOR UPDATE")  // the writer's append will wait here
        let writerConnection = try PGConnection.connect(url)
        let pid = writerConnection.backendPID
        let writer = try GroupCommitWriter(connection: writerConnection)
        append(writer)
        writer.pump()
        let killer = try PGConnection.connect(url)
        var waited = 0
        while waited < 500 {
            let r = try killer.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [String(pid)])
            if r.string(0, 0) == "Lock" { break }
            usleep(10_000); waited += 1
        }
        whileWaiting()
        try killer.execute("SELECT pg_terminate_backend($1)", [String(pid)])
        writer.runUntilIdle(timeoutMilliseconds: 10_000)
        try blocker.execute("ROLLBACK")
        return writer
    }

    @Test func noAckWhenTheConnectionDiesBeforeCommit() throws {
        let url = try TestPostgres.freshDatabase()
        var outcome: Result<[AppendOutcome], StoreError>?
        let writer = try Self.killedBeforeCommit(url, append: { $0.append(events: [Self.event(1)]) { outcome = $0 } },
                                                 whileWaiting: { #expect(outcome == nil, "nothing is acknowledged while COMMIT is pending") })
        let result = try #require(outcome, "the waiter must hear about the failure")
        #expect(throws: StoreError.self) { try result.get() }
        #expect(writer.failure?.isRetryable == true)
        #expect(try EventReader.events(PGConnection.connect(url), after: 0).isEmpty, "the killed transaction stored nothing")
    }

    @Test func deliveriesTakeGapFreeCursorsAndSkipReDerivedOnes() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        func delivery(_ i: Int64) -> DeliveryRow {
            DeliveryRow(user: "u1", userIndex: i, causeSeq: i, kind: "alert", app: "a", notificationId: "n\(i)",
                        reason: "normal", at: Instant(millisecondsSinceEpoch: 1000 * i), rulesVersion: "1",
                        trace: #"[{"rule":"normal"}]"#, body: #"{"kind":"alert"}"#)
        }
        var cursors: [Int64] = []
        writer.append(deliveries: [delivery(1), delivery(2)]) { cursors += (try? $0.get()) ?? [] }
        writer.runUntilIdle()
        writer.append(deliveries: [delivery(2), delivery(3)]) { cursors += (try? $0.get()) ?? [] }
        writer.runUntilIdle()
        #expect(cursors == [1, 2, 0, 3], "a re-derived delivery is skipped (0) and takes no cursor")
        let conn = try PGConnection.connect(url)
        #expect(try EventReader.deliveries(conn, after: 0).map(\.row) == [delivery(1), delivery(2), delivery(3)])
    }

    /// A summary storm decides a million deliveries at one instant: one statement of them would
    /// pass PostgreSQL's 1 GB message limit and fail forever. Big appends go in parts.
    @Test func anAppendLargerThanATransactionIsSplitAndCompletesOnce() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        writer.limits.maxRowsPerTransaction = 100
        let rows = (1...1_050).map { i in
            DeliveryRow(user: "u\(i % 3)", userIndex: Int64(i), causeSeq: 1, kind: "summary", app: nil, notificationId: nil,
                        reason: "summary", at: Instant(millisecondsSinceEpoch: 1000), rulesVersion: "1",
                        trace: "[]", body: #"{"kind":"summary","i":\#(i)}"#)
        }
        var calls = 0
        var cursors: [Int64] = []
        writer.append(deliveries: rows) { calls += 1; cursors = (try? $0.get()) ?? [] }
        writer.runUntilIdle()
        #expect(calls == 1)
        #expect(cursors == (1...1_050).map(Int64.init))

        var outcomes: [AppendOutcome] = []
        writer.append(events: (1...250).map { Self.event($0) }) { outcomes = (try? $0.get()) ?? [] }
        writer.runUntilIdle()
        #expect(outcomes == (1...250).map { AppendOutcome.appended(seq: Int64($0)) })
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 1_050)
    }

    @Test func consumerCursorNeverMovesBackwards() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        var acked: [Int64] = []
        for c in [5, 9, 3] as [Int64] {
            writer.ack(consumer: "push", cursor: c) { acked.append((try? $0.get()) ?? -1) }
        }
        writer.runUntilIdle()
        #expect(acked == [5, 9, 9])
        #expect(try EventReader.consumerCursor(PGConnection.connect(url), name: "push") == 9)
    }

    @Test func missingPostgresBinariesGiveAClearError() {
        #expect {
            _ = try LocalCluster.findBinaries(in: ["/nonexistent/bin"])
        } throws: { error in
            "\(error)".contains("apt-get install postgresql") && "\(error)".contains("--database-url")
        }
    }
}

@Suite struct IdempotencyScopeTests {
    /// The store's key is (user, app, notification id) on rows that carry an id; the service sets it
    /// on submits only, so withdraw, snooze and opened of a stored notification append normally.
    @Test func rowsWithoutANotificationIdNeverCollideWithASubmit() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        let submit = EventStoreTests.event(1, id: "n1")
        var rows = [submit]
        for type in ["opened", "snooze", "withdraw"] {
            var r = submit
            r.type = type
            r.notificationId = nil
            r.body = #"{"id":"n1","op":"\#(type)"}"#
            rows.append(r)
        }
        let outcomes = try EventStoreTests.appendAll(writer, rows)
        #expect(outcomes == [.appended(seq: 1), .appended(seq: 2), .appended(seq: 3), .appended(seq: 4)])
        #expect(try EventStoreTests.appendAll(writer, [submit]) == [.duplicate(seq: 1)], "a re-sent submit is still a duplicate")
    }
}

/// What a client is told when PostgreSQL is away: one line, libpq's own hints left to the log
/// (the `store_unavailable` detail must not nest libpq's multi-line text and advice).
@Suite struct StoreErrorClientReasonTests {
    @Test func aRefusedConnectionIsOneLineForTheClient() {
        let libpq = "connection to server at \"127.0.0.1\", port 55602 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?\n"
        let reason = StoreError.unavailable(libpq).clientReason
        #expect(reason == "PostgreSQL is unreachable: Connection refused", "what failed, not where PostgreSQL runs")
        #expect(StoreError.unavailable("could not translate host name \"db.internal\" to address: Name or service not known").clientReason
                == "PostgreSQL is unreachable (the service's log says why)")
        #expect(StoreError.unavailable("server closed the connection unexpectedly\n").clientReason
                == "PostgreSQL is unreachable: server closed the connection unexpectedly")
        #expect(!reason.contains("\n") && !reason.contains("retries"))
        #expect(StoreError.serverUnavailable(sqlstate: "57P03", message: "the database system is starting up\n").clientReason
                == "PostgreSQL cannot serve right now (SQLSTATE 57P03: the database system is starting up)")
    }
}
