// Lean pending items after a restart: their content is read back without blocking the loop; while it cannot be read they wait, then fire once, in order.
import Foundation
@testable import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct LeanContentTests {
    static let start = "2026-11-23T06:00:00Z"
    static let app = "com.example.lean"
    static let users = 6

    /// Run 1: deferred notifications two and three hours ahead (lean after a restart: more than a
    /// minute ahead), a collapse pair and an early withdraw among them; then a clean stop.
    static func seed(_ url: String) throws -> Int {
        let server = try TestServer(url: url, start: start) { $0.snapshotEveryEvents = nil }
        defer { server.stop() }
        let c = try server.client()
        #expect(try c.call(["op": "registerApp", "app": .string(app), "entitlements": []])["ok"] == true)
        var expected = 0
        for u in 0..<users {
            let user = JSONValue.string("lean-\(u)")
            #expect(try c.call(["op": "authorization", "user": user, "app": .string(app), "status": "authorized",
                                "options": ["alert", "sound", "badge"]])["ok"] == true)
            func submit(_ id: String, _ at: String, _ extra: [String: JSONValue] = [:]) throws {
                var o: [String: JSONValue] = ["op": "submit", "user": user, "app": .string(app), "id": .string("n\(u)-\(id)"),
                                              "title": .string("Item \(id) for \(u)"), "body": "Body text",
                                              "hiddenPreviewsBodyPlaceholder": "Update", "deliverAt": .string(at)]
                for (k, v) in extra { o[k] = v }
                #expect(try c.call(.object(o))["ok"] == true)
            }
            try submit("a", "2026-11-23T08:00:00Z")
            try submit("b", "2026-11-23T09:00:00Z", ["collapseId": "score"])
            try submit("c", "2026-11-23T08:30:00Z", ["collapseId": "score"])
            try submit("d", "2026-11-23T08:45:00Z")
            #expect(try c.call(["op": "withdraw", "user": user, "app": .string(app), "id": .string("n\(u)-d")])["ok"] == true)
            expected += 2  // a, and the collapse pair's latest (c replaces b); d withdrawn
        }
        return expected
    }

    /// Every stored delivery is unique per (user, notification, kind) and replay of the whole log agrees with it.
    static func expectOnceAndReplayAgrees(_ url: String, delivered: Int) throws {
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let dup = try conn.execute("SELECT count(*) FROM (SELECT user_id, notification_id, kind FROM deliveries GROUP BY 1, 2, 3 HAVING count(*) > 1) d")
        #expect(dup.int64(0, 0) == 0, "a decision stored twice")
        let n = try conn.execute("SELECT count(*) FROM deliveries WHERE kind IN ('alert', 'quiet') AND app = $1", [app])
        #expect(n.int64(0, 0) == Int64(delivered))
        let replay = try Replayer().run(conn) { 0 }
        #expect(replay.differences.isEmpty, "replay: \(replay.differences.prefix(3))")
    }

    static func storedDeliveries(_ url: String) throws -> Int {
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        return Int(try conn.execute("SELECT count(*) FROM deliveries").int64(0, 0) ?? 0)
    }

    static func consumer(_ server: TestServer) throws -> WireClient {
        let c = try server.client()
        #expect(try c.call(["op": "subscribe", "consumer": "watch", "from": "earliest"])["ok"] == true)
        return c
    }

    static func deliveredIds(_ lines: [JSONValue]) -> [String] {
        lines.filter { ["alert", "quiet"].contains($0["kind"]?.stringValue ?? "") }.compactMap { $0["notification"]?.stringValue }
    }

    /// Restart with lean items, PostgreSQL stopped before they come due (the manual clock cannot
    /// move while it is down: the move is refused and the clock stays), then started again; the
    /// clock moves past every deadline: each delivery arrives once, the content was read back
    /// from `events`, and replay finds 0 differences.
    @Test func leanItemsDueAfterAPostgresOutageArriveOnceAndReplayAgrees() throws {
        let pg = try PrivateCluster()
        defer { pg.destroy() }
        let expected = try Self.seed(pg.url)
        let log = LogLines()
        let server = try TestServer(url: pg.url, start: Self.start, log: log) { $0.snapshotEveryEvents = nil }
        defer { server.stop() }
        let watch = try Self.consumer(server)
        let c = try server.client()
        #expect(try c.call(["op": "stats"])["contentRowsRead"] == 0, "nothing due yet: nothing read back")

        pg.cluster.stop(mode: "fast")
        var refused = false
        for _ in 0..<50 {
            let r = try c.call(["op": "clock", "advanceTo": "2026-11-23T10:00:00Z"])
            #expect(r["ok"] != true, "no clock move is stored while PostgreSQL is down")
            if r["error"]?["code"] == "store_unavailable" { refused = true; break }
            usleep(100_000)
        }
        #expect(refused)
        #expect(try c.call(["op": "stats"])["now"] == .string(Self.start), "a refused move leaves the clock where the log says")

        try pg.cluster.start()
        var moved = false
        for _ in 0..<150 {  // until the writer reconnected (back-off up to 5 s)
            let r = try c.request(#"{"op":"clock","advanceTo":"2026-11-23T10:00:00Z"}"#, timeoutMilliseconds: 30_000)
            if r["ok"] == true { moved = true; break }
            usleep(200_000)
        }
        #expect(moved)
        // The clock's reply came after its due decisions committed: the consumer gets every stored row.
        let lines = try watch.deliveries(Self.storedDeliveries(pg.url), timeoutMilliseconds: 30_000)
        let ids = Self.deliveredIds(lines)
        #expect(ids.count == expected && Set(ids).count == expected, "each once: \(ids)")
        #expect(!ids.contains { $0.hasSuffix("-d") || $0.hasSuffix("-b") }, "withdrawn and replaced items are not delivered")
        let stats = try c.call(["op": "stats"])
        #expect((stats["contentRowsRead"]?.intValue ?? 0) >= Int64(expected), "lean content read back: \(stats.canonicalString)")
        #expect(stats["foldsWaitingForContent"] == 0 && stats["contentWaiting"] == 0)
        server.stop()
        try Self.expectOnceAndReplayAgrees(pg.url, delivered: expected)
    }

    /// Reads of `events` fail while appends still work (new connections to the database refused,
    /// the reader's connection cut): the due decisions wait — the clock's reply with them, and an
    /// event of a waiting user is acknowledged but folds only after them — with a log line saying
    /// so; once reads work again each decision is made once, in order, and replay agrees.
    @Test func dueLeanItemsWaitWhileContentCannotBeReadThenFireOnceInOrder() throws {
        let url = try TestPostgres.freshDatabase()
        let expected = try Self.seed(url)
        let log = LogLines()
        let server = try TestServer(url: url, start: Self.start, log: log) { $0.snapshotEveryEvents = nil }
        defer { server.stop() }
        let watch = try Self.consumer(server)
        let before = try Self.storedDeliveries(url)
        _ = try watch.deliveries(before)  // run 1's (withdrawn, replaced)
        let c = try server.client()

        let admin = try PGConnection.connect(url)
        defer { admin.close() }
        let db = try #require(try admin.execute("SELECT current_database()").string(0, 0))
        // The service's connections, in the order start-up opens them: the events' writer, the
        // deliveries' two writers, the reader, the lease's.
        let backends = try admin.execute("""
            SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'herald' AND pid <> pg_backend_pid()
            ORDER BY backend_start
            """, [db])
        #expect(backends.rowCount == 5, "the three writers, the reader and the lease's")
        let readerPid = try #require(backends.string(3, 0))
        let cluster = try PGConnection.connect(TestPostgres.cluster().connectionString())  // a database cannot lock itself out
        defer { cluster.close() }
        try cluster.execute("ALTER DATABASE \(db) ALLOW_CONNECTIONS false")
        try admin.execute("SELECT pg_terminate_backend($1::int)", [readerPid])

        // The clock moves past every deadline: the event is stored, the decisions wait for content.
        let mover = try server.client()
        try mover.send(#"{"op":"clock","advanceTo":"2026-11-23T10:00:00Z","rid":"move"}"#)
        var waited = false
        for _ in 0..<500 where !waited {
            waited = !log.matching("warning:", "could not read the content of", "decisions wait").isEmpty
            usleep(20_000)
        }
        #expect(waited, "the wait is logged: \(log.all)")
        // An event of a user whose decisions wait: acknowledged (committed), folded after them.
        let late: JSONValue = ["op": "submit", "user": "lean-0", "app": .string(Self.app), "id": "n0-late", "title": "Now",
                               "hiddenPreviewsBodyPlaceholder": "Update"]
        try c.send(late.canonicalString)
        #expect(try c.readJSON(timeoutMilliseconds: 10_000, orLog: log)["ok"] == true)
        let waiting = try c.call(["op": "stats"])
        #expect((waiting["contentWaiting"]?.intValue ?? 0) > 0 && (waiting["foldsWaitingForContent"]?.intValue ?? 0) == 1,
                "\(waiting.canonicalString)")
        #expect(throws: (any Error).self, "nothing is decided without the notification") {
            _ = try watch.readJSON(timeoutMilliseconds: 300)
        }

        try cluster.execute("ALTER DATABASE \(db) ALLOW_CONNECTIONS true")
        let reply = try mover.readJSON(timeoutMilliseconds: 30_000, orLog: log)
        #expect(reply["ok"] == true && reply["rid"] == "move", "the clock's reply came once its decisions were made: \(reply.canonicalString)")
        let lines = try watch.deliveries(Self.storedDeliveries(url) - before, timeoutMilliseconds: 30_000)
        let ids = Self.deliveredIds(lines)
        #expect(Set(ids).count == expected + 1 && ids.count == expected + 1, "each once: \(ids)")
        let user0 = lines.filter { $0["user"] == "lean-0" }.compactMap { $0["notification"]?.stringValue }
        #expect(user0.last == "n0-late", "the event that waited folded after the timers due before it: \(user0)")
        #expect(!log.matching("notice:", "content read again").isEmpty, "the end of the wait is logged: \(log.all)")
        server.stop()
        try Self.expectOnceAndReplayAgrees(url, delivered: expected + 1)
    }

    /// A clock move whose append fails leaves engine time where the log says (SPEC: the clock is an
    /// event); the next accepted move, and a restart, resume from the stored moves.
    @Test func aClockMoveThatIsNotStoredDoesNotMoveTheClock() throws {
        let url = try TestPostgres.freshDatabase()
        let admin = try PGConnection.connect(url)
        defer { admin.close() }
        try admin.executeScript("""
            CREATE FUNCTION test_refuse_clock() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.type = 'clock' THEN RAISE EXCEPTION 'clock moves refused by the test'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER test_refuse_clock BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION test_refuse_clock();
            """)
        let server = try TestServer(url: url, start: Self.start) { $0.snapshotEveryEvents = nil }
        let c = try server.client()
        let refused = try c.call(["op": "clock", "advanceTo": "2026-11-23T07:00:00Z"])
        #expect(refused["ok"] != true, "\(refused.canonicalString)")
        #expect(try c.call(["op": "stats"])["now"] == .string(Self.start), "the clock did not move")
        #expect(try c.call(["op": "registerApp", "app": .string(Self.app), "entitlements": []])["ok"] == true)
        let stored = try admin.execute("SELECT (extract(epoch FROM engine_time) * 1000)::bigint FROM events ORDER BY seq DESC LIMIT 1")
        #expect(stored.int64(0, 0) == Instant(rfc3339: Self.start)!.millisecondsSinceEpoch, "the next event takes the unmoved time")

        try admin.executeScript("DROP TRIGGER test_refuse_clock ON events")
        #expect(try c.call(["op": "clock", "advanceTo": "2026-11-23T07:00:00Z"])["ok"] == true)
        #expect(try c.call(["op": "stats"])["now"] == "2026-11-23T07:00:00Z")
        server.stop()
        let again = try TestServer(url: url, start: Self.start) { $0.snapshotEveryEvents = nil }
        defer { again.stop() }
        #expect(try again.client().call(["op": "stats"])["now"] == "2026-11-23T07:00:00Z", "a restart resumes at the stored move")
    }

    /// SIGTERM's drain ends with a final snapshot: the next start restores it and folds no event
    /// after it, and holds the state the whole log folds to.
    @Test func cleanShutdownWritesAFinalSnapshotAndTheNextStartFoldsNothing() throws {
        let url = try TestPostgres.freshDatabase()
        let log = LogLines()
        do {
            let server = try TestServer(url: url, start: SnapshotRestoreTests.start, log: log)  // default: no periodic snapshot this small
            let c = try server.client()
            try SnapshotRestoreTests.send(c, SnapshotRestoreTests.phase(0, users: 3))
            #expect(try c.call(["op": "clock", "advanceTo": "2026-11-23T08:10:00Z"])["ok"] == true)
            try SnapshotRestoreTests.send(c, SnapshotRestoreTests.phase(1, users: 2))
            #expect(try c.call(["op": "clock", "advanceTo": "2026-11-23T09:10:00Z"])["ok"] == true)
            server.stop()
        }
        #expect(!log.matching("final snapshot written").isEmpty, "\(log.all)")
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        let maxSeq = try conn.execute("SELECT max(seq) FROM events").int64(0, 0) ?? 0
        let snap = try #require(try SnapshotStore.latest(conn))
        #expect(snap.throughSeq == maxSeq, "the final snapshot covers the whole log, the last clock move included")

        let second = LogLines()
        do {
            let server = try TestServer(url: url, start: SnapshotRestoreTests.start, log: second)
            #expect(try server.client().call(["op": "stats"])["now"] == "2026-11-23T09:10:00Z")
            server.stop()
        }
        #expect(!second.matching("restored snapshot through seq \(maxSeq) + 0 events after it").isEmpty, "\(second.all)")
        #expect(second.matching("final snapshot").isEmpty, "nothing folded since: no second final snapshot")

        let whole = try SnapshotRestoreTests.restored(url, snapshots: false)
        let fromSnapshot = try SnapshotRestoreTests.restored(url, snapshots: true)
        try SnapshotRestoreTests.expectSame(whole, fromSnapshot, advanceTo: "2026-11-27T00:00:00Z")
    }
}

extension WireClient {
    /// `readJSON`, recording the service's log when nothing came.
    func readJSON(timeoutMilliseconds: Int32, orLog log: LogLines) throws -> JSONValue {
        do { return try readJSON(timeoutMilliseconds: timeoutMilliseconds) } catch {
            Issue.record("no line in \(timeoutMilliseconds) ms; service log: \(log.all.suffix(30).joined(separator: "\n"))")
            throw error
        }
    }
}
