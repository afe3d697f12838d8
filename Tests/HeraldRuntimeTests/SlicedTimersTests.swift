// Many users due at one instant fire in slices, each slice's deliveries its own append: nothing lost, nothing twice, replay agrees.
import Testing
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport

@Suite struct SlicedTimersTests {
    static let app = "com.example.news"

    /// 30 users' summaries due at one instant, fired 3 users per loop turn and appended 2 rows at a
    /// time, while another connection submits to the same users: the clock op answers only after
    /// every summary committed, every user gets exactly one summary with its own items, and replay
    /// (live order == replay order per user) finds no difference.
    @Test func aStormFiredInSlicesDeliversEverySummaryOnceAndReplaysExactly() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z") { config in
            config.timerSliceUsers = 3
            config.deliveryAppendRows = 2
        }
        defer { server.stop() }
        let c = try server.client()
        let users = (0..<30).map { "u\($0)" }
        for u in users {
            #expect(try c.call(["op": "authorization", "user": .string(u), "app": .string(Self.app), "status": "authorized",
                                "options": ["alert", "sound", "badge"]])["ok"] == true)
            #expect(try c.call(["op": "settings", "user": .string(u), "app": .string(Self.app), "delivery": "summary"])["ok"] == true)
            #expect(try c.call(["op": "summarySchedule", "user": .string(u), "times": ["08:00"], "timeZone": "UTC"])["ok"] == true)
            for i in 0..<2 {
                #expect(try c.call(["op": "submit", "id": .string("\(u)-\(i)"), "app": .string(Self.app), "user": .string(u),
                                    "title": "Item", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"])["ok"] == true)
            }
        }
        // Pipelined on a second connection while the storm is sliced: some fold before their user's
        // slice comes up (the event advances the user's timers first), some after.
        let other = try server.client()
        try c.send(#"{"op":"clock","advanceTo":"2026-03-27T08:00:00Z","rid":"clock"}"#)
        for u in users {
            try other.send(#"{"op":"submit","id":"\#(u)-late","app":"\#(Self.app)","user":"\#(u)","title":"Late","body":"B","hiddenPreviewsBodyPlaceholder":"x"}"#)
        }
        let clock = try c.readJSON()
        #expect(clock["ok"] == true)
        // 60 queued items + 30 summaries were decided before the clock op: all committed before it answered.
        #expect((clock["deliveryHead"]?.intValue ?? 0) >= 90)
        for _ in users { #expect(try other.readJSON()["ok"] == true) }

        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(120)
        let summaries = ds.filter { $0["kind"] == "summary" }
        #expect(summaries.count == 30)
        #expect(Set(summaries.compactMap { $0["user"]?.stringValue }) == Set(users))
        for s in summaries {
            let user = s["user"]?.stringValue ?? ""
            // A late submit read before the clock op (other connection, same loop turn) is in it too.
            let items = Set(s["items"]?.arrayValue?.compactMap { $0["notification"]?.stringValue } ?? [])
            #expect(items.isSuperset(of: ["\(user)-0", "\(user)-1"]) && items.isSubset(of: ["\(user)-0", "\(user)-1", "\(user)-late"]))
            #expect(s["at"] == "2026-03-27T08:00:00Z")
        }
        #expect(Set(ds.compactMap { $0["cursor"]?.intValue }).count == 120, "no cursor twice")

        let report = try Replayer().run(PGConnection.connect(server.url)) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
        #expect(report.deliveriesCompared == 120)
    }
}
