// Replay of a recorded history: identical deliveries byte for byte, and an altered stored delivery is caught.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ReplayTests {
    /// A day of Alice's notifications through the real service: summaries, Focus, deferred, duplicates.
    static func recordHistory() throws -> String {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        let mail = "com.example.mail", chat = "com.example.chat"
        _ = try c.call(["op": "registerApp", "app": .string(mail), "entitlements": []])
        _ = try c.call(["op": "registerApp", "app": .string(chat), "entitlements": ["communication"]])
        for app in [mail, chat] {
            _ = try c.call(["op": "authorization", "user": "alice", "app": .string(app), "status": "authorized", "options": ["alert", "sound", "badge"]])
            _ = try c.call(["op": "authorization", "user": "bob", "app": .string(app), "status": "provisional", "options": []])
        }
        _ = try c.call(["op": "summarySchedule", "user": "alice", "times": ["08:00", "18:00"], "timeZone": "Europe/Berlin"])
        _ = try c.call(["op": "settings", "user": "alice", "app": .string(mail), "delivery": "summary"])
        _ = try c.call(["op": "focusDefine", "user": "alice", "focus": "Sleep", "allowedPeople": ["mom"],
                        "schedule": [["days": [1, 2, 3, 4, 5, 6, 7], "start": "22:00", "end": "07:00"]], "timeZone": "Europe/Berlin"])
        for (i, user) in ["alice", "bob"].enumerated() {
            for n in 0..<5 {
                _ = try c.call(["op": "submit", "id": .string("m-\(i)-\(n)"), "app": .string(mail), "user": .string(user),
                                "title": .string("Mail \(n)"), "body": "Body", "hiddenPreviewsBodyPlaceholder": "Mail", "relevanceScore": .double(Double(n) / 10)])
            }
            _ = try c.call(["op": "submit", "id": .string("c-\(i)"), "app": .string(chat), "user": .string(user), "title": "Mom",
                            "body": "Night", "hiddenPreviewsBodyPlaceholder": "Msg", "communication": ["sender": "mom"],
                            "deliverAt": "2026-03-27T23:30:00Z"])
        }
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-28T09:00:00Z"])
        _ = try c.call(["op": "opened", "user": "alice", "app": .string(chat), "id": "c-0"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-29T09:00:00Z"])
        return server.url
    }

    @Test func recordedHistoryReplaysWithZeroDifferences() throws {
        let url = try Self.recordHistory()
        let conn = try PGConnection.connect(url)
        let report = try Replayer().run(conn) { 0 }
        #expect(report.eventsRead > 20)
        #expect(report.deliveriesCompared > 10)
        #expect(report.differences.isEmpty, "\(report.differences)")
    }

    @Test func alteredStoredDeliveryIsDetected() throws {
        let url = try Self.recordHistory()
        let conn = try PGConnection.connect(url)
        // Only a superuser bypassing the append-only triggers can do this: the tampering replay must catch.
        try conn.execute("SET session_replication_role = replica")
        try conn.execute("""
            UPDATE deliveries SET body = replace(body::text, '"banner":true', '"banner":false')::json
            WHERE cursor = (SELECT min(cursor) FROM deliveries WHERE body::text LIKE '%"banner":true%')
            """)
        try conn.execute("SET session_replication_role = origin")
        let report = try Replayer().run(conn) { 0 }
        #expect(report.differences.count == 1)
        let d = try #require(report.differences.first)
        #expect(d.stored?.contains("\"banner\":false") == true && d.derived?.contains("\"banner\":true") == true)
    }
}
