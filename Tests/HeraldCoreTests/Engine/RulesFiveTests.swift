// Rules version "5" (session 29): a deferred notification's collapse and timing decided as of its
// `deliverAt` (SPEC §3 Deferred: "Focus, summary and settings are judged then, not at submission").
// Each test checks the new decision and that "4" still decides an old log as it did.
import HeraldCore
import Testing

@Suite struct RulesFiveTests {
    static let mail = "com.example.mail"

    func harness(_ version: String = Engine.currentRulesVersion) -> EngineHarness {
        EngineHarness(rulesVersion: version, authorizingMail: true)
    }

    /// SPEC §3 Collapse with Deferred: a queued notification stays under "upcoming summary" until
    /// its deferred replacement is decided at `deliverAt`; "4" removed it at the replacement's
    /// arrival, leaving the user nothing to see until then.
    @Test func collapse_aDeferredNotificationReplacesAQueuedOneAtItsDeliverAt() {
        for version in ["5", "4"] {
            var h = harness(version)
            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
            #expect(only(h.submit("q1", #""collapseId":"c""#)).kind == .queued)
            let arrival = h.submit("d2", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#)
            let atDeliverAt = h.advance(to: at("2026-01-05T13:00:00Z"))
            if version == "5" {
                #expect(arrival.isEmpty, "q1 is still visible")
                #expect(atDeliverAt.map(\.kind) == [.replaced, .queued])
                #expect(atDeliverAt.first?.notificationId == "q1" && atDeliverAt.first?.reason == "replaced_by_newer")
                #expect(atDeliverAt.first?.causeSeq == atDeliverAt.last?.causeSeq, "caused by d2's submit")
            } else {
                #expect(arrival.map(\.kind) == [.replaced])
                #expect(atDeliverAt.map(\.kind) == [.queued])
            }
            let summary = only(h.advance(to: at("2026-01-05T18:00:00Z")))
            #expect(summary.items.map(\.notification.id) == ["d2"])
            #expect(h.state().badge(of: Self.mail) == 1, "one thing, one notification, one badge")
        }
    }

    /// The same for a held one: if the deferred replacement is stopped at `deliverAt` (here by
    /// rule 4, marketing without consent), the held notification stays and is in the Focus
    /// digest; "4" had replaced it at arrival, so the user got neither.
    @Test func collapse_aDeferredNotificationStoppedAtItsDeliverAtLeavesTheHeldOne() {
        for version in ["5", "4"] {
            var h = harness(version)
            h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
            #expect(only(h.submit("h1", #""collapseId":"c""#)).kind == .held)
            h.submit("m2", #""collapseId":"c","marketing":true,"deliverAt":"2026-01-05T13:00:00Z""#)
            #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).kind == .suppressed)
            let digest = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
            if version == "5" {
                #expect(only(digest).items.map(\.notification.id) == ["h1"])
                #expect(h.state().badge(of: Self.mail) == 1)
            } else {
                #expect(digest.isEmpty, "rules 4: m2 replaced h1 at its arrival")
                #expect(h.state().badge(of: Self.mail) == 0)
            }
        }
    }

    /// A reschedule: a deferred notification still replaces a scheduled (deferred) one of its
    /// collapse id at arrival, in both versions, so only the newer one is decided.
    @Test func collapse_aDeferredNotificationReplacesAScheduledOneAtArrival() {
        for version in ["5", "4"] {
            var h = harness(version)
            #expect(h.submit("d1", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
            let arrival = h.submit("d2", #""collapseId":"c","deliverAt":"2026-01-05T14:00:00Z""#)
            #expect(arrival.map(\.kind) == [.replaced] && arrival.first?.notificationId == "d1", "rules \(version)")
            #expect(h.advance(to: at("2026-01-05T13:30:00Z")).isEmpty)
            let d2 = only(h.advance(to: at("2026-01-05T14:00:00Z")))
            #expect(d2.kind == .alert && d2.notificationId == "d2" && d2.replaces == nil)
        }
    }

    /// A delivered one is replaced when its deferred successor is delivered (rule 7b's quiet
    /// `replaces`), as before: collapse onto a delivered notification was always decided then.
    @Test func collapse_aDeferredNotificationReplacesADeliveredOneQuietlyAtItsDeliverAt() {
        var h = harness()
        #expect(only(h.submit("n1", #""collapseId":"c""#)).kind == .alert)
        #expect(h.submit("d2", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        let d2 = only(h.advance(to: at("2026-01-05T13:00:00Z")))
        #expect(d2.kind == .quiet && d2.replaces == "n1" && d2.presentation?.badge == 1)
    }

    /// SPEC §3 Summary firing ("one summary delivery carries every queued notification") with
    /// Deferred: a notification whose `deliverAt` is a summary instant and that is queued then is
    /// in that summary; "4" fired the summary first, so it waited for the next one (here 10 h).
    @Test func summary_aDeferredNotificationQueuedAtTheSummaryInstantIsInThatSummary() {
        for version in ["5", "4"] {
            var h = harness(version)
            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
            h.submit("d1", #""deliverAt":"2026-01-05T18:00:00Z""#)
            let ds = h.advance(to: at("2026-01-05T18:00:00Z"))
            if version == "5" {
                #expect(ds.map(\.kind) == [.queued, .summary])
                #expect(ds.first?.summaryAt == at("2026-01-05T18:00:00Z"))
                #expect(ds.last?.items.map(\.notification.id) == ["d1"])
                #expect(h.state().nextDeadline() == nil, "no summary left due")
            } else {
                #expect(ds.map(\.kind) == [.queued])
                #expect(ds.first?.summaryAt == at("2026-01-06T08:00:00Z"))
            }
        }
        // With other items queued already, the summary due then carries both.
        var h = harness()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.submit("q1")
        h.submit("d1", #""deliverAt":"2026-01-05T18:00:00Z""#)
        let s = h.advance(to: at("2026-01-05T18:00:00Z")).last
        #expect(s?.kind == .summary && s?.items.map(\.notification.id) == ["q1", "d1"])
    }

    /// A deferred decision at a summary instant that is not queued leaves no summary behind, and
    /// a submit arriving at a summary instant (not deferred) still waits for the next one: the
    /// summary due then has fired before the event (timers due at an event's time fire first).
    @Test func summary_onlyDeferredDecisionsJoinTheSummaryOfTheirInstant() {
        var h = harness()
        h.submit("d1", #""deliverAt":"2026-01-05T18:00:00Z""#)  // mail is immediate: an alert
        #expect(h.advance(to: at("2026-01-05T18:00:00Z")).map(\.kind) == [.alert])
        #expect(h.state().nextDeadline() == nil, "no summary left due")

        var g = harness()
        g.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        g.submit("q1")
        #expect(only(g.advance(to: at("2026-01-05T18:00:00Z"))).kind == .summary)
        let q2 = only(g.submit("q2"))
        #expect(q2.kind == .queued && q2.summaryAt == at("2026-01-06T08:00:00Z"))
    }

    /// SPEC §5's 64 KiB line: the parts of a summary or digest split over several lines say which
    /// part they are and how many there are, so a consumer knows when it has all of them; a
    /// summary of one line carries neither. "4" split without them.
    @Test func wireLine_theSplitPartsOfASummaryCarryPartAndParts() {
        let long = String(repeating: "x", count: 3_800)
        for version in ["5", "4"] {
            var h = harness(version)
            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
            for i in 0..<40 {
                h.send("submit", #"{"id":"s\#(i)","app":"com.example.mail","user":"u","title":"Hello","body":"\#(long)","hiddenPreviewsBodyPlaceholder":"New mail"}"#)
            }
            let parts = h.advance(to: at("2026-01-05T18:00:00Z"))
            #expect(parts.count == 3)
            let json = parts.map { try! JSONValue.parse(String(decoding: $0.bodyBytes, as: UTF8.self)) }
            if version == "5" {
                #expect(parts.map(\.part) == [1, 2, 3] && parts.allSatisfy { $0.parts == 3 })
                #expect(json.map { $0["part"]?.intValue } == [1, 2, 3])
                #expect(json.allSatisfy { $0["parts"]?.intValue == 3 })
            } else {
                #expect(json.allSatisfy { $0["part"] == nil && $0["parts"] == nil })
            }
            #expect(zip(parts, json).allSatisfy { $0.bodyBytes == $1.canonicalBytes }, "the direct writer matches the canonical form")
            h.submit("one")
            let single = only(h.advance(to: at("2026-01-06T08:00:00Z")))
            #expect(single.parts == 0 && !String(decoding: single.bodyBytes, as: UTF8.self).contains("\"part"))
        }
    }

    /// SPEC §2 focusOff with a schedule covering the whole week (an all-day window every day):
    /// "4" kept it off until the window's end, which never comes, so it was off for good; "5"
    /// brings it back at the next start of one of its windows (here the next local midnight), as
    /// a scheduled Focus turned off by hand comes back at its next window.
    @Test func focus_aFocusScheduledAllWeekTurnedOffComesBackAtItsNextWindowStart() {
        for version in ["5", "4"] {
            var h = harness(version)
            h.send("focusDefine", #"{"user":"u","focus":"Always","schedule":[{"days":[1,2,3,4,5,6,7],"start":"00:00","end":"00:00"}],"timeZone":"Europe/Berlin"}"#)
            #expect(only(h.submit("n1")).kind == .held)
            #expect(only(h.send("focusOff", #"{"user":"u","focus":"Always"}"#)).kind == .focusDigest)
            #expect(only(h.submit("n2")).kind == .alert)
            _ = h.advance(to: at("2026-01-05T22:59:59Z"))
            #expect(only(h.submit("n3")).kind == .alert, "still off before Berlin's midnight")
            _ = h.advance(to: at("2026-01-05T23:00:00Z"))  // 00:00 in Berlin
            let n4 = only(h.submit("n4"))
            #expect(n4.kind == (version == "5" ? .held : .alert), "rules \(version)")
        }
    }

    /// SPEC §10 Snooze of a held notification (SPEC §3 rule 10: "available in Notification Center
    /// at once"): "5" takes it; at `until` it alerts again if the Focus has ended (it was in the
    /// digest meanwhile), and is held again, flagged snoozed, if the Focus still holds it. "4"
    /// accepted the snooze and ignored it.
    @Test func snooze_aHeldNotificationIsSnoozedToo() {
        for version in ["5", "4"] {
            var h = harness(version)
            h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T12:30:00Z"}"#)
            #expect(only(h.submit("h1")).kind == .held)
            #expect(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"h1","until":"2026-01-05T13:00:00Z"}"#).isEmpty)
            let digest = only(h.advance(to: at("2026-01-05T12:30:00Z")))
            #expect(digest.kind == .focusDigest && digest.items.map(\.notification.id) == ["h1"])
            let again = h.advance(to: at("2026-01-05T13:00:00Z"))
            if version == "5" {
                let d = only(again)
                #expect(d.kind == .alert && d.snoozed && d.notificationId == "h1" && d.presentation?.badge == 1, "counted once")
            } else {
                #expect(again.isEmpty)
            }
        }
        // The Focus still on at `until`: held again (no banner), then in the digest once.
        var h = harness()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        h.submit("h1")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"h1","until":"2026-01-05T13:00:00Z"}"#)
        let held = only(h.advance(to: at("2026-01-05T13:00:00Z")))
        #expect(held.kind == .held && held.snoozed && held.presentation?.badge == 1)
        let digest = only(h.send("focusOff", #"{"user":"u","focus":"Work"}"#))
        #expect(digest.items.map(\.notification.id) == ["h1"] && h.state().badge(of: Self.mail) == 1)
    }

    /// The same for a queued one ("upcoming summary"): at `until` it leaves the summary and is
    /// judged by the rules then (here the app is back on immediate delivery: an alert); a withdraw
    /// before `until` cancels the snooze.
    @Test func snooze_aQueuedNotificationIsJudgedAgainAtUntil() {
        var h = harness()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.submit("q1")
        h.submit("q2")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"q1","until":"2026-01-05T13:00:00Z"}"#)
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"q2","until":"2026-01-05T13:00:00Z"}"#)
        h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"q2"}"#)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"immediate"}"#)
        let d = only(h.advance(to: at("2026-01-05T13:00:00Z")))
        #expect(d.kind == .alert && d.snoozed && d.notificationId == "q1" && d.presentation?.badge == 1)
        #expect(h.advance(to: at("2026-01-05T18:00:00Z")).isEmpty, "q1 left the summary; q2 was withdrawn")
    }

    /// The only queued notification, snoozed until the summary due then, is in that summary: it
    /// left the queue for a moment (the snooze's decision comes first under "5"), and that cleared
    /// the summary, so it went out 10 h later (a review of session 29). With another item queued
    /// it always worked.
    @Test func snooze_theOnlyQueuedNotificationSnoozedUntilTheSummaryIsInIt() {
        var h = harness()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("q1")).summaryAt == at("2026-01-05T18:00:00Z"))
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"q1","until":"2026-01-05T18:00:00Z"}"#)
        let ds = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(ds.map(\.kind) == [.queued, .summary], "\(ds.map(\.kind))")
        #expect(ds.first?.snoozed == true && ds.first?.summaryAt == at("2026-01-05T18:00:00Z"))
        #expect(ds.last?.items.map(\.notification.id) == ["q1"])
        #expect(h.state().nextDeadline() == nil)
    }
}
