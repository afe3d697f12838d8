// SPEC §3 delivery rules beyond the interruption levels: summary firing, collapse, idempotency in the fold,
// badges, hidden previews, the Time Sensitive introduction, deferred delivery, silence all.
import HeraldCore
import Testing

fileprivate func authorized() -> EngineHarness {
    var h = EngineHarness()
    h.authorize(options: ["alert", "sound", "badge"])
    return h
}

fileprivate func summaryApp() -> EngineHarness {
    var h = authorized()
    h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
    return h
}

@Suite struct SummaryFiringTests {
    @Test func summaryFiring_itemsByRelevanceThenArrival() {
        var h = summaryApp()
        h.authorize("u", "com.example.news")
        h.send("settings", #"{"user":"u","app":"com.example.news","delivery":"summary"}"#)
        h.submit("a", #""relevanceScore":0.2,"threadId":"t1""#)
        h.submit("b")
        h.submit("c", app: "com.example.news", #""relevanceScore":0.9"#)
        h.submit("d", #""relevanceScore":0.2"#)
        h.submit("e", #""relevanceScore":0"#)
        let s = only(h.advance(to: at("2026-01-05T18:00:00Z")))
        #expect(s.kind == .summary && s.reason == "summary")
        #expect(s.at == at("2026-01-05T18:00:00Z"))
        #expect(s.items.map(\.notification.id) == ["c", "a", "d", "b", "e"])
        let first = s.body["items"]?.arrayValue?[1]
        #expect(first?["app"] == .string("com.example.mail"))
        #expect(first?["threadId"] == .string("t1"))
        #expect(first?["content"]?["title"] == .string("Hello"))
    }

    @Test func summaryFiring_emptySummaryEmitsNothing() {
        var h = summaryApp()
        #expect(h.advance(to: at("2026-01-06T18:00:00Z")).isEmpty)
        #expect(h.state().nextDeadline() == nil)
    }

    @Test func summaryFiring_defaultTimesAre0800And1800UTC() {
        var h = summaryApp()
        h.now = at("2026-01-05T19:00:00Z")
        let q = only(h.submit("n1"))
        #expect(q.summaryAt == at("2026-01-06T08:00:00Z"))
        #expect(h.advance(to: at("2026-01-06T07:59:59Z")).isEmpty)
        #expect(only(h.advance(to: at("2026-01-06T08:00:00Z"))).kind == .summary)
    }

    @Test func summaryFiring_usesUserSchedule() {
        var h = summaryApp()
        h.send("summarySchedule", #"{"user":"u","times":["07:30","21:00"],"timeZone":"Europe/Berlin"}"#)
        #expect(only(h.submit("n1")).summaryAt == at("2026-01-05T20:00:00Z"))
    }

    @Test func summaryFiring_expiryOfQueuedItemBeforeItsSummary() {
        var h = summaryApp()
        h.submit("n1", #""expiresAt":"2026-01-05T15:00:00Z""#)
        h.submit("n2")
        let ds = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(ds.map(\.kind) == [.expired, .summary])
        #expect(ds[0].at == at("2026-01-05T15:00:00.001Z") && ds[0].notificationId == "n1")
        #expect(ds[1].items.map(\.notification.id) == ["n2"])
    }

    @Test func summaryFiring_itemExpiringExactlyAtSummaryIsIncluded() {
        var h = summaryApp()
        h.submit("n1", #""expiresAt":"2026-01-05T18:00:00Z""#)
        #expect(only(h.advance(to: at("2026-01-05T19:00:00Z"))).items.count == 1)
    }

    @Test func expiry_heldItemExpiresBeforeFocusEnds_notInDigest() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T16:00:00Z"}"#)
        h.submit("n1", #""expiresAt":"2026-01-05T13:00:00Z""#)
        h.submit("n2")
        let ds = h.advance(to: at("2026-01-05T17:00:00Z"))
        #expect(ds.map(\.kind) == [.expired, .focusDigest])
        #expect(ds[0].presentation?.badge == 1)  // the expired one no longer counts
        #expect(ds[1].items.map(\.notification.id) == ["n2"])
    }

    @Test func withdraw_queuedItemLeavesTheSummary() {
        var h = summaryApp()
        h.submit("n1"); h.submit("n2")
        #expect(only(h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"n1"}"#)).kind == .withdrawn)
        #expect(only(h.advance(to: at("2026-01-05T18:00:00Z"))).items.map(\.notification.id) == ["n2"])
    }
}

@Suite struct CollapseOfPendingAndDeliveredTests {
    @Test func collapse_pendingQueuedIsReplaced() {
        var h = summaryApp()
        h.submit("old", #""collapseId":"score""#)
        let ds = h.submit("new", #""collapseId":"score""#)
        #expect(ds.map(\.kind) == [.replaced, .queued])
        #expect(ds[0].notificationId == "old" && ds[0].reason == "replaced_by_newer")
        #expect(only(h.advance(to: at("2026-01-05T18:00:00Z"))).items.map(\.notification.id) == ["new"])
    }

    @Test func collapse_pendingDeferredIsReplaced() {
        var h = authorized()
        h.submit("old", #""collapseId":"k","deliverAt":"2026-01-05T13:00:00Z""#)
        #expect(h.submit("new", #""collapseId":"k""#).map(\.kind) == [.replaced, .alert])
        #expect(h.advance(to: at("2026-01-05T14:00:00Z")).isEmpty)
    }

    @Test func collapse_pendingHeldIsReplaced() {
        var h = authorized()
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        h.submit("old", #""collapseId":"k""#)
        #expect(h.submit("new", #""collapseId":"k""#).map(\.kind) == [.replaced, .held])
        #expect(only(h.send("focusOff", #"{"user":"u","focus":"Work"}"#)).items.map(\.notification.id) == ["new"])
    }

    @Test func collapse_alreadyDelivered_newOneQuietWithReplaces() {
        var h = authorized()
        h.submit("old", #""collapseId":"k""#)
        let d = only(h.submit("new", #""collapseId":"k""#))
        #expect(d.kind == .quiet && d.replaces == "old" && d.reason == "collapsed_into_delivered")
        #expect(d.body["replaces"] == .string("old"))
        #expect(d.presentation?.badge == 1)  // one thing, one notification
    }

    @Test func collapse_alreadyDelivered_timeSensitiveStillAlerts() {
        var h = authorized()
        h.submit("old", #""collapseId":"k""#)
        let d = only(h.submit("new", #""collapseId":"k","interruptionLevel":"timeSensitive""#))
        #expect(d.kind == .alert && d.replaces == "old")
    }

    @Test func collapse_alreadyDelivered_criticalStillAlerts() {
        var h = EngineHarness()
        h.register("com.example.mail", ["critical"])
        h.authorize(options: ["alert", "criticalAlert"])
        h.submit("old", #""collapseId":"k""#)
        let d = only(h.submit("new", #""collapseId":"k","interruptionLevel":"critical""#))
        #expect(d.kind == .alert && d.replaces == "old" && d.presentation?.overrideSilent == true)
    }
}

@Suite struct IdempotencyInTheFoldTests {
    @Test func idempotency_duplicateOfPendingIgnoredByFold() {
        // The runtime acks a duplicate (app, id) with duplicate: true and stores nothing;
        // should one reach the fold anyway while the original is pending, it is ignored.
        var h = authorized()
        h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#)
        #expect(h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).presentation?.badge == 1)
    }

    @Test func idempotency_draftCarriesKey() {
        let a = Engine().admit(op: "submit", request: try! JSONValue.parse(#"{"id":"n1","app":"a.b","user":"u"}"#), apps: AppRegistry())
        guard case .accepted(let acc) = a else { Issue.record("rejected"); return }
        #expect(acc.events.first?.app == "a.b" && acc.events.first?.notificationId == "n1")
    }
}

@Suite struct BadgeCountTests {
    @Test func badge_countsDeliveredUnopened() {
        var h = authorized()
        #expect(only(h.submit("n1")).presentation?.badge == 1)
        #expect(only(h.submit("n2")).presentation?.badge == 2)
        #expect(h.state().badge(of: "com.example.mail") == 2)
    }

    @Test func badge_openedLowers() {
        var h = authorized()
        h.submit("n1"); h.submit("n2")
        h.send("opened", #"{"user":"u","app":"com.example.mail","id":"n1"}"#)
        h.send("opened", #"{"user":"u","app":"com.example.mail","id":"n1"}"#)  // twice: counts once
        #expect(h.state().badge(of: "com.example.mail") == 1)
        #expect(only(h.submit("n3")).presentation?.badge == 2)
    }

    @Test func badge_clearSetsZeroAndEmitsOneCleared() {
        var h = authorized()
        h.submit("n1"); h.submit("n2")
        let d = only(h.send("badgeClear", #"{"user":"u","app":"com.example.mail"}"#))
        #expect(d.kind == .cleared && d.app == "com.example.mail" && d.presentation?.badge == 0)
        #expect(h.state().badge(of: "com.example.mail") == 0)
        #expect(only(h.submit("n3")).presentation?.badge == 1)
    }

    @Test func badge_provisionalDoesNotCount() {
        var h = EngineHarness()
        h.authorize(status: "provisional", options: ["badge"])
        #expect(only(h.submit("n1")).presentation?.badge == nil)
        #expect(h.state().badge(of: "com.example.mail") == 0)
    }
}

@Suite struct HiddenPreviewTests {
    @Test func hiddenPreviews_never_placeholderOnly() {
        var h = authorized()
        h.send("settings", #"{"user":"u","showPreviews":"never"}"#)
        let c = only(h.submit("n1")).body["content"]
        #expect(c?["body"] == .string("New mail"))
        #expect(c?["title"] == nil && c?["subtitle"] == nil)
    }

    @Test func hiddenPreviews_never_withoutPlaceholderSaysNotification() {
        var h = authorized()
        h.send("settings", #"{"user":"u","showPreviews":"never"}"#)
        let d = only(h.send("submit", #"{"id":"n1","app":"com.example.mail","user":"u","title":"Secret","body":"Text"}"#))
        #expect(d.body["content"]?["body"] == .string("Notification"))
        #expect(d.body["content"]?["title"] == nil)
    }

    @Test func hiddenPreviews_whenUnlocked_sendsBoth() {
        var h = authorized()
        let c = only(h.submit("n1")).body["content"]
        #expect(c?["title"] == .string("Hello") && c?["body"] == .string("World"))
        #expect(c?["hiddenPreviewsBodyPlaceholder"] == .string("New mail"))
    }

    @Test func hiddenPreviews_always_fullContentOnly() {
        var h = authorized()
        h.send("settings", #"{"user":"u","showPreviews":"always"}"#)
        let c = only(h.submit("n1")).body["content"]
        #expect(c?["title"] == .string("Hello") && c?["hiddenPreviewsBodyPlaceholder"] == nil)
    }
}

@Suite struct TimeSensitiveIntroTests {
    @Test func timeSensitiveIntro_firstDeliveryOfAppOnly() {
        var h = authorized()
        h.authorize("u", "com.example.cal")
        let a = only(h.submit("n1", #""interruptionLevel":"timeSensitive""#))
        let b = only(h.submit("n2", #""interruptionLevel":"timeSensitive""#))
        let c = only(h.submit("n3", app: "com.example.cal", #""interruptionLevel":"timeSensitive""#))
        #expect(a.timeSensitiveIntro && !b.timeSensitiveIntro && c.timeSensitiveIntro)
        #expect(a.body["timeSensitiveIntro"] == .bool(true) && b.body["timeSensitiveIntro"] == nil)
    }

    @Test func timeSensitiveIntro_notForActive() {
        var h = authorized()
        #expect(!only(h.submit("n1")).timeSensitiveIntro)
    }
}

@Suite struct DeferredDeliveryTests {
    @Test func deferred_decidedAtDeliverAt_withSettingsThen() {
        var h = authorized()
        #expect(h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        #expect(h.state().nextDeadline() == at("2026-01-05T13:00:00Z"))
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)  // Focus judged then, not at submission
        let d = only(h.advance(to: at("2026-01-05T13:05:00Z")))
        #expect(d.kind == .held && d.at == at("2026-01-05T13:00:00Z"))
    }

    @Test func deferred_deliverAtInPastIsImmediate() {
        var h = authorized()
        #expect(only(h.submit("n1", #""deliverAt":"2026-01-05T11:00:00Z""#)).kind == .alert)
    }

    @Test func deferred_timerFiresBeforeALaterEvent() {
        var h = authorized()
        h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#)
        h.now = at("2026-01-05T14:00:00Z")  // the wheel was late: the next event still sees it first
        let ds = h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(ds).kind == .alert && ds[0].at == at("2026-01-05T13:00:00Z"))
    }
}

@Suite struct SilenceAllTests {
    @Test func silenceAll_suppressesOrdinary() {
        var h = authorized()
        h.send("settings", #"{"user":"u","allowNotifications":false}"#)
        let d = only(h.submit("n1"))
        #expect(d.kind == .suppressed && d.reason == "notifications_disabled")
    }

    @Test func silenceAll_governmentPasses() {
        var h = EngineHarness()
        h.register("gov.alerts", ["government"])
        h.authorize("u", "gov.alerts")
        h.send("settings", #"{"user":"u","allowNotifications":false}"#)
        #expect(only(h.submit("n1", app: "gov.alerts")).kind == .alert)
    }

    @Test func silenceAll_criticalWithoutAuthorizationStillSuppressed() {
        var h = EngineHarness()
        h.register("com.example.mail", ["critical"])
        h.authorize(options: ["alert"])
        h.send("settings", #"{"user":"u","allowNotifications":false}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"critical""#)).kind == .suppressed)
    }
}
