// Summary and Focus decisions across midnight and DST changes, through the engine and the calendars.
import HeraldCore
import Testing

@Suite struct CalendarInteractionTests {
    func summaryAt0230(_ zone: String, start: Instant, times: String = #"["02:30"]"#) -> EngineHarness {
        var h = EngineHarness(now: start)
        h.authorize(options: ["alert", "sound", "badge"])
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("summarySchedule", #"{"user":"u","times":\#(times),"timeZone":"\#(zone)"}"#)
        return h
    }

    @Test func summary_0230_springForward_EuropeBerlin_firesAtTheJump() {
        var h = summaryAt0230("Europe/Berlin", start: at("2026-03-28T20:00:00Z"))
        #expect(only(h.submit("n1")).summaryAt == at("2026-03-29T01:00:00Z"))  // 03:00 CEST
        let s = only(h.advance(to: at("2026-03-29T12:00:00Z")))
        #expect(s.kind == .summary && s.at == at("2026-03-29T01:00:00Z"))
    }

    @Test func summary_0230_fallBack_EuropeBerlin_firesOnceAtFirstOccurrence() {
        var h = summaryAt0230("Europe/Berlin", start: at("2026-10-24T20:00:00Z"))
        #expect(only(h.submit("n1")).summaryAt == at("2026-10-25T00:30:00Z"))  // 02:30 CEST
        #expect(only(h.advance(to: at("2026-10-25T00:30:00Z"))).kind == .summary)
        // Inside the repeated hour: the second 02:30 (01:30Z) does not fire again.
        h.advance(to: at("2026-10-25T01:10:00Z"))
        #expect(only(h.submit("n2")).summaryAt == at("2026-10-26T01:30:00Z"))
        #expect(h.advance(to: at("2026-10-25T23:00:00Z")).isEmpty)
    }

    @Test func summary_0230_springForward_AmericaNewYork_firesAtTheJump() {
        var h = summaryAt0230("America/New_York", start: at("2026-03-08T00:00:00Z"))
        #expect(only(h.submit("n1")).summaryAt == at("2026-03-08T07:00:00Z"))  // 03:00 EDT
        #expect(only(h.advance(to: at("2026-03-08T12:00:00Z"))).at == at("2026-03-08T07:00:00Z"))
    }

    @Test func summary_0230_fallBack_AmericaNewYork_firesOnce() {
        var h = summaryAt0230("America/New_York", start: at("2026-11-01T00:00:00Z"))
        #expect(only(h.submit("n1")).summaryAt == at("2026-11-01T07:30:00Z"))  // 02:30 EST (after the repeat)
        #expect(only(h.advance(to: at("2026-11-01T12:00:00Z"))).at == at("2026-11-01T07:30:00Z"))
    }

    @Test func summary_0130_fallBack_AmericaNewYork_ambiguousFiresAtFirstOccurrence() {
        var h = summaryAt0230("America/New_York", start: at("2026-11-01T00:00:00Z"), times: #"["01:30"]"#)
        #expect(only(h.submit("n1")).summaryAt == at("2026-11-01T05:30:00Z"))  // 01:30 EDT
        #expect(only(h.advance(to: at("2026-11-01T05:30:00Z"))).kind == .summary)
        #expect(only(h.submit("n2")).summaryAt == at("2026-11-02T06:30:00Z"))  // not 06:30Z today
    }

    @Test func summary_scheduleChangeMovesPendingSummary() {
        var h = summaryAt0230("UTC", start: T0)
        #expect(only(h.submit("n1")).summaryAt == at("2026-01-06T02:30:00Z"))
        h.send("summarySchedule", #"{"user":"u","times":["13:00"],"timeZone":"UTC"}"#)
        #expect(h.state().nextDeadline() == at("2026-01-05T13:00:00Z"))
    }

    func nightFocus(start: Instant) -> EngineHarness {
        var h = EngineHarness(now: start)
        h.authorize(options: ["alert", "sound", "badge"])
        h.send("focusDefine", #"{"user":"u","focus":"Sleep","schedule":[{"days":[1,2,3,4,5,6,7],"start":"22:00","end":"07:00"}],"timeZone":"Europe/Berlin"}"#)
        return h
    }

    @Test func focus_2200to0700_acrossMidnight() {
        var h = nightFocus(start: at("2026-01-05T20:59:00Z"))  // 21:59 CET: not yet
        #expect(only(h.submit("n0")).kind == .alert)
        h.advance(to: at("2026-01-05T21:30:00Z"))  // 22:30 CET
        #expect(only(h.submit("n1")).kind == .held)
        h.advance(to: at("2026-01-05T23:30:00Z"))  // 00:30 next day
        #expect(only(h.submit("n2")).kind == .held)
        #expect(h.state().nextDeadline() == at("2026-01-06T06:00:00Z"))  // 07:00 CET
        let d = only(h.advance(to: at("2026-01-06T09:00:00Z")))
        #expect(d.kind == .focusDigest && d.at == at("2026-01-06T06:00:00Z"))
        #expect(d.items.map(\.notification.id) == ["n1", "n2"])
        #expect(only(h.submit("n3")).kind == .alert)
    }

    @Test func focus_2200to0700_acrossSpringForward() {
        var h = nightFocus(start: at("2026-03-28T21:30:00Z"))  // Sat 22:30 CET
        #expect(only(h.submit("n1")).kind == .held)
        let d = only(h.advance(to: at("2026-03-29T12:00:00Z")))
        #expect(d.at == at("2026-03-29T05:00:00Z"))  // 07:00 CEST: an 8-hour night
    }

    @Test func focus_2200to0700_acrossFallBack() {
        var h = nightFocus(start: at("2026-10-24T20:30:00Z"))  // Sat 22:30 CEST
        #expect(only(h.submit("n1")).kind == .held)
        h.advance(to: at("2026-10-25T05:30:00Z"))  // 06:30 CET: still night (10-hour night)
        #expect(only(h.submit("n2")).kind == .held)
        let d = only(h.advance(to: at("2026-10-25T12:00:00Z")))
        #expect(d.at == at("2026-10-25T06:00:00Z") && d.items.count == 2)
    }

    @Test func focus_scheduledTurnedOffByHand_offUntilWindowEnds() {
        var h = nightFocus(start: at("2026-01-05T21:30:00Z"))
        h.submit("n1")
        #expect(only(h.send("focusOff", #"{"user":"u","focus":"Sleep"}"#)).kind == .focusDigest)
        #expect(only(h.submit("n2")).kind == .alert)
        h.advance(to: at("2026-01-06T21:30:00Z"))  // next night: active again
        #expect(only(h.submit("n3")).kind == .held)
    }

    @Test func focus_manualOverSchedule_wakesOnlyWhenTheManualFocusEnds() {
        // The manual Focus wins over the nightly schedule until it ends: no wake-up at each 22:00
        // and 07:00 in between (the fuzz target found 1.5M of them for a Focus on until 4052).
        var h = nightFocus(start: at("2026-01-05T10:00:00Z"))
        h.send("focusOn", #"{"user":"u","focus":"Sleep","until":"2028-01-05T12:00:00Z"}"#)
        #expect(only(h.submit("n1")).kind == .held)
        #expect(h.state().nextDeadline() == at("2028-01-05T12:00:00Z"))
        #expect(h.advance(to: at("2027-06-01T06:30:00Z")).isEmpty, "still held under the manual Focus")
        let d = only(h.advance(to: at("2028-01-05T13:00:00Z")))  // 13:00 CET: outside the night window
        #expect(d.kind == .focusDigest && d.at == at("2028-01-05T12:00:00Z"))
    }

    @Test func focus_manualUntilEndsAndDigests() {
        var h = EngineHarness()
        h.authorize(options: ["alert"])
        h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T12:30:00Z"}"#)
        h.submit("n1")
        #expect(h.state().activeFocus(at: at("2026-01-05T12:29:59Z")) == "Work")
        #expect(h.state().activeFocus(at: at("2026-01-05T12:30:00Z")) == nil)
        #expect(only(h.advance(to: at("2026-01-05T12:30:00Z"))).kind == .focusDigest)
    }
}

@Suite struct TimeZoneChangeTests {
    @Test func summary_userMovesTimeZone_pendingSummaryFollowsNewZone() {
        var h = EngineHarness()
        h.authorize(options: ["alert"])
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("summarySchedule", #"{"user":"u","times":["18:00"],"timeZone":"Europe/Berlin"}"#)
        #expect(only(h.submit("n1")).summaryAt == at("2026-01-05T17:00:00Z"))
        h.send("summarySchedule", #"{"user":"u","times":["18:00"],"timeZone":"America/New_York"}"#)
        #expect(h.state().nextDeadline() == at("2026-01-05T23:00:00Z"))
        #expect(only(h.advance(to: at("2026-01-06T00:00:00Z"))).at == at("2026-01-05T23:00:00Z"))
    }

    @Test func focus_userMovesTimeZone_windowFollowsNewZone() {
        var h = EngineHarness(now: at("2026-01-05T21:30:00Z"))  // 22:30 in Berlin, 16:30 in New York
        h.authorize(options: ["alert"])
        h.send("focusDefine", #"{"user":"u","focus":"Sleep","schedule":[{"days":[1,2,3,4,5,6,7],"start":"22:00","end":"07:00"}],"timeZone":"Europe/Berlin"}"#)
        #expect(only(h.submit("n1")).kind == .held)
        let d = only(h.send("focusDefine", #"{"user":"u","focus":"Sleep","schedule":[{"days":[1,2,3,4,5,6,7],"start":"22:00","end":"07:00"}],"timeZone":"America/New_York"}"#))
        #expect(d.kind == .focusDigest)  // not night in New York: the Focus ended with the move
        #expect(only(h.submit("n2")).kind == .alert)
        h.advance(to: at("2026-01-06T03:30:00Z"))  // 22:30 in New York
        #expect(only(h.submit("n3")).kind == .held)
    }
}
