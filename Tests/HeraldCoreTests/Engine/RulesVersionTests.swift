// SPEC §10 "each delivery records the rules version that made it": an old log decided by its own rules under a newer build.
import HeraldCore
import Testing

@Suite struct RulesVersionTests {
    let t1 = at("2026-01-05T12:00:00Z")
    let t2 = at("2026-01-05T13:00:00Z")

    // The history's look-ups.

    @Test func rulesVersion_eventsByTheLastChangeAtOrBeforeTheirSeq() {
        let h = RulesHistory(changes: [.init(fromSeq: 10, at: t1, version: "2"), .init(fromSeq: 5, at: t1.adding(.minutes(-5)), version: "1")])
        #expect(h.changes.map(\.fromSeq) == [5, 10], "sorted by seq")
        #expect(h.version(forEventAt: 4) == RulesHistory.unrecorded)
        #expect(h.version(forEventAt: 9) == "1")
        #expect(h.version(forEventAt: 10) == "2")
        #expect(h.version(forEventAt: 1_000) == "2")
        #expect(h.latest == "2")
    }

    @Test func rulesVersion_timersDueByTheStartUpAreTheStoppedBuilds() {
        let h = RulesHistory(changes: [.init(fromSeq: 10, at: t1, version: "2")])
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

    // The engine decides each event and timer by its version, and labels the delivery with it.

    /// A user whose oldest notification's content is no longer kept, snoozing it at seq `snoozeSeq`.
    func olderSnooze(rules: RulesHistory) -> (deliveries: [Delivery], harness: EngineHarness) {
        var h = EngineHarness()
        h.engine = Engine(rules: rules)
        h.authorize()
        h.submit("n0")
        for i in 1...(2 * Engine.snoozableLimit + 4) { h.submit("n\(i)") }
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T13:00:00Z"}"#)
        return (h.advance(to: at("2026-01-05T13:30:00Z")), h)
    }

    @Test func rulesVersion_1_ignoresASnoozeOfContentNoLongerKept() {
        let (fired, h) = olderSnooze(rules: .only("1"))
        #expect(fired.isEmpty, "version 1 dropped such a snooze")
        #expect(h.log.allSatisfy { $0.rulesVersion == "1" })
    }

    @Test func rulesVersion_2_readsTheSnoozedContentBack() {
        let (fired, h) = olderSnooze(rules: .only("2"))
        #expect(only(fired).snoozed && fired[0].rulesVersion == "2")
        #expect(h.log.allSatisfy { $0.rulesVersion == "2" })
    }

    @Test func rulesVersion_anOldLogKeepsItsRulesAfterANewerBuildTakesOver() {
        // The snooze (the last event) was decided by version 1; a newer build took over after it.
        let submits = 2 * Engine.snoozableLimit + 5, authorization: Int64 = 1
        let snoozeSeq = authorization + Int64(submits) + 1
        let history = RulesHistory(changes: [.init(fromSeq: snoozeSeq + 1, at: at("2026-01-05T12:30:00Z"), version: "2")])
        var (fired, h) = olderSnooze(rules: history)
        #expect(fired.isEmpty, "the snooze stays ignored: version 1 decided it")
        #expect(h.log.allSatisfy { $0.rulesVersion == "1" })
        // After the take-over, a snooze of the same notification is decided by version 2.
        h.now = at("2026-01-05T14:00:00Z")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T15:00:00Z"}"#)
        fired = h.advance(to: at("2026-01-05T15:00:00Z"))
        #expect(only(fired).snoozed && fired[0].rulesVersion == "2")
    }

    @Test func rulesVersion_aTimerDueBeforeTheTakeOverIsLabelledByTheOldRules() {
        // Deferred by the Focus-free summary schedule: a summary due at 18:00 UTC, decided after a
        // take-over at 17:00 (by version 2) and, in a second history, at 19:00 (still version 1).
        func summary(takeOverAt: Instant) -> Delivery {
            var h = EngineHarness()
            h.engine = Engine(rules: RulesHistory(changes: [.init(fromSeq: 100, at: takeOverAt, version: "2")]))
            h.authorize()
            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
            h.submit("n1")
            return only(h.advance(to: at("2026-01-05T18:30:00Z")))
        }
        let early = summary(takeOverAt: at("2026-01-05T17:00:00Z")), late = summary(takeOverAt: at("2026-01-05T19:00:00Z"))
        #expect(early.kind == .summary && early.rulesVersion == "2")
        #expect(late.kind == .summary && late.rulesVersion == "1")
        #expect(early.items == late.items, "only the label differs: no rule of the summary changed")
    }

    @Test func rulesVersion_aTimerAnEventMakesDueAtOnceIsTheEventsVersion() {
        // Under a manual clock the take-over's time is the clock's, and so is the next event's: a
        // snooze whose `until` has passed alerts at once, at the take-over's instant, by "2".
        let submits = 2 * Engine.snoozableLimit + 5
        let snoozeSeq = Int64(1 + submits + 1)
        var h = EngineHarness()
        h.engine = Engine(rules: RulesHistory(changes: [.init(fromSeq: snoozeSeq, at: T0, version: "2")]))
        h.authorize()
        for i in 0..<submits { h.submit("n\(i)") }
        let d = only(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T11:00:00Z"}"#))
        #expect(d.snoozed && d.at == T0 && d.rulesVersion == "2", "\(d.rulesVersion)")
        #expect(h.log.dropLast().allSatisfy { $0.rulesVersion == "1" })
    }

    @Test func rulesVersion_aWhatIfRequestIsDecidedByTheRulesInForceWhenItIsInjected() {
        let h = RulesHistory(changes: [.init(fromSeq: 10, at: t1, version: "2")])
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

        // The engine: a snooze of content no longer kept, injected after the last event (decided
        // by "1") and after a take-over by "2", is read back (version 2's rule), not ignored.
        let submits = 2 * Engine.snoozableLimit + 5
        let last = Int64(1 + submits)
        let takeOver = at("2026-01-05T12:30:00Z")
        var harness = EngineHarness()
        harness.engine = Engine(rules: RulesHistory(changes: [.init(fromSeq: last + 1, at: takeOver, version: "2")]))
        harness.authorize()
        for i in 0..<submits { harness.submit("n\(i)") }
        #expect(harness.seq == last && harness.log.allSatisfy { $0.rulesVersion == "1" })
        func injected(at t: Instant) -> [Delivery] {
            var state = harness.states["u"]!, apps = harness.apps
            let body = try! JSONValue.parse(#"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T14:00:00Z"}"#)
            let snooze = StoredEvent(seq: last, user: "u", type: "snooze", body: body, at: t)
            if let wanted = state.contentNeeded(toApply: snooze), let submit = harness.events.first(where: { $0.seq == wanted }) {
                state.supplyContent(SubmittedNotification(body: submit.body), seq: wanted)
            }
            let version = harness.engine.rules.version(forInjectionAfter: last, at: t)
            _ = harness.engine.apply(snooze, decidedBy: version, to: &state, apps: &apps)
            return harness.engine.advance(&state, to: at("2026-01-05T14:30:00Z"), apps: apps).deliveries
        }
        #expect(injected(at: takeOver.adding(.minutes(-1))).isEmpty, "before the take-over: version 1 ignores it")
        let after = injected(at: takeOver.adding(.minutes(1)))
        #expect(only(after).snoozed && after[0].rulesVersion == "2")
    }

    @Test func rulesVersion_takeOversWithNoEventBetweenThemTheLastDecides() {
        let h = RulesHistory(changes: [.init(fromSeq: 7, at: t1, version: "2"), .init(fromSeq: 7, at: t1, version: "1")])
        #expect(h.version(forEventAt: 7) == "1" && h.latest == "1")
        #expect(h.version(forTimerDueAt: t2) == "1")
    }

    @Test func rulesVersion_summarySaysWhichRulesDecidedWhichPart() {
        #expect(RulesHistory().summary == "1 throughout (none recorded)")
        #expect(RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "2")]).summary == "2 throughout")
        let upgraded = RulesHistory(changes: [.init(fromSeq: 1, at: t1, version: "1"), .init(fromSeq: 42, at: t2, version: "2")])
        #expect(upgraded.summary == "1 for seq 1–41, 2 from seq 42 (timers due after 2026-01-05T13:00:00Z)")
        let back = RulesHistory(changes: [.init(fromSeq: 42, at: t2, version: "2"), .init(fromSeq: 42, at: t2, version: "1")])
        #expect(back.summary == "1 throughout", "a take-over undone before any event")
    }
}
