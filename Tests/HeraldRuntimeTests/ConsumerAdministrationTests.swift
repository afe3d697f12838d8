// Consumers as their users meet them: subscribe filters, the admin ops `consumers` and
// `deleteConsumer`, `herald consumers list|delete`, and `herald tail --no-ack` (issue 44, experiments 3 and 4).
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct ConsumerAdministrationTests {
    static let mail = ServiceTests.mail
    static let chat = "com.example.chat"

    /// Registers mail and chat; alice authorizes both (alerts), bob neither (suppressed).
    static func setUp(_ c: WireClient) throws {
        for app in [mail, chat] {
            #expect(try c.call(["op": "registerApp", "app": .string(app), "entitlements": []])["ok"] == true)
            #expect(try c.call(["op": "authorization", "user": "alice", "app": .string(app), "status": "authorized",
                                "options": ["alert", "sound", "badge"]])["ok"] == true)
        }
    }

    /// Submits `count` notifications cycling over (mail, alice), (chat, alice), (mail, bob), then
    /// moves the clock a second (its reply waits for the deliveries' commit).
    static func submitMixed(_ c: WireClient, count: Int, prefix: String = "n") throws {
        let cycle: [(String, String)] = [(mail, "alice"), (chat, "alice"), (mail, "bob")]
        for i in 0..<count {
            let (app, user) = cycle[i % cycle.count]
            try c.send(JSONValue.object(["op": "submit", "id": .string("\(prefix)\(i)"), "app": .string(app), "user": .string(user),
                                         "title": "T", "body": "B", "hiddenPreviewsBodyPlaceholder": "x"]).canonicalString)
        }
        for _ in 0..<count { #expect(try c.readJSON()["ok"] == true) }
        let now = try #require(try c.call(["op": "stats"])["now"]?.stringValue)
        let later = Instant(rfc3339: now)!.adding(.seconds(1))
        _ = try c.call(["op": "clock", "advanceTo": .string(later.rfc3339)])
    }

    static func head(_ c: WireClient) throws -> Int64 { try #require(try c.call(["op": "stats"])["deliveryHead"]?.intValue) }

    /// The `consumers` op's entry for `name` (nil: not listed).
    static func listed(_ c: WireClient, _ name: String) throws -> JSONValue? {
        let r = try c.call(["op": "consumers"])
        #expect(r["ok"] == true, "\(r.canonicalString)")
        return r["consumers"]?.arrayValue?.first { $0["consumer"]?.stringValue == name }
    }

    /// The consumer's acknowledged cursor once `condition` holds for it (polled, at most ~5 s).
    static func ackedWhen(_ c: WireClient, _ name: String, _ condition: (Int64?) -> Bool) throws -> Int64? {
        var acked: Int64?
        for _ in 0..<250 {
            acked = try listed(c, name)?["partitions"]?.arrayValue?.first?["acked"]?.intValue
            if condition(acked) { break }
            usleep(20_000)
        }
        return acked
    }

    /// Experiment 3: a filtered and an unfiltered consumer on one log. Each sees exactly its lines
    /// (the filtered one the unfiltered one's lines of its apps and kinds, byte for byte, in cursor
    /// order), and the filtered one's cursor ends at the log's head though the last lines are not
    /// its own. A ring of 16 lines makes the earlier lines come from PostgreSQL, the later from memory.
    @Test func aFilteredConsumerSeesExactlyItsLinesAndItsCursorEndsAtTheHead() throws {
        let server = try TestServer { $0.deliveryRingCapacity = 16 }
        defer { server.stop() }
        let c = try server.client()
        try Self.setUp(c)
        try Self.submitMixed(c, count: 60, prefix: "before")   // behind the ring when they subscribe
        let all = try server.client(), some = try server.client()
        #expect(try all.call(["op": "subscribe", "consumer": "all", "from": "earliest"])["ok"] == true)
        let sub = try some.call(["op": "subscribe", "consumer": "mail-alerts", "from": "earliest",
                                 "filter": ["apps": .array([.string(Self.mail)]), "kinds": ["alert"]]])
        #expect(sub["ok"] == true && sub["filter"]?["kinds"] == ["alert"], "\(sub.canonicalString)")
        try Self.submitMixed(c, count: 61, prefix: "after")    // ends with chat's and bob's lines
        let head = try Self.head(c)
        let everything = try all.deliveries(Int(head))
        #expect(everything.compactMap { $0["cursor"]?.intValue } == Array(1...head))
        let expected = everything.filter { $0["app"]?.stringValue == Self.mail && $0["kind"] == "alert" }
        #expect(expected.count == 41 && everything.contains { $0["kind"] == "suppressed" })
        let got = try some.deliveries(expected.count)
        #expect(got == expected)
        for d in got { try some.send(#"{"op":"ack","consumer":"mail-alerts","cursor":\#(d["cursor"]!.intValue!)}"#) }
        try all.send(#"{"op":"ack","consumer":"all","cursor":\#(head)}"#)
        // Nothing else comes: the acks' replies only.
        for _ in got { #expect(try some.readJSON()["ok"] == true) }
        #expect(try some.readLine(timeoutMilliseconds: 300) == nil)
        #expect(try Self.ackedWhen(c, "mail-alerts") { $0 == head } == head)
        #expect(try Self.ackedWhen(c, "all") { $0 == head } == head)
        // The operators' view says so too.
        let conn = try PGConnection.connect(server.url)
        defer { conn.close() }
        #expect(try conn.execute("SELECT lag FROM herald_consumer_lag WHERE consumer = 'mail-alerts'").int64(0, 0) == 0)
        // A filtered consumer acknowledging nothing yet is not moved past the lines it was sent.
        let later = try server.client()
        #expect(try later.call(["op": "subscribe", "consumer": "late", "from": "earliest", "filter": ["kinds": ["suppressed"]]])["ok"] == true)
        let first = try #require(try later.deliveries(1).first)
        usleep(200_000)
        #expect(try Self.listed(c, "late")?["partitions"]?.arrayValue?.first?["acked"]?.intValue == 0, "first line sent: \(first["cursor"]!)")
    }

    @Test func aFilterNamingAnUnknownKindIsRefusedAndTheConnectionMaySubscribeAgain() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        let r = try c.call(["op": "subscribe", "consumer": "x", "filter": ["kinds": ["alerts"]]])
        #expect(r["ok"] == false && r["error"]?["code"] == "invalid_filter", "\(r.canonicalString)")
        #expect(r["error"]?["detail"]?.stringValue?.contains("alert, quiet, queued") == true)
        #expect(try Self.listed(c, "x") == nil, "a refused subscribe makes no consumer")
        #expect(try c.call(["op": "subscribe", "consumer": "x", "filter": ["kinds": ["alert"]]])["ok"] == true)
        #expect(try Self.listed(c, "x")?["filter"] == ["kinds": ["alert"]])
    }

    /// Experiment 4: deleting a consumer with a live connection closes that connection with a
    /// `consumer_deleted` error line, removes its cursor, and the name then starts afresh: from
    /// the tail by default, from cursor 1 with `earliest`.
    @Test func deletingAConsumerClosesItsConnectionWithAReasonAndTheNameStartsAfresh() throws {
        let server = try TestServer()
        defer { server.stop() }
        let admin = try server.client()
        try Self.setUp(admin)
        try Self.submitMixed(admin, count: 3)
        let gateway = try server.client()
        #expect(try gateway.call(["op": "subscribe", "consumer": "gw", "from": "earliest"])["ok"] == true)
        _ = try gateway.deliveries(3)
        #expect(try gateway.call(["op": "ack", "consumer": "gw", "cursor": 2])["cursor"] == 2)
        let members = try #require(try Self.listed(admin, "gw")?["members"]?.arrayValue)
        #expect(members.count == 1)

        let deleted = try admin.call(["op": "deleteConsumer", "consumer": "gw"])
        #expect(deleted["ok"] == true && deleted["acked"] == 2 && deleted["closedConnections"] == 1, "\(deleted.canonicalString)")
        let last = try gateway.readJSON()
        #expect(last["ok"] == false && last["error"]?["code"] == "consumer_deleted", "\(last.canonicalString)")
        #expect(last["error"]?["title"]?.stringValue?.contains("deleted by an operator") == true)
        #expect(throws: (any Error).self) { while try gateway.readLine(timeoutMilliseconds: 5_000) != nil {} }
        #expect(try Self.listed(admin, "gw") == nil)
        let conn = try PGConnection.connect(server.url)
        defer { conn.close() }
        #expect(try conn.execute("SELECT count(*) FROM consumers WHERE name = 'gw'").int64(0, 0) == 0)
        // An ack of the deleted name is refused: it does not bring the cursor back.
        #expect(try admin.call(["op": "ack", "consumer": "gw", "cursor": 3])["error"]?["code"] == "unknown_consumer")

        // Afresh: a committed subscribe starts at the tail, an earliest one at cursor 1.
        let again = try server.client()
        #expect(try again.call(["op": "subscribe", "consumer": "gw"])["cursor"] == 3)
        let fromStart = try server.client()
        #expect(try fromStart.call(["op": "subscribe", "consumer": "gw", "from": "earliest"])["cursor"] == 0)
        #expect(try fromStart.deliveries(1).first?["cursor"] == 1)

        let unknown = try admin.call(["op": "deleteConsumer", "consumer": "nobody"])
        #expect(unknown["ok"] == false && unknown["error"]?["code"] == "unknown_consumer")
        let consumerToken = try admin.call(["op": "deleteConsumer"])
        #expect(consumerToken["error"]?["code"] == "invalid_field")
    }

    @Test func consumerAdministrationNeedsTheAdminRole() throws {
        let tokens = TokenTable(["reader-token": Grant(name: "reader", roles: [.consumer], apps: nil)])
        let server = try TestServer(tokens: tokens)
        defer { server.stop() }
        let c = try server.client(token: "reader-token")
        #expect(try c.call(["op": "consumers"])["error"]?["code"] == "forbidden")
        #expect(try c.call(["op": "deleteConsumer", "consumer": "reader"])["error"]?["code"] == "forbidden")
    }

    /// The op and the operators' SQL view agree on every consumer's cursor, lag and last ack; the
    /// op adds its filter and live connections, and `herald consumers list` prints the op's view.
    @Test func theConsumersOpAgreesWithTheLagViewAndShowsFiltersAndMembers() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUp(c)
        try Self.submitMixed(c, count: 6)
        let live = try server.client()
        #expect(try live.call(["op": "subscribe", "consumer": "live", "from": "earliest", "filter": ["apps": .array([.string(Self.chat)])]])["ok"] == true)
        let chatLines = try live.deliveries(2)
        #expect(try live.call(["op": "ack", "consumer": "live", "cursor": chatLines[0]["cursor"]!])["ok"] == true)
        do {
            let away = try server.client()
            // Stored at its starting cursor, 4; it leaves before acknowledging anything.
            #expect(try away.call(["op": "subscribe", "consumer": "away", "from": 4])["ok"] == true)
            away.close()
        }
        _ = try server.statsWhen { $0["consumers"] == 1 }
        let reply = try c.call(["op": "consumers"])
        let list = try #require(reply["consumers"]?.arrayValue)
        #expect(list.compactMap { $0["consumer"]?.stringValue } == ["away", "live"])
        let conn = try PGConnection.connect(server.url)
        defer { conn.close() }
        let view = try conn.execute("SELECT consumer, acked, head, lag, to_char(acked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM herald_consumer_lag ORDER BY consumer")
        #expect(view.rowCount == 2)
        for (i, entry) in list.enumerated() {
            let p = entry["partitions"]?.arrayValue?.first
            #expect(p?["acked"]?.intValue == view.int64(i, 1) && p?["head"]?.intValue == view.int64(i, 2), "\(entry.canonicalString)")
            #expect(entry["lag"]?.intValue == view.int64(i, 3) && entry["ackedAt"]?.stringValue == view.string(i, 4))
        }
        #expect(list[0]["filter"] == .null && list[0]["members"] == [])
        #expect(list[1]["filter"] == ["apps": .array([.string(Self.chat)])])
        let member = try #require(list[1]["members"]?.arrayValue?.first)
        #expect(member["peer"]?.stringValue?.hasPrefix("127.0.0.1:") == true && member["sent"] == chatLines[1]["cursor"])

        let json = try HeraldCommandTests.herald(["consumers", "list", "--json", "--connect", "127.0.0.1:\(server.port)"])
        #expect(json.status == 0, "\(json)")
        let printed = try JSONValue.parse(Array(json.stdout.utf8))
        #expect(printed["consumers"]?.arrayValue?.map { $0["partitions"] } == list.map { $0["partitions"] })
        let table = try HeraldCommandTests.herald(["consumers", "list", "--connect", "127.0.0.1:\(server.port)"])
        let lines = table.stdout.split(separator: "\n").map(String.init)
        #expect(table.status == 0 && lines.count == 3 && lines[0].hasPrefix("CONSUMER"), "\(table)")
        #expect(lines[1].hasPrefix("away ") && lines[2].contains(#"{"apps":["com.example.chat"]}"#), "\(table)")
    }

    @Test func herald_consumers_deleteClosesTheLiveConnectionAndSaysWhatItDid() throws {
        let server = try TestServer()
        defer { server.stop() }
        let gateway = try server.client()
        #expect(try gateway.call(["op": "subscribe", "consumer": "gw"])["ok"] == true)
        let run = try HeraldCommandTests.herald(["consumers", "delete", "gw", "--connect", "127.0.0.1:\(server.port)"])
        #expect(run.status == 0 && run.stdout.contains("deleted consumer gw") && run.stdout.contains("1 live connection(s) closed"), "\(run)")
        #expect(try gateway.readJSON()["error"]?["code"] == "consumer_deleted")
        let again = try HeraldCommandTests.herald(["consumers", "delete", "gw", "--connect", "127.0.0.1:\(server.port)"])
        #expect(again.status == 2 && again.stderr.contains("No consumer named “gw” exists"), "\(again)")
    }

    /// `herald tail --no-ack` reads without moving any cursor: under a consumer's name it starts at
    /// that consumer's cursor, the consumer's live connection keeps streaming, its cursor does not
    /// move, and no consumer is created; without a name it reads from where `--from` says.
    @Test func tailWithNoAckReadsWithoutMovingAnyCursorNorDisplacingTheConsumer() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUp(c)
        try Self.submitMixed(c, count: 5)
        let gateway = try server.client()
        #expect(try gateway.call(["op": "subscribe", "consumer": "gw", "from": "earliest"])["ok"] == true)
        _ = try gateway.deliveries(5)
        #expect(try gateway.call(["op": "ack", "consumer": "gw", "cursor": 2])["ok"] == true)

        let tail = ["tail", "--no-ack", "--connect", "127.0.0.1:\(server.port)", "--limit", "3", "--idle-exit", "10"]
        let peek = try HeraldCommandTests.herald(tail + ["--consumer", "gw"])
        #expect(peek.status == 0, "\(peek)")
        #expect(peek.stdout.split(separator: "\n").compactMap { try? JSONValue.parse(String($0))["cursor"]?.intValue } == [3, 4, 5])
        let alerts = try HeraldCommandTests.herald(tail + ["--from", "earliest", "--kind", "alert"])
        #expect(alerts.status == 0, "\(alerts)")
        #expect(alerts.stdout.split(separator: "\n").compactMap { try? JSONValue.parse(String($0))["cursor"]?.intValue } == [1, 2, 4])
        // The gateway was not displaced: it still streams, and its cursor is where it acked.
        try Self.submitMixed(c, count: 1, prefix: "more")
        #expect(try gateway.deliveries(1).first?["cursor"] == 6)
        #expect(try Self.listed(c, "gw")?["partitions"]?.arrayValue?.first?["acked"] == 2)
        let names = try #require(try c.call(["op": "consumers"])["consumers"]?.arrayValue).compactMap { $0["consumer"]?.stringValue }
        #expect(names == ["gw"])
    }
}
