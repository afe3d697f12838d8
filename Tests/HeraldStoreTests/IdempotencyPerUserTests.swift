// SPEC §3 "Idempotency": (app, user, notification id) is unique forever, inside the user's
// partition (events_notification_once in schema/004_partitions.sql). The store's side: COPY and the append function alike.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct IdempotencyPerUserTests {
    static func submit(_ id: String, user: String, index: Int32 = 0, body: String? = nil) -> EventRow {
        EventRow(user: user, type: "submit", app: "com.example.mail", notificationId: id,
                 body: body ?? #"{"id":"\#(id)","title":"T","user":"\#(user)"}"#,
                 engineTime: Instant(millisecondsSinceEpoch: 1_780_000_000_000), recipientIndex: index)
    }

    /// A fan-out's rows, numbered 0 … n-1 as the service numbers them.
    static func fanOut(_ id: String, _ users: [String], body: ((String) -> String)? = nil) -> [EventRow] {
        users.enumerated().map { i, u in submit(id, user: u, index: Int32(i), body: body?(u)) }
    }

    static func stored(_ url: String) throws -> [StoredEventRow] {
        try EventReader.events(PGConnection.connect(url), after: 0)
    }

    @Test func idempotency_aUsedIdForAnotherUserIsAnotherNotification() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "alice")]) == [.appended(seq: 1)])
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "bob")]) == [.appended(seq: 2)])
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "alice")]) == [.duplicate(seq: 1)])
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "alice", body: #"{"other":1}"#)]) == [.conflict(seq: 1)])
        #expect(try Self.stored(url).map(\.row.user) == ["alice", "bob"], "the conflicting re-send was not stored")
        #expect(try EventReader.head(PGConnection.connect(url)) == 2, "no position was used by the re-sends")
    }

    @Test func idempotency_aFanOutReSentWithTheSameRecipientsIsADuplicateRowForRow() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        let rows = Self.fanOut("n1", ["alice", "bob", "carol"])
        #expect(try EventStoreTests.appendAll(writer, rows) == [.appended(seq: 1), .appended(seq: 2), .appended(seq: 3)])
        #expect(try EventStoreTests.appendAll(writer, rows) == [.duplicate(seq: 1), .duplicate(seq: 2), .duplicate(seq: 3)])
        #expect(try Self.stored(url).map(\.row) == rows, "stored once, with the recipient indexes")
    }

    /// Each recipient is its own key: a re-sent fan-out's known recipients are duplicates (or
    /// conflicts, with another body), its new ones are stored.
    @Test func idempotency_aFanOutReSentWithOtherRecipientsStoresOnlyTheNewOnes() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        _ = try EventStoreTests.appendAll(writer, Self.fanOut("n1", ["alice", "bob"]))
        #expect(try EventStoreTests.appendAll(writer, Self.fanOut("n1", ["bob", "alice", "dave"]))
                == [.duplicate(seq: 2), .duplicate(seq: 1), .appended(seq: 3)])
        let otherBody = Self.fanOut("n1", ["alice", "erin"], body: { _ in #"{"other":1}"# })
        #expect(try EventStoreTests.appendAll(writer, otherBody) == [.conflict(seq: 1), .appended(seq: 4)])
        #expect(try Self.stored(url).map(\.row.user) == ["alice", "bob", "dave", "erin"])
    }

    @Test func idempotency_aKeyUsedTwiceInABatchIsStoredOnceThePerUserKeysApart() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        let batch = [Self.submit("n1", user: "alice"), Self.submit("n1", user: "bob")]
            + Self.fanOut("n1", ["alice", "carol"]) + [Self.submit("n2", user: "bob"), Self.submit("n1", user: "alice")]
        let outcomes = try EventStoreTests.appendAll(writer, batch)
        #expect(outcomes == [.appended(seq: 1), .appended(seq: 2), .duplicate(seq: 1), .appended(seq: 3),
                             .appended(seq: 4), .duplicate(seq: 1)])
        #expect(try Self.stored(url).map(\.row.user) == ["alice", "bob", "carol", "bob"])
    }

    /// A fan-out is stored whole: one transaction, even past the writer's row limit (which only
    /// bounds how many requests join one), so a re-send never meets half of it.
    @Test func idempotency_aFanOutIsOneTransactionPastTheWritersRowLimit() throws {
        let url = try TestPostgres.freshDatabase()
        var limits = GroupCommitWriter.Limits()
        limits.maxRowsPerTransaction = 2
        let writer = try GroupCommitWriter(connection: PGConnection.connect(url), limits: limits)
        let rows = Self.fanOut("n1", (1...7).map { "user-\($0)" })
        #expect(try EventStoreTests.appendAll(writer, rows) == (1...7).map { .appended(seq: Int64($0)) })
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(DISTINCT xmin::text) FROM events").int64(0, 0) == 1, "one transaction")
        #expect(try EventStoreTests.appendAll(writer, rows) == (1...7).map { .duplicate(seq: Int64($0)) })
    }

    /// An export does not carry recipient indexes: import counts them again, so a fan-out re-sent
    /// to the imported copy is still a duplicate there, and another user's submit a new notification.
    @Test func idempotency_anImportedLogKeepsItsIdsUsed() throws {
        let source = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(source)
        let fanOut = Self.fanOut("n1", ["alice", "bob"])
        _ = try EventStoreTests.appendAll(writer, fanOut + [Self.submit("n2", user: "alice")])
        var lines: [String] = []
        _ = try LogTransfer.export(PGConnection.connect(source)) { lines.append($0) }
        let target = try TestPostgres.freshDatabase()
        _ = try LogTransfer.import(PGConnection.connect(target), lines: lines)
        #expect(try Self.stored(target).map(\.row) == Self.stored(source).map(\.row), "recipient indexes as written")
        let copy = try CopyAppendTests.writer(target)
        #expect(try EventStoreTests.appendAll(copy, fanOut) == [.duplicate(seq: 1), .duplicate(seq: 2)])
        #expect(try EventStoreTests.appendAll(copy, [Self.submit("n2", user: "bob")]) == [.appended(seq: 4)])
    }
}
