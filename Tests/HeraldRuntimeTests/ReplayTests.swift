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

    static func recordDeferredThenImmediate() throws -> String {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        let mail = "com.example.mail"
        _ = try c.call(["op": "authorization", "user": "carol", "app": .string(mail), "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "submit", "id": "later", "app": .string(mail), "user": "carol", "title": "Later", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "Mail", "deliverAt": "2026-03-27T13:00:00Z"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])
        _ = try c.call(["op": "submit", "id": "now", "app": .string(mail), "user": "carol", "title": "Now", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "Mail"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T14:00:00Z"])
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

    /// `herald replay --until SEQ|TIME` audits a prefix of the log: every prefix of a clean log
    /// replays with zero differences — up to seq s, the log as it stood before event s + 1 (timers
    /// due by then fired, later ones such as the deferred 23:30 submits not yet); up to a time, the
    /// events and timers up to it.
    @Test(arguments: [false, true])
    func everyPrefixOfACleanLogBySeqOrTimeReplaysWithZeroDifferences(deferredThenImmediate: Bool) throws {
        // Also a deferred submit followed by an immediate one for the same user: the deferred
        // decision (13:00) is stored after the immediate one, though its cause comes first.
        let url = try deferredThenImmediate ? Self.recordDeferredThenImmediate() : Self.recordHistory()
        let conn = try PGConnection.connect(url)
        let head = try EventReader.head(conn)
        for s in 1...head {
            var replayer = Replayer()
            replayer.limit = .seq(s)
            let report = try replayer.run(conn) { 0 }
            #expect(report.differences.isEmpty, "until seq \(s): \(report.differences)")
        }
        let times = try conn.execute("""
            SELECT DISTINCT (extract(epoch FROM t) * 1000)::bigint FROM
              (SELECT engine_time AS t FROM events UNION SELECT at FROM deliveries) x ORDER BY 1
            """)
        #expect(times.rowCount >= 4)
        for i in 0..<times.rowCount {
            let t = Instant(millisecondsSinceEpoch: try #require(times.int64(i, 0)))
            for probe in [t.adding(.init(milliseconds: -1)), t, t.adding(.minutes(1))] {
                var replayer = Replayer()
                replayer.limit = .time(probe)
                let report = try replayer.run(conn) { 0 }
                #expect(report.differences.isEmpty, "until \(probe.rfc3339): \(report.differences)")
            }
        }
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

@Suite struct WhatIfTests {
    @Test func summaryDeliveryWhatIfListsExactlyTheAlertsThatWouldHaveBeenQueued() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        for app in ["com.example.mail", "com.example.chat"] {
            _ = try c.call(["op": "authorization", "user": "alice", "app": .string(app), "status": "authorized", "options": ["alert", "badge"]])
        }
        for n in 1...3 {
            _ = try c.call(["op": "submit", "id": .string("m\(n)"), "app": "com.example.mail", "user": "alice",
                            "title": "Mail", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"])
        }
        _ = try c.call(["op": "submit", "id": "c1", "app": "com.example.chat", "user": "alice", "title": "Chat", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T09:00:00Z"])
        server.stop()

        var replayer = Replayer()
        guard case .accepted(let accepted) = Engine().admit(op: "settings", request: [
            "user": "alice", "app": "com.example.mail", "delivery": "summary"], apps: AppRegistry()) else {
            Issue.record("what-if request rejected"); return
        }
        replayer.injections = [Replayer.Injection(at: Instant(rfc3339: "2026-03-27T06:00:00Z")!, draft: accepted.events[0])]
        let report = try replayer.run(PGConnection.connect(server.url)) { 0 }
        let mail = report.changes.filter { $0.subject.hasPrefix("com.example.mail ") }
        #expect(mail.map(\.subject) == ["com.example.mail m1", "com.example.mail m2", "com.example.mail m3"])
        #expect(mail.allSatisfy { $0.stored.first?.hasPrefix("alert") == true && $0.derived.first?.hasPrefix("queued") == true })
        #expect(!report.changes.contains { $0.subject.contains("c1") }, "the chat app is unaffected")
        #expect(report.changes.contains { $0.subject.hasPrefix("summary at 2026-03-27T08:00:00Z") && $0.stored.isEmpty },
                "and an 08:00 summary would have fired")
        let written = try EventReader.head(PGConnection.connect(server.url))
        #expect(written == 7, "what-if writes nothing")
    }
}
