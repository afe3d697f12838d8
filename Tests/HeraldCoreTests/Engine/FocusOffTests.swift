// SPEC §2 focusOff of a scheduled Focus: off until its window ends, and back at its next window start.
import HeraldCore
import Testing

@Suite struct FocusOffTests {
    /// A schedule covering the whole week (an all-day window every day) never ends, so "off until
    /// the window's end" would be off for good: it comes back at the next start of one of its
    /// windows (here the next local midnight), as a scheduled Focus turned off by hand comes back
    /// at its next window.
    @Test func focus_aFocusScheduledAllWeekTurnedOffComesBackAtItsNextWindowStart() {
        var h = EngineHarness(authorizingMail: true)
        h.send("focusDefine", #"{"user":"u","focus":"Always","schedule":[{"days":[1,2,3,4,5,6,7],"start":"00:00","end":"00:00"}],"timeZone":"Europe/Berlin"}"#)
        #expect(only(h.submit("n1")).kind == .held)
        #expect(only(h.send("focusOff", #"{"user":"u","focus":"Always"}"#)).kind == .focusDigest)
        #expect(only(h.submit("n2")).kind == .alert)
        _ = h.advance(to: at("2026-01-05T22:59:59Z"))
        #expect(only(h.submit("n3")).kind == .alert, "still off before Berlin's midnight")
        _ = h.advance(to: at("2026-01-05T23:00:00Z"))  // 00:00 in Berlin
        #expect(only(h.submit("n4")).kind == .held)
    }

    /// SPEC §10 "Pending, visible" (Focus ends): a scheduled Focus turned off by hand comes back at
    /// a later instant — a scheduled decision `herald pending` lists (`focusesOff`), also for a
    /// whole-week one, whose `activeFocus` is empty while it is off.
    @Test func pendingVisible_aScheduledFocusTurnedOffShowsWhenItComesBack() {
        var h = EngineHarness(authorizingMail: true)
        h.send("focusDefine", #"{"user":"u","focus":"Always","schedule":[{"days":[1,2,3,4,5,6,7],"start":"00:00","end":"00:00"}],"timeZone":"Europe/Berlin"}"#)
        h.send("focusDefine", #"{"user":"u","focus":"Work","schedule":[{"days":[1,2,3,4,5],"start":"09:00","end":"17:00"}],"timeZone":"UTC"}"#)
        h.send("focusOff", #"{"user":"u","focus":"Always"}"#)
        let s = h.state().json(at: at("2026-01-05T12:00:00Z"))
        #expect(s["activeFocus"]?["focus"] == "Work")
        #expect(s["focusesOff"] == [["focus": "Always", "until": "2026-01-05T23:00:00Z"]], "\(s)")
        let later = h.state().json(at: at("2026-01-05T23:00:00Z"))
        #expect(later["focusesOff"] == [])
        let always = later["focuses"]?.arrayValue?.first { $0["focus"] == "Always" }
        #expect(always?["offUntil"] == nil, "an offUntil that has passed is not shown: \(String(describing: always))")
    }
}
