// SPEC §3 Collapse ("one thing, one notification"): what a notification with a collapse id replaces, and when.
import HeraldCore
import Testing

@Suite struct CollapseTests {
    static let mail = "com.example.mail"

    /// Rules 1, 2 and 4: a new notification that is withdrawn, expired or suppressed is never
    /// presented, so it replaces nothing; the held one stays held, counted, and is in the Focus
    /// digest.
    @Test func collapse_aNotificationStoppedByRules1To4ReplacesNothing() {
        let stopped: [(String, String, DeliveryKind)] = [
            ("m2", #""collapseId":"c","marketing":true"#, .suppressed),
            ("e2", #""collapseId":"c","expiresAt":"2026-01-05T11:00:00Z""#, .expired),
            ("w2", #""collapseId":"c""#, .withdrawn),
        ]
        var h = EngineHarness(authorizingMail: true)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("n1", #""collapseId":"c""#)).kind == .held)
        h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"w2"}"#)
        for (id, extra, kind) in stopped {
            let ds = h.submit(id, extra)
            #expect(ds.map(\.kind) == [kind], "\(id): \(ds.map(\.kind))")
        }
        let digest = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        #expect(only(digest).items.map(\.notification.id) == ["n1"])
        #expect(h.state().badge(of: Self.mail) == 1)
    }
}

/// SPEC §3 Collapse with Deferred ("Focus, summary and settings are judged then, not at
/// submission"): a deferred notification's collapse is decided as of its `deliverAt`.
@Suite struct DeferredCollapseTests {
    static let mail = "com.example.mail"

    /// A queued notification stays under "upcoming summary" until its deferred replacement is
    /// decided at `deliverAt`, leaving the user something to see until then.
    @Test func collapse_aDeferredNotificationReplacesAQueuedOneAtItsDeliverAt() {
        var h = EngineHarness(authorizingMail: true)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("q1", #""collapseId":"c""#)).kind == .queued)
        let arrival = h.submit("d2", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#)
        let atDeliverAt = h.advance(to: at("2026-01-05T13:00:00Z"))
        #expect(arrival.isEmpty, "q1 is still visible")
        #expect(atDeliverAt.map(\.kind) == [.replaced, .queued])
        #expect(atDeliverAt.first?.notificationId == "q1" && atDeliverAt.first?.reason == "replaced_by_newer")
        #expect(atDeliverAt.first?.causeSeq == atDeliverAt.last?.causeSeq, "caused by d2's submit")
        let summary = only(h.advance(to: at("2026-01-05T18:00:00Z")))
        #expect(summary.items.map(\.notification.id) == ["d2"])
        #expect(h.state().badge(of: Self.mail) == 1, "one thing, one notification, one badge")
    }

    /// The same for a held one: if the deferred replacement is stopped at `deliverAt` (here by
    /// rule 4, marketing without consent), the held notification stays and is in the Focus digest.
    @Test func collapse_aDeferredNotificationStoppedAtItsDeliverAtLeavesTheHeldOne() {
        var h = EngineHarness(authorizingMail: true)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("h1", #""collapseId":"c""#)).kind == .held)
        h.submit("m2", #""collapseId":"c","marketing":true,"deliverAt":"2026-01-05T13:00:00Z""#)
        #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).kind == .suppressed)
        let digest = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        #expect(only(digest).items.map(\.notification.id) == ["h1"])
        #expect(h.state().badge(of: Self.mail) == 1)
    }

    /// A reschedule: a deferred notification replaces a scheduled (deferred) one of its collapse
    /// id at arrival, so only the newer one is decided.
    @Test func collapse_aDeferredNotificationReplacesAScheduledOneAtArrival() {
        var h = EngineHarness(authorizingMail: true)
        #expect(h.submit("d1", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        let arrival = h.submit("d2", #""collapseId":"c","deliverAt":"2026-01-05T14:00:00Z""#)
        #expect(arrival.map(\.kind) == [.replaced] && arrival.first?.notificationId == "d1")
        #expect(h.advance(to: at("2026-01-05T13:30:00Z")).isEmpty)
        let d2 = only(h.advance(to: at("2026-01-05T14:00:00Z")))
        #expect(d2.kind == .alert && d2.notificationId == "d2" && d2.replaces == nil)
    }

    /// A delivered one is replaced when its deferred successor is delivered (rule 7b's quiet
    /// `replaces`): collapse onto a delivered notification is decided then.
    @Test func collapse_aDeferredNotificationReplacesADeliveredOneQuietlyAtItsDeliverAt() {
        var h = EngineHarness(authorizingMail: true)
        #expect(only(h.submit("n1", #""collapseId":"c""#)).kind == .alert)
        #expect(h.submit("d2", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        let d2 = only(h.advance(to: at("2026-01-05T13:00:00Z")))
        #expect(d2.kind == .quiet && d2.replaces == "n1" && d2.presentation?.badge == 1)
    }

    /// A deferred notification withdrawn before it arrived is never decided, so the queued one it
    /// would have replaced stays.
    @Test func collapse_aDeferredNotificationWithdrawnBeforeArrivalReplacesNothing() {
        var h = EngineHarness(authorizingMail: true)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("q1", #""collapseId":"c""#)).kind == .queued)
        h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"q2"}"#)
        #expect(h.submit("q2", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        let later = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(later.map(\.kind) == [.withdrawn, .summary])
        #expect(later.last?.items.map(\.notification.id) == ["q1"])
    }
}
