// End to end over real TCP and a real PostgreSQL, with the manual clock: the wire protocol of SPEC §5–§6.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ServiceTests {
    static let mail = "com.example.mail"

    static func setUpAlice(_ c: WireClient) throws {
        #expect(try c.call(["op": "registerApp", "app": .string(mail), "entitlements": []])["ok"] == true)
        #expect(try c.call(["op": "authorization", "user": "alice", "app": .string(mail), "status": "authorized",
                            "options": ["alert", "sound", "badge"]])["ok"] == true)
    }

    static func submit(_ id: String, extra: [String: JSONValue] = [:]) -> JSONValue {
        var o: [String: JSONValue] = ["op": "submit", "id": .string(id), "app": .string(mail), "user": "alice",
                                      "title": "Hello", "body": "World", "hiddenPreviewsBodyPlaceholder": "A message"]
        for (k, v) in extra { o[k] = v }
        return .object(o)
    }

    @Test func pingHelloAndRidAreAnsweredInRequestOrder() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client(hello: false)
        // Pipelined: three requests in one write, replies in order with their rids.
        try c.sendRaw(Array(#"{"op":"ping","rid":1}{"op":"hello","token":"t","rid":"two"}{"op":"stats","rid":3}"#
            .replacingOccurrences(of: "}{", with: "}\n{").appending("\n").utf8))
        let r1 = try c.readJSON(), r2 = try c.readJSON(), r3 = try c.readJSON()
        #expect(r1["rid"] == 1 && r1["op"] == "pong")
        #expect(r2["rid"] == "two" && r2["server"] == "herald/0.1.0")
        #expect(r3["rid"] == 3 && r3["op"] == "stats")
    }

    @Test func submitIsAckedAfterCommitAndDeliveredToAConsumer() throws {
        let server = try TestServer()
        defer { server.stop() }
        let producer = try server.client()
        try Self.setUpAlice(producer)
        let ack = try producer.call(Self.submit("n1", extra: ["rid": 7]))
        #expect(ack["ok"] == true && ack["rid"] == 7)
        let seq = try #require(ack["seq"]?.intValue)

        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)
        let d = try #require(consumer.deliveries(1).first)
        #expect(d["kind"] == "alert" && d["notification"] == "n1" && d["causeSeq"]?.intValue == seq)
        #expect(d["presentation"]?["banner"] == true && d["presentation"]?["badge"] == 1)
    }

    @Test func duplicateSubmitReturnsTheOriginalSeq() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        let first = try c.call(Self.submit("n1"))
        let again = try c.call(Self.submit("n1"))
        #expect(again["ok"] == true && again["duplicate"] == true && again["seq"] == first["seq"])
        // SPEC §3: a re-send is acknowledged as a duplicate whatever it carries; one that
        // differs says so in a warning, and is neither stored nor delivered.
        let differs = try c.call(Self.submit("n1", extra: ["body": "Different"]))
        #expect(differs["ok"] == true && differs["duplicate"] == true && differs["seq"] == first["seq"]
                && differs["warnings"]?.arrayValue?.first?["code"] == "duplicate_differs", "\(differs.canonicalString)")
    }

    /// One name in two Unicode spellings would be one key to the service and two to PostgreSQL
    /// (docs/hostile-input.md): identifiers that are not NFC are refused, consumers' names too.
    @Test func identifiersNotInNFCAreRefusedAndNothingIsStored() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        let nfd = "Jose\u{301}"
        let refused = try c.call(Self.submit("n1", extra: ["user": .string(nfd)]))
        #expect(refused["ok"] == false && refused["error"]?["code"] == "identifier_not_nfc")
        #expect(try c.call(Self.submit("n1", extra: ["user": .string("Jos\u{E9}")]))["ok"] == true)
        #expect(try c.call(Self.submit(nfd))["error"]?["code"] == "identifier_not_nfc")
        let consumer = try server.client()
        let sub = try consumer.call(["op": "subscribe", "consumer": .string("push-\(nfd)"), "from": "earliest"])
        #expect(sub["ok"] == false && sub["error"]?["code"] == "identifier_not_nfc")
        #expect(try consumer.call(["op": "ack", "consumer": .string(nfd), "cursor": 0])["error"]?["code"] == "identifier_not_nfc")
        #expect(try consumer.call(["op": "subscribe", "consumer": .string("push-Jos\u{E9}"), "from": "earliest"])["ok"] == true)
        #expect(try consumer.deliveries(1).first?["user"] == .string("Jos\u{E9}"))
        let conn = try PGConnection.connect(server.url)
        #expect(try conn.execute("SELECT count(*) FROM events WHERE type = 'submit'").int64(0, 0) == 1)
        #expect(try conn.execute("SELECT user_id FROM events WHERE type = 'submit'").string(0, 0).map { Array($0.utf8) } == Array("Jos\u{E9}".utf8))
    }

    @Test func malformedLineAndUnknownOpGetClearErrorsAndTheConnectionLives() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try c.send("this is not json")
        let bad = try c.readJSON()
        #expect(bad["ok"] == false && bad["error"]?["code"] == "malformed_json")
        #expect(bad["error"]?["detail"]?.stringValue?.isEmpty == false)
        let unknown = try c.call(["op": "launchRockets"])
        #expect(unknown["error"]?["code"] == "unknown_op")
        #expect(try c.call(["op": "ping"])["op"] == "pong")
    }

    @Test func overLongLineGetsAnErrorAndClosesOnlyThatConnection() throws {
        let server = try TestServer()
        defer { server.stop() }
        let other = try server.client()
        let c = try server.client()
        try c.sendRaw([UInt8](repeating: UInt8(ascii: "x"), count: 64 * 1024 + 10))
        let reply = try c.readJSON()
        #expect(reply["error"]?["code"] == "line_too_long")
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
        #expect(try other.call(["op": "ping"])["op"] == "pong", "other connections are unaffected")
    }

    @Test func requestBeforeHelloIsRefusedWhenTokensAreConfigured() throws {
        let tokens = TokenTable(["producer-secret": Grant(name: "mail", roles: [.producer], apps: [Self.mail]),
                                 "admin-secret-1": Grant(name: "ops", roles: [.admin, .settings, .consumer], apps: nil)])
        let server = try TestServer(tokens: tokens)
        defer { server.stop() }
        let c = try server.client(hello: false)
        #expect(try c.call(Self.submit("n1"))["error"]?["code"] == "hello_required")
        #expect(try c.call(["op": "hello", "token": "wrong-token"])["error"]?["code"] == "invalid_token")
        #expect(try c.call(["op": "hello", "token": "producer-secret"])["roles"] == ["producer"])
        var other = Self.submit("n1")
        if case .object(var o) = other { o["app"] = "com.example.bank"; other = .object(o) }
        #expect(try c.call(other)["error"]?["code"] == "forbidden_app", "a producer may not submit for an app it does not own")
        #expect(try c.call(["op": "registerApp", "app": "x", "entitlements": []])["error"]?["code"] == "forbidden")
    }

    @Test func summaryFiresWhenTheManualClockPassesItsTime() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        #expect(try c.call(["op": "settings", "user": "alice", "app": .string(Self.mail), "delivery": "summary"])["ok"] == true)
        #expect(try c.call(["op": "summarySchedule", "user": "alice", "times": ["08:00"], "timeZone": "Europe/Berlin"])["ok"] == true)
        #expect(try c.call(Self.submit("n1"))["ok"] == true)
        // 2026-03-29 is spring-forward in Berlin: 08:00 local is 06:00Z; before that, 08:00 CET is 07:00Z.
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-28T07:00:00Z"])["ok"] == true)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(2)
        #expect(ds.map { $0["kind"]?.stringValue } == ["queued", "summary"])
        #expect(ds[1]["at"] == "2026-03-28T07:00:00Z")
        #expect(ds[1]["items"]?.arrayValue?.count == 1)
        #expect(try c.call(["op": "submit", "id": "n2", "app": .string(Self.mail), "user": "alice", "title": "Again", "body": "B",
                            "hiddenPreviewsBodyPlaceholder": "x"])["ok"] == true)
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-29T06:00:00Z"])
        let dst = try consumer.deliveries(2)
        #expect(dst[1]["kind"] == "summary" && dst[1]["at"] == "2026-03-29T06:00:00Z", "08:00 Berlin after the DST change is 06:00Z")
    }

    @Test func deferredNotificationIsJudgedByTheFocusActiveAtDeliverAt() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        #expect(try c.call(["op": "focusDefine", "user": "alice", "focus": "Sleep", "allowedApps": ["com.example.calendar"],
                            "schedule": [["days": [1, 2, 3, 4, 5, 6, 7], "start": "22:00", "end": "07:00"]],
                            "timeZone": "UTC"])["ok"] == true)
        #expect(try c.call(Self.submit("late", extra: ["deliverAt": "2026-03-27T23:00:00Z"]))["ok"] == true)
        // The Focus's allowed app breaks through in the same window.
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.calendar", "status": "authorized", "options": ["alert"]])
        #expect(try c.call(["op": "submit", "id": "meeting", "app": "com.example.calendar", "user": "alice", "title": "Standup",
                            "body": "Now", "hiddenPreviewsBodyPlaceholder": "Event", "deliverAt": "2026-03-27T23:30:00Z"])["ok"] == true)
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-28T08:00:00Z"])
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(3)
        #expect(ds[0]["kind"] == "held" && ds[0]["at"] == "2026-03-27T23:00:00Z", "judged at deliverAt, inside the Focus window")
        #expect(ds[1]["kind"] == "alert" && ds[1]["notification"] == "meeting", "an allowed app breaks through the Focus")
        #expect(ds[2]["kind"] == "focusDigest" && ds[2]["at"] == "2026-03-28T07:00:00Z")
    }

    @Test func consumerResumesAfterItsAckedCursor() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        for i in 1...3 { _ = try c.call(Self.submit("n\(i)")) }
        let first = try server.client()
        _ = try first.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        let ds = try first.deliveries(3)
        try first.send(#"{"op":"ack","consumer":"push","cursor":\#(ds[1]["cursor"]!.intValue!)}"#)
        #expect(try first.readJSON()["ok"] == true)
        first.close()
        let second = try server.client()
        let sub = try second.call(["op": "subscribe", "consumer": "push"])
        #expect(sub["cursor"] == ds[1]["cursor"])
        let resumed = try second.deliveries(1)
        #expect(resumed[0]["cursor"] == ds[2]["cursor"], "delivery resumes right after the acked cursor")
    }

    /// SPEC §5: "the consumer sends ack" for the durable name it subscribed with. An ack of a name
    /// that never subscribed is refused (`unknown_consumer`) and creates nothing: otherwise it would
    /// make a durable consumer that never catches up, in `herald_consumer_lag` for good. A name subscribed
    /// on another connection, or before (durable, not connected now), is acked as before.
    @Test func anAckOfANameThatNeverSubscribedIsRefusedAndCreatesNoConsumer() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        _ = try c.call(Self.submit("n1"))
        let typo = try c.call(["op": "ack", "consumer": "psuh", "cursor": 1])
        #expect(typo["ok"] == false && typo["error"]?["code"] == "unknown_consumer", "\(typo)")
        #expect(typo["error"]?["title"]?.stringValue?.contains("psuh") == true)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        _ = try consumer.deliveries(1)
        #expect(try c.call(["op": "ack", "consumer": "push", "cursor": 1])["ok"] == true, "subscribed on another connection")
        consumer.close()
        #expect(try c.call(["op": "ack", "consumer": "push", "cursor": 1])["ok"] == true, "durable, not connected")
        let conn = try PGConnection.connect(server.url)
        #expect(try conn.execute("SELECT name FROM consumers ORDER BY name").rowCount == 1, "no consumer “psuh”")
    }

    /// SPEC §9: connections subscribing under one name form a group. On one partition the newest
    /// streams (a consumer that reconnects takes over at once); the older one stays a member,
    /// streams nothing, and its acks are refused (`partition_reassigned`: fenced), so what it did
    /// not acknowledge goes to the streamer. When the streamer leaves, the partition goes back
    /// from the acknowledged cursor: nothing skipped, duplicates only after the last ack.
    @Test func connectionsOfOneNameFormAGroupWhoseNewestMemberStreamsAndWhoseOthersAreFenced() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        _ = try c.call(Self.submit("n1"))
        let first = try server.client()
        let joined = try first.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        #expect(joined["member"]?.stringValue?.isEmpty == false, "\(joined)")
        #expect(try first.deliveries(1)[0]["notification"] == "n1")
        #expect(try first.call(["op": "ack", "consumer": "push", "cursor": 1])["ok"] == true)
        _ = try c.call(Self.submit("n2"))
        #expect(try first.deliveries(1)[0]["notification"] == "n2", "sent, not acknowledged")

        let second = try server.client()
        _ = try second.call(["op": "subscribe", "consumer": "push"])
        #expect(try second.deliveries(1)[0]["notification"] == "n2", "from the acknowledged cursor")
        let fenced = try first.call(["op": "ack", "consumer": "push", "cursor": 2])
        #expect(fenced["error"]?["code"] == "partition_reassigned", "\(fenced)")
        _ = try c.call(Self.submit("n3"))
        #expect(try second.deliveries(1)[0]["notification"] == "n3")
        #expect(try first.readLine(timeoutMilliseconds: 300) == nil, "the older member streams nothing")

        let listed = try c.call(["op": "consumers"])
        let members = listed["consumers"]?.arrayValue?.first?["members"]?.arrayValue ?? []
        #expect(members.count == 2 && members[0]["partitions"] == .array([.int(0)]) && members[1]["partitions"] == .array([]),
                "\(listed.canonicalString)")

        #expect(try second.call(["op": "ack", "consumer": "push", "cursor": 2])["ok"] == true)
        second.close()
        #expect(try first.deliveries(1)[0]["notification"] == "n3", "back to the first, after the last ack")
        #expect(try first.call(["op": "ack", "consumer": "push", "cursor": 3])["ok"] == true)
    }

    /// One consumer stream a connection: delivery lines do not name their consumer, so a second
    /// subscribe on a connection (another name, or the same one again, also pipelined right behind
    /// the first) is refused with `already_subscribed`; the first stream goes on. Were both
    /// accepted, the two streams would come interleaved, each cursor twice.
    @Test func aSecondSubscribeOnOneConnectionIsRefusedAndTheFirstStreamGoesOn() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        _ = try c.call(Self.submit("n1"))
        let consumer = try server.client()
        try consumer.send(#"{"op":"subscribe","consumer":"a","from":"earliest","rid":1}"#)
        try consumer.send(#"{"op":"subscribe","consumer":"b","from":"earliest","rid":2}"#)
        var replies: [JSONValue] = [], lines: [JSONValue] = []
        while replies.count < 2 || lines.isEmpty {
            let v = try consumer.readJSON()
            if v["op"] == "delivery" { lines.append(v) } else { replies.append(v) }
        }
        #expect(replies[0]["ok"] == true && replies[0]["rid"] == 1)
        #expect(replies[1]["ok"] == false && replies[1]["error"]?["code"] == "already_subscribed" && replies[1]["rid"] == 2, "\(replies[1])")
        #expect(replies[1]["error"]?["title"]?.stringValue?.contains("“a”") == true)
        let again = try consumer.call(["op": "subscribe", "consumer": "a", "from": "earliest"])
        #expect(again["error"]?["code"] == "already_subscribed")
        _ = try c.call(Self.submit("n2"))
        let next = try consumer.readJSON()
        #expect(next["op"] == "delivery" && next["notification"] == "n2" && next["cursor"]?.intValue == (lines[0]["cursor"]?.intValue ?? 0) + 1,
                "one stream, each cursor once: \(next)")
    }

    /// The in-memory ring of recent delivery lines is bounded in bytes as well as lines (65,536
    /// lines of the largest summaries would have held 4 GiB): with large lines it keeps fewer, and a
    /// consumer behind it reads the rest from PostgreSQL, every cursor once, in order.
    @Test func theDeliveryRingIsBoundedInBytesAndAConsumerBehindItMissesNothing() throws {
        let server = try TestServer { $0.deliveryRingBytes = 20_000 }
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        let body = String(repeating: "b", count: 3_000)
        for i in 1...40 { _ = try c.call(Self.submit("n\(i)", extra: ["body": .string(body)])) }
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(40)
        #expect(ds.map { $0["notification"]?.stringValue } == (1...40).map { "n\($0)" })
        #expect(zip(ds, ds.dropFirst()).allSatisfy { $1["cursor"]!.intValue! == $0["cursor"]!.intValue! + 1 })
        // Every delivery is committed now (the consumer has them all).
        let stats = try c.call(["op": "stats"])
        let lines = try #require(stats["deliveryRingLines"]?.intValue), bytes = try #require(stats["deliveryRingBytes"]?.intValue)
        #expect(bytes <= 20_000 && lines < 40 && lines > 1, "\(lines) lines, \(bytes) bytes")
    }

    /// SPEC §5 "delivery is at-least-once from the last acked cursor": a subscription from a
    /// cursor past the newest delivery would skip the deliveries made up to it, so it is refused,
    /// saying why; a cursor at the head is fine. A negative ack names the cursor.
    @Test func subscribingPastTheNewestDeliveryIsRefusedAndNothingIsSkipped() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        _ = try c.call(Self.submit("n1"))
        let consumer = try server.client()
        let ahead = try consumer.call(["op": "subscribe", "consumer": "push", "from": 100_000])
        HostileClientTests.expectAlert(ahead, code: "cursor_ahead", titleHas: "past the newest delivery", detailHas: "earliest")
        let atHead = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        #expect(atHead["ok"] == true)
        let first = try consumer.deliveries(1)
        let negative = try consumer.call(["op": "ack", "consumer": "push", "cursor": -3])
        HostileClientTests.expectAlert(negative, code: "invalid_field", titleHas: "Cursor -3 is negative", detailHas: "last delivery")
        // A name subscribe would refuse is refused by ack too: no row is made for it.
        let long = String(repeating: "x", count: 201)
        HostileClientTests.expectAlert(try consumer.call(["op": "ack", "consumer": .string(long), "cursor": 1]),
                                       code: "invalid_field", titleHas: "1–200 bytes", detailHas: "subscribe")
        #expect(try PGConnection.connect(server.url).execute("SELECT count(*) FROM consumers WHERE length(name) > 200").int64(0, 0) == 0)
        // The next delivery reaches it: nothing was skipped.
        _ = try c.call(Self.submit("n2"))
        let next = try consumer.deliveries(1)
        #expect(next[0]["cursor"]?.intValue == first[0]["cursor"]!.intValue! + 1 && next[0]["notification"] == "n2")
    }

    @Test func restartDeliversEveryScheduledDecisionExactlyOnce() throws {
        let url = try TestPostgres.freshDatabase()
        var server = try TestServer(url: url)
        var c = try server.client()
        try Self.setUpAlice(c)
        _ = try c.call(["op": "settings", "user": "alice", "app": .string(Self.mail), "delivery": "summary"])
        _ = try c.call(Self.submit("queued-1"))
        _ = try c.call(Self.submit("deferred-1", extra: ["deliverAt": "2026-03-27T12:00:00Z", "interruptionLevel": "timeSensitive"]))
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        let before = try consumer.deliveries(1)
        _ = try consumer.call(["op": "ack", "consumer": "push", "cursor": before[0]["cursor"]!])
        server.stop()

        server = try TestServer(url: url)
        defer { server.stop() }
        c = try server.client()
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-28T00:00:00Z"])
        let again = try server.client()
        _ = try again.call(["op": "subscribe", "consumer": "push"])
        let after = try again.deliveries(2)
        #expect(after.map { $0["kind"]?.stringValue } == ["summary", "alert"] || after.map { $0["kind"]?.stringValue } == ["alert", "summary"])
        #expect(throws: WireClient.Failure.self, "nothing is delivered twice") { _ = try again.deliveries(1, timeoutMilliseconds: 1500) }
    }
}

@Suite struct WithdrawTests {
    /// A withdraw naming a user the notification never reached is not acked without a word (its
    /// real recipient keeps it): the ack says `nothing_to_withdraw`; it is stored all the same
    /// (a cancel in advance, SPEC §3 rule 1).
    @Test func aWithdrawNamingAUserWhoHasNothingOfThatIdIsWarned() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        _ = try c.call(["op": "submit", "id": "n1", "app": "com.example.mail", "user": "alice", "title": "T",
                        "body": "B", "hiddenPreviewsBodyPlaceholder": "x"])
        func codes(_ r: JSONValue) -> [String] { (r["warnings"]?.arrayValue ?? []).compactMap { $0["code"]?.stringValue } }
        let wrong = try c.call(["op": "withdraw", "user": "bob", "app": "com.example.mail", "id": "n1"])
        #expect(wrong["ok"] == true && codes(wrong) == ["nothing_to_withdraw"], "\(wrong.canonicalString)")
        #expect(wrong["warnings"]?.arrayValue?.first?["detail"]?.stringValue?.contains("leave out “user”") == true)
        let right = try c.call(["op": "withdraw", "user": "alice", "app": "com.example.mail", "id": "n1"])
        #expect(right["ok"] == true && codes(right) == [], "\(right.canonicalString)")
        let again = try c.call(["op": "withdraw", "user": "alice", "app": "com.example.mail", "id": "n1"])
        #expect(codes(again) == ["nothing_to_withdraw"], "withdrawn already")
        let inAdvance = try c.call(["op": "withdraw", "user": "alice", "app": "com.example.mail", "id": "n2"])
        #expect(inAdvance["ok"] == true && codes(inAdvance) == ["nothing_to_withdraw"])
        let n2 = try c.call(["op": "submit", "id": "n2", "app": "com.example.mail", "user": "alice", "title": "T",
                             "body": "B", "hiddenPreviewsBodyPlaceholder": "x"])
        #expect(n2["ok"] == true)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(3)
        #expect(ds.map { $0["kind"]?.stringValue } == ["alert", "withdrawn", "withdrawn"], "n2, cancelled in advance, never alerts")
    }

    /// A `focusOff` that turns nothing off — a misspelt name, a Focus not on by hand and outside its
    /// windows, one turned off already — got `ok` and no word. It is warned (`focus_not_on`), judged
    /// from the user's state when it is folded: a `focusOn` pipelined just before it counts.
    @Test func aFocusOffThatFindsNoFocusOnIsWarned() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        func codes(_ r: JSONValue) -> [String] { (r["warnings"]?.arrayValue ?? []).compactMap { $0["code"]?.stringValue } }
        let misspelt = try c.call(["op": "focusOff", "user": "alice", "focus": "Wrok"])
        #expect(misspelt["ok"] == true && codes(misspelt) == ["focus_not_on"], "\(misspelt.canonicalString)")
        #expect(misspelt["warnings"]?.arrayValue?.first?["title"]?.stringValue?.contains("alice has no Focus “Wrok”") == true)
        _ = try c.call(["op": "focusDefine", "user": "alice", "focus": "Morning", "timeZone": "UTC",
                        "schedule": [["days": [1, 2, 3, 4, 5, 6, 7], "start": "06:00", "end": "08:00"]]])
        _ = try c.call(["op": "focusDefine", "user": "alice", "focus": "Evening", "timeZone": "UTC",
                        "schedule": [["days": [1, 2, 3, 4, 5, 6, 7], "start": "18:00", "end": "20:00"]]])
        let outside = try c.call(["op": "focusOff", "user": "alice", "focus": "Evening"])
        #expect(codes(outside) == ["focus_not_on"], "defined, outside its window")
        #expect(outside["warnings"]?.arrayValue?.first?["title"]?.stringValue?.contains("is not on at 2026-03-27T07:00:00Z") == true)
        let inWindow = try c.call(["op": "focusOff", "user": "alice", "focus": "Morning"])
        #expect(inWindow["ok"] == true && codes(inWindow) == [], "\(inWindow.canonicalString)")
        #expect(codes(try c.call(["op": "focusOff", "user": "alice", "focus": "Morning"])) == ["focus_not_on"], "turned off already")
        // Pipelined: the focusOn is folded before the focusOff is judged.
        try c.send(#"{"op":"focusOn","user":"alice","focus":"Evening","rid":1}"#)
        try c.send(#"{"op":"focusOff","user":"alice","focus":"Evening","rid":2}"#)
        let on = try c.readJSON(), off = try c.readJSON()
        #expect(on["rid"] == 1 && codes(on) == [] && off["rid"] == 2 && codes(off) == [], "\(on.canonicalString) \(off.canonicalString)")
        #expect(codes(try c.call(["op": "focusOff", "user": "alice", "focus": "Evening"])) == ["focus_not_on"], "off by hand already")
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Evening", "until": "2026-03-27T07:30:00Z"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:45:00Z"])
        #expect(codes(try c.call(["op": "focusOff", "user": "alice", "focus": "Evening"])) == ["focus_not_on"], "its until passed")
    }

    @Test func withdrawWithoutUserReachesEveryRecipientAndOpenedIsStored() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        for user in ["alice", "bob"] {
            _ = try c.call(["op": "authorization", "user": .string(user), "app": "com.example.mail", "status": "authorized", "options": ["alert", "badge"]])
        }
        _ = try c.call(["op": "settings", "user": "bob", "app": "com.example.mail", "delivery": "summary"])
        let fan = try c.call(["op": "submit", "id": "n1", "app": "com.example.mail", "users": ["alice", "bob"], "title": "T",
                              "body": "B", "hiddenPreviewsBodyPlaceholder": "x"])
        #expect(fan["ok"] == true && fan["events"] == 2)
        #expect(try c.call(["op": "opened", "user": "alice", "app": "com.example.mail", "id": "n1"])["ok"] == true)
        let w = try c.call(["op": "withdraw", "app": "com.example.mail", "id": "n1"])
        #expect(w["ok"] == true, "\(w.canonicalString)")
        #expect(try c.call(["op": "withdraw", "app": "com.example.mail", "id": "nope"])["error"]?["code"] == "unknown_notification")
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(4)
        let bob = ds.filter { $0["user"] == "bob" }.map { $0["kind"]?.stringValue }
        #expect(bob == ["queued", "withdrawn"], "bob's queued copy is withdrawn")
    }
}

@Suite struct DurableConsumerTests {
    /// SPEC §5: delivery is at least once from the last acked cursor, and the consumer's name is
    /// durable. A new name is stored at its starting cursor when it subscribes, so one that
    /// reconnects "committed" before ever acking resumes there, not at the head, and misses
    /// nothing delivered while it was away.
    @Test func aConsumerThatNeverAckedResumesWhereItStartedAndMissesNothing() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let p = try server.client()
        try ServiceTests.setUpAlice(p)
        _ = try p.call(ServiceTests.submit("a"))
        let first = try server.client()
        let subscribed = try first.call(["op": "subscribe", "consumer": "k", "from": "earliest"])
        #expect(subscribed["ok"] == true && subscribed["cursor"] == 0)
        #expect(try first.deliveries(1).map { $0["notification"]?.stringValue } == ["a"])
        first.close()   // no ack
        _ = try p.call(ServiceTests.submit("b"))
        _ = try p.call(["op": "clock", "advanceTo": "2026-03-27T07:00:01Z"])   // b's delivery committed
        let again = try server.client()
        let resumed = try again.call(["op": "subscribe", "consumer": "k"])
        #expect(resumed["cursor"] == 0, "\(resumed.canonicalString)")
        #expect(try again.deliveries(2).map { $0["notification"]?.stringValue } == ["a", "b"], "a again (never acked), and b")
        let stored = try PGConnection.connect(server.url).execute("SELECT acked FROM consumer_cursors WHERE partition = 0 AND name = 'k'")
        #expect(stored.rowCount == 1 && stored.int64(0, 0) == 0)
    }
}

@Suite struct SubscribeOrderTests {
    /// SPEC §5: replies come in request order, and `subscribe` is answered "→ then" delivery lines.
    /// A known consumer's subscribe pipelined behind a submit not yet committed: the submit's
    /// reply, the subscribe reply, then the lines (the stream must not write to the socket past
    /// the replies still owed).
    @Test func deliveryLinesWaitForTheSubscribeReplyAndEveryEarlierReply() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let p = try server.client()
        try ServiceTests.setUpAlice(p)
        _ = try p.call(ServiceTests.submit("a"))
        let known = try server.client()
        _ = try known.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        _ = try known.deliveries(1)
        known.close()
        for round in 0..<5 {
            let c = try server.client()
            let submit = ServiceTests.submit("b\(round)", extra: ["rid": "r1"]).canonicalString
            let subscribe = JSONValue.object(["op": "subscribe", "consumer": "c", "from": "earliest", "rid": "r2"]).canonicalString
            try c.sendRaw(Array((submit + "\n" + subscribe + "\n").utf8))
            let first = try c.readJSON(), second = try c.readJSON(), third = try c.readJSON()
            #expect(first["rid"] == "r1" && first["ok"] == true, "round \(round): \(first.canonicalString)")
            #expect(second["rid"] == "r2" && second["op"] == "subscribe", "round \(round): \(second.canonicalString)")
            #expect(third["op"] == "delivery" && third["cursor"] == 1, "round \(round): \(third.canonicalString)")
            c.close()
        }
    }
}

@Suite struct OneOrderedStreamTests {
    /// SPEC §10 "One ordered stream per user": a withdraw without a user reads its recipients
    /// from PostgreSQL first; the requests sent after it on its connection wait, so they are
    /// stored — and decided — after it. (Were they to overtake it, a submit pipelined behind
    /// would collapse into the withdrawn notification, and 130 of them would push it out of the
    /// remembered deliveries, so the acknowledged withdraw would do nothing.)
    @Test func oneOrderedStreamPerUser_requestsSentAfterAWithdrawWithoutAUserAreStoredAfterIt() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert", "badge"]])
        func submit(_ id: String) -> String {
            JSONValue.object(["op": "submit", "id": .string(id), "app": "com.example.mail", "user": "alice", "title": "T", "body": "B",
                              "collapseId": "K", "hiddenPreviewsBodyPlaceholder": "x"]).canonicalString
        }
        let first = try c.call(try JSONValue.parse(submit("a")))
        #expect(first["ok"] == true)
        // Pipelined: the withdraw, then 130 submits of the same user (the first collapses with "a").
        try c.send(JSONValue.object(["op": "withdraw", "app": "com.example.mail", "id": "a"]).canonicalString)
        for i in 0..<130 { try c.send(submit("b\(i)")) }
        let withdrawn = try c.readJSON()
        var seqs: [Int64] = []
        for _ in 0..<130 { seqs.append(try #require(c.readJSON()["seq"]?.intValue)) }
        let w = try #require(withdrawn["seq"]?.intValue)
        #expect(seqs.allSatisfy { $0 > w }, "the withdraw (seq \(w)) is stored before the submits sent after it: \(seqs.prefix(3))…")
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "c", "from": "earliest"])
        let ds = try consumer.deliveries(3)
        #expect(ds[0]["kind"] == "alert" && ds[0]["notification"] == "a")
        #expect(ds[1]["kind"] == "withdrawn" && ds[1]["notification"] == "a" && ds[1]["presentation"]?["badge"] == 0,
                "\(ds[1].canonicalString)")
        #expect(ds[2]["notification"] == "b0" && ds[2]["kind"] == "alert" && ds[2]["replaces"] == nil,
                "b0 no longer collapses into the withdrawn a: \(ds[2].canonicalString)")
    }
}

@Suite struct EveryOpTests {
    /// Every state-changing op of SPEC §5 over TCP, and the delivery kinds the other tests do not reach.
    @Test func remainingOpsAndDeliveryKindsEndToEnd() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        let mail = "com.example.mail"
        func ok(_ request: JSONValue) throws {
            let r = try c.call(request)
            #expect(r["ok"] == true, "\(request.canonicalString) → \(r.canonicalString)")
        }
        func submit(_ id: String, user: String = "alice", _ extra: [String: JSONValue] = [:]) throws {
            var o: [String: JSONValue] = ["op": "submit", "id": .string(id), "app": .string(mail), "user": .string(user),
                                          "title": "T", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"]
            for (k, v) in extra { o[k] = v }
            try ok(.object(o))
        }
        try ok(["op": "registerApp", "app": .string(mail), "entitlements": []])
        try ok(["op": "authorization", "user": "alice", "app": .string(mail), "status": "authorized", "options": ["alert", "sound", "badge"]])
        try submit("not-authorized", user: "carol")                                   // suppressed
        try ok(["op": "authorization", "user": "bob", "app": .string(mail), "status": "provisional", "options": []])
        try submit("trial", user: "bob")                                              // quiet, provisional
        try ok(["op": "provisionalKeep", "user": "bob", "app": .string(mail), "delivery": "immediate"])
        try ok(["op": "provisionalTurnOff", "user": "bob", "app": .string(mail)])
        try ok(["op": "mute", "user": "alice", "app": .string(mail), "until": "2026-03-27T07:30:00Z"])
        try submit("muted")                                                           // quiet
        try ok(["op": "clock", "advanceTo": "2026-03-27T07:45:00Z"])                  // the mute has ended
        try ok(["op": "focusOn", "user": "alice", "focus": "Work"])
        try submit("held-expiring", ["expiresAt": "2026-03-27T08:00:00Z"])            // held, then expired
        try submit("first", ["collapseId": "score"])                                  // held
        try submit("second", ["collapseId": "score"])                                 // replaces first
        try submit("kept")                                                            // held, then in the digest
        try ok(["op": "clock", "advanceTo": "2026-03-27T09:00:00Z"])
        try ok(["op": "focusOff", "user": "alice", "focus": "Work"])                  // focusDigest
        try submit("to-snooze")                                                       // alert
        try ok(["op": "snooze", "user": "alice", "app": .string(mail), "id": "to-snooze", "until": "2026-03-27T10:00:00Z"])
        try ok(["op": "opened", "user": "alice", "app": .string(mail), "id": "to-snooze"])
        try ok(["op": "clock", "advanceTo": "2026-03-27T10:30:00Z"])                  // the snooze alerts again
        try ok(["op": "badgeClear", "user": "alice", "app": .string(mail)])           // cleared
        try ok(["op": "settings", "user": "alice", "allowNotifications": false])
        try submit("silenced")                                                        // suppressed (silence all)
        try ok(["op": "clock", "advanceTo": "2026-03-27T10:30:00Z"])                  // replies once deliveries are committed

        let stats = try c.call(["op": "stats"])
        let head = try #require(stats["deliveryHead"]?.intValue)
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "all", "from": "earliest"])
        let ds = try consumer.deliveries(Int(head))
        let kinds = Set(ds.compactMap { $0["kind"]?.stringValue })
        for kind in ["alert", "quiet", "held", "suppressed", "expired", "replaced", "focusDigest", "cleared"] {
            #expect(kinds.contains(kind), "a \(kind) delivery; got \(ds.map { "\($0["kind"]!.stringValue!)/\($0["notification"]?.stringValue ?? "-")" })")
        }
        #expect(ds.contains { $0["notification"] == "trial" && $0["provisional"] == true })
        #expect(ds.filter { $0["notification"] == "to-snooze" && $0["kind"] == "alert" }.count == 2, "alerted, then again at the snooze's end")
        #expect(ds.contains { $0["notification"] == "second" && $0["kind"] == "held" })
        #expect(ds.contains { $0["kind"] == "replaced" && $0["notification"] == "first" })
        #expect(ds.last?["kind"] == "suppressed" && ds.last?["notification"] == "silenced")
        // The cursor order is the commit order, with no gaps.
        #expect(ds.compactMap { $0["cursor"]?.intValue } == Array(1...head))
    }
}

@Suite struct SlowConsumerTests {
    /// A consumer far behind a tiny in-memory ring, with a tiny buffer bound: it is paused,
    /// pages from PostgreSQL when it catches up, and sees every cursor once, in order.
    @Test func slowConsumerIsPausedAndResumesFromPostgresWithoutAGap() throws {
        let server = try TestServer { $0.deliveryRingCapacity = 16; $0.consumerBufferBytes = 2048 }
        defer { server.stop() }
        let c = try server.client()
        _ = try c.call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        let n = 400
        for i in 0..<n {
            try c.send(JSONValue.object(["op": "submit", "id": .string("n\(i)"), "app": "com.example.mail", "user": "alice",
                                         "title": "T", "body": .string(String(repeating: "b", count: 200)),
                                         "hiddenPreviewsBodyPlaceholder": "x"]).canonicalString)
        }
        for _ in 0..<n { #expect(try c.readJSON()["ok"] == true) }
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T07:00:01Z"])   // all deliveries committed
        // Subscribing now starts 384 cursors behind the 16-line ring: pages come from PostgreSQL,
        // and the 2 KiB bound pauses the stream until the socket drains.
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "slow", "from": "earliest"])
        var cursors: [Int64] = []
        while cursors.count < n {
            let d = try consumer.readJSON(timeoutMilliseconds: 10_000)
            if let cursor = d["cursor"]?.intValue { cursors.append(cursor) }
        }
        #expect(cursors == Array(1...Int64(n)), "every cursor once, in order")
    }
}

@Suite struct RacingDuplicateTests {
    @Test func sixteenConnectionsRacingTheSameIdStoreOneRowAndAllGetItsSeq() throws {
        let server = try TestServer()
        defer { server.stop() }
        _ = try server.client().call(["op": "authorization", "user": "alice", "app": "com.example.mail", "status": "authorized", "options": ["alert"]])
        let clients = try (0..<16).map { _ in try server.client() }
        let line = JSONValue.object(["op": "submit", "id": "race", "app": "com.example.mail", "user": "alice", "title": "T",
                                     "body": "B", "hiddenPreviewsBodyPlaceholder": "x"]).canonicalString
        for c in clients { try c.send(line) }   // all sent before any reply is read
        let replies = try clients.map { try $0.readJSON() }
        #expect(replies.allSatisfy { $0["ok"] == true })
        #expect(Set(replies.compactMap { $0["seq"]?.intValue }).count == 1, "every ack names the one stored event")
        #expect(replies.filter { $0["duplicate"] == nil }.count == 1, "exactly one was the original")
        let conn = try PGConnection.connect(server.url)
        #expect(try conn.execute("SELECT count(*) FROM events WHERE notification_id = 'race'").int64(0, 0) == 1)
    }
}
