// Deliveries are committed by writer connections of their own (`ServiceConfiguration.deliveryWriters`).
import Foundation
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct DeliveryWriterTests {
    /// Submits `ids` one by one for alice, each acknowledged.
    static func submit(_ c: WireClient, _ ids: [String]) throws {
        for id in ids {
            #expect(try c.call(ServiceTests.submit(id))["ok"] == true, "\(id) acknowledged")
        }
    }

    /// A fresh log with StormCopyTests' 12 users and their queued items (cursors 1 … 12), written by
    /// a service that has stopped (`inspect` sees its stats first): the next one starts on it.
    static func logWithTwelveQueuedItems(_ inspect: (JSONValue) -> Void = { _ in }) throws -> String {
        let url = try TestPostgres.freshDatabase()
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z") { StormCopyTests.configure(&$0) }
        defer { server.stop() }
        let c = try server.client()
        defer { c.close() }
        try StormCopyTests.setUpUsers(c)
        inspect(try server.statsWhen { $0["deliveriesCommitted"]?.intValue == 12 })
        return url
    }

    /// A burst's last rows are shared so the writers finish together: with the other writer free,
    /// half each; with it busy, what it has still to store counts on its side; nothing is split
    /// into an append of `smallest` rows or fewer, and one writer alone takes the rest.
    @Test func aBurstsLastRowsAreSharedSoTheWritersFinishTogether() {
        #expect(HeraldService.tailShare(unsent: 3840, othersStillToStore: [0], smallest: 512) == 1920)
        #expect(HeraldService.tailShare(unsent: 3840, othersStillToStore: [800], smallest: 512) == 2320)
        #expect(HeraldService.tailShare(unsent: 2020, othersStillToStore: [626], smallest: 512) == 1323)
        // The other has more left than the whole rest: this writer takes all of it.
        #expect(HeraldService.tailShare(unsent: 2000, othersStillToStore: [4000], smallest: 512) == 2000)
        // What the share would leave (6 rows) goes with it.
        #expect(HeraldService.tailShare(unsent: 2918, othersStillToStore: [2906], smallest: 512) == 2918)
        #expect(HeraldService.tailShare(unsent: 1000, othersStillToStore: [0], smallest: 512) == 1000)
        #expect(HeraldService.tailShare(unsent: 512, othersStillToStore: [0], smallest: 512) == 512)
        #expect(HeraldService.tailShare(unsent: 3000, othersStillToStore: [], smallest: 512) == 3000)
        #expect(HeraldService.tailShare(unsent: 3000, othersStillToStore: [0, 0], smallest: 512) == 1000)
    }

    @Test func deliveriesAreCommittedByAWriterOfTheirOwnBesideTheEventsOne() throws {
        let server = try TestServer { $0.deliveriesRideBelowRows = 0 }   // never riding with events
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        try Self.submit(c, ["n1", "n2", "n3"])
        #expect(try consumer.deliveries(3).compactMap { $0["notification"]?.stringValue } == ["n1", "n2", "n3"])
        let stats = try c.call(["op": "stats"])
        let events = try #require(stats["storeBackendPID"]?.intValue)
        let deliveries = try #require(stats["storeDeliveryBackendPIDs"]?.arrayValue).compactMap(\.intValue)
        #expect(events > 0 && deliveries.count == 2 && Set(deliveries + [events]).count == 3 && !deliveries.contains(0),
                "three backends: \(stats.canonicalString)")
        #expect(stats["storeDeliveriesChained"]?.intValue == 0, "a few deliveries at a time go to the first writer, claiming their cursors")
        // No delivery shares a transaction with an event (one writer put small batches' deliveries
        // in the next events transaction).
        let conn = try PGConnection.connect(server.url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries d JOIN events e ON d.xmin::text = e.xmin::text").int64(0, 0) == 0)
    }

    @Test func aLostDeliveryWriterIsReconnectedWhileEventsAreStillAcknowledgedAndNoDeliveryIsLostOrRepeated() throws {
        let log = LogLines()
        let server = try TestServer(log: log) { $0.deliveriesRideBelowRows = 0 }   // the delivery writer takes every append
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        try Self.submit(c, ["n1"])
        _ = try consumer.deliveries(1)
        let pids = { (stats: JSONValue) in (stats["storeDeliveryBackendPIDs"]?.arrayValue ?? []).compactMap(\.intValue) }
        let before = try #require(pids(try c.call(["op": "stats"])).first)

        let admin = try PGConnection.connect(server.url)
        defer { admin.close() }
        try admin.execute("SELECT pg_terminate_backend($1::int)", [String(before)])
        // The events' writer is untouched: every submit is acknowledged at once.
        try Self.submit(c, ["n2", "n3", "n4", "n5"])
        let lines = try consumer.deliveries(4, timeoutMilliseconds: 15_000)
        #expect(lines.compactMap { $0["notification"]?.stringValue } == ["n2", "n3", "n4", "n5"], "in order, each once")
        #expect(lines.compactMap { $0["cursor"]?.intValue } == [2, 3, 4, 5], "cursors without a gap")
        let after = try server.statsWhen { !pids($0).contains(0) && !pids($0).contains(before) }
        #expect(!pids(after).contains(before) && !pids(after).contains(0), "a new connection: \(after.canonicalString)")
        #expect(!log.matching("lost PostgreSQL").isEmpty && !log.matching("reconnected to PostgreSQL").isEmpty, "\(log.all)")
        #expect(try admin.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 5, "each stored once")
        let report = try Replayer().run(admin) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }

    /// A small batch's deliveries ride in the events' writer's next transaction (one commit for
    /// both); a burst still goes to the delivery writers; the cursors stay gap-free and in commit
    /// order across the change of carrier, and replay agrees.
    @Test func smallBatchesRideWithTheEventsWriterAndBurstsGoToTheDeliveryWritersInCursorOrder() throws {
        let url = try TestPostgres.freshDatabase()
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z") { config in
            StormCopyTests.configure(&config)
            config.timerSliceUsers = 12
            config.deliveriesRideBelowRows = 4   // the storm's 12 rows do not ride; single submits do
        }
        defer { server.stop() }
        let c = try server.client()
        try StormCopyTests.setUpUsers(c)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "live", "from": "earliest"])
        let queued = try consumer.deliveries(12)   // the queued items, decided one request at a time
        #expect(queued.compactMap { $0["cursor"]?.intValue } == Array(1...12))
        // Twenty submits pipelined: the events' writer is busy, so each batch's deliveries ride in
        // a later events transaction (a request at a time, they would ride alone).
        try ServiceTests.setUpAlice(c)
        for i in 1...20 { try c.send(ServiceTests.submit("p\(i)").canonicalString) }
        for _ in 1...20 { #expect(try c.readJSON()["ok"] == true) }
        let pipelined = try consumer.deliveries(20)
        #expect(pipelined.compactMap { $0["cursor"]?.intValue } == Array(13...32), "each cursor once, in order")
        #expect(pipelined.compactMap { $0["notification"]?.stringValue } == (1...20).map { "p\($0)" })
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])["ok"] == true)
        let live = try consumer.deliveries(12)
        #expect(live.compactMap { $0["cursor"]?.intValue } == Array(33...44), "each cursor once, in order")
        #expect(live.allSatisfy { $0["kind"] == "summary" })
        let conn = try PGConnection.connect(url)
        // Riding: some pipelined submits' rows share a transaction with events; the summaries do not.
        let shared = try conn.execute("""
            SELECT count(*) FILTER (WHERE d.cursor BETWEEN 13 AND 32), count(*) FILTER (WHERE d.cursor > 32)
            FROM deliveries d WHERE EXISTS (SELECT 1 FROM events e WHERE e.xmin::text = d.xmin::text)
            """)
        #expect((shared.int64(0, 0) ?? 0) > 0, "small batches rode with events")
        #expect(shared.int64(0, 1) == 0, "the burst went to the delivery writers")
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 44)
        let report = try Replayer().run(conn) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }

    @Test func aBurstOfDueTimersIsStoredByBothDeliveryWritersAtOnceEachCursorOnceInOrder() throws {
        // 12 summaries due at one instant, decided in one slice and appended 4 rows at a time: a
        // burst (a whole append's worth waiting) with the head known, so the two writers each
        // take an append at cursors the service assigned (chained).
        let url = try TestPostgres.freshDatabase()
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z") { config in
            StormCopyTests.configure(&config)
            config.timerSliceUsers = 12
        }
        defer { server.stop() }
        let c = try server.client()
        try StormCopyTests.setUpUsers(c)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "live", "from": "earliest"])
        _ = try consumer.deliveries(12)   // the queued items, cursors 1 … 12
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])["ok"] == true)
        let live = try consumer.deliveries(12)
        #expect(live.compactMap { $0["cursor"]?.intValue } == Array(13...24), "each cursor once, in order")
        #expect(live.allSatisfy { $0["kind"] == "summary" })
        let stats = try server.statsWhen { $0["deliveriesCommitted"]?.intValue == 24 }
        #expect((stats["storeDeliveriesChained"]?.intValue ?? 0) > 0, "chained appends stored some: \(stats.canonicalString)")
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*), max(cursor) FROM deliveries").int64(0, 1) == 24)
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 24)
        let report = try Replayer().run(conn) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }
}

extension DeliveryWriterTests {
    /// A firing that takes several slices (users still due now: a burst from its first slice)
    /// right after a start, with the head read at start-up: its appends go to the writers as they
    /// free up, chained, and every summary is stored once, in decision order, as replay derives it.
    /// (Which writer takes which slice depends on timing; the effect on a 20,000-job burst is
    /// measured by `herald bench peer`, BENCHMARKS.md.)
    @Test func aFiringOverSeveralSlicesAfterAStartIsStoredOnceInOrderByChainedAppends() throws {
        let url = try Self.logWithTwelveQueuedItems()
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z") { config in
            StormCopyTests.configure(&config)
            config.timerSliceUsers = 2   // 12 users due: six slices of 2 summaries, fewer than an append (4)
        }
        defer { server.stop() }
        let again = try server.client()
        #expect(try again.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])["ok"] == true)
        let after = try server.statsWhen { $0["deliveriesCommitted"]?.intValue == 12 }
        #expect((after["storeDeliveriesChained"]?.intValue ?? 0) >= 2, "the firing's first append went chained: \(after.canonicalString)")
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "live", "from": "earliest"])
        let all = try consumer.deliveries(24)
        #expect(all.compactMap { $0["cursor"]?.intValue } == Array(1...24), "each cursor once, in order")
        #expect(all.suffix(12).allSatisfy { $0["kind"] == "summary" })
        let conn = try PGConnection.connect(url)
        let report = try Replayer().run(conn) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }

    /// While a burst's chained appends are in flight the WAL writer is nudged every
    /// `walNudgeMilliseconds` (here the appends are held: a row lock on partition 0's row of `delivery_heads` keeps the
    /// first from committing); once they commit the nudges stop, and every summary is stored once,
    /// in order, and replays exactly.
    @Test func aBurstWakesTheWALWriterWhileItsAppendsAreInFlightAndOnlyThen() throws {
        let url = try Self.logWithTwelveQueuedItems { stats in
            #expect(stats["firing"]?["walNudges"]?.intValue == 0, "no burst, no nudge")
        }
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z") { config in
            StormCopyTests.configure(&config)
            config.walNudgeMilliseconds = 2
        }
        defer { server.stop() }
        let admin = try PGConnection.connect(url)
        defer { admin.close() }
        _ = try admin.execute("BEGIN")
        _ = try admin.execute("SELECT cursor FROM delivery_heads WHERE partition = 0 FOR UPDATE")
        let again = try server.client()
        try again.send(#"{"op":"clock","advanceTo":"2026-03-27T08:00:00Z","rid":"storm"}"#)
        let held = try server.statsWhen { ($0["firing"]?["walNudges"]?.intValue ?? 0) >= 3 }
        #expect((held["firing"]?["walNudges"]?.intValue ?? 0) >= 3, "nudged while the appends wait: \(held.canonicalString)")
        #expect(held["deliveriesCommitted"]?.intValue == 0)
        _ = try admin.execute("COMMIT")
        #expect(try again.readJSON()["ok"] == true)
        // A nudge sent before the last append committed may still be answered after it: wait
        // for it, then no more may come.
        let done = try server.statsWhen {
            $0["deliveriesCommitted"]?.intValue == 12 && $0["firing"]?["walNudgeInFlight"] == false
        }
        usleep(50_000)   // 25 intervals: no chained append in flight, no nudge
        let later = try server.client().call(["op": "stats"])
        #expect(later["firing"]?["walNudges"] == done["firing"]?["walNudges"], "the nudges stopped with the burst")
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "live", "from": "earliest"])
        let all = try consumer.deliveries(24)
        #expect(all.compactMap { $0["cursor"]?.intValue } == Array(1...24), "each cursor once, in order")
        let report = try Replayer().run(PGConnection.connect(url)) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }

    /// After a start the delivery head read from PostgreSQL is where the next chained append
    /// starts. If something else moved the head since (here, by hand), the first chained appends
    /// fail with a conflict, nothing of them is stored, and their rows are claimed again after
    /// the moved head: each delivery stored once, in decision order.
    @Test func aHeadMovedSinceTheStartFailsTheFirstChainedAppendAndItsRowsAreClaimedAgain() throws {
        let url = try Self.logWithTwelveQueuedItems()
        let log = LogLines()
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z", log: log) { config in
            StormCopyTests.configure(&config)
            config.timerSliceUsers = 12
        }
        defer { server.stop() }
        let admin = try PGConnection.connect(url)
        defer { admin.close() }
        try admin.execute("UPDATE delivery_heads SET cursor = 15 WHERE partition = 0")   // cursors 13 … 15 taken elsewhere
        let again = try server.client()
        #expect(try again.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])["ok"] == true)
        _ = try server.statsWhen { $0["deliveriesCommitted"]?.intValue == 12 }
        #expect(!log.matching("the delivery head is not at 12").isEmpty, "the stale head was met: \(log.all)")
        let rows = try admin.execute("SELECT cursor FROM deliveries WHERE kind = 'summary' ORDER BY cursor")
        #expect((0..<rows.rowCount).compactMap { rows.int64($0, 0) } == Array(16...27), "after the moved head, each once, no gap")
        #expect(try admin.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 27)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "late", "from": "earliest"])
        let all = try consumer.deliveries(24)
        #expect(all.compactMap { $0["cursor"]?.intValue } == Array(1...12) + Array(16...27))
    }
}

@Suite struct DeliveryRequeueTests {
    @Test func aFailedAppendsRowsGoBackWhereTheyWereDecided() {
        // Usual: all of them before what is left.
        #expect(DeliveryAppends.merged(["c", "d"], [3, 4], into: ["e", "f"], [5, 6]) == (["c", "d", "e", "f"], [3, 4, 5, 6]))
        #expect(DeliveryAppends.merged(["c"], [3], into: [String](), []) == (["c"], [3]))
        // A retry re-took u3, u4 (put back before u5, u6, which failed later but were decided
        // after them) and failed too: u3, u4 go back in front of u5, u6.
        #expect(DeliveryAppends.merged(["u3", "u4"], [3, 4], into: ["u5", "u6", "u7"], [5, 6, 7])
                == (["u3", "u4", "u5", "u6", "u7"], [3, 4, 5, 6, 7]))
        // Interleaved: an append had taken put-back rows and new ones while another, decided in
        // between, was in flight and was put back first.
        #expect(DeliveryAppends.merged(["a3", "a4", "a9"], [3, 4, 9], into: ["b5", "b6", "c11"], [5, 6, 11])
                == (["a3", "a4", "b5", "b6", "a9", "c11"], [3, 4, 5, 6, 9, 11]))
    }
}
