// Experiment 6's DST half (docs/reliability.md): a restart inside the repeated autumn hour
// does not fire a 02:30 summary twice.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct DSTRestartTests {
    /// Berlin, 2026-10-25: at 03:00 CEST (01:00Z) clocks go back to 02:00 CET, so 02:30 happens
    /// at 00:30Z and again at 01:30Z. The summary fires at the first; a service restarted between
    /// the two (the engine state rebuilt from the log) must not fire it again at the second.
    @Test func restartInsideTheRepeatedHourDoesNotFireTheSummaryTwice() throws {
        let mail = "com.example.mail"
        let url = try TestPostgres.freshDatabase()
        var server = try TestServer(url: url, start: "2026-10-24T20:00:00Z")
        var c = try server.client()
        try ServiceTests.setUpAlice(c)
        #expect(try c.call(["op": "settings", "user": "alice", "app": .string(mail), "delivery": "summary"])["ok"] == true)
        #expect(try c.call(["op": "summarySchedule", "user": "alice", "times": ["02:30"], "timeZone": "Europe/Berlin"])["ok"] == true)
        #expect(try c.call(ServiceTests.submit("q1"))["ok"] == true)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-10-25T00:45:00Z"])["ok"] == true)

        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        let first = try consumer.deliveries(2)
        #expect(first.map { $0["kind"]?.stringValue } == ["queued", "summary"])
        #expect(first[1]["at"] == "2026-10-25T00:30:00Z", "the first 02:30 (CEST)")
        _ = try consumer.call(["op": "ack", "consumer": "push", "cursor": first[1]["cursor"]!])
        server.stop()

        // Restarted at 02:45 CEST, inside the hour that repeats.
        server = try TestServer(url: url, start: "2026-10-25T00:45:00Z")
        defer { server.stop() }
        c = try server.client()
        #expect(try c.call(ServiceTests.submit("q2"))["ok"] == true)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-10-25T01:45:00Z"])["ok"] == true)  // past the second 02:30 (CET)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-10-26T02:00:00Z"])["ok"] == true)
        // No waiting for an absence: a second summary at 01:30Z would stand between these two.
        let again = try server.client()
        _ = try again.call(["op": "subscribe", "consumer": "push"])
        let after = try again.deliveries(2)
        #expect(after.map { $0["kind"]?.stringValue } == ["queued", "summary"])
        #expect(after[1]["at"] == "2026-10-26T01:30:00Z", "the next summary is the next day's 02:30 (CET), not the repeated one")
    }
}
