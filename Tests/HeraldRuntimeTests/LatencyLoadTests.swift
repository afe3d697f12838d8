// The latency bench's paced sender (HeraldTestSupport's LatencyLoad) against a real service: every
// submit sent once, every ack and delivery line matched to its submit, in both sending modes.
import Foundation
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct LatencyLoadTests {
    /// 0: one write per submit, timed from its send; 500: the submits due every 500 µs in one write,
    /// each timed from its due time. Counts and signs only: no test asserts on how fast.
    @Test(arguments: [0, 500])
    func everySubmitIsSentOnceAndEachAckAndDeliveryLineIsMatchedToIt(tickMicroseconds: Int) throws {
        let server = try TestServer()
        defer { server.stop() }
        var load = LatencyLoad()
        load.events = 400
        load.ratePerSecond = 4_000
        load.tickMicroseconds = tickMicroseconds
        load.ingest.users = 25
        try load.ingest.prepare(port: server.port)
        let result = try load.run(port: server.port)
        #expect(result.delivered == 400)
        #expect(result.latencies.count == 400 && result.ackLatencies.count == 400)
        #expect((result.latencies.minimumMs ?? -1) >= 0 && (result.ackLatencies.minimumMs ?? -1) >= 0,
                "an ack or a delivery line never comes before its submit was due")
        let stats = try server.client().call(["op": "stats"])
        #expect(stats["eventsCommitted"]?.intValue.map { $0 >= 400 } == true, "\(stats.canonicalString)")
    }

    /// The group-commit reference stores the run's own submits and deliveries again, every one
    /// once, in batches of the given size (the last one shorter), and leaves no table behind.
    @Test func theGroupCommitReferenceStoresEachOfTheRunsRowsAgainOnce() throws {
        let server = try TestServer()
        defer { server.stop() }
        var load = LatencyLoad()
        load.events = 230
        load.ratePerSecond = 4_000
        load.ingest.users = 25
        try load.ingest.prepare(port: server.port)
        #expect(try load.run(port: server.port).delivered == 230)
        let reference = try load.groupCommitReference(databaseURL: server.url, submitsPerTransaction: 50, count: 230)
        #expect(reference.latencies.count == 230)
        #expect((reference.latencies.minimumMs ?? -1) >= 0, "a commit never comes before its submit was due")
        let conn = try PGConnection.connect(server.url)
        defer { conn.close() }
        #expect(try conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'bench_reference_%'").int64(0, 0) == 0)
    }
}

