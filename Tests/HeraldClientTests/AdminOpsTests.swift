// The producer's admin ops (consumers, deleteConsumer, erase) and the ping probe against a real `herald serve`.
import Foundation
import HeraldClient
import HeraldTestSupport
import Testing

@Suite struct AdminOpsTests {
    /// `consumers()` lists a durable consumer with its acknowledged cursor and its live connection;
    /// `deleteConsumer` says what it removed; a second delete is `unknown_consumer`.
    @Test func consumersListsADurableConsumerAndDeleteConsumerRemovesIt() async throws {
        let server = try ClientTestServer()
        let herald = try await ConsumerTests.producer(server)
        try await ConsumerTests.submit(herald, 0..<3)
        let consumer = try await herald.subscribe(consumer: "gateway", from: .earliest, ackEvery: 1)
        for _ in 0..<3 { _ = try await consumer.next(timeoutMilliseconds: 10_000) }
        consumer.flushAcks()
        let deadline = Date().addingTimeInterval(10)
        while consumer.acknowledged[0] != 2 && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }

        let list = try await herald.consumers()
        let listed = try #require(list.raw["consumers"]?.arrayValue?.first { $0["consumer"]?.stringValue == "gateway" })
        #expect(listed["partitions"]?.arrayValue?.first?["acked"]?.intValue == 2, "\(list.line)")
        #expect(listed["members"]?.arrayValue?.count == 1, "\(list.line)")

        // Closed (which acks the third line), else it would subscribe again after the delete and bring the name back.
        await consumer.close()
        // The server sees the connection close a moment later: wait until the list has no member.
        _ = try await ConsumerTests.members(of: "gateway", in: herald, becoming: 0, withinSeconds: 10)

        // The reply says what it removed. How many connections it closed is the server's view of a
        // close racing it (under load the consumer's last connection may not have been seen to go).
        let deleted = try await herald.deleteConsumer("gateway")
        #expect(deleted.raw["acked"]?.intValue == 3 && (deleted.raw["closedConnections"]?.intValue ?? -1) >= 0, "\(deleted.line)")
        do {
            try await herald.deleteConsumer("gateway")
            Issue.record("a deleted consumer was deleted again")
        } catch {
            #expect(error.code == "unknown_consumer" && error.kind == .notFound, "\(error)")
        }
        await herald.close()
    }

    /// `erase(user:)` is acknowledged with the erasure event's seq; a producer's token may not erase.
    @Test func eraseIsAcknowledgedWithItsEventsSeqAndNeedsTheAdminRole() async throws {
        let server = try ClientTestServer()
        let herald = try await ConsumerTests.producer(server)
        try await ConsumerTests.submit(herald, 0..<2)
        let erased = try await herald.erase(user: "alice")
        #expect(erased.seq > 0 && erased.raw["ok"]?.boolValue == true, "\(erased.line)")
        let producer = try await HeraldProducer.connect(port: server.port, token: ClientTestServer.producerToken)
        do {
            try await producer.erase(user: "alice")
            Issue.record("a producer's token erased")
        } catch {
            #expect(error.kind == .forbidden, "\(error)")
        }
        await producer.close()
        await herald.close()
    }

    /// The probe pings without hello (a server with tokens answers it) and returns the pong's line;
    /// nothing listening is `connect_failed`, naming the address.
    @Test func theProbeGetsAPongWithoutATokenAndNamesAnAddressThatRefuses() throws {
        let server = try ClientTestServer()
        let pong = try HeraldProducer.probe(port: server.port)
        #expect(pong.contains(#""op":"pong""#) && pong.contains(#""ok":true"#), "\(pong)")
        let closed = LocalClusterPort.free()
        do {
            _ = try HeraldProducer.probe(port: closed, timeoutMilliseconds: 2_000)
            Issue.record("a closed port answered")
        } catch {
            #expect(error.code == "connect_failed" && error.title.contains("127.0.0.1:\(closed)"), "\(error)")
        }
    }
}
