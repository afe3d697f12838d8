// SPEC §10 snooze of a notification older than the content a user's state keeps: read back from
// `events` by the serving loop, by start-up's fold and by replay, each deciding it alike.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct SnoozeReadBackTests {
    static let mail = ServiceTests.mail
    /// More deliveries than the content kept for snooze (`Engine.snoozableLimit`, at most twice that).
    static let earlier = 2 * Engine.snoozableLimit + 4

    static func deliverMany(_ c: WireClient) throws {
        try ServiceTests.setUpAlice(c)
        #expect(try c.call(ServiceTests.submit("n0", extra: ["subtitle": "The first one"]))["ok"] == true)
        for i in 1...earlier { #expect(try c.call(ServiceTests.submit("n\(i)"))["ok"] == true) }
    }

    static func snooze(_ c: WireClient, until: String) throws -> JSONValue {
        try c.call(["op": "snooze", "user": "alice", "app": .string(mail), "id": "n0", "until": .string(until)])
    }

    static func expectSnoozedFirst(_ lines: [JSONValue], sourceLocation: SourceLocation = #_sourceLocation) {
        let last = lines.last
        #expect(last?["notification"] == "n0" && last?["kind"] == "alert" && last?["snoozed"] == true
                && last?["content"]?["subtitle"] == "The first one", "\(last?.canonicalString ?? "none")", sourceLocation: sourceLocation)
    }

    @Test func theServingLoopReadsItBackAndReplayAgrees() throws {
        let url = try TestPostgres.freshDatabase()
        let server = try TestServer(url: url)
        defer { server.stop() }
        let c = try server.client()
        try Self.deliverMany(c)
        #expect(try Self.snooze(c, until: "2026-03-27T08:00:00Z")["ok"] == true)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:30:00Z"])["ok"] == true)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        Self.expectSnoozedFirst(try consumer.deliveries(Self.earlier + 2))

        let report = try Replayer().run(PGConnection.connect(url)) { 0 }
        #expect(report.differences.isEmpty && report.deliveriesCompared == Int64(Self.earlier + 2), "\(report.differences)")
        let history = try UserHistory.fold(PGConnection.connect(url), user: "alice", limit: .everything)
        #expect(history.deliveries.last?.snoozed == true && history.deliveries.last?.notificationId == "n0")
    }

    @Test func aSnoozeWhoseUntilHasPassedAlertsAtOnce() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.deliverMany(c)
        #expect(try Self.snooze(c, until: "2026-03-27T06:00:00Z")["ok"] == true)
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        Self.expectSnoozedFirst(try consumer.deliveries(Self.earlier + 2))
    }

    /// Start-up folds the snooze event from the log (no snapshot) and reads the content itself.
    @Test func startUpsFoldReadsItBackToo() throws {
        let url = try TestPostgres.freshDatabase()
        do {
            let server = try TestServer(url: url) { $0.snapshotEveryEvents = nil; $0.snapshotAtShutdown = false }
            defer { server.stop() }
            let c = try server.client()
            try Self.deliverMany(c)
            #expect(try Self.snooze(c, until: "2026-03-27T08:00:00Z")["ok"] == true)
        }
        let again = try TestServer(url: url) { $0.snapshotEveryEvents = nil; $0.snapshotAtShutdown = false }
        defer { again.stop() }
        let c = try again.client()
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:30:00Z"])["ok"] == true)
        let consumer = try again.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        Self.expectSnoozedFirst(try consumer.deliveries(Self.earlier + 2))
        let report = try Replayer().run(PGConnection.connect(url)) { 0 }
        #expect(report.differences.isEmpty, "\(report.differences)")
    }
}
