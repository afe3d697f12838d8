// The benchmarks' synthetic history stores what the service would have stored, and the service restores it to the expected state.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct SyntheticHistoryTests {
    static let start = "2026-11-23T06:00:00Z"

    /// The storm's and the restart's requests for a few users, through the real service over TCP.
    static func throughService(users: Int) throws -> String {
        let server = try TestServer(start: start)
        defer { server.stop() }
        let c = try server.client()
        let register = SyntheticWorkloads.registerApp()
        _ = try c.call(JSONValue.object(register.body.objectValue!.merging(["op": .string(register.op)]) { a, _ in a }))
        for u in 0..<users {
            for (op, body) in requests(u) {
                let r = try c.call(.object(body.objectValue!.merging(["op": .string(op)]) { a, _ in a }))
                #expect(r["ok"] == true, "\(op): \(r.canonicalString)")
            }
        }
        return server.url
    }

    static func requests(_ u: Int) -> [(op: String, body: JSONValue)] {
        u % 2 == 0 ? SyntheticWorkloads.stormUser(u, items: 3)
                   : SyntheticWorkloads.timersUser(u, timers: 4, from: Instant(rfc3339: start)!)
            + SyntheticWorkloads.mixedUser(u, eventsPerUser: 12)
    }

    static func synthetic(users: Int) throws -> String {
        let url = try TestPostgres.freshDatabase()
        let h = try SyntheticHistory(databaseURL: url)
        h.batchRows = 7  // several COPY batches even for a small history
        let at = Instant(rfc3339: start)!
        try h.global(SyntheticWorkloads.registerApp().op, SyntheticWorkloads.registerApp().body, at: at)
        for u in 0..<users { try h.user("user-\(u)", requests(u), at: at) }
        try h.finish()
        return url
    }

    /// Every column the service writes, in position order (not committed_at). Bodies are opened
    /// with the database's content keys: the service seals content under random keys, the
    /// synthetic history stores it in clear (as a log written before schema 006).
    static func dump(_ url: String) throws -> [String] {
        let conn = try PGConnection.connect(url)
        let keys = try KeyRing.load(conn)
        func opened(_ body: String?, _ user: String?) -> String {
            String(decoding: keys.readable(Array((body ?? "").utf8), user: user), as: UTF8.self)
        }
        var out: [String] = []
        let e = try conn.execute("""
            SELECT seq::text || '|' || coalesce(user_id, '-') || '|' || type || '|' || coalesce(app, '-') || '|' ||
                   coalesce(notification_id, '-') || '|', body::text, '|' || engine_time::text, user_id
            FROM events ORDER BY seq
            """)
        for i in 0..<e.rowCount { out.append((e.string(i, 0) ?? "") + opened(e.string(i, 1), e.string(i, 3)) + (e.string(i, 2) ?? "")) }
        let d = try conn.execute("""
            SELECT cursor::text || '|' || user_id || '|' || user_index || '|' || cause_seq || '|' || kind || '|' ||
                   coalesce(app, '-') || '|' || coalesce(notification_id, '-') || '|' || reason || '|' || at::text || '|' ||
                   rules_version || '|' || trace::text || '|', body::text, user_id
            FROM deliveries ORDER BY cursor
            """)
        for i in 0..<d.rowCount { out.append((d.string(i, 0) ?? "") + opened(d.string(i, 1), d.string(i, 2))) }
        out.append("heads \(try conn.execute("SELECT seq FROM partitions WHERE partition = 0").int64(0, 0) ?? -1) \(try conn.execute("SELECT cursor FROM delivery_heads WHERE partition = 0").int64(0, 0) ?? -1)")
        return out
    }

    @Test func storesExactlyWhatTheServiceStores() throws {
        let viaService = try Self.dump(Self.throughService(users: 4))
        let viaCopy = try Self.dump(Self.synthetic(users: 4))
        #expect(viaService.count > 40)
        #expect(viaCopy == viaService)
    }

    @Test func serviceRestoresItWithoutReDerivingAndFiresTheStorm() throws {
        let url = try Self.synthetic(users: 6)
        let server = try TestServer(url: url, start: Self.start)
        defer { server.stop() }
        let c = try server.client()
        let stats = try c.call(["op": "stats"])
        #expect(stats["users"]?.intValue == 6)
        // Every delivery the fold implies was found stored: nothing re-derived, nothing committed at start-up.
        #expect(stats["deliveriesCommitted"]?.intValue == 0)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "t"])
        let moved = try c.call(["op": "clock", "advanceTo": "2026-11-23T08:00:00Z"])
        #expect(moved["ok"] == true)
        // Three storm users (0, 2, 4) get one summary of three items each (deferred ones of the others fire too).
        var summaries: [JSONValue] = []
        while summaries.count < 3 {
            let d = try consumer.deliveries(1)[0]
            if d["kind"] == "summary" { summaries.append(d) }
        }
        #expect(summaries.allSatisfy { $0["items"]?.arrayValue?.count == 3 })
        #expect(Set(summaries.compactMap { $0["user"]?.stringValue }) == ["user-0", "user-2", "user-4"])
        let replay = try Replayer().run(PGConnection.connect(url)) { 0 }
        #expect(replay.differences.isEmpty)
    }
}
