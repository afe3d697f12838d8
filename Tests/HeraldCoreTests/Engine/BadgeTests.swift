// SPEC §3 Badge: the number of delivered, unopened notifications, and the deliveries that carry it.
import HeraldCore
import Testing

@Suite struct BadgeTests {
    static let mail = "com.example.mail"

    /// "Every delivery that the user's badge setting allows carries badge": a snooze that ends
    /// expired no longer counts, and its delivery says so.
    @Test func badge_aSnoozeThatEndsExpiredCarriesTheLoweredCount() {
        var h = EngineHarness()
        h.authorize(options: ["alert", "sound", "badge"])
        #expect(only(h.submit("e1", #""expiresAt":"2026-01-05T12:35:00Z""#)).presentation?.badge == 1)
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"e1","until":"2026-01-05T12:40:00Z"}"#)
        let d = only(h.advance(to: at("2026-01-05T12:45:00Z")))
        #expect(d.kind == .expired && d.snoozed)
        #expect(d.presentation?.badge == 0)
        #expect(h.state().badge(of: Self.mail) == 0)
    }

    /// An `opened` for one that was withdrawn (the badge already dropped) or suppressed (it never
    /// counted) lowers nothing.
    @Test func badge_openedOfAWithdrawnOrSuppressedNotificationLowersNothing() {
        var h = EngineHarness()
        h.authorize(options: ["alert", "sound", "badge"])
        h.submit("a1")
        h.submit("a2")
        let w = only(h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"a1"}"#))
        #expect(w.kind == .withdrawn && w.presentation?.badge == 1)
        h.send("opened", #"{"user":"u","app":"com.example.mail","id":"a1"}"#)
        #expect(only(h.submit("m1", #""marketing":true"#)).kind == .suppressed)
        h.send("opened", #"{"user":"u","app":"com.example.mail","id":"m1"}"#)
        let a3 = only(h.submit("a3"))
        #expect(a3.presentation?.badge == 2, "a2 and a3 unopened")
    }

    /// An `opened` without an id opens the newest counted one, so withdrawing it later does not
    /// lower the count a second time.
    @Test func badge_openedWithoutAnIdMarksTheNewestCountedNotificationOpened() {
        var h = EngineHarness(authorizingMail: true)
        #expect(only(h.submit("n1")).presentation?.badge == 1)
        h.send("opened", #"{"user":"u","app":"com.example.mail"}"#)
        #expect(only(h.submit("n2")).presentation?.badge == 1)
        let w = only(h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"n1"}"#))
        #expect(w.kind == .withdrawn)
        #expect(w.presentation?.badge == nil, "n1 was opened already")
        #expect(only(h.submit("n3")).presentation?.badge == 2, "n2 and n3 unopened")
    }
}
