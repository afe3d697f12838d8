// SPEC §10 attention budget: at most N banners an hour across apps; Time Sensitive and Critical exempt but counted.
import HeraldCore
import Testing

@Suite struct AttentionBudgetTests {
    static let mail = "com.example.mail"

    @Test func attentionBudget_excessActiveBecomesQuiet() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.send("settings", #"{"user":"u","attentionBudget":2}"#)
        #expect(only(h.submit("n1")).kind == .alert)
        #expect(only(h.submit("n2", app: "com.example.chat")).kind == .alert)  // across apps
        let d = only(h.submit("n3"))
        #expect(d.kind == .quiet && d.reason == "attention_budget")
    }

    @Test func attentionBudget_rollingHour() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.send("settings", #"{"user":"u","attentionBudget":1}"#)
        #expect(only(h.submit("n1")).kind == .alert)
        h.advance(to: T0.adding(.minutes(59)))
        #expect(only(h.submit("n2")).kind == .quiet)
        h.advance(to: T0.adding(.minutes(60)))
        #expect(only(h.submit("n3")).kind == .alert)
    }

    @Test func attentionBudget_timeSensitiveAndCriticalExemptButCounted() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.register("com.example.mail", ["critical"])
        h.authorize(options: ["alert", "sound", "criticalAlert"])
        h.send("settings", #"{"user":"u","attentionBudget":1}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"timeSensitive""#)).kind == .alert)
        #expect(only(h.submit("n2", #""interruptionLevel":"critical""#)).kind == .alert)
        #expect(only(h.submit("n3")).kind == .quiet)  // the exempt ones used the budget
    }

    /// "Time Sensitive and Critical are exempt and still counted": a critical banner alone uses a
    /// budget of one.
    @Test func attentionBudget_aCriticalBannerIsExemptButCounted() {
        var h = EngineHarness()
        h.register(Self.mail, ["critical"])
        h.authorize(options: ["alert", "sound", "criticalAlert"])
        h.send("settings", #"{"user":"u","attentionBudget":1}"#)
        let critical = only(h.submit("c1", #""interruptionLevel":"critical""#))
        #expect(critical.kind == .alert && critical.reason == "critical" && critical.presentation?.overrideSilent == true)
        let d = only(h.submit("n1"))
        #expect(d.kind == .quiet && d.reason == "attention_budget")
    }

    @Test func attentionBudget_nullRemovesIt() {
        var h = EngineHarness.mailAndChatAuthorized()
        h.send("settings", #"{"user":"u","attentionBudget":0}"#)
        #expect(only(h.submit("n1")).kind == .quiet)
        h.send("settings", #"{"user":"u","attentionBudget":null}"#)
        #expect(only(h.submit("n2")).kind == .alert)
    }
}
