// Point-in-time state, explain's story, and export/import preserving replay (SPEC §8, §10).
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct AuditToolsTests {
    @Test func stateAtShowsBeforeAndAfterASettingsChange() throws {
        let server = try TestServer()
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        let change = try c.call(["op": "settings", "user": "alice", "app": "com.example.mail", "delivery": "summary"])
        server.stop()
        let seq = try #require(change["seq"]?.intValue)
        let conn = try PGConnection.connect(server.url)
        let before = try UserHistory.fold(conn, user: "alice", limit: .seq(seq - 1)).state.json
        let after = try UserHistory.fold(conn, user: "alice", limit: .seq(seq)).state.json
        #expect(before["apps"]?["com.example.mail"]?["delivery"] == "immediate")
        #expect(after["apps"]?["com.example.mail"]?["delivery"] == "summary")
    }

    /// `herald state` / `herald pending` without `--at`: "now" is the latest instant the log shows
    /// the service reached. Under the system clock no event records time passing — emulated here
    /// by removing the manual clock's move after the deferred decision fired — so the decision's
    /// own delivery is what shows it is no longer pending.
    @Test func stateNowShowsADeferredDecisionThatFiredAsNoLongerPending() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "erin", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "submit", "id": "e1", "app": "com.example.mail", "user": "erin", "title": "Later", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "Mail", "deliverAt": "2026-03-27T07:00:05Z"])
        let move = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:00:10Z"])
        #expect(move["ok"] == true)
        server.stop()
        let conn = try PGConnection.connect(server.url)
        // The clock op's reply has SPEC §5's success shape: the stored move's seq and its warnings.
        let clockSeq = try conn.execute("SELECT seq FROM events WHERE type = 'clock'").int64(0, 0)
        #expect(move["seq"]?.intValue == clockSeq && move["warnings"] == [] && move["now"] == "2026-03-27T07:00:10Z")
        try conn.execute("SET session_replication_role = replica")
        try conn.execute("DELETE FROM events WHERE type = 'clock'")
        try conn.execute("UPDATE partitions SET seq = (SELECT max(seq) FROM events) WHERE partition = 0")
        try conn.execute("SET session_replication_role = origin")
        let stored = try conn.execute("SELECT count(*) FROM deliveries WHERE user_id = 'erin' AND notification_id = 'e1' AND kind = 'alert'")
        #expect(stored.int64(0, 0) == 1, "the service decided e1 at 07:00:05")

        let now = try UserHistory.fold(conn, user: "erin", limit: .everything)
        #expect(now.state.json["pending"] == [], "\(now.state.json["pending"] ?? .null)")
        #expect(now.at == Instant(rfc3339: "2026-03-27T07:00:05Z"))
        #expect(now.deliveries.last?.notification?.id == "e1" && now.deliveries.last?.kind == .alert)
        // At an instant before the decision it is still to come.
        let before = try UserHistory.fold(conn, user: "erin", limit: .time(Instant(rfc3339: "2026-03-27T07:00:04Z")!))
        #expect(before.state.json["pending"]?.arrayValue?.first?["stage"] == "deferred")
    }

    /// `herald state alice --at SEQ` where SEQ is someone else's later event: alice's deferred
    /// decision due before it had fired (the fold advances to the log's instant at that seq, not
    /// to alice's own last event), as `replay --until SEQ` sees it.
    @Test func stateAtAnotherUsersLaterSeqShowsTimersThatHadFired() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        let c = try server.client()
        let mail = "com.example.mail"
        for u in ["alice", "bob"] {
            _ = try c.call(["op": "authorization", "user": .string(u), "app": .string(mail), "status": "authorized", "options": ["alert"]])
        }
        _ = try c.call(["op": "submit", "id": "a1", "app": .string(mail), "user": "alice", "title": "T", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x", "deliverAt": "2026-03-27T10:00:00Z"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T13:00:00Z"])
        let bobs = try c.call(["op": "settings", "user": "bob", "app": .string(mail), "sound": false])
        let first = try c.call(["op": "settings", "user": "bob", "app": .string(mail), "badge": false])
        server.stop()
        let conn = try PGConnection.connect(server.url)
        let seq = try #require(bobs["seq"]?.intValue)
        #expect(first["ok"] == true)
        let then = try UserHistory.fold(conn, user: "alice", limit: .seq(seq))
        #expect(then.state.json["pending"] == [], "a1 fired at 10:00, before seq \(seq) at 13:00")
        #expect(then.deliveries.last?.notification?.id == "a1")
        // Up to the submit (seq 3): before the clock's move (seq 4, to 13:00) was folded; timers
        // due by an event's instant fire before it, as the engine orders them, so a1 had fired.
        #expect(try UserHistory.fold(conn, user: "alice", limit: .seq(3)).state.json["pending"] == [])
        let nine = try UserHistory.fold(conn, user: "alice", limit: .time(Instant(rfc3339: "2026-03-27T09:00:00Z")!))
        #expect(nine.state.json["pending"]?.arrayValue?.count == 1, "at 09:00 a1 was still to come")
    }

    @Test func explainOfANotificationHeldByFocusNamesTheFocusAndTheRule() throws {
        let server = try TestServer(start: "2026-03-27T23:00:00Z")
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Sleep"])
        _ = try c.call(["op": "submit", "id": "n1", "app": "com.example.mail", "user": "alice", "title": "Hi", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x"])
        server.stop()
        let conn = try PGConnection.connect(server.url)
        let r = try conn.execute("SELECT kind, reason, trace::text, body::text FROM deliveries WHERE notification_id = 'n1'")
        #expect(r.string(0, 0) == "held")
        let trace = try #require(RuleStep.steps(storedTrace: r.string(0, 2) ?? ""))
        #expect(trace.last == RuleStep("focus", "decided"), "the deciding rule is the last step")
        #expect(r.string(0, 2)?.hasSuffix(#","focus:decided"]"#) == true, "stored compact")
        #expect(try JSONValue.parse(r.string(0, 3) ?? "{}")["focus"] == "Sleep")
    }

    @Test func exportThenImportOnAFreshDatabaseReplaysTheSame() throws {
        let url = try ReplayTests.recordHistory()
        var lines: [String] = []
        let counts = try LogTransfer.export(PGConnection.connect(url)) { lines.append($0) }
        #expect(counts.events > 0 && counts.deliveries > 0)

        let copy = try TestPostgres.freshDatabase()
        let imported = try LogTransfer.import(PGConnection.connect(copy), lines: lines)
        #expect(imported.events == counts.events && imported.deliveries == counts.deliveries)
        let original = try Replayer().run(PGConnection.connect(url)) { 0 }
        let replayed = try Replayer().run(PGConnection.connect(copy)) { 0 }
        #expect(replayed.differences.isEmpty && replayed.deliveriesCompared == original.deliveriesCompared)
        // The same rows, content opened: the import sealed it again under keys of its own.
        func opened(_ url: String) throws -> [DeliveryRow] {
            let conn = try PGConnection.connect(url)
            let keys = try KeyRing.load(conn)
            return try EventReader.deliveries(conn, after: 0).map { d in
                var row = d.row
                row.bodyBytes = keys.readable(row.bodyBytes, user: row.user)
                return row
            }
        }
        #expect(try opened(copy) == opened(url))
        #expect(try PGConnection.connect(copy).execute("SELECT count(*) FROM user_keys").int64(0, 0) ?? 0 > 0, "sealed on import")
        #expect(throws: LogTransfer.ImportError.self, "import refuses a database that already has events") {
            _ = try LogTransfer.import(PGConnection.connect(copy), lines: lines)
        }
        // Nor into a database a service serves (even an empty one): it would not see the rows.
        let served = try TestServer()
        defer { served.stop() }
        do {
            _ = try LogTransfer.import(PGConnection.connect(served.url), lines: lines)
            Issue.record("imported under a running service")
        } catch {
            #expect("\(error)".contains("Another herald serve is already serving this database"), "\(error)")
        }
        #expect(try EventReader.head(PGConnection.connect(served.url)) == 0)
    }

    /// Every row an import may write, counted: a refused import must leave all of them as they were.
    static func importedRows(_ url: String) throws -> [Int64] {
        let conn = try PGConnection.connect(url)
        return try ["SELECT count(*) FROM events", "SELECT count(*) FROM deliveries", "SELECT count(*) FROM rules_versions",
                    "SELECT seq FROM partitions WHERE partition = 0", "SELECT cursor FROM delivery_heads WHERE partition = 0"].map { try conn.execute($0).int64(0, 0) ?? -1 }
    }

    @Test func importRefusesAnExportWithAMissingEventOrDeliveryNamingItAndImportsNothing() throws {
        let url = try ReplayTests.recordHistory()
        var lines: [String] = []
        _ = try LogTransfer.export(PGConnection.connect(url)) { lines.append($0) }
        func line(_ kind: String, _ field: String, _ n: Int64) throws -> Int {
            try #require(lines.firstIndex { (try? JSONValue.parse($0))?[kind]?[field]?.intValue == n })
        }
        var cases: [([String], [String])] = []
        var withoutEvent = lines
        withoutEvent.remove(at: try line("event", "seq", 5))
        cases.append((withoutEvent, ["event seq 5:", "holds event seq 6 where 5 was due"]))
        var withoutFirst = lines
        withoutFirst.remove(at: try line("event", "seq", 1))
        cases.append((withoutFirst, ["event seq 1:"]))
        var withoutTwo = lines
        withoutTwo.removeSubrange(try line("event", "seq", 7)...(try line("event", "seq", 8)))
        cases.append((withoutTwo, ["event seq 7–8:"]))
        var withoutDelivery = lines
        withoutDelivery.remove(at: try line("delivery", "cursor", 3))
        cases.append((withoutDelivery, ["delivery cursor 3:"]))
        // Cut after the events a delivery names: nothing is missing in between, but its cause is.
        let lastEvent = try #require(lines.lastIndex { $0.hasPrefix(#"{"event""#) })
        var withoutLastEvents = lines
        withoutLastEvents.removeSubrange((lastEvent - 3)...lastEvent)
        cases.append((withoutLastEvents, ["the export's events end at seq"]))

        for (input, phrases) in cases {
            let copy = try TestPostgres.freshDatabase()
            let before = try Self.importedRows(copy)
            do {
                _ = try LogTransfer.import(PGConnection.connect(copy), lines: input)
                Issue.record("imported an export with a gap: \(phrases)")
            } catch {
                for phrase in phrases { #expect("\(error)".contains(phrase), "\(error)") }
                #expect("\(error)".contains("Nothing was imported"), "\(error)")
            }
            #expect(try Self.importedRows(copy) == before, "nothing imported: \(phrases)")
        }
    }

    /// The end line: an export cut after a whole line — even right after its last event, where
    /// no gap shows — is refused, as is one whose end line does not match or has lines after it;
    /// `allowMissingEnd` takes an export written without one.
    @Test func importRefusesAnExportCutAfterAWholeLineOrWithAnEndLineThatDoesNotMatch() throws {
        let url = try ReplayTests.recordHistory()
        var lines: [String] = []
        let counts = try LogTransfer.export(PGConnection.connect(url)) { lines.append($0) }
        #expect(lines.last == #"{"end":{"deliveries":\#(counts.deliveries),"events":\#(counts.events)}}"#)
        let lastEvent = try #require(lines.lastIndex { $0.hasPrefix(#"{"event""#) })
        let cases: [([String], [String])] = [
            (Array(lines[...lastEvent]), ["ends without its end line", "--allow-missing-end"]),
            (Array(lines.dropLast()), ["ends without its end line"]),
            (lines.dropLast() + [#"{"end":{"deliveries":\#(counts.deliveries),"events":\#(counts.events + 1)}}"#],
             ["counts \(counts.events + 1) events", "holds \(counts.events)"]),
            (lines + [lines[lastEvent]], ["Line \(lines.count + 1)", "after the end line"]),
        ]
        for (input, phrases) in cases {
            let copy = try TestPostgres.freshDatabase()
            let before = try Self.importedRows(copy)
            do {
                _ = try LogTransfer.import(PGConnection.connect(copy), lines: input)
                Issue.record("imported: \(phrases)")
            } catch {
                for phrase in phrases { #expect("\(error)".contains(phrase), "\(error)") }
                #expect("\(error)".contains("Nothing was imported"), "\(error)")
            }
            #expect(try Self.importedRows(copy) == before, "nothing imported: \(phrases)")
        }
        // An export from before the end line: taken as it is when asked.
        let old = try TestPostgres.freshDatabase()
        let imported = try LogTransfer.import(PGConnection.connect(old), lines: lines.dropLast(), allowMissingEnd: true)
        #expect(imported.events == counts.events && imported.deliveries == counts.deliveries)
    }

    @Test func aTruncatedImportSaysNothingWasImported() throws {
        let url = try ReplayTests.recordHistory()
        var lines: [String] = []
        _ = try LogTransfer.export(PGConnection.connect(url)) { lines.append($0) }
        let cut = lines.count / 2
        lines[cut] = String(lines[cut].prefix(lines[cut].count / 2))
        let copy = try TestPostgres.freshDatabase()
        let before = try Self.importedRows(copy)
        do {
            _ = try LogTransfer.import(PGConnection.connect(copy), lines: lines)
            Issue.record("imported a truncated line")
        } catch {
            #expect("\(error)".contains("Line \(cut + 1) is not an exported row"), "\(error)")
            #expect("\(error)".contains("Nothing was imported") && !"\(error)".contains("nothing after it"), "\(error)")
        }
        #expect(try Self.importedRows(copy) == before)
    }
}

@Suite struct OperatorViewTests {
    @Test func pendingSummaryAndHeldViewsFollowTheClock() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "settings", "user": "alice", "app": "com.example.mail", "delivery": "summary"])
        _ = try c.call(["op": "submit", "id": "q1", "app": "com.example.mail", "user": "alice", "title": "T", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x"])
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Work"])
        _ = try c.call(["op": "settings", "user": "alice", "app": "com.example.mail", "delivery": "immediate"])
        _ = try c.call(["op": "submit", "id": "h1", "app": "com.example.mail", "user": "alice", "title": "T", "body": "B",
                        "hiddenPreviewsBodyPlaceholder": "x"])
        // Acks come after the event commits, deliveries just after: a clock op replies once they are committed too.
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:00:00Z"])
        let conn = try PGConnection.connect(server.url)
        func rows(_ view: String) throws -> [String] {
            let r = try conn.execute("SELECT notification_id FROM \(view) ORDER BY 1")
            return (0..<r.rowCount).compactMap { r.string($0, 0) }
        }
        #expect(try rows("herald_pending_summary_items") == ["q1"])
        #expect(try rows("herald_held_notifications") == ["h1"])
        #expect(try conn.execute("SELECT focus FROM herald_manual_focus_on").string(0, 0) == "Work")
        _ = try c.call(["op": "focusOff", "user": "alice", "focus": "Work"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T09:00:00Z"])
        #expect(try rows("herald_pending_summary_items").isEmpty, "the 08:00 summary took it")
        #expect(try rows("herald_held_notifications").isEmpty, "the focusDigest listed it")
        let lag = try conn.execute("SELECT count(*) FROM herald_deliveries_hourly").int64(0, 0) ?? 0
        #expect(lag > 0)
    }
}
