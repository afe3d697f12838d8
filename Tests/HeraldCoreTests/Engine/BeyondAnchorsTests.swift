// SPEC §10 engine parts: attention budget, snooze, fan-out, deterministic replay, timers as outputs.
import HeraldCore
import Testing

@Suite struct BeyondAnchorsTests {
    func authorized() -> EngineHarness {
        var h = EngineHarness()
        h.authorize(options: ["alert", "sound", "badge"])
        h.authorize("u", "com.example.chat")
        return h
    }

    // Attention budget.

    @Test func attentionBudget_excessActiveBecomesQuiet() {
        var h = authorized()
        h.send("settings", #"{"user":"u","attentionBudget":2}"#)
        #expect(only(h.submit("n1")).kind == .alert)
        #expect(only(h.submit("n2", app: "com.example.chat")).kind == .alert)  // across apps
        let d = only(h.submit("n3"))
        #expect(d.kind == .quiet && d.reason == "attention_budget")
    }

    @Test func attentionBudget_rollingHour() {
        var h = authorized()
        h.send("settings", #"{"user":"u","attentionBudget":1}"#)
        #expect(only(h.submit("n1")).kind == .alert)
        h.advance(to: T0.adding(.minutes(59)))
        #expect(only(h.submit("n2")).kind == .quiet)
        h.advance(to: T0.adding(.minutes(60)))
        #expect(only(h.submit("n3")).kind == .alert)
    }

    @Test func attentionBudget_timeSensitiveAndCriticalExemptButCounted() {
        var h = authorized()
        h.register("com.example.mail", ["critical"])
        h.authorize(options: ["alert", "sound", "criticalAlert"])
        h.send("settings", #"{"user":"u","attentionBudget":1}"#)
        #expect(only(h.submit("n1", #""interruptionLevel":"timeSensitive""#)).kind == .alert)
        #expect(only(h.submit("n2", #""interruptionLevel":"critical""#)).kind == .alert)
        #expect(only(h.submit("n3")).kind == .quiet)  // the exempt ones used the budget
    }

    @Test func attentionBudget_nullRemovesIt() {
        var h = authorized()
        h.send("settings", #"{"user":"u","attentionBudget":0}"#)
        #expect(only(h.submit("n1")).kind == .quiet)
        h.send("settings", #"{"user":"u","attentionBudget":null}"#)
        #expect(only(h.submit("n2")).kind == .alert)
    }

    // Snooze.

    @Test func snooze_alertsAgainOnceAtUntil() {
        var h = authorized()
        h.submit("n1")
        #expect(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T13:00:00Z"}"#).isEmpty)
        #expect(h.state().nextDeadline() == at("2026-01-05T13:00:00Z"))
        let d = only(h.advance(to: at("2026-01-05T13:30:00Z")))
        #expect(d.kind == .alert && d.snoozed && d.at == at("2026-01-05T13:00:00Z") && d.notificationId == "n1")
        #expect(d.presentation?.badge == 1)  // same notification: not counted twice
        #expect(h.advance(to: at("2026-01-06T13:30:00Z")).isEmpty)  // once
    }

    @Test func snooze_judgedByRulesInForceThen() {
        var h = authorized()
        h.submit("n1")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T13:00:00Z"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).kind == .held)
    }

    @Test func snooze_withdrawnMeanwhile_nothing() {
        var h = authorized()
        h.submit("n1")
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T13:00:00Z"}"#)
        h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"n1"}"#)
        #expect(h.advance(to: at("2026-01-05T14:00:00Z")).isEmpty)
    }

    @Test func snooze_untilAlreadyPast_alertsAgainNow() {
        var h = authorized()
        h.submit("n1")
        h.now = at("2026-01-05T12:10:00Z")
        let d = only(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n1","until":"2026-01-05T12:05:00Z"}"#))
        #expect(d.snoozed && d.at == at("2026-01-05T12:10:00Z"))
    }

    /// SPEC §10: a delivered notification alerts again at `until` — also one delivered before the
    /// last deliveries whose content the state keeps: the fold's caller reads it back from the log.
    @Test func snooze_olderThanTheContentKept_isReadBackAndAlertsAgain() {
        var h = authorized()
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
        var h = authorized()
        h.submit("n0")
        for i in 1...(2 * Engine.snoozableLimit + 4) { h.submit("n\(i)") }
        h.now = at("2026-01-05T12:10:00Z")
        let d = only(h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"n0","until":"2026-01-05T12:05:00Z"}"#))
        #expect(d.snoozed && d.notificationId == "n0" && d.at == at("2026-01-05T12:10:00Z"))
    }

    @Test func snooze_unknownNotificationIgnored() {
        var h = authorized()
        h.send("snooze", #"{"user":"u","app":"com.example.mail","id":"nope","until":"2026-01-05T13:00:00Z"}"#)
        #expect(h.state().nextDeadline() == nil)
    }

    // Fan-out.

    @Test func fanOut_oneEventPerUser_eachJudgedOnItsOwn() {
        var h = EngineHarness()
        h.authorize("u1", "com.example.mail")
        h.authorize("u3", "com.example.mail")
        h.send("focusOn", #"{"user":"u3","focus":"Work"}"#)
        let a = Engine().admit(op: "submit", request: try! JSONValue.parse(
            #"{"id":"n1","app":"com.example.mail","users":["u1","u2","u3"],"title":"Hi"}"#), apps: h.apps)
        guard case .accepted(let acc) = a else { Issue.record("rejected"); return }
        #expect(acc.events.map(\.user) == ["u1", "u2", "u3"])
        #expect(acc.events.map { $0.body["user"] } == [.string("u1"), .string("u2"), .string("u3")])
        #expect(acc.events.allSatisfy { $0.body["users"] == nil })
        let ds = h.send("submit", #"{"id":"n1","app":"com.example.mail","users":["u1","u2","u3"],"title":"Hi"}"#)
        #expect(ds.map(\.kind) == [.alert, .suppressed, .held])
        #expect(ds.map(\.user) == ["u1", "u2", "u3"])
    }

    // Determinism and timers.

    @Test func replay_sameEventsGiveIdenticalBytes() {
        var h = authorized()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.submit("n1", #""relevanceScore":0.5,"data":{"z":1,"a":[1,2.5,"x"]}"#)
        h.submit("n2", app: "com.example.chat", #""interruptionLevel":"timeSensitive""#)
        h.advance(to: at("2026-01-06T09:00:00Z"))
        var replay = EngineHarness()
        for e in h.events { _ = replay.apply(e) }
        replay.advance(to: at("2026-01-06T09:00:00Z"))
        #expect(replay.log.map(\.body.canonicalBytes) == h.log.map(\.body.canonicalBytes))
        #expect(replay.log.map(\.traceJSON) == h.log.map(\.traceJSON))
        #expect(replay.state() == h.state())
    }

    @Test func timers_spuriousWakeIsHarmless() {
        var h = authorized()
        h.submit("n1", #""deliverAt":"2026-01-05T13:00:00Z""#)
        #expect(h.advance(to: at("2026-01-05T12:30:00Z")).isEmpty)
        #expect(h.advance(to: at("2026-01-05T12:30:00Z")).isEmpty)
        #expect(only(h.advance(to: at("2026-01-05T13:00:00Z"))).kind == .alert)
        #expect(h.advance(to: at("2026-01-05T13:00:00Z")).isEmpty)
    }

    @Test func timers_nextWakeIsEarliestDeadline() {
        var h = authorized()
        var s = h.state()
        let o = h.engine.apply(StoredEvent(seq: 99, user: "u", type: "submit",
                                           body: try! JSONValue.parse(#"{"id":"x","app":"com.example.mail","user":"u","deliverAt":"2026-01-05T15:00:00Z"}"#),
                                           at: T0), to: &s, apps: &h.apps)
        #expect(o.deliveries.isEmpty && o.nextWake == at("2026-01-05T15:00:00Z"))
    }

    /// Timers due at one instant: expiry, Focus change (its digest), then — rules "5" — the
    /// deferred decisions and snoozes, then the summary (so one queued then is in it); rules
    /// "1"–"4" fired the summary before the deferred decisions.
    @Test func timers_sameDeadline_expiryThenFocusThenDecisionsThenSummary() {
        for (version, kinds) in [("5", [DeliveryKind.expired, .focusDigest, .alert, .summary]),
                                 ("4", [.expired, .focusDigest, .summary, .alert])] {
            var h = authorized()
            h.engine = Engine(rulesVersion: version)
            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
            h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T18:00:00Z"}"#)
            h.submit("q1")  // queued
            h.submit("q2", #""expiresAt":"2026-01-05T17:59:59.999Z""#)  // expires at 18:00
            h.submit("h1", app: "com.example.chat")  // held until 18:00
            h.submit("d1", app: "com.example.chat", #""deliverAt":"2026-01-05T18:00:00Z""#)
            let ds = h.advance(to: at("2026-01-05T18:00:00Z"))
            #expect(ds.map(\.kind) == kinds, "rules \(version)")
            #expect(ds.allSatisfy { $0.at == at("2026-01-05T18:00:00Z") })
        }
    }

    @Test func idleUser_defaultStateIsSmall() {
        #expect(MemoryLayout<UserState>.size < 256)
    }
}

@Suite struct UserStateJSONTests {
    @Test func pointInTime_stateJSONListsSettingsAndPending() {
        var h = EngineHarness()
        h.authorize(options: ["alert", "badge"])
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Work","until":"2026-01-05T14:00:00Z"}"#)
        h.submit("q1")
        h.submit("d1", #""deliverAt":"2026-01-05T13:00:00Z""#)
        let j = h.state().json
        #expect(j["apps"]?["com.example.mail"]?["delivery"] == .string("summary"))
        #expect(j["apps"]?["com.example.mail"]?["badgeCount"] == .int(1))
        #expect(j["manualFocus"]?["until"] == .string("2026-01-05T14:00:00Z"))
        #expect(j["pending"]?.arrayValue?.map { $0["stage"] } == [.string("queued"), .string("deferred")])
        #expect(j["nextWake"] == .string("2026-01-05T13:00:00Z"))
        #expect(j.canonicalBytes == h.state().json.canonicalBytes)
    }

    /// SPEC §10 "Pending, visible": a Focus turned on by hand `until` an instant is over then,
    /// even while a scheduled window of the same Focus keeps it in force (a review found `state`
    /// and `pending` still showing it as manual, contradicting the `herald_manual_focus_on` view).
    @Test func pendingVisible_aManualFocusPastItsUntilIsNotShownAsManual() {
        var h = EngineHarness()
        h.send("focusDefine", #"{"user":"u","focus":"Sleep","schedule":[{"days":[1,2,3,4,5,6,7],"start":"22:00","end":"07:00"}],"timeZone":"UTC"}"#)
        h.send("focusOn", #"{"user":"u","focus":"Sleep","until":"2026-01-05T23:00:00Z"}"#)
        let before = h.state().json(at: at("2026-01-05T22:30:00Z"))
        #expect(before["activeFocus"]?["manual"] == .bool(true))
        #expect(before["manualFocus"]?["until"] == .string("2026-01-05T23:00:00Z"))
        let after = h.state().json(at: at("2026-01-06T03:00:00Z"))
        #expect(after["activeFocus"]?["focus"] == .string("Sleep") && after["activeFocus"]?["manual"] == .bool(false))
        #expect(after["activeFocus"]?["nextChange"] == .string("2026-01-06T07:00:00Z"))
        #expect(after["manualFocus"] == nil)
    }

    /// SPEC §10 "Pending, visible" (Focus and mute ends): as of an instant, the state says which
    /// Focus is in force and when that changes, and which mutes are not over yet.
    @Test func pendingVisible_stateAtAnInstantShowsTheActiveFocusAndTheMutesNotOver() {
        var h = EngineHarness()
        h.authorize()
        h.authorize("u", "com.example.chat")
        h.send("focusDefine", #"{"user":"u","focus":"Work","schedule":[{"days":[1,2,3,4,5],"start":"09:00","end":"17:00"}],"timeZone":"UTC"}"#)
        h.send("focusDefine", #"{"user":"u","focus":"Gym"}"#)
        h.send("mute", #"{"user":"u","app":"com.example.mail","until":"2026-01-05T13:00:00Z"}"#)
        let noon = h.state().json(at: at("2026-01-05T12:00:00Z"))  // a Monday
        #expect(noon["activeFocus"] == ["focus": "Work", "manual": false, "nextChange": "2026-01-05T17:00:00Z"])
        #expect(noon["mutes"] == [["app": "com.example.mail", "until": "2026-01-05T13:00:00Z"]])
        #expect(noon["at"] == "2026-01-05T12:00:00Z")
        let evening = h.state().json(at: at("2026-01-05T18:00:00Z"))
        #expect(evening["activeFocus"] == nil && evening["mutes"] == [])
        h.send("focusOn", #"{"user":"u","focus":"Gym","until":"2026-01-05T13:30:00Z"}"#)
        let manual = h.state().json(at: at("2026-01-05T12:30:00Z"))
        #expect(manual["activeFocus"] == ["focus": "Gym", "manual": true, "nextChange": "2026-01-05T13:30:00Z"])
        #expect(h.state().json(at: nil) == h.state().json)
    }

    /// SPEC §10 "Pending, visible" (Focus ends): a scheduled Focus turned off by hand comes back at a
    /// later instant — a scheduled decision `herald pending` lists (`focusesOff`). A whole-week one
    /// is the case a review found missing: `activeFocus` is empty while it is off, so nothing said
    /// when it returns. Under rules "4" that was never: `until` null.
    @Test func pendingVisible_aScheduledFocusTurnedOffShowsWhenItComesBack() {
        for (version, until) in [("5", JSONValue.string("2026-01-05T23:00:00Z")), ("4", .null)] {
            var h = EngineHarness(rulesVersion: version, authorizingMail: true)
            h.send("focusDefine", #"{"user":"u","focus":"Always","schedule":[{"days":[1,2,3,4,5,6,7],"start":"00:00","end":"00:00"}],"timeZone":"Europe/Berlin"}"#)
            h.send("focusDefine", #"{"user":"u","focus":"Work","schedule":[{"days":[1,2,3,4,5],"start":"09:00","end":"17:00"}],"timeZone":"UTC"}"#)
            h.send("focusOff", #"{"user":"u","focus":"Always"}"#)
            let s = h.state().json(at: at("2026-01-05T12:00:00Z"))
            #expect(s["activeFocus"]?["focus"] == "Work", "rules \(version)")
            #expect(s["focusesOff"] == [["focus": "Always", "until": until]], "rules \(version): \(s)")
            let later = h.state().json(at: at("2026-01-05T23:00:00Z"))
            #expect(later["focusesOff"] == (version == "5" ? [] : [["focus": "Always", "until": .null]]))
            let always = later["focuses"]?.arrayValue?.first { $0["focus"] == "Always" }
            #expect((always?["offUntil"] == nil) == (version == "5"), "an offUntil that has passed is not shown: \(String(describing: always))")
        }
    }
}

