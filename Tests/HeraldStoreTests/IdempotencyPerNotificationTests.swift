// SPEC §3 "Idempotency": (app, notification id) is unique forever, whoever the recipients
// (events_notification_once in schema/001_tables.sql). The store's side: COPY and the append function alike, fan-outs as a whole.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct IdempotencyPerNotificationTests {
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

    @Test func idempotency_aUsedIdSubmittedForAnotherUserIsAConflictAndStoresNothing() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "alice")]) == [.appended(seq: 1)])
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "bob")]) == [.conflict(seq: 1)])
        #expect(try EventStoreTests.appendAll(writer, [Self.submit("n1", user: "alice")]) == [.duplicate(seq: 1)])
        #expect(try Self.stored(url).map(\.row.user) == ["alice"], "bob's row was not stored")
        #expect(try EventReader.head(PGConnection.connect(url)) == 1, "no position was used")
    }

    @Test func idempotency_aFanOutReSentWithTheSameRecipientsIsADuplicateRowForRow() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        let rows = Self.fanOut("n1", ["alice", "bob", "carol"])
        #expect(try EventStoreTests.appendAll(writer, rows) == [.appended(seq: 1), .appended(seq: 2), .appended(seq: 3)])
        #expect(try EventStoreTests.appendAll(writer, rows) == [.duplicate(seq: 1), .duplicate(seq: 2), .duplicate(seq: 3)])
        #expect(try Self.stored(url).map(\.row) == rows, "stored once, with the recipient indexes")
    }

    @Test func idempotency_aFanOutReSentWithOtherRecipientsIsAConflictAndStoresNoneOfItsRows() throws {
        let variants: [(String, [EventRow])] = [
            ("a recipient more", Self.fanOut("n1", ["alice", "bob", "dave"])),
            ("a recipient fewer", Self.fanOut("n1", ["alice"])),
            ("another first recipient", Self.fanOut("n1", ["dave", "bob"])),
            ("the same recipients in another order", Self.fanOut("n1", ["bob", "alice"])),
            ("another body for one", Self.fanOut("n1", ["alice", "bob"], body: { $0 == "bob" ? #"{"other":1}"# : #"{"id":"n1","title":"T","user":"\#($0)"}"# })),
        ]
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        let original = Self.fanOut("n1", ["alice", "bob"])
        _ = try EventStoreTests.appendAll(writer, original)
        for (what, rows) in variants {
            let outcomes = try EventStoreTests.appendAll(writer, rows)
            #expect(outcomes == Array(repeating: .conflict(seq: 1), count: rows.count), "\(what): \(outcomes)")
        }
        #expect(try Self.stored(url).map(\.row) == original, "nothing of the variants was stored")
    }

    @Test func idempotency_theFirstOfTwoRequestsWithOneIdInABatchWinsWhateverTheUser() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try CopyAppendTests.writer(url)
        // Three requests in one append: the first stores n1, the second (another user) and the
        // third (a fan-out that starts with the first's row) are answered against it.
        let batch = [Self.submit("n1", user: "alice"), Self.submit("n1", user: "bob")]
            + Self.fanOut("n1", ["alice", "carol"]) + [Self.submit("n2", user: "bob"), Self.submit("n1", user: "alice")]
        let outcomes = try EventStoreTests.appendAll(writer, batch)
        #expect(outcomes == [.appended(seq: 1), .conflict(seq: 1), .conflict(seq: 1), .conflict(seq: 1),
                             .appended(seq: 2), .duplicate(seq: 1)])
        #expect(try Self.stored(url).map(\.row.notificationId) == ["n1", "n2"])
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
    /// to the imported copy is still a duplicate there, and another user's submit a conflict.
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
        #expect(try EventStoreTests.appendAll(copy, [Self.submit("n2", user: "bob")]) == [.conflict(seq: 3)])
    }
}
