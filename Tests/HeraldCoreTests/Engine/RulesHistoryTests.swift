// SPEC §10 "each delivery records the rules version that made it": which version decides which part of a log.
import HeraldCore
import Testing

/// The history's look-ups take versions as labels: they do not depend on which versions this
/// build knows, so "2" and "3" here stand for versions a later build adds
/// (docs/decisions/0002-rules-versions.md).
@Suite struct RulesHistoryTests {
    let t1 = at("2026-01-05T12:00:00Z")
    let t2 = at("2026-01-05T13:00:00Z")

    @Test func rulesVersion_eventsByTheLastChangeAtOrBeforeTheirSeq() {
        let h = RulesHistory(changes: [.init(fromSeq: 10, at: t1, version: "2"), .init(fromSeq: 5, at: t1.adding(.minutes(-5)), version: "1")])
        #expect(h.changes.map(\.fromSeq) == [5, 10], "sorted by seq")
        #expect(h.version(forEventAt: 4) == h.initial)
        #expect(h.version(forEventAt: 9) == "1")
        #expect(h.version(forEventAt: 10) == "2")
        #expect(h.version(forEventAt: 1_000) == "2")
        #expect(h.latest == "2")
    }

    @Test func rulesVersion_timersDueByTheStartUpAreTheStoppedBuilds() {
        let h = RulesHistory(changes: [.init(fromSeq: 1, at: t1.adding(.minutes(-30)), version: "1"), .init(fromSeq: 10, at: t1, version: "2")])
        #expect(h.version(forTimerDueAt: t1.adding(.minutes(-1))) == "1")
        #expect(h.version(forTimerDueAt: t1) == "1", "due at the start-up: owed by the build that stopped")
        #expect(h.version(forTimerDueAt: t1.adding(.init(milliseconds: 1))) == "2")
    }

    @Test func rulesVersion_aChangeOnAnEmptyLogGovernsEveryTimer() {
        let h = RulesHistory(changes: [.init(fromSeq: 1, at: t2, version: "2")])
        #expect(h.version(forTimerDueAt: t1) == "2")
        #expect(h.version(forEventAt: 1) == "2")
        #expect(RulesHistory.only("1").version(forTimerDueAt: t2) == "1")
    }

    @Test func rulesVersion_aWhatIfRequestIsDecidedByTheRulesInForceWhenItIsInjected() {
        let h = RulesHistory(changes: [.init(fromSeq: 1, at: t1.adding(.minutes(-30)), version: "1"), .init(fromSeq: 10, at: t1, version: "2")])
        #expect(h.version(forInjectionAfter: 9, at: t1.adding(.minutes(-1))) == "1", "before the take-over")
        #expect(h.version(forInjectionAfter: 9, at: t1) == "2", "at or after it: the new build would have decided it")
        #expect(h.version(forInjectionAfter: 8, at: t2) == "1", "event 9, decided by 1, came after it")
        #expect(h.version(forInjectionAfter: 10, at: t2) == "2")
        #expect(RulesHistory.only("1").version(forInjectionAfter: 10, at: t2) == "1")
        let twice = RulesHistory(changes: [.init(fromSeq: 10, at: t1, version: "2"), .init(fromSeq: 10, at: t2, version: "3")])
        #expect(twice.version(forInjectionAfter: 9, at: t1.adding(.minutes(1))) == "2", "the second take-over came later")
        let fresh = RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "2")])
        #expect(fresh.version(forInjectionAfter: 0, at: .earliestRepresentable) == "2",
                "before the first event of a log one version served from the start (--what-if without \"at\")")
    }

    @Test func rulesVersion_takeOversWithNoEventBetweenThemTheLastDecides() {
        let h = RulesHistory(changes: [.init(fromSeq: 7, at: t1, version: "2"), .init(fromSeq: 7, at: t1, version: "1")])
        #expect(h.version(forEventAt: 7) == "1" && h.latest == "1")
        #expect(h.version(forTimerDueAt: t2) == "1")
    }

    @Test func rulesVersion_summarySaysWhichRulesDecidedWhichPart() {
        #expect(RulesHistory().summary == "\(Engine.currentRulesVersion) throughout (none recorded)")
        #expect(RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "2")]).summary == "2 throughout")
        let upgraded = RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "1"), .init(fromSeq: 42, at: t2, version: "2")])
        #expect(upgraded.summary == "1 for seq 1–41, 2 from seq 42 (timers due after 2026-01-05T13:00:00Z)")
        let back = RulesHistory(changes: [.init(fromSeq: 42, at: t2, version: "2"), .init(fromSeq: 42, at: t2, version: "1")])
        #expect(back.summary == "1 throughout", "a take-over undone before any event")
    }

    /// A log that names a version this build does not know (a newer build's) says which.
    @Test func rulesVersion_unknownVersionsAreTheOnesThisBuildDoesNotKnow() {
        #expect(Engine.knownRulesVersions == [Engine.currentRulesVersion])
        #expect(RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "1")]).unknownVersions.isEmpty)
        #expect(RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "1"), .init(fromSeq: 9, at: t2, version: "99")]).unknownVersions == ["99"])
        #expect(RulesHistory().initial == Engine.currentRulesVersion, "a log no build served is decided by this build's version")
    }

    /// The engine labels every delivery, timed ones included, with the version that decided it.
    @Test func rulesVersion_everyDeliveryCarriesTheVersionThatDecidedIt() {
        var h = EngineHarness()
        h.engine = Engine(rules: RulesHistory(changes: [.init(fromSeq: 1, at: T0, version: Engine.currentRulesVersion)]))
        h.authorize()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.submit("q1")
        h.submit("d1", #""deliverAt":"2026-01-05T13:00:00Z""#)
        _ = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(h.log.map(\.kind) == [.queued, .queued, .summary])
        #expect(h.log.allSatisfy { $0.rulesVersion == "1" })
    }
}
