// A consumer behind the in-memory ring reads its deliveries from PostgreSQL: when that read fails,
// it reads again by itself, also when no new delivery comes to wake it.
import Foundation
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import Testing

@Suite struct ConsumerCatchUpTests {
    /// The read is made to fail deterministically: a lock holds it on `deliveries`, and its backend
    /// is terminated while it waits. Nothing is submitted afterwards, so only a retry can finish it.
    @Test func aCatchUpReadThatFailsIsReadAgainWithoutNewDeliveries() throws {
        let log = LogLines()
        let server = try TestServer(log: log) { $0.deliveryRingCapacity = 8 }
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let count = 40
        for i in 0..<count { #expect(try c.call(ServiceTests.submit("n\(i)"))["ok"] == true) }
        let live = try server.client()
        #expect(try live.call(["op": "subscribe", "consumer": "live", "from": "earliest"])["ok"] == true)
        _ = try live.deliveries(count)  // all committed

        let admin = try PGConnection.connect(server.url)
        defer { admin.close() }
        let locker = try PGConnection.connect(server.url)
        defer { locker.close() }
        try locker.execute("BEGIN")
        try locker.execute("LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE")
        let late = try server.client()
        #expect(try late.call(["op": "subscribe", "consumer": "late", "from": "earliest"])["ok"] == true)
        var waiting: String?
        for _ in 0..<500 where waiting == nil {
            waiting = try admin.execute("""
                SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                AND query LIKE 'SELECT cursor, body, user_id FROM deliveries%'
                """).string(0, 0)
            if waiting == nil { usleep(10_000) }
        }
        let reader = try #require(waiting, "the catch-up read waits for the lock")
        try admin.execute("SELECT pg_terminate_backend($1::int)", [reader])
        try locker.execute("ROLLBACK")

        let lines = try late.deliveries(count, timeoutMilliseconds: 10_000)
        #expect(lines.compactMap { $0["cursor"]?.intValue } == Array(1...Int64(count)), "every delivery once, in order")
        #expect(!log.matching("warning: consumer late", "failed").isEmpty, "the failure is logged: \(log.all)")
        #expect(!log.matching("consumer late", "works again").isEmpty)
    }

    /// Experiment 6 (docs/reliability.md) once saw a page sent twice: a drain callback armed before
    /// a catch-up read pumped the stream again while the read was in flight, and a second read from
    /// the same position sent the same page again. Here each read is woken once right after it is
    /// sent, as that callback did (`catchUpReadSent`, on the loop): one read, each delivery once.
    /// Without `pump`'s in-flight guard: two reads and every delivery twice.
    @Test func aStreamWokenWhileItsCatchUpReadIsInFlightReadsThePageOnce() throws {
        let server = try TestServer { $0.deliveryRingCapacity = 8 }
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let count = 40
        for i in 0..<count { #expect(try c.call(ServiceTests.submit("n\(i)"))["ok"] == true) }
        _ = try server.statsWhen { ($0["deliveryHead"]?.intValue ?? 0) >= Int64(count) }

        // Set before the consumer subscribes (its request, through the socket, orders the two).
        nonisolated(unsafe) let service = server.service
        nonisolated(unsafe) var waking = false
        service.catchUpReadSent = { stream in
            guard !waking else { return }  // once per read: a second read would wake again
            waking = true
            service.pump(stream)
            waking = false
        }
        let late = try server.client()
        #expect(try late.call(["op": "subscribe", "consumer": "late", "from": "earliest"])["ok"] == true)
        var lines = try late.deliveries(count)
        // Anything sent after the page arrives before the reply to a ping on the same connection.
        try late.send(#"{"op":"ping"}"#)
        while true {
            let v = try late.readJSON()
            if v["op"]?.stringValue == "delivery" { lines.append(v) } else { break }
        }
        #expect(lines.compactMap { $0["cursor"]?.intValue } == Array(1...Int64(count)), "every delivery once, in order")
        let stats = try server.statsWhen { _ in true }
        #expect(stats["firing"]?["catchUpReads"]?.intValue == 1, "\(stats["firing"]?.canonicalString ?? "")")
    }
}
