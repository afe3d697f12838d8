// Deliveries are committed by a writer connection of their own (`ServiceConfiguration.separateDeliveryWriter`).
import Foundation
import HeraldCore
import HeraldRuntime
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

    @Test func deliveriesAreCommittedByAWriterOfTheirOwnBesideTheEventsOne() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        try Self.submit(c, ["n1", "n2", "n3"])
        #expect(try consumer.deliveries(3).compactMap { $0["notification"]?.stringValue } == ["n1", "n2", "n3"])
        let stats = try c.call(["op": "stats"])
        let events = try #require(stats["storeBackendPID"]?.intValue), deliveries = try #require(stats["storeDeliveryBackendPID"]?.intValue)
        #expect(events > 0 && deliveries > 0 && events != deliveries, "two backends: \(stats.canonicalString)")
        // No delivery shares a transaction with an event (one writer put small batches' deliveries
        // in the next events transaction).
        let conn = try PGConnection.connect(server.url)
        #expect(try conn.execute("SELECT count(*) FROM deliveries d JOIN events e ON d.xmin::text = e.xmin::text").int64(0, 0) == 0)
    }

    @Test func aLostDeliveryWriterIsReconnectedWhileEventsAreStillAcknowledgedAndNoDeliveryIsLostOrRepeated() throws {
        let log = LogLines()
        let server = try TestServer(log: log)
        defer { server.stop() }
        let c = try server.client()
        try ServiceTests.setUpAlice(c)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        try Self.submit(c, ["n1"])
        _ = try consumer.deliveries(1)
        let before = try #require(try c.call(["op": "stats"])["storeDeliveryBackendPID"]?.intValue)

        let admin = try PGConnection.connect(server.url)
        defer { admin.close() }
        try admin.execute("SELECT pg_terminate_backend($1::int)", [String(before)])
        // The events' writer is untouched: every submit is acknowledged at once.
        try Self.submit(c, ["n2", "n3", "n4", "n5"])
        let lines = try consumer.deliveries(4, timeoutMilliseconds: 15_000)
        #expect(lines.compactMap { $0["notification"]?.stringValue } == ["n2", "n3", "n4", "n5"], "in order, each once")
        #expect(lines.compactMap { $0["cursor"]?.intValue } == [2, 3, 4, 5], "cursors without a gap")
        let after = try server.statsWhen { ($0["storeDeliveryBackendPID"]?.intValue ?? 0) > 0 }
        #expect(after["storeDeliveryBackendPID"]?.intValue != before, "a new connection")
        #expect(!log.matching("lost PostgreSQL").isEmpty && !log.matching("reconnected to PostgreSQL").isEmpty, "\(log.all)")
        #expect(try admin.execute("SELECT count(*) FROM deliveries").int64(0, 0) == 5, "each stored once")
        let report = try Replayer().run(admin) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }
}
