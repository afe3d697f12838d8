// Timers due at one instant: expiry, Focus change, deferred decisions and snoozes, then the summary (one queued then is in it).
import HeraldCore
import Testing

@Suite struct SummaryTimerOrderTests {
    static let mail = "com.example.mail"

    /// Timers due at one instant: expiry, Focus change (its digest), then the deferred decisions
    /// and snoozes, then the summary (so one queued then is in it).
    @Test func timers_sameDeadline_expiryThenFocusThenDecisionsThenSummary() {
        var h = EngineHarness()
        h.authorize(options: ["alert", "sound", "badge"])
        h.authorize("u", "com.example.chat")
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T18:00:00Z"}"#)
        h.submit("q1")  // queued
        h.submit("q2", #""expiresAt":"2026-01-05T17:59:59.999Z""#)  // expires at 18:00
        h.submit("h1", app: "com.example.chat")  // held until 18:00
        h.submit("d1", app: "com.example.chat", #""deliverAt":"2026-01-05T18:00:00Z""#)
        let ds = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(ds.map(\.kind) == [.expired, .focusDigest, .alert, .summary])
        #expect(ds.allSatisfy { $0.at == at("2026-01-05T18:00:00Z") })
    }

    /// SPEC §3 Summary firing ("one summary delivery carries every queued notification") with
    /// Deferred: a notification whose `deliverAt` is a summary instant and that is queued then is
    /// in that summary, not the next one.
    @Test func summary_aDeferredNotificationQueuedAtTheSummaryInstantIsInThatSummary() {
        var h = EngineHarness(authorizingMail: true)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.submit("d1", #""deliverAt":"2026-01-05T18:00:00Z""#)
        let ds = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(ds.map(\.kind) == [.queued, .summary])
        #expect(ds.first?.summaryAt == at("2026-01-05T18:00:00Z"))
        #expect(ds.last?.items.map(\.notification.id) == ["d1"])
        #expect(h.state().nextDeadline() == nil, "no summary left due")

        // With other items queued already, the summary due then carries both.
        var g = EngineHarness(authorizingMail: true)
        g.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        g.submit("q1")
        g.submit("d1", #""deliverAt":"2026-01-05T18:00:00Z""#)
        let s = g.advance(to: at("2026-01-05T18:00:00Z")).last
        #expect(s?.kind == .summary && s?.items.map(\.notification.id) == ["q1", "d1"])
    }

    /// A deferred decision at a summary instant that is not queued leaves no summary behind, and
    /// a submit arriving at a summary instant (not deferred) still waits for the next one: the
    /// summary due then has fired before the event (timers due at an event's time fire first).
    @Test func summary_onlyDeferredDecisionsJoinTheSummaryOfTheirInstant() {
        var h = EngineHarness(authorizingMail: true)
        h.submit("d1", #""deliverAt":"2026-01-05T18:00:00Z""#)  // mail is immediate: an alert
        #expect(h.advance(to: at("2026-01-05T18:00:00Z")).map(\.kind) == [.alert])
        #expect(h.state().nextDeadline() == nil, "no summary left due")

        var g = EngineHarness(authorizingMail: true)
        g.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        g.submit("q1")
        #expect(only(g.advance(to: at("2026-01-05T18:00:00Z"))).kind == .summary)
        let q2 = only(g.submit("q2"))
        #expect(q2.kind == .queued && q2.summaryAt == at("2026-01-06T08:00:00Z"))
    }

    /// The only queued notification, snoozed until the summary due then, is in that summary: it
    /// leaves the queue for a moment (the snooze's decision comes first), and that must not clear
    /// the summary and send it 10 h later.
    @Test func snooze_theOnlyQueuedNotificationSnoozedUntilTheSummaryIsInIt() {
        var h = EngineHarness(authorizingMail: true)
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
