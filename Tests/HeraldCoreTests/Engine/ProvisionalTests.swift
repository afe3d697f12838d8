// SPEC §3 rule 6: what Keep (Deliver Immediately or in Scheduled Summary) makes of a provisional app's notifications.
import HeraldCore
import Testing

@Suite struct ProvisionalTests {
    static let mail = "com.example.mail"

    /// Keep → Deliver in Scheduled Summary "puts A in U's summary" — and a summary app's Time
    /// Sensitive notifications are not queued (rule 9), nor its communication ones (rule 8), and a
    /// mute makes its notifications quiet (rule 7).
    @Test func rule6_provisionalKeep_summary_isJudgedAsASummaryApp() {
        var h = EngineHarness()
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
    }

    /// Keep → Deliver Immediately "makes later ones quiet", and quiet is "Notification Center
    /// only; no banner, sound, badge or lock screen".
    @Test func rule6_provisionalKeep_immediate_isQuietWithoutABadge() {
        var h = EngineHarness(authorizingMail: true)
        h.authorize(status: "provisional", options: ["alert", "sound", "badge"])
        h.send("provisionalKeep", #"{"user":"u","app":"com.example.mail"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .quiet && d.reason == "provisional_kept" && !d.provisional)
        #expect(d.presentation?.badge == nil && d.presentation?.banner == false)
        #expect(h.state().badge(of: Self.mail) == 0)
    }
}
