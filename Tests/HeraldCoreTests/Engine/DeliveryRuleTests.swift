// SPEC §3 rules 1–11 in order, the defaults, and how the rules interact.
import HeraldCore
import Testing

@Suite struct DeliveryRuleTests {
    static let app = "com.example.mail"

    func authorized(_ options: [String] = ["alert", "sound", "badge"]) -> EngineHarness {
        var h = EngineHarness()
        h.authorize(options: options)
        return h
    }

    // Defaults.

    @Test func default_appIsNotDetermined_suppresses() {
        var h = EngineHarness()
        let d = only(h.submit("n1"))
        #expect(d.kind == .suppressed && d.reason == "not_authorized")
    }

    @Test func default_authorizationOptionsTurnOnExactlyAlertSoundBadge() {
        var h = authorized(["alert"])
        let p = only(h.submit("n1")).presentation
        #expect(p == Presentation(banner: true, sound: false, badge: nil, lockScreen: true, notificationCenter: true))
    }

    @Test func default_badgeAbsentWhenBadgesOff() {
        var h = authorized(["alert", "sound"])
        #expect(only(h.submit("n1")).presentation?.badge == nil)
        #expect(only(h.submit("n1b")).body["presentation"]?["badge"] == nil)
    }

    @Test func default_showPreviewsIsWhenUnlocked_andNotificationsAllowed() {
        let s = UserState(user: "u")
        #expect(s.globalSettings.showPreviews == .whenUnlocked)
        #expect(s.globalSettings.allowNotifications)
        #expect(s.globalSettings.attentionBudget == nil)
    }

    // Rule 1.

    @Test func rule1_withdrawn_pendingGetsWithdrawnDelivery() {
        var h = authorized()
        #expect(h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        let d = only(h.send("withdraw", #"{"app":"com.example.mail","id":"n1","user":"u"}"#))
        #expect(d.kind == .withdrawn && d.reason == "withdrawn" && d.notificationId == "n1")
        #expect(h.advance(to: at("2026-01-05T14:00:00Z")).isEmpty)
    }

    @Test func rule1_withdrawn_beforeSubmitArrives_nothingDelivered() {
        var h = authorized()
        #expect(h.send("withdraw", #"{"app":"com.example.mail","id":"n1","user":"u"}"#).isEmpty)
        let d = only(h.submit("n1"))
        #expect(d.kind == .withdrawn && d.reason == "withdrawn_before_arrival")
        #expect(d.presentation == nil && d.notification == nil)
    }

    @Test func rule1_withdrawn_afterDelivery_removesAndLowersBadge() {
        var h = authorized()
        h.submit("n1")
        let d = only(h.send("withdraw", #"{"app":"com.example.mail","id":"n1","user":"u"}"#))
        #expect(d.kind == .withdrawn && d.reason == "withdrawn_after_delivery")
        #expect(d.presentation?.badge == 0)
    }

    // Rule 2.

    @Test func rule2_expired_atDecisionTime() {
        var h = authorized()
        let d = only(h.submit("n1", #""expiresAt":"2026-01-05T11:00:00Z""#))
        #expect(d.kind == .expired && d.reason == "expired")
    }

    @Test func rule2_expired_isStrictlyAfterExpiresAt() {
        var h = authorized()
        #expect(only(h.submit("n1", #""expiresAt":"2026-01-05T12:00:00Z""#)).kind == .alert)
    }

    @Test func rule2_expired_deferredJudgedAtDeliverAt() {
        var h = authorized()
        h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z","expiresAt":"2026-01-05T13:00:00Z""#)
        #expect(only(h.advance(to: at("2026-01-05T13:30:00Z"))).kind == .alert)
    }

    // Rule 3.

    @Test func rule3_notAuthorized_notDetermined_suppresses() {
        var h = EngineHarness()
        #expect(only(h.submit("n1")).reason == "not_authorized")
    }

    @Test func rule3_notAuthorized_denied_suppresses() {
        var h = EngineHarness()
        h.authorize(status: "denied", options: [])
        let d = only(h.submit("n1"))
        #expect(d.kind == .suppressed && d.reason == "not_authorized")
    }

    @Test func rule3_notAuthorized_criticalWithEntitlementAndCriticalAlert_passes() {
        var h = EngineHarness()
        h.register(Self.app, ["critical"])
        h.authorize(status: "denied", options: ["criticalAlert"])
        let d = only(h.submit("n1", #""interruptionLevel":"critical""#))
        #expect(d.kind == .alert && d.reason == "critical")
    }

    @Test func rule3_notAuthorized_criticalWithoutCriticalAlert_suppressed() {
        var h = EngineHarness()
        h.register(Self.app, ["critical"])
        h.authorize(status: "denied", options: [])
        #expect(only(h.submit("n1", #""interruptionLevel":"critical""#)).reason == "not_authorized")
    }

    // Rule 4.

    @Test func rule4_marketing_withoutConsent_suppressed() {
        var h = authorized()
        let d = only(h.submit("n1", #""marketing":true"#))
        #expect(d.kind == .suppressed && d.reason == "marketing_not_consented")
    }

    @Test func rule4_marketing_withConsent_delivered() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","marketingConsent":true}"#)
        #expect(only(h.submit("n1", #""marketing":true"#)).kind == .alert)
    }

    // Rule 5.

    @Test func rule5_critical_alertsDuringFocus() {
        var h = EngineHarness()
        h.register(Self.app, ["critical"])
        h.authorize(options: ["alert", "criticalAlert"])
        h.send("focusOn", #"{"user":"u","focus":"Sleep"}"#)
        let d = only(h.submit("n1", #""interruptionLevel":"critical""#))
        #expect(d.kind == .alert && d.presentation?.overrideSilent == true && d.presentation?.sound == true)
    }

    @Test func rule5_critical_alertsWhileMuted() {
        var h = EngineHarness()
        h.register(Self.app, ["critical"])
        h.authorize(options: ["alert", "criticalAlert"])
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"critical""#)).kind == .alert)
        #expect(only(h.submit("n2")).kind == .quiet)
    }

    @Test func rule5_critical_alertsWhenSilencedAll() {
        var h = EngineHarness()
        h.register(Self.app, ["critical"])
        h.authorize(options: ["alert", "criticalAlert"])
        h.send("settings", #"{"user":"u","allowNotifications":false}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"critical""#)).kind == .alert)
    }

    // Rule 6.

    @Test func rule6_provisional_quietAndFlagged() {
        var h = authorized()
        h.authorize(status: "provisional", options: ["alert", "sound", "badge"])
        let d = only(h.submit("n1"))
        #expect(d.kind == .quiet && d.provisional && d.reason == "provisional")
        #expect(d.presentation == Presentation(notificationCenter: true))
        #expect(d.body["provisional"] == .bool(true))
    }

    @Test func rule6_provisionalKeep_immediate_laterOnesQuietNotFlagged() {
        var h = EngineHarness()
        h.authorize(status: "provisional", options: ["alert", "sound", "badge"])
        h.send("provisionalKeep", #"{"user":"u","app":"com.example.mail","delivery":"immediate"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .quiet && !d.provisional && d.reason == "provisional_kept")
    }

    @Test func rule6_provisionalKeep_immediate_untilSettingsChange() {
        var h = EngineHarness()
        h.authorize(status: "provisional", options: [])
        h.send("provisionalKeep", #"{"user":"u","app":"com.example.mail"}"#)
        h.send("settings", #"{"user":"u","app":"com.example.mail","alert":true,"sound":true}"#)
        #expect(h.state().authorization(of: Self.app) == .authorized)
        #expect(only(h.submit("n1")).kind == .alert)
    }

    @Test func rule6_provisionalKeep_summary_putsAppInSummary() {
        var h = EngineHarness()
        h.authorize(status: "provisional", options: [])
        h.send("provisionalKeep", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .queued && d.reason == "provisional_kept_summary")
        #expect(d.summaryAt == at("2026-01-05T18:00:00Z"))
        let s = only(h.advance(to: at("2026-01-05T18:00:00Z")))
        #expect(s.kind == .summary && s.items.map(\.notification.id) == ["n1"])
    }

    @Test func rule6_provisionalTurnOff_setsDenied() {
        var h = EngineHarness()
        h.authorize(status: "provisional", options: [])
        h.send("provisionalTurnOff", #"{"user":"u","app":"com.example.mail"}"#)
        #expect(h.state().authorization(of: Self.app) == .denied)
        #expect(only(h.submit("n1")).reason == "not_authorized")
    }

    // Rule 7.

    @Test func rule7_muted_quietUntilMuteEnds() {
        var h = authorized()
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .quiet && d.reason == "muted")
        h.advance(to: at("2026-01-05T13:00:00Z"))
        #expect(only(h.submit("n2")).kind == .alert)
    }

    @Test func rule7_muted_otherAppsUnaffected() {
        var h = authorized()
        h.authorize("u", "com.example.chat")
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        #expect(only(h.submit("n1", app: "com.example.chat")).kind == .alert)
    }

    // Rule 8.

    static let chat = "com.example.chat"

    func chatWithFocus() -> EngineHarness {
        var h = EngineHarness()
        h.register(Self.chat, ["communication"])
        h.authorize("u", Self.chat)
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowedPeople":["alice"],"allowTimeSensitive":true}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        return h
    }

    @Test func rule8_communication_fromAllowedPerson_breaksThroughFocus() {
        var h = chatWithFocus()
        let d = only(h.submit("m1", app: Self.chat, #""communication":{"sender":"alice"}"#))
        #expect(d.kind == .alert && d.reason == "communication_allowed_person")
    }

    @Test func rule8_communication_fromOtherPerson_held() {
        var h = chatWithFocus()
        #expect(only(h.submit("m1", app: Self.chat, #""communication":{"sender":"bob"}"#)).kind == .held)
    }

    @Test func rule8_communication_senderDecides_evenForTimeSensitive() {
        var h = chatWithFocus()
        #expect(only(h.submit("m1", app: Self.chat, #""communication":{"sender":"bob"},"interruptionLevel":"timeSensitive""#)).kind == .held)
    }

    @Test func rule8_communication_neverSummarized() {
        var h = chatWithFocus()
        h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
        h.send("settings", #"{"user":"u","app":"com.example.chat","delivery":"summary"}"#)
        #expect(only(h.submit("m1", app: Self.chat, #""communication":{"sender":"bob"}"#)).kind == .alert)
        #expect(only(h.submit("m2", app: Self.chat)).kind == .queued)
    }

    @Test func rule8_communication_withoutEntitlement_isOrdinary() {
        var h = EngineHarness()
        h.authorize("u", Self.chat)
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowedPeople":["alice"]}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("m1", app: Self.chat, #""communication":{"sender":"alice"}"#)).kind == .held)
    }

    // Rule 9.

    @Test func rule9_summary_queuedAndVisibleAsUpcoming() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .queued && d.reason == "summary_queued")
        #expect(d.body["summaryAt"] == .string("2026-01-05T18:00:00Z"))
        #expect(d.presentation?.banner == false && d.presentation?.notificationCenter == true)
    }

    // Rule 10.

    @Test func rule10_focus_heldThenOneDigestWhenFocusEnds() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T14:00:00Z"}"#)
        #expect(only(h.submit("n1")).kind == .held)
        #expect(only(h.submit("n2")).kind == .held)
        let ds = h.advance(to: at("2026-01-05T15:00:00Z"))
        let d = only(ds)
        #expect(d.kind == .focusDigest && d.reason == "focus_ended" && d.focus == "Work")
        #expect(d.at == at("2026-01-05T14:00:00Z"))
        #expect(d.items.map(\.notification.id) == ["n1", "n2"])
    }

    @Test func rule10_focus_endingWithNothingHeld_noDigest() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(h.send("focusOff", #"{"user":"u","focus":"Work"}"#).isEmpty)
    }

    @Test func rule10_focus_allowedAppBreaksThrough() {
        var h = authorized()
        h.send("focusDefine", #"{"user":"u","focus":"Work","allowedApps":["com.example.mail"]}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .alert && d.reason == "focus_allowed_app")
    }

    @Test func rule10_focus_manualOffEmitsDigest() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        h.submit("n1")
        let d = only(h.send("focusOff", #"{"user":"u","focus":"Work"}"#))
        #expect(d.kind == .focusDigest && d.items.count == 1)
    }

    // Rule 11.

    @Test func rule11_normal_alertWithAllowedPresentation() {
        var h = authorized(["alert", "badge"])
        h.send("settings", #"{"user":"u","app":"com.example.mail","lockScreen":false}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .alert && d.reason == "delivered")
        #expect(d.presentation == Presentation(banner: true, sound: false, badge: 1, lockScreen: false, notificationCenter: true))
    }

    @Test func rule11_normal_alertsOffMeansQuiet() {
        var h = authorized(["badge"])
        let d = only(h.submit("n1"))
        #expect(d.kind == .quiet && d.reason == "alerts_off")
    }

    @Test func rule11_normal_passiveIsQuiet() {
        var h = authorized()
        #expect(only(h.submit("n1", #""interruptionLevel":"passive""#)).kind == .quiet)
    }

    // Order.

    @Test func rules_traceListsRulesInOrder() {
        var h = authorized()
        let d = only(h.submit("n1"))
        #expect(d.trace.map(\.rule) == ["withdrawn", "expired", "not_authorized", "silence_all", "marketing", "critical",
                                         "provisional", "muted", "collapse", "communication", "summary", "focus", "normal"])
        #expect(d.trace.last == RuleStep("normal", "decided"))
        #expect(d.rulesVersion == Engine.currentRulesVersion)
    }

    @Test func rules_expiredBeatsNotAuthorized() {
        var h = EngineHarness()
        #expect(only(h.submit("n1", #""expiresAt":"2026-01-05T11:00:00Z""#)).kind == .expired)
    }

    @Test func rules_notAuthorizedBeatsMarketing() {
        var h = EngineHarness()
        #expect(only(h.submit("n1", #""marketing":true"#)).reason == "not_authorized")
    }

    @Test func rules_provisionalBeatsMuteAndFocus() {
        var h = EngineHarness()
        h.authorize(status: "provisional", options: [])
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("n1")).reason == "provisional")
    }

    @Test func rules_muteBeatsSummary() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        #expect(only(h.submit("n1")).reason == "muted")
    }

    @Test func rules_summaryBeatsFocus() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.submit("n1")).kind == .queued)
    }
}
