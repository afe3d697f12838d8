// A consumer that falls behind a storm's in-memory ring catches up from PostgreSQL in pages, across reconnects: every cursor once, in order.
import Testing
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import HeraldTestSupport

@Suite struct StormConsumerTests {
    static let app = "com.example.news"

    /// 40 users' summaries fire in slices of 3 users, appended 4 rows at a time, with an 8-line ring
    /// and a 1 KiB consumer buffer: a consumer subscribed before the storm falls behind the ring and
    /// reads pages from PostgreSQL. It drops its connection after 25 deliveries having acked the
    /// 20th, resubscribes, and must see cursor 21 onwards in order with no gap; all together every
    /// delivery of the log once (after the acked point), summaries `at` their instant, replay equal.
    @Test func aConsumerBehindTheRingCatchesUpInPagesAcrossAReconnect() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z") { config in
            config.timerSliceUsers = 3
            config.deliveryAppendRows = 4
            config.deliveryRingCapacity = 8
            config.consumerBufferBytes = 1024
        }
        defer { server.stop() }
        let c = try server.client()
        let users = (0..<40).map { "u\($0)" }
        for u in users {
            _ = try c.call(["op": "authorization", "user": .string(u), "app": .string(Self.app), "status": "authorized",
                            "options": ["alert", "sound", "badge"]])
            _ = try c.call(["op": "settings", "user": .string(u), "app": .string(Self.app), "delivery": "summary"])
            _ = try c.call(["op": "summarySchedule", "user": .string(u), "times": ["08:00"], "timeZone": "UTC"])
            #expect(try c.call(["op": "submit", "id": .string("\(u)-0"), "app": .string(Self.app), "user": .string(u),
                                "title": "Item", "body": .string(String(repeating: "b", count: 300)),
                                "hiddenPreviewsBodyPlaceholder": "x"])["ok"] == true)
        }
        // 40 queued deliveries so far (cursors 1…40); the storm adds 40 summaries (41…80).
        var consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "storm", "from": "earliest"])
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])["ok"] == true)

        var first: [JSONValue] = []
        for _ in 0..<25 { first.append(try consumer.readJSON()) }
        #expect(first.compactMap { $0["cursor"]?.intValue } == Array(1...25))
        // Delivery lines keep arriving on this connection: the ack's reply is the first line without a cursor.
        try consumer.send(#"{"op":"ack","consumer":"storm","cursor":20}"#)
        var reply = try consumer.readJSON()
        while reply["cursor"] != nil && reply["op"] == "delivery" { reply = try consumer.readJSON() }
        #expect(reply["ok"] == true)
        consumer.close()

        consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "storm"])
        var rest: [JSONValue] = []
        for _ in 0..<60 { rest.append(try consumer.readJSON()) }
        #expect(rest.compactMap { $0["cursor"]?.intValue } == Array(21...80), "from the acked cursor, every cursor once, in order")
        let summaries = rest.filter { $0["kind"] == "summary" }
        #expect(summaries.count == 40)
        #expect(summaries.allSatisfy { $0["at"] == "2026-03-27T08:00:00Z" })
        #expect(Set(summaries.compactMap { $0["user"]?.stringValue }) == Set(users))

        // The ring never held the consumer's next line for long: it read pages from PostgreSQL.
        let stats = try c.call(["op": "stats"])
        #expect((stats["firing"]?["catchUpReads"]?.intValue ?? 0) > 0)
        #expect((stats["firing"]?["catchUpRows"]?.intValue ?? 0) >= 40)
        let report = try Replayer().run(PGConnection.connect(server.url)) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
        #expect(report.deliveriesCompared == 80)
    }

    /// Consumers' lines (from the ring's bodies and from catch-up pages) are written straight
    /// into the batch: `{"cursor":n,"op":"delivery",` + the stored body after its `{` + newline.
    @Test func appendLineWritesTheWireLineOfAStoredBody() throws {
        let body = Array(#"{"at":"2026-03-27T08:00:00Z","kind":"summary","user":"u"}"#.utf8)
        for cursor: Int64 in [0, 1, 9, 10, 12_345, -7, Int64.max, Int64.min + 1] {
            var sink = ByteSink(capacity: 4)  // small: growing is exercised
            defer { sink.deallocate() }
            sink.append(0x41)
            let partition = Int(cursor.magnitude % 1024)
            body.withUnsafeBytes { HeraldService.appendLine($0, partition: partition, cursor: cursor, to: &sink) }
            let out = sink.array
            #expect(out == [0x41] + Array("{\"cursor\":\(cursor),\"op\":\"delivery\",\"partition\":\(partition),".utf8) + body.dropFirst() + [0x0A])
            let line = try JSONValue.parse(String(decoding: out.dropFirst().dropLast(), as: UTF8.self))
            #expect(line["cursor"] == .int(cursor) && line["op"] == .string("delivery") && line["kind"] == .string("summary"))
            #expect(line["partition"] == .int(Int64(partition)))
        }
    }
}
