// The COPY append path against a real PostgreSQL: its fallback, its tail, its recovery.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct CopyAppendTests {
    static func event(_ i: Int, user: String = "u1", id: String? = nil, body: String? = nil) -> EventRow {
        EventStoreTests.event(i, user: user, id: id, body: body)
    }

    static func delivery(_ i: Int64, user: String = "u1") -> DeliveryRow {
        DeliveryRow(user: user, userIndex: i, causeSeq: i, kind: "alert", app: "a", notificationId: "n\(i)",
                    reason: "normal", at: Instant(millisecondsSinceEpoch: 1000 * i), rulesVersion: "1",
                    trace: #"[{"rule":"normal"}]"#, body: #"{"kind":"alert"}"#)
    }

    static func writer(_ url: String, completeFirstUpTo: Int? = nil) throws -> GroupCommitWriter {
        var limits = GroupCommitWriter.Limits()
        if let completeFirstUpTo { limits.completeFirstUpToEvents = completeFirstUpTo }
        return try GroupCommitWriter(connection: PGConnection.connect(url), limits: limits)
    }

    /// A withdraw without a user finds the recipients by (app, notification id): the unique index
    /// leads with those columns, so the look-up never reads the whole log.
    @Test func theRecipientsOfANotificationAreFoundThroughTheIdempotencyIndex() throws {
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        try conn.execute("SET enable_seqscan = off")
        let plan = try conn.execute("""
            EXPLAIN SELECT DISTINCT user_id FROM events
            WHERE app = 'com.example.mail' AND notification_id = 'n-1' AND type = 'submit' ORDER BY 1
            """)
        let text = (0..<plan.rowCount).compactMap { plan.string($0, 0) }.joined(separator: "\n")
        #expect(text.contains("events_notification"), "\(text)")
        #expect(!text.contains("Seq Scan"), "\(text)")
    }

    /// (app, id, user) is the key only when all three are present: rows missing an app or a user
    /// never collide (NULLs are distinct in the unique index), through COPY and the function alike.
    @Test func rowsWithoutAnAppHaveNoKey() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        let rows = [EventStoreTests.event(1, user: "u"), EventStoreTests.event(1, user: "u")]
        let at = Instant(millisecondsSinceEpoch: 1_780_000_000_000)
        let keyless = EventRow(user: "u", type: "submit", app: nil, notificationId: "n", body: "{}", engineTime: at)
        let userless = EventRow(user: nil, type: "submit", app: "a", notificationId: "n", body: "{}", engineTime: at)
        let outcomes = try EventStoreTests.appendAll(writer, rows + [keyless, keyless, userless, userless])
        #expect(outcomes.first == .appended(seq: 1))
        #expect(outcomes[1] == .duplicate(seq: 1))
        #expect(outcomes[2...] == [.appended(seq: 2), .appended(seq: 3), .appended(seq: 4), .appended(seq: 5)],
                "\(outcomes)")
    }

    @Test func aKeyRepeatedInsideOneBatchIsStoredOnceAndTheRepeatIsADuplicate() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        _ = try EventStoreTests.appendAll(writer, [Self.event(1)])
        let batch = [Self.event(2), Self.event(3), Self.event(2), Self.event(3, body: #"{"other":1}"#), Self.event(1), Self.event(4)]
        let outcomes = try EventStoreTests.appendAll(writer, batch)
        #expect(outcomes == [.appended(seq: 2), .appended(seq: 3), .duplicate(seq: 2), .conflict(seq: 3),
                             .duplicate(seq: 1), .appended(seq: 4)])
        let stored = try EventReader.events(PGConnection.connect(url), after: 0)
        #expect(stored.map(\.seq) == [1, 2, 3, 4], "no gap, nothing stored twice")
        #expect(stored.map(\.row) == [Self.event(1), Self.event(2), Self.event(3), Self.event(4)])
    }

    @Test func separateAppendsInOneCopyBatchEachHearTheirOwnOutcome() throws {
        // Several appends share one COPY; one of them re-sends a stored id. The COPY fails as a
        // whole, the batch goes again through the function, and every append gets its own answer.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        _ = try EventStoreTests.appendAll(writer, [Self.event(1), Self.event(2)])
        var results: [Int: [AppendOutcome]] = [:]
        writer.append(events: [Self.event(3)]) { results[0] = try? $0.get() }
        writer.append(events: [Self.event(3)]) { results[99] = try? $0.get() }   // alone: it waits for the first
        #expect(writer.runUntilIdle())
        for (n, rows) in [(1, [Self.event(4), Self.event(5)]), (2, [Self.event(2)]), (3, [Self.event(6)])] {
            writer.append(events: rows) { results[n] = try? $0.get() }
        }
        #expect(writer.runUntilIdle())
        #expect(results[0] == [.appended(seq: 3)])
        #expect(results[99] == [.duplicate(seq: 3)])
        #expect(results[1] == [.appended(seq: 4), .appended(seq: 5)])
        #expect(results[2] == [.duplicate(seq: 2)], "acked duplicate with the original seq")
        #expect(results[3] == [.appended(seq: 6)])
        #expect(try EventReader.events(PGConnection.connect(url), after: 0).map(\.seq) == [1, 2, 3, 4, 5, 6])
    }

    @Test func singleEventAppendsShareATransactionWithBatchesAndHearTheirOwnOutcomeInOrder() throws {
        // `append(event:)` (one row, one outcome) beside `append(events:)` in one transaction:
        // on the COPY path, and again when a stored key sends the batch through the function.
        for storedKeyInBatch in [false, true] {
            let url = try TestPostgres.freshDatabase()
            let writer = try Self.writer(url)
            _ = try EventStoreTests.appendAll(writer, [Self.event(1)])
            var heard: [String] = []
            writer.append(event: Self.event(2)) { heard.append("a \(try! $0.get())") }
            writer.append(events: [Self.event(3), Self.event(4)]) { heard.append("b \(try! $0.get())") }
            writer.append(event: storedKeyInBatch ? Self.event(1) : Self.event(5)) { heard.append("c \(try! $0.get())") }
            writer.append(event: Self.event(6)) { heard.append("d \(try! $0.get())") }
            #expect(writer.runUntilIdle())
            let c = storedKeyInBatch ? AppendOutcome.duplicate(seq: 1) : .appended(seq: 5)
            let d = AppendOutcome.appended(seq: storedKeyInBatch ? 5 : 6)
            #expect(heard == ["a \(AppendOutcome.appended(seq: 2))", "b \([AppendOutcome.appended(seq: 3), .appended(seq: 4)])",
                              "c \(c)", "d \(d)"], "stored key in the batch: \(storedKeyInBatch)")
            let stored = try EventReader.events(PGConnection.connect(url), after: 0).map(\.seq)
            #expect(stored == Array(1...(storedKeyInBatch ? 5 : 6)).map(Int64.init), "gap-free")
        }
    }

    @Test func aSingleEventAppendCutOffBeforeCommitFailsAndLaterOnesAreRefusedAtOnce() throws {
        let url = try TestPostgres.freshDatabase()
        var inFlight: Result<AppendOutcome, StoreError>?
        let writer = try EventStoreTests.killedBeforeCommit(url, append: { $0.append(event: Self.event(1)) { inFlight = $0 } },
                                                            whileWaiting: { #expect(inFlight == nil, "nothing is acknowledged while COMMIT is pending") })
        #expect(inFlight.map { if case .failure = $0 { true } else { false } } == true, "failed, never acknowledged")
        var later: Result<AppendOutcome, StoreError>?
        writer.append(event: Self.event(2)) { later = $0 }
        #expect(later.map { if case .failure = $0 { true } else { false } } == true, "a broken writer refuses at once")
        #expect(try EventReader.events(PGConnection.connect(url), after: 0).isEmpty)
    }

    @Test func eventsDeliveriesAndAcksShareOneCopyTransaction() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        _ = try EventStoreTests.appendAll(writer, [Self.event(1)])   // alone; what follows queues behind
        writer.append(events: [Self.event(2)]) { _ in }
        var events: [AppendOutcome] = [], cursors: [Int64] = [], acked: Int64 = 0
        writer.append(events: [Self.event(3), Self.event(4)]) { events = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(1), Self.delivery(2)]) { cursors = (try? $0.get()) ?? [] }
        writer.ack(consumer: "push", cursor: 2) { acked = (try? $0.get()) ?? -1 }
        let before = writer.transactionsCommitted
        #expect(writer.runUntilIdle())
        #expect(events == [.appended(seq: 3), .appended(seq: 4)])
        #expect(cursors == [1, 2])
        #expect(acked == 2)
        #expect(writer.transactionsCommitted - before <= 2, "queued work shares commits")

        // The same mix with a stored key: the whole transaction goes again through the function.
        events = []; cursors = []
        writer.append(events: [Self.event(5)]) { _ in }
        writer.append(events: [Self.event(6), Self.event(2)]) { events = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(3), Self.delivery(2)]) { cursors = (try? $0.get()) ?? [] }
        writer.ack(consumer: "push", cursor: 3) { acked = (try? $0.get()) ?? -1 }
        #expect(writer.runUntilIdle())
        #expect(events == [.appended(seq: 6), .duplicate(seq: 2)])
        #expect(cursors == [3, 0], "the re-derived delivery is skipped")
        #expect(acked == 3)
        let conn = try PGConnection.connect(url)
        #expect(try EventReader.events(conn, after: 0).map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(try EventReader.deliveries(conn, after: 0).map(\.cursor) == [1, 2, 3])
    }

    @Test func eventsAndDeliveriesGoByTwoCopiesInOneQuery() throws {
        // No acks: one simple query claims positions and cursors, runs both COPYs and commits —
        // three round trips, no pipeline segment after it.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        _ = try EventStoreTests.appendAll(writer, [Self.event(1)])   // alone; what follows queues behind
        writer.append(events: [Self.event(2)]) { _ in }
        var events: [AppendOutcome] = [], cursors: [Int64] = []
        writer.append(events: [Self.event(3), Self.event(4)]) { events = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(1), Self.delivery(2, user: "u2")]) { cursors = (try? $0.get()) ?? [] }
        var more: [Int64] = []
        writer.append(deliveries: [Self.delivery(3)]) { more = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(events == [.appended(seq: 3), .appended(seq: 4)])
        #expect(cursors == [1, 2])
        #expect(more == [3])
        #expect(writer.deliveriesCopied == 3)

        // A delivery stored already (re-derived after a restart) aborts the second COPY: the whole
        // transaction goes through the functions, which skip it.
        events = []; cursors = []
        writer.append(events: [Self.event(5)]) { _ in }
        writer.append(events: [Self.event(6)]) { events = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(4), Self.delivery(2, user: "u2")]) { cursors = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(events == [.appended(seq: 6)])
        #expect(cursors == [4, 0], "the re-derived delivery is skipped")
        #expect(writer.deliveriesCopied == 3, "through the function")
        // The next mixed batch comes back to COPY.
        cursors = []
        writer.append(events: [Self.event(7)]) { _ in }
        writer.append(events: [Self.event(8)]) { _ in }
        writer.append(deliveries: [Self.delivery(5)]) { cursors = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(cursors == [5])
        #expect(writer.deliveriesCopied == 4)

        let conn = try PGConnection.connect(url)
        #expect(try EventReader.events(conn, after: 0).map(\.seq) == (1...8).map(Int64.init))
        let stored = try EventReader.deliveries(conn, after: 0)
        #expect(stored.map(\.cursor) == [1, 2, 3, 4, 5])
        #expect(stored.map(\.row) == [Self.delivery(1), Self.delivery(2, user: "u2"), Self.delivery(3), Self.delivery(4),
                                       Self.delivery(5)], "every column as sent, by COPY or by the function")
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 5)
    }

    @Test func copiedDeliveriesAreTheFunctionsRowsByteForByte() throws {
        // The same rows through COPY (beside events, and alone) and through the function: equal
        // columns, JSON text kept exactly (non-ASCII, escapes, spaces, NULL app and notification id).
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        let odd = DeliveryRow(user: "ü-user", userIndex: 1, causeSeq: 2, kind: "cleared", app: nil, notificationId: nil,
                              reason: "badge_clear", at: Instant(millisecondsSinceEpoch: -1234), rulesVersion: "1",
                              trace: #"[ {"rule":"a\u00e9","x":[1, 2.5e3]} ]"#, body: #"{"t":"é\n😀","n":null}"#)
        var alone = odd; alone.user = "c-user"
        var viaFunction = odd; viaFunction.user = "f-user"
        _ = try EventStoreTests.appendAll(writer, [Self.event(1)])
        writer.append(events: [Self.event(2)]) { _ in }    // in flight; what follows queues behind
        writer.append(events: [Self.event(3)]) { _ in }
        writer.append(deliveries: [odd]) { _ in }
        #expect(writer.runUntilIdle())
        writer.append(deliveries: [alone]) { _ in }         // alone: a COPY of its own
        #expect(writer.runUntilIdle())
        #expect(writer.deliveriesCopied == 2)
        // Beside a stored key, the whole transaction goes again through the append functions.
        writer.append(events: [Self.event(4)]) { _ in }    // in flight; what follows queues behind
        writer.append(events: [Self.event(1)]) { _ in }    // a duplicate
        writer.append(deliveries: [viaFunction]) { _ in }
        #expect(writer.runUntilIdle())
        #expect(writer.deliveriesCopied == 2, "the third through the function")
        let conn = try PGConnection.connect(url)
        let rows = try EventReader.deliveries(conn, after: 0).map(\.row)
        #expect(rows == [odd, alone, viaFunction])
        let text = try conn.execute("SELECT trace || body FROM deliveries ORDER BY cursor")
        #expect(text.string(0, 0) == odd.trace + odd.body)
        #expect(text.string(1, 0) == text.string(0, 0) && text.string(2, 0) == text.string(0, 0))
    }

    @Test func deliveriesAloneGoByACopyOfTheirOwn() throws {
        // A storm's appends: deliveries without events. `BEGIN; SELECT herald_claim_deliveries(…); COPY
        // deliveries …; COMMIT` — two round trips; with an ack, its pipeline segment ends the
        // transaction (three).
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        var cursors: [Int64] = [], more: [Int64] = []
        var trips = writer.roundTrips
        writer.append(deliveries: [Self.delivery(1), Self.delivery(1, user: "u2")]) { cursors = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(cursors == [1, 2])
        #expect(writer.deliveriesCopied == 2)
        #expect(writer.roundTrips - trips == 2, "the query, then the data")
        #expect(try PGConnection.connect(url).execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 2)

        // Several appends queued behind one in flight share the next COPY; an ack joins its tail.
        var acked: Int64 = 0
        trips = writer.roundTrips
        let before = writer.transactionsCommitted
        writer.append(deliveries: [Self.delivery(2)]) { _ in }
        writer.append(deliveries: [Self.delivery(3), Self.delivery(4)]) { cursors = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(2, user: "u2")]) { more = (try? $0.get()) ?? [] }
        writer.ack(consumer: "push", cursor: 4) { acked = (try? $0.get()) ?? -1 }
        #expect(writer.runUntilIdle())
        #expect(cursors == [4, 5] && more == [6] && acked == 4)
        #expect(writer.deliveriesCopied == 6)
        #expect(writer.transactionsCommitted - before == 2)
        #expect(writer.roundTrips - trips == 5, "2 for the first COPY, 3 for the one with an ack")
        let stored = try EventReader.deliveries(PGConnection.connect(url), after: 0)
        #expect(stored.map(\.cursor) == [1, 2, 3, 4, 5, 6])
        #expect(stored.map(\.row) == [Self.delivery(1), Self.delivery(1, user: "u2"), Self.delivery(2), Self.delivery(3),
                                       Self.delivery(4), Self.delivery(2, user: "u2")])
        #expect(try PGConnection.connect(url).execute("SELECT acked FROM consumer_cursors WHERE partition = 0 AND name = 'push'").int64(0, 0) == 4)
    }

    @Test func aStoredDeliveryMakesACopyOfDeliveriesAloneGoThroughTheFunction() throws {
        // A restart re-derives deliveries already stored: the COPY meets a stored (user, user_index)
        // and fails as a whole; the batch goes again through `herald_append_deliveries`, which
        // skips the stored ones (cursor 0) and numbers the fresh ones without a gap. Every append
        // hears its own answer; the next batch tries COPY again.
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        var first: [Int64] = []
        writer.append(deliveries: (1...3).map { Self.delivery($0) }) { first = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(first == [1, 2, 3])

        var a: [Int64] = [], b: [Int64] = [], c: [Int64] = []
        writer.append(deliveries: [Self.delivery(9)]) { _ in }           // in flight; the rest queues behind it
        writer.append(deliveries: [Self.delivery(2), Self.delivery(4)]) { a = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(3)]) { b = (try? $0.get()) ?? [] }
        writer.append(deliveries: [Self.delivery(5)]) { c = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(a == [0, 5], "the re-derived delivery is skipped, the fresh one stored")
        #expect(b == [0])
        #expect(c == [6])
        #expect(writer.deliveriesCopied == 4, "3 + the lone one; the batch with stored rows went through the function")
        #expect(writer.failure == nil)

        var next: [Int64] = []
        writer.append(deliveries: [Self.delivery(6)]) { next = (try? $0.get()) ?? [] }
        #expect(writer.runUntilIdle())
        #expect(next == [7])
        #expect(writer.deliveriesCopied == 5, "COPY again")
        let conn = try PGConnection.connect(url)
        let stored = try EventReader.deliveries(conn, after: 0)
        #expect(stored.map(\.cursor) == Array(1...7))
        #expect(stored.map(\.row.userIndex) == [1, 2, 3, 9, 4, 5, 6], "each stored once")
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 7, "no gap")
    }

    @Test func theAppendFunctionsStillRefuseInvalidJSON() throws {
        // Bodies and traces are `text` (Herald's COPY writes canonical bytes);
        // the SQL functions other writers call still parse what they are given.
        let url = try TestPostgres.freshDatabase()
        let conn = try PGConnection.connect(url)
        #expect(throws: StoreError.self) {
            try conn.execute("""
                SELECT * FROM herald_append_events(0, NULL, ARRAY['u'], ARRAY['submit'], ARRAY['a'], ARRAY['n'], ARRAY['{not json'], ARRAY[now()], ARRAY[0])
                """)
        }
        for (trace, body) in [("[]", "{bad"), ("[x", "{}")] {
            #expect(throws: StoreError.self) {
                try conn.execute("""
                    SELECT * FROM herald_append_deliveries(0, NULL, ARRAY['u'], ARRAY[1::bigint], ARRAY[1::bigint], ARRAY['alert'],
                        ARRAY['a'], ARRAY['n'], ARRAY['normal'], ARRAY[now()], ARRAY['1'], ARRAY[$1], ARRAY[$2])
                    """, [trace, body])
            }
        }
        #expect(try conn.execute("SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM deliveries)").int64(0, 0) == 0)
        // Valid JSON is stored as sent, byte for byte (json kept its input text; text does too).
        let body = #"{"b": [1,  2], "a":"é"}"#
        _ = try conn.execute("""
            SELECT * FROM herald_append_events(0, NULL, ARRAY['u'], ARRAY['submit'], ARRAY['a'], ARRAY['n'], ARRAY[$1], ARRAY[now()], ARRAY[0])
            """, [body])
        #expect(try conn.execute("SELECT body FROM events").string(0, 0) == body)
        #expect(try conn.execute("SELECT body::json ->> 'a' FROM events").string(0, 0) == "é")
    }

    @Test func aCopyThatFailsForAnotherReasonFailsOnlyItsBatch() throws {
        // A NUL byte (the protocol refuses it; PostgreSQL's text type too): the COPY is refused (not
        // a key problem), the batch's waiters get the error, the transaction is rolled back, and the
        // next batch appends at the next free position. (Bodies are `text`: the
        // server does not parse them as JSON, so an invalid body is not the failure used here.)
        let url = try TestPostgres.freshDatabase()
        let writer = try Self.writer(url)
        _ = try EventStoreTests.appendAll(writer, [Self.event(1)])
        var bad: Result<[AppendOutcome], StoreError>?
        writer.append(events: [Self.event(2), Self.event(3, body: "{\"a\":\"x\u{0}y\"}")]) { bad = $0 }
        #expect(writer.runUntilIdle())
        #expect(throws: StoreError.self) { try bad?.get() }
        #expect(writer.failure == nil, "the writer stays usable")
        #expect(try EventStoreTests.appendAll(writer, [Self.event(4), Self.event(2)]) == [.appended(seq: 2), .appended(seq: 3)])
        #expect(try EventReader.events(PGConnection.connect(url), after: 0).map(\.seq) == [1, 2, 3])
    }

    @Test func aCopyBatchAfterAReconnectContinuesTheLogAndFindsDuplicates() throws {
        let url = try TestPostgres.freshDatabase()
        let first = try Self.writer(url)
        _ = try EventStoreTests.appendAll(first, (1...20).map { Self.event($0) })
        try PGConnection.connect(url).execute("SELECT pg_terminate_backend($1)", [String(first.connection.backendPID)])
        var lost: Result<[AppendOutcome], StoreError>?
        first.append(events: [Self.event(21)]) { lost = $0 }
        first.runUntilIdle(timeoutMilliseconds: 10_000)
        #expect(throws: StoreError.self) { try lost?.get() }
        #expect(first.failure?.isRetryable == true)

        let second = try Self.writer(url)   // what StoreLink does after a reconnect
        let outcomes = try EventStoreTests.appendAll(second, [Self.event(21), Self.event(5), Self.event(22)])
        #expect(outcomes == [.appended(seq: 21), .duplicate(seq: 5), .appended(seq: 22)])
        // After a fallback the next batch goes through the function (one round trip); once one
        // comes back without a stored key, batches go by COPY again (two round trips).
        var trips = second.roundTrips
        #expect(try EventStoreTests.appendAll(second, [Self.event(23)]) == [.appended(seq: 23)])
        #expect(second.roundTrips - trips == 1, "through the function after a fallback")
        trips = second.roundTrips
        #expect(try EventStoreTests.appendAll(second, [Self.event(24)]) == [.appended(seq: 24)])
        #expect(second.roundTrips - trips == 2, "by COPY again after a batch without a stored key")
        #expect(try EventReader.events(PGConnection.connect(url), after: 0).map(\.seq) == (1...24).map(Int64.init))
    }
}
