// SPEC §2: each row and column of the interruption-level table.
import HeraldCore
import Testing

@Suite struct InterruptionLevelTests {
    func authorized() -> EngineHarness {
        var h = EngineHarness()
        h.register("com.example.mail", ["critical"])
        h.authorize(options: ["alert", "sound", "badge", "criticalAlert"])
        return h
    }

    @Test func level_passive_quietNotificationCenterOnly() {
        var h = authorized()
        let d = only(h.submit("n1", #""interruptionLevel":"passive""#))
        #expect(d.kind == .quiet)
        #expect(d.reason == "passive")
        #expect(d.presentation?.banner == false && d.presentation?.sound == false)
        #expect(d.presentation?.notificationCenter == true)
    }

    @Test func level_active_isDefault_andAlerts() {
        var h = authorized()
        let d = only(h.submit("n1"))
        #expect(d.kind == .alert)
        #expect(d.notification?.level == .active)
        #expect(d.presentation == Presentation(banner: true, sound: true, badge: 1, lockScreen: true, notificationCenter: true))
    }

    @Test func level_timeSensitive_alerts() {
        var h = authorized()
        let d = only(h.submit("n1", #""interruptionLevel":"timeSensitive""#))
        #expect(d.kind == .alert)
        #expect(d.presentation?.overrideSilent == false)
    }

    @Test func level_critical_alertsAndOverridesSilent() {
        var h = authorized()
        let d = only(h.submit("n1", #""interruptionLevel":"critical""#))
        #expect(d.kind == .alert)
        #expect(d.reason == "critical")
        #expect(d.presentation?.overrideSilent == true)
    }

    @Test func level_passive_doesNotOverrideSummary() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"passive""#)).kind == .queued)
    }

    @Test func level_active_doesNotOverrideSummary() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("n1")).kind == .queued)
    }

    @Test func level_timeSensitive_overridesSummary() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"timeSensitive""#)).kind == .alert)
    }

    @Test func level_critical_overridesSummary() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"critical""#)).kind == .alert)
    }

    @Test func level_passive_doesNotBreakThroughFocus() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"passive""#)).kind == .held)
    }

    @Test func level_active_doesNotBreakThroughFocus() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .held)
        #expect(d.focus == "Work")
        #expect(d.presentation?.banner == false && d.presentation?.sound == false)
    }

    @Test func level_timeSensitive_breaksThroughFocusThatAllowsIt() {
        var h = authorized()
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowTimeSensitive":true}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        let d = only(h.submit("n1", #""interruptionLevel":"timeSensitive""#))
        #expect(d.kind == .alert)
        #expect(d.reason == "focus_allows_time_sensitive")
    }

    @Test func level_timeSensitive_heldByFocusThatDisallowsIt() {
        var h = authorized()
        h.send("focusDefine", #"{"user":"u","focus":"Sleep","allowTimeSensitive":false}"#)
        h.send("focusOn", #"{"user":"u","focus":"Sleep"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"timeSensitive""#)).kind == .held)
    }

    @Test func level_timeSensitive_heldWhenUserTurnedTimeSensitiveOffForApp() {
        var h = authorized()
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowTimeSensitive":true}"#)
        h.send("settings", #"{"user":"u","app":"com.example.mail","timeSensitive":false}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        let d = only(h.submit("n1", #""interruptionLevel":"timeSensitive""#))
        #expect(d.kind == .held)
        #expect(d.trace.contains(RuleStep("time_sensitive_setting", "downgraded")))
    }

    @Test func level_timeSensitive_vsSummary_vsFocus_vsAppSetting() {
        // Summary app, Focus that allows TS: TS overrides the summary and breaks through.
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowTimeSensitive":true}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("a", #""interruptionLevel":"timeSensitive""#)).kind == .alert)
        // Focus disallows TS: TS still skips the summary but is held by the Focus.
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowTimeSensitive":false}"#)
        #expect(only(h.submit("b", #""interruptionLevel":"timeSensitive""#)).kind == .held)
        // The user turned TS off for the app: it is an active notification → summary.
        h.send("settings", #"{"user":"u","app":"com.example.mail","timeSensitive":false}"#)
        #expect(only(h.submit("c", #""interruptionLevel":"timeSensitive""#)).kind == .queued)
        // No Focus, TS off for the app, immediate delivery: alerts as active, no TS intro.
        h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"immediate"}"#)
        let d = only(h.submit("d", #""interruptionLevel":"timeSensitive""#))
        #expect(d.kind == .alert && !d.timeSensitiveIntro)
    }

    @Test func level_critical_breaksThroughFocus() {
        var h = authorized()
        h.send("focusDefine", #"{"user":"u","focus":"Sleep","allowTimeSensitive":false}"#)
        h.send("focusOn", #"{"user":"u","focus":"Sleep"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"critical""#)).kind == .alert)
    }

    @Test func level_nonCritical_doNotOverrideSilent() {
        var h = authorized()
        for (i, l) in ["passive", "active", "timeSensitive"].enumerated() {
            #expect(only(h.submit("n\(i)", #""interruptionLevel":"\#(l)""#)).presentation?.overrideSilent == false)
        }
    }

    @Test func level_critical_needsUserCriticalAlertAuthorization() {
        var h = EngineHarness()
        h.register("com.example.mail", ["critical"])
        h.authorize(options: ["alert", "sound"])
        h.send("focusOn", #"{"user":"u","focus":"Sleep"}"#)
        let d = only(h.submit("n1", #""interruptionLevel":"critical""#))
        #expect(d.kind == .held)  // downgraded to active, so the Focus holds it
        #expect(d.trace.contains(RuleStep("critical", "downgraded")))
    }
}
