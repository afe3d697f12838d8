// SPEC §10 "each delivery records the rules version that made it" across an upgrade: the start-up records
// where a newer build took over (`rules_versions`), and replay decides each part of the log by its own rules.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct RulesVersionUpgradeTests {
    typealias Snooze = SnoozeReadBackTests

    static func rulesRows(_ url: String) throws -> [String] {
        let r = try PGConnection.connect(url).execute("SELECT from_seq, version FROM rules_versions ORDER BY id")
        return (0..<r.rowCount).map { "\(r.string($0, 0) ?? "")=\(r.string($0, 1) ?? "")" }
    }

    /// A log written by a build deciding by rules "1" (a snooze of a notification older than the
    /// content kept is ignored), then served by this build ("3"; "2" and later read it back).
    @Test func anOldLogReplaysByItsOwnRulesAfterAnUpgrade() throws {
        let url = try TestPostgres.freshDatabase()
        do {
            let old = try TestServer(url: url) { $0.rulesVersion = "1" }
            defer { old.stop() }
            let c = try old.client()
            try Snooze.deliverMany(c)
            #expect(try Snooze.snooze(c, until: "2026-03-27T08:00:00Z")["ok"] == true)
            #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:30:00Z"])["ok"] == true)
        }
        let first = try Self.rulesRows(url)
        #expect(first == ["1=1"], "recorded on the empty log")
        let head = try EventReader.head(PGConnection.connect(url))

        let log = LogLines()
        let new = try TestServer(url: url, log: log)
        defer { new.stop() }
        let upgraded = try Self.rulesRows(url)
        let current = Engine.currentRulesVersion
        #expect(upgraded == ["1=1", "\(head + 1)=\(current)"], "the upgrade is recorded where it took over")
        #expect(!log.matching("rules version \(current) decides from seq \(head + 1)").isEmpty, "\(log.all)")
        let c = try new.client()
        // Time passes before the new build's first snooze (room for the what-if below).
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:40:00Z"])["ok"] == true)
        #expect(try Snooze.snooze(c, until: "2026-03-27T09:00:00Z")["ok"] == true)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T09:30:00Z"])["ok"] == true)
        let consumer = try new.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        let lines = try consumer.deliveries(Snooze.earlier + 2)
        #expect(lines.dropLast().allSatisfy { $0["rulesVersion"] == "1" }, "the old build's snooze alerted nothing")
        Snooze.expectSnoozedFirst(lines)
        #expect(lines.last?["rulesVersion"] == .string(current) && lines.last?["at"] == "2026-03-27T09:00:00Z")

        // Replay decides the first snooze by "1" and the second by this build's: byte for byte.
        let report = try Replayer().run(PGConnection.connect(url)) { 0 }
        #expect(report.differences.isEmpty && report.deliveriesCompared == Int64(Snooze.earlier + 2), "\(report.differences)")
        let history = try UserHistory.fold(PGConnection.connect(url), user: "alice", limit: .everything)
        #expect(history.deliveries.map(\.rulesVersion) == lines.compactMap { $0["rulesVersion"]?.stringValue })

        // What-if under one version for everything: the decisions that would change.
        var underTwo = Replayer()
        underTwo.rulesVersion = "2"
        let two = try underTwo.run(PGConnection.connect(url)) { 0 }
        #expect(two.changes.map(\.subject).contains { $0.contains("n0") }, "the first snooze would have alerted: \(two.changes)")
        var underOne = Replayer()
        underOne.rulesVersion = "1"
        let one = try underOne.run(PGConnection.connect(url)) { 0 }
        #expect(one.changes.count == 1 && one.changes[0].stored.count == 2 && one.changes[0].derived.count == 1,
                "the second snooze would not have alerted: \(one.changes)")

        // A what-if snooze of n0 injected between the old build's last event (08:30) and the new
        // build's first (08:40) is decided by the rules a request sent then would have met: after
        // the take-over (08:30) this build's — it alerts once more, at once, as its `until` has come (a later
        // one would be replaced by the log's next snooze of n0) —, a minute before it "1" (ignored:
        // nothing changes). An injection at an event's instant goes before that event.
        let takeOver = try #require(report.rules.changes.last)
        func whatIfSnooze(at t: Instant) throws -> [Replayer.Change] {
            let request: JSONValue = ["user": "alice", "app": .string(Snooze.mail), "id": "n0",
                                      "until": .string(t.rfc3339)]
            guard case .accepted(let accepted) = Engine().admit(op: "snooze", request: request, apps: AppRegistry()) else {
                Issue.record("the what-if snooze was rejected"); return []
            }
            var replayer = Replayer()
            replayer.injections = [Replayer.Injection(at: t, draft: accepted.events[0])]
            return try replayer.run(PGConnection.connect(url)) { 0 }.changes
        }
        #expect(takeOver.fromSeq == head + 1 && takeOver.at == Instant(rfc3339: "2026-03-27T08:30:00Z"))
        let afterTakeOver = try whatIfSnooze(at: Instant(rfc3339: "2026-03-27T08:35:00Z")!)
        #expect(afterTakeOver.count == 1 && afterTakeOver[0].subject.contains("n0")
                && afterTakeOver[0].derived.count == afterTakeOver[0].stored.count + 1, "\(afterTakeOver)")
        #expect(try whatIfSnooze(at: takeOver.at.adding(.minutes(-1))).isEmpty)
    }

    /// A restart by the same build records nothing; a log decided by rules this build does not
    /// know (a newer build's) is refused at start-up and by replay, saying what to do.
    @Test func aLogOfUnknownRulesIsRefusedAndTheSameVersionRecordsNothing() throws {
        let url = try TestPostgres.freshDatabase()
        do {
            let server = try TestServer(url: url)
            defer { server.stop() }
            try ServiceTests.setUpAlice(server.client())
        }
        do {
            let again = try TestServer(url: url)
            again.stop()
        }
        #expect(try Self.rulesRows(url) == ["1=\(Engine.currentRulesVersion)"])
        // Another version, then this one again, with no event between: both recorded, the last decides.
        do { try TestServer(url: url) { $0.rulesVersion = "1" }.stop() }
        do { try TestServer(url: url).stop() }
        #expect(try Self.rulesRows(url).suffix(2) == ["\(try EventReader.head(PGConnection.connect(url)) + 1)=1", "\(try EventReader.head(PGConnection.connect(url)) + 1)=\(Engine.currentRulesVersion)"])
        #expect(try RulesVersionStore.history(PGConnection.connect(url)).latest == Engine.currentRulesVersion)

        try PGConnection.connect(url).execute("INSERT INTO rules_versions (from_seq, at, version) VALUES (100, now(), '99')")
        let refused = #expect(throws: StoreError.self) { _ = try TestServer(url: url) }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("rules version 99, which this build does not know"))
        #expect(throws: StoreError.self) { _ = try Replayer().run(PGConnection.connect(url)) { 0 } }
    }
}
