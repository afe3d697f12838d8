// Rules version "4" (session 28): where a black-box review found version "3" departing from SPEC §3.
// Each test checks the new decision and that "3" still decides an old log as it did.
import HeraldCore
import Testing

@Suite struct RulesFourTests {
    static let mail = "com.example.mail"
    static let news = "com.example.news"

    /// A submit with its own body (`EngineHarness.submit` sends a short one).
    static func submit(_ h: inout EngineHarness, _ id: String, body: String, _ extra: String = "") {
        h.send("submit", #"{"id":"\#(id)","app":"com.example.mail","user":"u","title":"Hello","body":"\#(body)","hiddenPreviewsBodyPlaceholder":"New mail"\#(extra)}"#)
    }

    func harness(_ version: String = Engine.currentRulesVersion) -> EngineHarness {
        EngineHarness(rulesVersion: version, authorizingMail: true)
    }

    /// SPEC §3 Collapse ("one thing, one notification") with rules 1, 2 and 4: a new notification
    /// that is withdrawn, expired or suppressed is never presented, so it replaces nothing; the
    /// held one stays held, counted, and is in the Focus digest.
    @Test func collapse_aNotificationStoppedByRules1To4ReplacesNothing() {
        let stopped: [(String, String, DeliveryKind)] = [
            ("m2", #""collapseId":"c","marketing":true"#, .suppressed),
            ("e2", #""collapseId":"c","expiresAt":"2026-01-05T11:00:00Z""#, .expired),
            ("w2", #""collapseId":"c""#, .withdrawn),
        ]
        for version in ["4", "3"] {
            var h = harness(version)
            h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
            #expect(only(h.submit("n1", #""collapseId":"c""#)).kind == .held)
            h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"w2"}"#)
            for (id, extra, kind) in stopped {
                let ds = h.submit(id, extra)
                if version == "4" {
                    #expect(ds.map(\.kind) == [kind], "\(id): \(ds.map(\.kind))")
                } else {
                    #expect(ds.map(\.kind).last == kind)
                }
            }
            let digest = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
            if version == "4" {
                #expect(only(digest).items.map(\.notification.id) == ["n1"])
                #expect(h.state().badge(of: Self.mail) == 1)
            } else {
                #expect(digest.isEmpty, "rules 3: the marketing push replaced n1")
            }
        }
    }

    /// The same for a deferred notification withdrawn before it arrived: it is never decided, so
    /// the queued one it would have replaced stays.
    @Test func collapse_aDeferredNotificationWithdrawnBeforeArrivalReplacesNothing() {
        var h = harness()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        #expect(only(h.submit("q1", #""collapseId":"c""#)).kind == .queued)
        h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"q2"}"#)
        #expect(h.submit("q2", #""collapseId":"c","deliverAt":"2026-01-05T13:00:00Z""#).isEmpty)
        let later = h.advance(to: at("2026-01-05T18:00:00Z"))
        #expect(later.map(\.kind) == [.withdrawn, .summary])
        #expect(later.last?.items.map(\.notification.id) == ["q1"])
    }

    /// SPEC §3 Badge ("delivered, unopened notifications"): an `opened` without an id opens the
    /// newest counted one, so withdrawing it later does not lower the count a second time.
    @Test func badge_openedWithoutAnIdMarksTheNewestCountedNotificationOpened() {
        for (version, expected) in [("4", 2), ("3", 1)] {
            var h = harness(version)
            #expect(only(h.submit("n1")).presentation?.badge == 1)
            h.send("opened", #"{"user":"u","app":"com.example.mail"}"#)
            #expect(only(h.submit("n2")).presentation?.badge == 1)
            let w = only(h.send("withdraw", #"{"user":"u","app":"com.example.mail","id":"n1"}"#))
            #expect(w.kind == .withdrawn)
            #expect(w.presentation?.badge == (version == "4" ? nil : 0), "rules \(version): n1 was opened already")
            #expect(only(h.submit("n3")).presentation?.badge == expected, "rules \(version): n2 and n3 unopened")
        }
    }

    /// SPEC §3 rule 3 and Turn Off ("sets denied"), judged when the summary fires: the items of an
    /// app the user turned off leave it as `suppressed` (`not_authorized`), lowering the badge;
    /// the other apps' items are summarized.
    @Test func summary_itemsOfAnAppNoLongerAuthorizedAreSuppressedWhenItFires() {
        for version in ["4", "3"] {
            var h = harness(version)
            h.authorize("u", Self.news, options: ["alert", "sound", "badge"])
            for app in [Self.mail, Self.news] {
                h.send("settings", #"{"user":"u","app":"\#(app)","delivery":"summary"}"#)
            }
            h.submit("m1")
            h.submit("s1", app: Self.news)
            h.authorize(status: "denied", options: [])
            let fired = h.advance(to: at("2026-01-05T18:00:00Z"))
            if version == "4" {
                #expect(fired.map(\.kind) == [.suppressed, .summary])
                #expect(fired[0].notificationId == "m1" && fired[0].reason == "not_authorized")
                #expect(fired[0].presentation?.badge == 0 && h.state().badge(of: Self.mail) == 0)
                #expect(fired[1].items.map(\.notification.id) == ["s1"])
            } else {
                #expect(only(fired).items.map(\.notification.id) == ["m1", "s1"])
            }
        }
    }

    /// SPEC §3 Silence all ("suppresses everything except critical … and government alerts"),
    /// judged when a summary or a Focus digest goes out: nothing but a government app's items.
    @Test func silenceAll_suppressesTheItemsOfASummaryAndAFocusDigestButAGovernmentApps() {
        let gov = "gov.example.alerts"
        var h = harness()
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

    /// SPEC §3 rule 6: Keep → Deliver Immediately "makes later ones quiet", and quiet is
    /// "Notification Center only; no banner, sound, badge or lock screen".
    @Test func rule6_provisionalKeep_immediate_isQuietWithoutABadge() {
        for (version, badge) in [("4", nil), ("3", 1)] as [(String, Int?)] {
            var h = harness(version)
            h.authorize(status: "provisional", options: ["alert", "sound", "badge"])
            h.send("provisionalKeep", #"{"user":"u","app":"com.example.mail"}"#)
            let d = only(h.submit("n1"))
            #expect(d.kind == .quiet && d.reason == "provisional_kept" && !d.provisional)
            #expect(d.presentation?.badge == badge && d.presentation?.banner == false, "rules \(version)")
            #expect(h.state().badge(of: Self.mail) == (badge ?? 0))
        }
    }

    /// SPEC §5: "at most 64 KiB a line" — delivery lines too. Forty queued notifications of 3,800
    /// characters made one 158 kB summary line; now the summary goes out as several at the same
    /// instant, every line within the limit, the items in summary order across them. The Focus
    /// digest likewise.
    @Test func wireLine_aSummaryOrDigestTooLongForOneLineGoesOutAsSeveral() {
        let long = String(repeating: "x", count: 3_800)
        for version in ["4", "3"] {
            var h = harness(version)
            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
            for i in 0..<40 { Self.submit(&h, "s\(i)", body: long, #","relevanceScore":\#(Double(i % 7) / 10)"#) }
            let summaries = h.advance(to: at("2026-01-05T18:00:00Z"))
            let lines = summaries.map { $0.bodyBytes.count + 48 }  // the cursor and op the wire adds
            let items = summaries.flatMap(\.items)
            #expect(summaries.allSatisfy { $0.kind == .summary && $0.at == at("2026-01-05T18:00:00Z") })
            #expect(items.count == 40 && items == items.sorted { a, b in
                let ra = a.notification.relevanceScore ?? 0, rb = b.notification.relevanceScore ?? 0
                return ra != rb ? ra > rb : a.seq < b.seq
            })
            if version == "4" {
                #expect(summaries.count == 3 && lines.allSatisfy { $0 <= Engine.maxDeliveryLineBytes }, "\(lines)")
            } else {
                #expect(summaries.count == 1 && lines[0] > 150_000)
            }

            h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"immediate"}"#)
            h.send("focusOn", #"{"user":"u","focus":"Work"}"#)
            for i in 0..<40 { Self.submit(&h, "h\(i)", body: long) }
            let digests = h.send("focusOff", #"{"user":"u","focus":"Work"}"#)
            #expect(digests.flatMap(\.items).map(\.notification.id) == (0..<40).map { "h\($0)" })
            #expect(digests.count == (version == "4" ? 3 : 1))
            if version == "4" { #expect(digests.allSatisfy { $0.bodyBytes.count + 48 <= Engine.maxDeliveryLineBytes }) }
        }
    }

    /// Ordinary summaries are one line, and cost no measuring: `itemsAlwaysFitting` items of
    /// nearly the largest notification the door admits fit one line.
    @Test func wireLine_theLargestNotificationsThatAlwaysFitMakeOneLine() {
        let body = String(repeating: "y", count: 3_700), thread = String(repeating: "t", count: 200)
        var h = harness()
        h.send("settings", #"{"user":"u","app":"com.example.mail","delivery":"summary"}"#)
        for i in 0..<Engine.itemsAlwaysFitting { Self.submit(&h, "s\(i)", body: body, #","threadId":"\#(thread)""#) }
        let s = only(h.advance(to: at("2026-01-05T18:00:00Z")))
        #expect(s.items.count == Engine.itemsAlwaysFitting && s.bodyBytes.count + 48 <= Engine.maxDeliveryLineBytes)
    }
}
