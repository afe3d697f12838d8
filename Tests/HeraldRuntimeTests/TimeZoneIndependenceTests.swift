// Deliveries depend on each user's time zone, never on the process's TZ.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldTestSupport
import Testing

@Suite struct TimeZoneIndependenceTests {
    static let mail = "com.example.mail"

    /// A calendar-heavy scenario (summaries in Los Angeles and across Berlin's spring-forward,
    /// a Focus in Kolkata with a half-hour offset, deferred deliveries) on the manual clock.
    /// Its instants are fixed in UTC, so they hold under any TZ; `scripts/tz-matrix` runs it
    /// under several and diffs the delivery bytes written to `HERALD_DELIVERY_DUMP`.
    @Test func calendarScenarioDeliversAtTheSameInstantsWhateverTheProcessTimeZone() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        func ok(_ request: JSONValue) throws {
            let reply = try c.call(request)
            #expect(reply["ok"] == true, "\(request.canonicalString) → \(reply.canonicalString)")
        }
        func submit(_ user: String, _ id: String, deliverAt: String? = nil) throws {
            var o: [String: JSONValue] = ["op": "submit", "app": .string(Self.mail), "user": .string(user), "id": .string(id),
                                          "title": "Hi", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"]
            if let deliverAt { o["deliverAt"] = .string(deliverAt) }
            try ok(.object(o))
        }
        try ok(["op": "registerApp", "app": .string(Self.mail), "entitlements": []])
        for user in ["alice", "bob", "chandra"] {
            try ok(["op": "authorization", "user": .string(user), "app": .string(Self.mail), "status": "authorized",
                    "options": ["alert", "sound", "badge"]])
        }
        try ok(["op": "settings", "user": "alice", "app": .string(Self.mail), "delivery": "summary"])
        try ok(["op": "summarySchedule", "user": "alice", "times": ["08:00", "18:00"], "timeZone": "America/Los_Angeles"])
        try ok(["op": "settings", "user": "chandra", "app": .string(Self.mail), "delivery": "summary"])
        try ok(["op": "summarySchedule", "user": "chandra", "times": ["02:30"], "timeZone": "Europe/Berlin"])
        try ok(["op": "focusDefine", "user": "bob", "focus": "Sleep", "allowedApps": [],
                "schedule": [["days": [1, 2, 3, 4, 5, 6, 7], "start": "22:00", "end": "07:00"]], "timeZone": "Asia/Kolkata"])
        try submit("alice", "a1")
        try submit("bob", "b1", deliverAt: "2026-03-27T20:00:00Z")
        try submit("chandra", "c1")
        try ok(["op": "clock", "advanceTo": "2026-03-28T12:00:00Z"])
        try submit("chandra", "c2")
        try submit("alice", "a2")
        let last = try c.call(["op": "clock", "advanceTo": "2026-03-29T12:00:00Z"])
        let head = try #require(last["deliveryHead"]?.intValue)

        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "tz", "from": "earliest"])["ok"] == true)
        let lines = try consumer.deliveries(Int(head))
        let decisions = lines.map { "\($0["user"]?.stringValue ?? "") \($0["kind"]?.stringValue ?? "") \($0["at"]?.stringValue ?? "")" }
        // 08:00 PDT = 15:00Z; 22:00–07:00 IST = 16:30Z–01:30Z; 02:30 Berlin on the 28th (CET) = 01:30Z, and on
        // the 29th it does not exist (02:00 → 03:00 CEST): it fires at 03:00 CEST = 01:00Z.
        for expected in ["alice summary 2026-03-27T15:00:00Z", "bob held 2026-03-27T20:00:00Z", "bob focusDigest 2026-03-28T01:30:00Z",
                         "chandra summary 2026-03-28T01:30:00Z", "chandra summary 2026-03-29T01:00:00Z", "alice summary 2026-03-28T15:00:00Z"] {
            #expect(decisions.contains(expected), "\(expected) in \(decisions)")
        }
        if let path = ProcessInfo.processInfo.environment["HERALD_DELIVERY_DUMP"] {
            let text = lines.map(\.canonicalString).joined(separator: "\n") + "\n"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }
}
