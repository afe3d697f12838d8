// The operator views (schema/003_operator_views.sql) against the fold: after each history, what a view says is what
// `herald state` / `herald pending` (UserHistory.fold) say, on a real service and PostgreSQL.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct OperatorViewsFoldTests {
    static let mail = "com.example.mail"
    static let news = "com.example.news"

    /// Rows of `sql` as text (NULL as nil).
    static func rows(_ conn: PGConnection, _ sql: String) throws -> [[String?]] {
        let r = try conn.execute(sql)
        return (0..<r.rowCount).map { row in (0..<r.columnCount).map { r.string(row, $0) } }
    }

    /// A timestamptz column as milliseconds since the epoch, to compare with the fold's instants.
    static func ms(_ column: String) -> String { "(extract(epoch FROM \(column)) * 1000)::bigint::text" }
    static func ms(rfc3339 text: String?) -> String? { text.flatMap(Instant.init(rfc3339:)).map { String($0.millisecondsSinceEpoch) } }

    static func state(_ conn: PGConnection, _ user: String) throws -> JSONValue {
        try UserHistory.fold(conn, user: user, limit: .everything).state.json
    }

    static func submit(_ c: WireClient, _ id: String, app: String = mail, user: String = "alice",
                       deliverAt: String? = nil) throws -> JSONValue {
        var o: [String: JSONValue] = ["op": "submit", "id": .string(id), "app": .string(app), "user": .string(user),
                                      "title": "T", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"]
        if let deliverAt { o["deliverAt"] = .string(deliverAt) }
        let r = try c.call(.object(o))
        #expect(r["ok"]?.boolValue == true, "\(r.canonicalString)")
        return r
    }

    /// Deliveries commit just after the ack; a clock op replies once they are committed too.
    static func settle(_ c: WireClient, _ at: String) throws {
        let r = try c.call(["op": "clock", "advanceTo": .string(at)])
        #expect(r["ok"]?.boolValue == true, "\(r.canonicalString)")
    }

    @Test func pendingSummaryItemsShowNoTimeALaterSummaryScheduleMoved() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.mail), "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "settings", "user": "alice", "app": .string(Self.mail), "delivery": "summary"])
        _ = try Self.submit(c, "q1")
        try Self.settle(c, "2026-03-27T07:00:00Z")
        let conn = try PGConnection.connect(server.url)
        let view = "SELECT notification_id, \(Self.ms("summary_at")), \(Self.ms("summary_at_when_queued")), schedule_changed_seq::text FROM herald_pending_summary_items ORDER BY cursor"
        let eight = Self.ms(rfc3339: "2026-03-27T08:00:00Z"), noon = Self.ms(rfc3339: "2026-03-27T12:00:00Z")
        #expect(try Self.rows(conn, view) == [["q1", eight, eight, nil]], "no schedule: 08:00 UTC (SPEC §3)")

        // The schedule changes: the engine moves the summary to the new schedule's next time.
        let schedule = try c.call(["op": "summarySchedule", "user": "alice", "times": ["12:00"], "timeZone": "UTC"])
        let scheduleSeq = try #require(schedule["seq"]?.intValue)
        let pending = try #require(Self.state(conn, "alice")["pending"]?.arrayValue)
        #expect(pending.map { Self.ms(rfc3339: $0["summaryAt"]?.stringValue) } == [noon], "the fold's summary is at noon")
        #expect(try Self.rows(conn, view) == [["q1", nil, eight, String(scheduleSeq)]],
                "the view no longer shows 08:00 as the summary's time: it says the schedule moved it")

        // An item queued after the change carries the engine's current instant, which is every item's.
        _ = try Self.submit(c, "q2")
        try Self.settle(c, "2026-03-27T07:00:00Z")
        #expect(try Self.rows(conn, view) == [["q1", noon, eight, nil], ["q2", noon, noon, nil]])

        try Self.settle(c, "2026-03-27T08:30:00Z")
        #expect(try Self.rows(conn, view).map { $0[0] } == ["q1", "q2"], "nothing fired at 08:00")
        try Self.settle(c, "2026-03-27T12:30:00Z")
        #expect(try Self.rows(conn, view).isEmpty, "the noon summary took both")
    }

    /// An item leaves `herald_pending_summary_items` / `herald_held_notifications` at any later
    /// delivery naming it — suppressed when its summary or digest is screened (the app was turned
    /// off), or decided again when a snooze ran out — not only when expired, withdrawn or replaced.
    @Test func pendingAndHeldViewsEndAnItemAtAnyLaterDeliveryNamingIt() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        for app in [Self.mail, Self.news] {
            _ = try c.call(["op": "authorization", "user": "alice", "app": .string(app), "status": "authorized", "options": ["alert"]])
        }
        _ = try c.call(["op": "settings", "user": "alice", "app": .string(Self.news), "delivery": "summary"])
        _ = try Self.submit(c, "q1", app: Self.news)
        _ = try Self.submit(c, "q2", app: Self.news)
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Work"])
        _ = try Self.submit(c, "h1")
        _ = try Self.submit(c, "h2")
        // q2 and h2 are snoozed; at 07:30 each is decided again (still queued / still held).
        for (app, id) in [(Self.news, "q2"), (Self.mail, "h2")] {
            _ = try c.call(["op": "snooze", "user": "alice", "app": .string(app), "id": .string(id), "until": "2026-03-27T07:30:00Z"])
        }
        try Self.settle(c, "2026-03-27T07:30:00Z")
        let conn = try PGConnection.connect(server.url)
        let queued = "SELECT notification_id FROM herald_pending_summary_items WHERE user_id = 'alice' ORDER BY cursor"
        let held = "SELECT notification_id FROM herald_held_notifications WHERE user_id = 'alice' ORDER BY cursor"
        #expect(try Self.rows(conn, queued) == [["q1"], ["q2"]], "q2 once, under its newer queued delivery")
        #expect(try Self.rows(conn, held) == [["h1"], ["h2"]], "h2 once, under its newer held delivery")
        func fold() throws -> [String: [String]] {
            let pending = try #require(Self.state(conn, "alice")["pending"]?.arrayValue)
            return Dictionary(grouping: pending, by: { $0["stage"]?.stringValue ?? "" })
                .mapValues { $0.compactMap { $0["notification"]?.stringValue } }
        }
        #expect(try fold()["queued"] == ["q1", "q2"] && fold()["held"] == ["h1", "h2"])

        // The user turns news off: its summary leaves q1 and q2 out as suppressed.
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.news), "status": "denied"])
        try Self.settle(c, "2026-03-27T08:00:00Z")
        #expect(try Self.rows(conn, queued).isEmpty, "suppressed when the summary fired")
        #expect(try fold()["queued"] == nil)
        // A snooze of h1 running out after the Focus is off is an alert; the digest took h2.
        _ = try c.call(["op": "snooze", "user": "alice", "app": .string(Self.mail), "id": "h1", "until": "2026-03-27T09:00:00Z"])
        _ = try c.call(["op": "focusOff", "user": "alice", "focus": "Work"])
        try Self.settle(c, "2026-03-27T08:30:00Z")
        #expect(try Self.rows(conn, held).isEmpty)
        #expect(try fold()["held"] == nil)
    }

    @Test func settingsViewFollowsAuthorizationResetsAndProvisionalKeep() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.mail), "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "settings", "user": "alice", "app": .string(Self.mail), "sound": false, "marketingConsent": true])
        // A new authorization resets alert, sound and badge to its options.
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.mail), "status": "authorized",
                        "options": ["alert", "sound", "badge"]])
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.news), "status": "provisional", "options": []])
        _ = try c.call(["op": "provisionalKeep", "user": "alice", "app": .string(Self.news), "delivery": "summary"])
        _ = try c.call(["op": "settings", "user": "alice", "showPreviews": "never"])
        let conn = try PGConnection.connect(server.url)
        let view = try Self.rows(conn, """
            SELECT coalesce(app, ''), setting, value::text, set_by FROM herald_settings_current
            WHERE user_id = 'alice' ORDER BY 1, 2
            """)
        func row(_ app: String, _ setting: String) -> [String?]? { view.first { $0[0] == app && $0[1] == setting } }
        #expect(row(Self.mail, "sound") == [Self.mail, "sound", "true", "authorization"], "the authorization reset sound to its options")
        #expect(row(Self.mail, "badge") == [Self.mail, "badge", "true", "authorization"])
        #expect(row(Self.mail, "marketingConsent") == [Self.mail, "marketingConsent", "true", "settings"], "an authorization leaves it")
        #expect(row(Self.news, "delivery") == [Self.news, "delivery", #""summary""#, "provisionalKeep"])
        #expect(row("", "showPreviews") == ["", "showPreviews", #""never""#, "settings"])

        // Every value the view lists is the fold's.
        let state = try Self.state(conn, "alice")
        for r in view {
            let app = r[0] ?? "", setting = r[1] ?? ""
            let folded = app.isEmpty ? state["global"]?[setting] : state["apps"]?[app]?[setting]
            #expect(folded?.canonicalString == r[2].flatMap { try? JSONValue.parse($0) }?.canonicalString,
                    "\(app) \(setting): view \(r[2] ?? "nil"), state \(folded?.canonicalString ?? "nil")")
        }
    }

    @Test func authorizationsViewSaysAuthorizedAfterASettingsChangeOnAProvisionalApp() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.mail), "status": "provisional", "options": ["badge"]])
        let change = try c.call(["op": "settings", "user": "alice", "app": .string(Self.mail), "lockScreen": false])
        // A setting that is no presentation (marketing consent) leaves a provisional app provisional.
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.news), "status": "provisional", "options": []])
        _ = try c.call(["op": "settings", "user": "alice", "app": .string(Self.news), "marketingConsent": true])
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.chat", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "provisionalTurnOff", "user": "alice", "app": "com.example.chat"])
        let conn = try PGConnection.connect(server.url)
        let view = try Self.rows(conn, """
            SELECT app, status, decided_by, seq::text, options::text FROM herald_authorizations_current
            WHERE user_id = 'alice' ORDER BY app
            """)
        #expect(view.map { [$0[0], $0[1], $0[2], $0[4]] } == [
            ["com.example.chat", "denied", "provisionalTurnOff", #"["alert"]"#],
            [Self.mail, "authorized", "settings", #"["badge"]"#],
            [Self.news, "provisional", "authorization", "[]"],
        ], "options: the latest authorization's (a turn-off keeps them)")
        #expect(view.count == 3 && view[1][3] == change["seq"]?.intValue.map { String($0) }, "decided by the settings event")
        let state = try Self.state(conn, "alice")
        for r in view {
            #expect(state["apps"]?[r[0] ?? ""]?["status"]?.stringValue == r[1], "\(r[0] ?? ""): the fold agrees")
            #expect(state["apps"]?[r[0] ?? ""]?["options"]?.canonicalString == r[4], "\(r[0] ?? ""): options")
        }
    }

    @Test func manualFocusViewListsOnlyTheCurrentFocusAndNotPastItsUntil() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Gym"])
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Reading", "until": "2026-03-27T08:00:00Z"])
        _ = try c.call(["op": "focusOn", "user": "bob", "focus": "Work"])
        _ = try c.call(["op": "focusOff", "user": "bob", "focus": "Work"])
        _ = try c.call(["op": "focusOn", "user": "carol", "focus": "Sleep"])
        _ = try c.call(["op": "focusOff", "user": "carol", "focus": "Other"])  // not hers: Sleep stays
        let conn = try PGConnection.connect(server.url)
        let view = "SELECT user_id, focus FROM herald_manual_focus_on ORDER BY 1"
        #expect(try Self.rows(conn, view) == [["alice", "Reading"], ["carol", "Sleep"]], "a focusOn replaces the previous one")
        #expect(try Self.state(conn, "alice")["manualFocus"]?["focus"] == "Reading")
        #expect(try Self.state(conn, "bob")["manualFocus"] == nil)

        try Self.settle(c, "2026-03-27T07:59:59Z")
        #expect(try Self.rows(conn, view) == [["alice", "Reading"], ["carol", "Sleep"]])
        try Self.settle(c, "2026-03-27T08:00:00Z")
        #expect(try Self.rows(conn, view) == [["carol", "Sleep"]], "Reading ended at its until, by the log's clock")
    }

    @Test func pendingDeferredViewListsSubmitsWhoseDecisionIsNotStoredYet() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": .string(Self.mail), "status": "authorized", "options": ["alert"]])
        _ = try Self.submit(c, "now")
        _ = try Self.submit(c, "d1", deliverAt: "2026-03-27T09:00:00Z")
        _ = try Self.submit(c, "d2", deliverAt: "2026-03-27T10:00:00Z")
        _ = try Self.submit(c, "d3", deliverAt: "2026-03-27T09:30:00Z")
        _ = try c.call(["op": "withdraw", "app": .string(Self.mail), "id": "d3"])
        _ = try c.call(["op": "withdraw", "user": "alice", "app": .string(Self.mail), "id": "d4"])
        _ = try Self.submit(c, "d4", deliverAt: "2026-03-27T11:00:00Z")
        try Self.settle(c, "2026-03-27T07:00:00Z")
        let conn = try PGConnection.connect(server.url)
        let view = "SELECT notification_id, \(Self.ms("deliver_at")), withdrawn_before_submit::text FROM herald_pending_deferred WHERE user_id = 'alice' ORDER BY seq"
        #expect(try Self.rows(conn, view) == [
            ["d1", Self.ms(rfc3339: "2026-03-27T09:00:00Z"), "false"],
            ["d2", Self.ms(rfc3339: "2026-03-27T10:00:00Z"), "false"],
            ["d4", Self.ms(rfc3339: "2026-03-27T11:00:00Z"), "true"],
        ], "d3 was withdrawn while pending; `now` was decided at once")
        let deferred = try #require(Self.state(conn, "alice")["pending"]?.arrayValue).filter { $0["stage"] == "deferred" }
        #expect(try Self.rows(conn, view).map { [$0[0], $0[1]] }
                == deferred.map { [$0["notification"]?.stringValue, Self.ms(rfc3339: $0["decideAt"]?.stringValue)] },
                "the fold's deferred items")
        #expect(try Self.rows(conn, view).map { $0[2] == "true" } == deferred.map { $0["withdrawnBeforeSubmit"] == .bool(true) },
                "`herald state`/`pending` flag the one withdrawn before its submit as the view does")

        try Self.settle(c, "2026-03-27T09:15:00Z")
        #expect(try Self.rows(conn, view).map { $0[0] } == ["d2", "d4"], "d1 was decided at 09:00")
        try Self.settle(c, "2026-03-27T11:00:00Z")
        #expect(try Self.rows(conn, view).isEmpty, "d4 was decided (withdrawn) at its deliverAt")
    }

    @Test func activeMutesViewEndsEachMuteAtItsUntilByTheLogsClock() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "mute", "user": "alice", "app": .string(Self.mail), "until": "2026-03-27T08:00:00Z"])
        _ = try c.call(["op": "mute", "user": "alice", "app": .string(Self.news), "until": "2026-03-27T09:00:00Z"])
        _ = try c.call(["op": "mute", "user": "alice", "app": .string(Self.news), "until": "2026-03-27T06:00:00Z"])  // a past until unmutes
        _ = try c.call(["op": "mute", "user": "bob", "app": .string(Self.news), "until": "2026-03-27T09:00:00Z"])
        let conn = try PGConnection.connect(server.url)
        let view = "SELECT user_id, app, \(Self.ms("until")) FROM herald_active_mutes ORDER BY 1, 2"
        #expect(try Self.rows(conn, view) == [
            ["alice", Self.mail, Self.ms(rfc3339: "2026-03-27T08:00:00Z")],
            ["bob", Self.news, Self.ms(rfc3339: "2026-03-27T09:00:00Z")],
        ])
        let apps = try #require(Self.state(conn, "alice")["apps"])
        #expect(Self.ms(rfc3339: apps[Self.mail]?["mutedUntil"]?.stringValue) == Self.ms(rfc3339: "2026-03-27T08:00:00Z"))
        #expect(apps[Self.news]?["mutedUntil"] == nil)

        try Self.settle(c, "2026-03-27T08:00:00Z")
        #expect(try Self.rows(conn, view).map { $0[0] } == ["bob"], "alice's mute ended at 08:00 by the log's clock")
    }
}
