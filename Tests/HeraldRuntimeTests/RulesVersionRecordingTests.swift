// SPEC §10 "each delivery records the rules version that made it": the start-up records the version
// that decides the log (`rules_versions`), replay decides by it, and a log of unknown rules is refused.
import Foundation
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct RulesVersionRecordingTests {
    typealias Snooze = SnoozeReadBackTests

    static func rulesRows(_ url: String) throws -> [String] {
        let r = try PGConnection.connect(url).execute("SELECT from_seq, version FROM rules_versions ORDER BY id")
        return (0..<r.rowCount).map { "\(r.string($0, 0) ?? "")=\(r.string($0, 1) ?? "")" }
    }

    /// A log recorded under this build's version by a first start-up, served again by a second:
    /// every delivery carries the version, replay decides each part by it byte for byte, and a
    /// what-if under that version changes nothing.
    @Test func aLogRecordedUnderItsVersionReplaysByIt() throws {
        let url = try TestPostgres.freshDatabase()
        let current = Engine.currentRulesVersion
        do {
            let first = try TestServer(url: url)
            defer { first.stop() }
            let c = try first.client()
            try Snooze.deliverMany(c)
            #expect(try Snooze.snooze(c, until: "2026-03-27T08:00:00Z")["ok"] == true)
            #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:30:00Z"])["ok"] == true)
        }
        #expect(try Self.rulesRows(url) == ["1=\(current)"], "recorded on the empty log")

        let log = LogLines()
        let again = try TestServer(url: url, log: log)
        defer { again.stop() }
        #expect(try Self.rulesRows(url) == ["1=\(current)"], "the same version records nothing")
        #expect(log.matching("decides from seq").isEmpty, "\(log.all)")
        let c = try again.client()
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T08:40:00Z"])["ok"] == true)
        #expect(try Snooze.snooze(c, until: "2026-03-27T09:00:00Z")["ok"] == true)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-27T09:30:00Z"])["ok"] == true)
        let consumer = try again.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        let lines = try consumer.deliveries(Snooze.earlier + 3)
        #expect(lines.allSatisfy { $0["rulesVersion"] == .string(current) })
        Snooze.expectSnoozedFirst(lines)
        #expect(lines.last?["at"] == "2026-03-27T09:00:00Z")
        #expect(lines.dropLast().last?["snoozed"] == true && lines.dropLast().last?["at"] == "2026-03-27T08:00:00Z")

        let report = try Replayer().run(PGConnection.connect(url)) { 0 }
        #expect(report.differences.isEmpty && report.deliveriesCompared == Int64(Snooze.earlier + 3), "\(report.differences)")
        #expect(report.rules.summary == "\(current) throughout")
        let history = try UserHistory.fold(PGConnection.connect(url), user: "alice", limit: .everything)
        #expect(history.deliveries.map(\.rulesVersion) == lines.compactMap { $0["rulesVersion"]?.stringValue })

        // What-if under the log's own version: nothing would change.
        var underCurrent = Replayer()
        underCurrent.rulesVersion = current
        #expect(try underCurrent.run(PGConnection.connect(url)) { 0 }.changes.isEmpty)

        // A what-if snooze of n0 injected between two events is decided by the version in force
        // then: its `until` has come, so it alerts once more, at once.
        let request: JSONValue = ["user": "alice", "app": .string(Snooze.mail), "id": "n0", "until": "2026-03-27T08:35:00Z"]
        guard case .accepted(let accepted) = Engine().admit(op: "snooze", request: request, apps: AppRegistry()) else {
            Issue.record("the what-if snooze was rejected"); return
        }
        var whatIf = Replayer()
        whatIf.injections = [Replayer.Injection(at: Instant(rfc3339: "2026-03-27T08:35:00Z")!, draft: accepted.events[0])]
        let changes = try whatIf.run(PGConnection.connect(url)) { 0 }.changes
        #expect(changes.count == 1 && changes[0].subject.contains("n0")
                && changes[0].derived.count == changes[0].stored.count + 1, "\(changes)")
    }

    /// A log decided by rules this build does not know (a newer build's) is refused at start-up
    /// and by replay, saying what to do; so is a what-if under an unknown version.
    @Test func aLogOrAWhatIfOfUnknownRulesIsRefused() throws {
        let url = try TestPostgres.freshDatabase()
        do {
            let server = try TestServer(url: url)
            defer { server.stop() }
            try ServiceTests.setUpAlice(server.client())
        }
        #expect(try Self.rulesRows(url) == ["1=\(Engine.currentRulesVersion)"])
        #expect(try RulesVersionStore.history(PGConnection.connect(url)).latest == Engine.currentRulesVersion)

        var underUnknown = Replayer()
        underUnknown.rulesVersion = "99"
        let whatIf = #expect(throws: StoreError.self) { _ = try underUnknown.run(PGConnection.connect(url)) { 0 } }
        #expect("\(whatIf.map { "\($0)" } ?? "")".contains("rules version 99, which this build does not know"))
        let cli = try HeraldCommandTests.herald(["replay", "--database-url", url, "--rules-version", "99"])
        #expect(cli.status == 2 && cli.stderr.contains("--rules-version 99 is not a version this build knows (\(Engine.currentRulesVersion))"), "\(cli)")

        try PGConnection.connect(url).execute("INSERT INTO rules_versions (partition, from_seq, at, version) VALUES (0, 100, now(), '99')")
        let refused = #expect(throws: StoreError.self) { _ = try TestServer(url: url) }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("rules version 99, which this build does not know"))
        #expect(throws: StoreError.self) { _ = try Replayer().run(PGConnection.connect(url)) { 0 } }
    }
}
