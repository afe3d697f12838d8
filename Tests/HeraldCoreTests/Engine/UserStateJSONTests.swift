// SPEC §10 "Pending, visible": a user's state as JSON, as of an instant.
import HeraldCore
import Testing

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
    /// even while a scheduled window of the same Focus keeps it in force: `state` and `pending`
    /// must not show it as manual, which would contradict the `herald_manual_focus_on` view.
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
}
