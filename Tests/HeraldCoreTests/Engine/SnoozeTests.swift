// SPEC §10 snooze: a delivered, held or queued notification alerts again once at `until`, judged by the rules then.
import HeraldCore
import Testing

@Suite struct SnoozeTests {
    static let mail = "com.example.mail"

    @Test func snooze_alertsAgainOnceAtUntil() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n1")
        #expect(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T13:00:00Z"}"#).isEmpty)
        #expect(h.state().nextDeadline() == at("2026-01-05T13:00:00Z"))
        let d = only(h.advance(to: at("2026-01-05T13:30:00Z")))
        #expect(d.kind == .alert && d.snoozed && d.at == at("2026-01-05T13:00:00Z") && d.notificationId == "n1")
        #expect(d.presentation?.badge == 1)  // same notification: not counted twice
        #expect(h.advance(to: at("2026-01-06T13:30:00Z")).isEmpty)  // once
    }

    @Test func snooze_judgedByRulesInForceThen() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n1")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T13:00:00Z"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).kind == .held)
    }

    @Test func snooze_withdrawnMeanwhile_nothing() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n1")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T13:00:00Z"}"#)
        h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"n1"}"#)
        #expect(h.advance(to: at("2026-01-05T14:00:00Z")).isEmpty)
    }

    @Test func snooze_untilAlreadyPast_alertsAgainNow() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n1")
        h.now = at("2026-01-05T12:10:00Z")
        let d = only(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T12:05:00Z"}"#))
        #expect(d.snoozed && d.at == at("2026-01-05T12:10:00Z"))
    }

    /// SPEC §10: a delivered notification alerts again at `until` — also one delivered before the
    /// last deliveries whose content the state keeps: the fold's caller reads it back from the log.
    @Test func snooze_olderThanTheContentKept_isReadBackAndAlertsAgain() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n0", #""subtitle":"First""#)
        for i in 1...(2 * Engine.snoozableLimit + 4) { h.submit("n\(i)", app: i % 2 == 0 ? "com.example.mail" : "com.example.chat") }
        let snooze = #"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T13:00:00Z"}"#
        // Without the read-back the fold has nothing to alert with, and says which submit it needs.
        var bare = h
        bare.supplyFromLog = false
        let needed = bare.events.first { $0.kind == .submit && $0.body["id"] == "n0" }?.seq
        #expect(needed != nil)
        bare.send("snooze", snooze)
        #expect(bare.state().nextDeadline() == nil, "ignored without its content")

        #expect(h.send("snooze", snooze).isEmpty)
        #expect(h.state().nextDeadline() == at("2026-01-05T13:00:00Z"))
        let d = only(h.advance(to: at("2026-01-05T13:30:00Z")))
        #expect(d.kind == .alert && d.snoozed && d.notificationId == "n0" && d.content?["subtitle"] == "First")
        #expect(h.advance(to: at("2026-01-06T13:30:00Z")).isEmpty)  // once
    }

    @Test func snooze_olderThanTheContentKept_untilAlreadyPast_alertsAgainNow() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.submit("n0")
        for i in 1...(2 * Engine.snoozableLimit + 4) { h.submit("n\(i)") }
        h.now = at("2026-01-05T12:10:00Z")
        let d = only(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T12:05:00Z"}"#))
        #expect(d.snoozed && d.notificationId == "n0" && d.at == at("2026-01-05T12:10:00Z"))
    }

    @Test func snooze_unknownNotificationIgnored() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"nope","until":"2026-01-05T13:00:00Z"}"#)
        #expect(h.state().nextDeadline() == nil)
    }

    /// A held notification (SPEC §3 rule 10: "available in Notification Center at once") can be
    /// snoozed: at `until` it alerts again if the Focus has ended (it was in the digest meanwhile),
    /// and is held again, flagged snoozed, if the Focus still holds it.
    @Test func snooze_aHeldNotificationIsSnoozedToo() {
        var h = EngineHarness(authorizingMail: true)
        h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T12:30:00Z"}"#)
        #expect(only(h.submit("h1")).kind == .held)
        #expect(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"h1","until":"2026-01-05T13:00:00Z"}"#).isEmpty)
        let digest = only(h.advance(to: at("2026-01-05T12:30:00Z")))
        #expect(digest.kind == .focusDigest && digest.items.map(\.notification.id) == ["h1"])
        let d = only(h.advance(to: at("2026-01-05T13:00:00Z")))
        #expect(d.kind == .alert && d.snoozed && d.notificationId == "h1" && d.presentation?.badge == 1, "counted once")

        // The Focus still on at `until`: held again (no banner), then in the digest once.
        var g = EngineHarness(authorizingMail: true)
        g.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        g.submit("h1")
        g.send("snooze", #"{"user":"u","app":"com.example.mail","id":"h1","until":"2026-01-05T13:00:00Z"}"#)
        let held = only(g.advance(to: at("2026-01-05T13:00:00Z")))
        #expect(held.kind == .held && held.snoozed && held.presentation?.badge == 1)
        let again = only(g.send("focusOff", #"{"user":"u","focus":"Work"}"#))
        #expect(again.items.map(\.notification.id) == ["h1"] && g.state().badge(of: Self.mail) == 1)
    }

    /// The same for a queued one ("upcoming summary"): at `until` it leaves the summary and is
    /// judged by the rules then (here the app is back on immediate delivery: an alert); a withdraw
    /// before `until` cancels the snooze.
    @Test func snooze_aQueuedNotificationIsJudgedAgainAtUntil() {
        var h = EngineHarness(authorizingMail: true)
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
}
