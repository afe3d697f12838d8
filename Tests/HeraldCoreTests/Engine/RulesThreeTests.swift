// Rules version "3" (session 27): four places where a review found version "2" departing from
// SPEC §3/§10. Each test checks the new decision and that "2" still decides an old log as it did.
import HeraldCore
import Testing

@Suite struct RulesThreeTests {
    static let mail = "com.example.mail"

    func harness(_ version: String = Engine.currentRulesVersion) -> EngineHarness {
        EngineHarness(rulesVersion: version)
    }

    /// SPEC §10: "Time Sensitive and Critical are exempt and still counted" — a critical banner
    /// alone uses a budget of one.
    @Test func attentionBudget_aCriticalBannerIsExemptButCounted() {
        for (version, next) in [("3", DeliveryKind.quiet), ("2", .alert)] {
            var h = harness(version)
            h.register(Self.mail, ["critical"])
            h.authorize(options: ["alert", "sound", "criticalAlert"])
            h.send("settings", #"{"user":"u","attentionBudget":1}"#)
            let critical = only(h.submit("c1", #""interruptionLevel":"critical""#))
            #expect(critical.kind == .alert && critical.reason == "critical" && critical.presentation?.overrideSilent == true)
            let d = only(h.submit("n1"))
            #expect(d.kind == next, "rules \(version): \(d.kind)")
            if version == "3" { #expect(d.reason == "attention_budget") }
        }
    }

    /// SPEC §3 rule 6: Keep → Deliver in Scheduled Summary "puts A in U's summary" — and a summary
    /// app's Time Sensitive notifications are not queued (rule 9), nor its communication ones
    /// (rule 8), and a mute makes its notifications quiet (rule 7).
    @Test func rule6_provisionalKeep_summary_isJudgedAsASummaryApp() {
        var h = harness()
        h.register(Self.mail, ["communication"])
        h.authorize(status: "provisional", options: ["alert", "sound", "badge"])
        h.send("provisionalKeep", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        let active = only(h.submit("n1"))
        #expect(active.kind == .queued && active.reason == "provisional_kept_summary")
        let ts = only(h.submit("t1", #""interruptionLevel":"timeSensitive""#))
        #expect(ts.kind == .alert && ts.timeSensitiveIntro, "Time Sensitive overrides the summary: \(ts.kind) \(ts.reason)")
        let chat = only(h.submit("c1", #""communication":{"sender":"alice"}"#))
        #expect(chat.kind == .alert, "communication is never summarized: \(chat.kind) \(chat.reason)")
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        let muted = only(h.submit("n2"))
        #expect(muted.kind == .quiet && muted.reason == "muted")
        let s = only(h.advance(to: at("2026-01-05T18:00:00Z")))
        #expect(s.kind == .summary && s.items.map(\.notification.id) == ["n1"])

        var old = harness("2")
        old.register(Self.mail, ["communication"])
        old.authorize(status: "provisional", options: ["alert", "sound", "badge"])
        old.send("provisionalKeep", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(old.submit("t1", #""interruptionLevel":"timeSensitive""#)).kind == .queued, "rules 2 queued every level")
    }

    /// SPEC §3 Badge: "Every delivery that the user's badge setting allows carries badge" — a
    /// snooze that ends expired no longer counts, and its delivery says so.
    @Test func badge_aSnoozeThatEndsExpiredCarriesTheLoweredCount() {
        for version in ["3", "2"] {
            var h = harness(version)
            h.authorize(options: ["alert", "sound", "badge"])
            #expect(only(h.submit("e1", #""expiresAt":"2026-01-05T12:35:00Z""#)).presentation?.badge == 1)
            h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"e1","until":"2026-01-05T12:40:00Z"}"#)
            let d = only(h.advance(to: at("2026-01-05T12:45:00Z")))
            #expect(d.kind == .expired && d.snoozed)
            #expect(d.presentation?.badge == (version == "3" ? 0 : nil), "rules \(version)")
            #expect(h.state().badge(of: Self.mail) == 0)
        }
    }

    /// SPEC §3 Badge: the number of delivered, unopened notifications. An `opened` for one that
    /// was withdrawn (the badge already dropped) or suppressed (it never counted) lowers nothing.
    @Test func badge_openedOfAWithdrawnOrSuppressedNotificationLowersNothing() {
        for (version, expected) in [("3", 2), ("2", 1)] {
            var h = harness(version)
            h.authorize(options: ["alert", "sound", "badge"])
            h.submit("a1")
            h.submit("a2")
            let w = only(h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"a1"}"#))
            #expect(w.kind == .withdrawn && w.presentation?.badge == 1)
            h.send("opened", #"{"user":"u","app":"com.example.mail","id":"a1"}"#)
            #expect(only(h.submit("m1", #""marketing":true"#)).kind == .suppressed)
            h.send("opened", #"{"user":"u","app":"com.example.mail","id":"m1"}"#)
            let a3 = only(h.submit("a3"))
            #expect(a3.presentation?.badge == expected, "rules \(version): a2 and a3 unopened")
        }
    }
}
