// The binary-COPY log stream reads back exactly what the paged readers read, in position order.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct LogStreamTests {
    @Test func streamedEventsEqualThePagedReadByteForByte() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        var rows = (1...300).map { EventStoreTests.event($0, user: "u\($0 % 7)") }
        // A global event (no user), a pre-1970 engine time, and odd bytes in the body.
        rows.append(EventRow(user: nil, type: "registerApp", body: #"{"app":"x","q":"'; DROP TABLE events; --"}"#,
                             engineTime: Instant(millisecondsSinceEpoch: -1_234)))
        _ = try EventStoreTests.appendAll(writer, rows)

        let conn = try PGConnection.connect(url)
        let paged = try EventReader.events(conn, after: 0, limit: 1000)
        var streamed: [StoredEventRow] = []
        let stream = try LogStream(conn, deliveries: false)
        while case .event(let e)? = try stream.next() { streamed.append(e.row) }
        #expect(streamed == paged)
        #expect(streamed.count == 301)
        // The connection is usable again after the COPY.
        #expect(try EventReader.head(conn) == 301)

        var limited = 0
        let upTo = try LogStream(conn, through: 42, deliveries: false)
        while try upTo.next() != nil { limited += 1 }
        #expect(limited == 42)
    }

    @Test func storedDeliveriesFollowTheEventThatCausedThem() throws {
        let url = try TestPostgres.freshDatabase()
        let writer = try GroupCommitWriter(connection: try PGConnection.connect(url))
        _ = try EventStoreTests.appendAll(writer, (1...5).map { EventStoreTests.event($0) })
        let deliveries = [3, 1, 5].enumerated().map { i, cause in
            DeliveryRow(user: "u1", userIndex: Int64(i + 1), causeSeq: Int64(cause), kind: "alert", app: "a",
                        notificationId: "n\(cause)", reason: "normal", at: Instant(millisecondsSinceEpoch: 1000),
                        rulesVersion: "1", trace: "[]", body: #"{"kind":"alert","n":\#(cause)}"#)
        }
        writer.append(deliveries: deliveries) { _ in }
        writer.runUntilIdle()

        let stream = try LogStream(try PGConnection.connect(url), deliveries: true)
        var order: [String] = []
        while let record = try stream.next() {
            switch record {
            case .event(let e): order.append("e\(e.seq)")
            case .delivery(let d):
                order.append("d\(d.causeSeq)")
                #expect(String(decoding: d.body, as: UTF8.self) == #"{"kind":"alert","n":\#(d.causeSeq)}"#)
            }
        }
        // Each stored delivery comes after the event that caused it; deliveries come in cursor
        // (commit) order, events in seq order.
        for (i, record) in order.enumerated() where record.hasPrefix("d") {
            #expect(order[..<i].contains("e" + record.dropFirst()), "\(record) after its cause: \(order)")
        }
        #expect(order.filter { $0.hasPrefix("d") } == ["d3", "d1", "d5"])
        #expect(order.filter { $0.hasPrefix("e") } == (1...5).map { "e\($0)" })
        // Held back no longer than needed: d3 right after e3, then d1 (its cause long read), d5 after e5.
        #expect(order == ["e1", "e2", "e3", "d3", "d1", "e4", "e5", "d5"])
        var limited: [String] = []
        let upTo = try LogStream(try PGConnection.connect(url), through: 3, deliveries: true)
        while let record = try upTo.next() {
            if case .event(let e) = record { limited.append("e\(e.seq)") } else if case .delivery(let d) = record { limited.append("d\(d.causeSeq)") }
        }
        #expect(limited == ["e1", "e2", "e3", "d3", "d1"], "through a seq: the deliveries of the events up to it")
    }
}
