// What a summary or Focus digest may still carry when it goes out: items of apps since turned off or silenced leave it.
import HeraldCore
import Testing

@Suite struct SummaryScreeningTests {
    static let mail = "com.example.mail"
    static let news = "com.example.news"

    /// SPEC §3 rule 3 and Turn Off ("sets denied"), judged when the summary fires: the items of an
    /// app the user turned off leave it as `suppressed` (`not_authorized`), lowering the badge;
    /// the other apps' items are summarized.
    @Test func summary_itemsOfAnAppNoLongerAuthorizedAreSuppressedWhenItFires() {
        var h = EngineHarness(authorizingMail: true)
        h.authorize("u", Self.news, options: ["alert", "sound", "badge"])
        for app in [Self.mail, Self.news] {
            h.send("settings", #"{"user":"u","app":"\#(app)","delivery":"summary"}"#)
        }
        h.submit("m1")
        h.submit("s1", app: Self.news)
        h.authorize(status: "denied", options: [])
        let fired = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(fired.map(\.kind) == [.suppressed, .summary])
        #expect(fired[0].notificationId == "m1" && fired[0].reason == "not_authorized")
        #expect(fired[0].presentation?.badge == 0 && h.state().badge(of: Self.mail) == 0)
        #expect(fired[1].items.map(\.notification.id) == ["s1"])
    }

    /// SPEC §3 Silence all ("suppresses everything except critical … and government alerts"),
    /// judged when a summary or a Focus digest goes out: nothing but a government app's items.
    @Test func silenceAll_suppressesTheItemsOfASummaryAndAFocusDigestButAGovernmentApps() {
        let gov = "gov.example.alerts"
        var h = EngineHarness(authorizingMail: true)
        h.register(gov, ["government"])
        h.authorize("u", gov, options: ["alert", "sound", "badge"])
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        h.send("settings", #"{"user":"u","app":"gov.example.alerts","delivery":"summary"}"#)
        h.submit("m1")
        h.submit("g1", app: gov)
        h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
        h.submit("h1", #""interruptionLevel":"timeSensitive""#)  // not queued; the Focus allows TS
        h.send("focusDefine", #"{"user":"u","focus":"Sleep","allowTimeSensitive":false}"#)
        h.send("focusOn", #"{"user":"u","focus":"Sleep"}"#)
        #expect(only(h.submit("h2", #""interruptionLevel":"timeSensitive""#)).kind == .held)
        h.send("settings", #"{"user":"u","allowNotifications":false}"#)
        let off = h.send("focusOff", #"{"user":"u","focus":"Sleep"}"#)
        #expect(off.map(\.kind) == [.suppressed] && off.first?.reason == "notifications_disabled", "no digest: \(off.map(\.kind))")
        let fired = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(fired.map(\.kind) == [.suppressed, .summary])
        #expect(fired.first?.notificationId == "m1" && fired.last?.items.map(\.notification.id) == ["g1"])
    }
}
