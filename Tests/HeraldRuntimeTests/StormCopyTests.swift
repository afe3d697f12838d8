// A storm's summaries are appended by COPY; a restart that re-derives summaries already stored stores each once and consumers see each once.
import Foundation
import Synchronization
import Testing
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport

@Suite struct StormCopyTests {
    static let app = "com.example.news"
    static let users = (0..<12).map { "u\($0)" }

    /// Slices of 3 users, appends of 4 rows; no snapshot at all, so the restart folds the whole log
    /// and its summary timers (due at 08:00, where the manual clock resumes) fire again.
    static func configure(_ config: inout ServiceConfiguration) {
        config.timerSliceUsers = 3
        config.deliveryAppendRows = 4
        config.snapshotAtShutdown = false
        config.restoreFromSnapshots = false
        config.snapshotEveryEvents = nil
    }

    /// Every user authorized, on summary delivery at 08:00 UTC, with one queued item.
    static func setUpUsers(_ c: WireClient) throws {
        for u in Self.users {
            _ = try c.call(["op": "authorization", "user": .string(u), "app": .string(Self.app), "status": "authorized",
                            "options": ["alert", "sound", "badge"]])
            _ = try c.call(["op": "settings", "user": .string(u), "app": .string(Self.app), "delivery": "summary"])
            _ = try c.call(["op": "summarySchedule", "user": .string(u), "times": ["08:00"], "timeZone": "UTC"])
            #expect(try c.call(["op": "submit", "id": .string("\(u)-0"), "app": .string(Self.app), "user": .string(u),
                                "title": "Item", "body": "b"])["ok"] == true)
        }
    }

    @Test func summariesGoByCopyAndARestartThatReDerivesThemStoresEachOnce() throws {
        let url = try TestPostgres.freshDatabase()
        var server = try TestServer(url: url, start: "2026-03-27T07:00:00Z", configure: Self.configure)
        let c = try server.client()
        try Self.setUpUsers(c)
        // 12 queued deliveries (cursors 1…12); the storm adds 12 summaries (13…24), appended alone.
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "live", "from": "earliest"])
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])["ok"] == true)
        let live = try consumer.deliveries(24)
        #expect(live.compactMap { $0["cursor"]?.intValue } == Array(1...24))
        #expect(live.filter { $0["kind"] == "summary" }.count == 12)
        let stats = try server.statsWhen { $0["deliveriesCommitted"]?.intValue == 24 }
        #expect(stats["storeDeliveriesCopied"]?.intValue == 24, "every delivery by COPY, the summaries alone: \(stats)")
        consumer.close()
        c.close()
        server.stop()

        // Restart: the summaries are decided again with the same (user, user_index). The COPY meets
        // them stored, the batch goes through the function, which skips them: nothing new is stored.
        server = try TestServer(url: url, start: "2026-03-27T07:00:00Z", configure: Self.configure)
        defer { server.stop() }
        let again = try server.statsWhen { ($0["firing"]?["appendRows"]?.intValue ?? 0) >= 12 }
        #expect(again["firing"]?["appendRows"]?.intValue == 12, "the 12 summaries were re-derived and appended: \(again)")
        #expect(again["deliveriesCommitted"]?.intValue == 0, "none of them stored again")
        #expect(again["storeDeliveriesCopied"]?.intValue == 0, "the COPY met stored rows: the function took the batch")
        #expect(again["deliveryHead"]?.intValue == 24)
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*), max(cursor) FROM deliveries").int64(0, 0) == 24)
        #expect(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) == 24, "no cursor claimed for them")
        #expect(try conn.execute("SELECT count(*) FROM deliveries WHERE kind = 'summary'").int64(0, 0) == 12)

        // A consumer reading from the start sees each delivery once, in order, and nothing after.
        let reader = try server.client()
        _ = try reader.call(["op": "subscribe", "consumer": "after", "from": "earliest"])
        let all = try reader.deliveries(24)
        #expect(all.compactMap { $0["cursor"]?.intValue } == Array(1...24))
        #expect(Set(all.filter { $0["kind"] == "summary" }.compactMap { $0["user"]?.stringValue }) == Set(Self.users))
        // Then a request's reply is the next line: no delivery follows the 24th.
        try reader.send(#"{"op":"stats"}"#)
        #expect(try reader.readJSON()["op"] == "stats")
        let report = try Replayer().run(conn) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
        #expect(report.deliveriesCompared == 24)
    }

    @Test func aStormWhoseWriterIsCutWithTwoAppendsOutStoresEverySummaryOnceInOrder() throws {
        // Appends of 2 rows, two handed to the writer at once. The connection is cut right after the
        // COMMIT of the second summary append was sent (outcome unknown); the service puts the rows
        // back and sends them again after the reconnect. Every summary is stored once, the consumer
        // sees cursors 1… once each, in the order an uncut storm stores them, and replay agrees.
        // (At that instant the append behind it is not queued yet — the first append's completions,
        // which queue it, run after the cut — so two failed appends re-queued in order are covered by
        // OverlapTests.aFailedDeliveryTransactionFailsTheDeliveriesQueuedBehindIt, not here.)
        let uncut = try Self.summaryOrder(cutAt: nil)
        let cut = try Self.summaryOrder(cutAt: 2)
        #expect(uncut.count == 12)
        #expect(cut == uncut, "summaries in decided order after the cut")
    }

    /// Runs the storm with appends of 2 rows (cut after the `cutAt`-th summary COMMIT is sent) and
    /// returns the summaries' users in cursor order, after checking each is stored once and replay agrees.
    static func summaryOrder(cutAt: Int?) throws -> [String] {
        let url = try TestPostgres.freshDatabase()
        let armed = Atomic<Bool>(false)
        let deliveryOnlyCommits = Atomic<Int>(0)
        let server = try TestServer(url: url, start: "2026-03-27T07:00:00Z") { config in
            Self.configure(&config)
            config.deliveryAppendRows = 2
            config.commitFlushedForTesting = { socket, eventRows in
                guard let cutAt, armed.load(ordering: .relaxed), eventRows == 0,
                      deliveryOnlyCommits.add(1, ordering: .relaxed).newValue == cutAt else { return false }
                shutdown(socket, Int32(SHUT_RDWR))
                return true
            }
        }
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpUsers(c)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "live", "from": "earliest"])
        _ = try server.statsWhen { $0["deliveryHead"]?.intValue == 12 }   // the 12 queued deliveries
        armed.store(true, ordering: .relaxed)
        // The cut writer reconnects with backoff (100 ms doubling to 5 s): on a host busy with the
        // rest of the suite a reconnect can fail a few times, so the clock's reply and the put-back
        // summaries may take longer than the usual 10 s. What is checked is that they arrive once each.
        let clock: JSONValue = ["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"]
        #expect(try c.request(clock.canonicalString, timeoutMilliseconds: 40_000)["ok"] == true)
        let live = try consumer.deliveries(24, timeoutMilliseconds: 40_000)
        #expect(live.compactMap { $0["cursor"]?.intValue } == Array(1...24), "each cursor once, in order")
        if let cutAt { #expect(deliveryOnlyCommits.load(ordering: .relaxed) >= cutAt, "the cut happened") }
        _ = try server.statsWhen { $0["deliveryHead"]?.intValue == 24 }
        let conn = try PGConnection.connect(url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries WHERE kind = 'summary'").int64(0, 0) == 12, "each summary stored once")
        let report = try Replayer().run(conn) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
        return live.filter { $0["kind"] == "summary" }.compactMap { $0["user"]?.stringValue }
    }
}
