// SPEC §3 "Idempotency" over TCP and PostgreSQL: (app, notification id) is unique forever,
// whoever the recipients — a used id for another user, a fan-out re-sent, ids racing in flight.
// "Re-submitting the same id is acknowledged with duplicate: true and the original seq; nothing
// new is stored or delivered": a re-send that differs gets that ack and a `duplicate_differs` warning.
import HeraldCore
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct IdempotencyTests {
    static let mail = "com.example.mail"

    static func submit(_ id: String, user: String? = nil, users: [String]? = nil, body: String = "World") -> JSONValue {
        var o: [String: JSONValue] = ["op": "submit", "id": .string(id), "app": .string(mail), "title": "Hello",
                                      "body": .string(body), "hiddenPreviewsBodyPlaceholder": "A message"]
        if let user { o["user"] = .string(user) }
        if let users { o["users"] = .array(users.map(JSONValue.string)) }
        return .object(o)
    }

    static func authorize(_ c: WireClient, _ users: [String]) throws {
        for user in users {
            #expect(try c.call(["op": "authorization", "user": .string(user), "app": .string(mail), "status": "authorized",
                                "options": ["alert"]])["ok"] == true)
        }
    }

    static func submitsStored(_ server: TestServer, id: String) throws -> [String] {
        let r = try PGConnection.connect(server.url).execute(
            "SELECT user_id FROM events WHERE type = 'submit' AND notification_id = $1 ORDER BY seq", [id])
        return (0..<r.rowCount).compactMap { r.string($0, 0) }
    }

    static func differs(_ r: JSONValue) -> Bool {
        r["ok"] == true && r["duplicate"] == true && r["warnings"]?.arrayValue?.first?["code"] == "duplicate_differs"
    }

    /// SPEC §3: (app, user, id) is the key: the same id for another user is another notification.
    @Test func idempotency_aUsedIdForAnotherUserIsAnotherNotificationStoredAndDelivered() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.authorize(c, ["alice", "bob"])
        let first = try c.call(Self.submit("n1", user: "alice"))
        #expect(first["ok"] == true)
        let other = try c.call(Self.submit("n1", user: "bob"))
        #expect(other["ok"] == true && other["duplicate"] == nil && other["seq"] != first["seq"], "\(other.canonicalString)")
        let changed = try c.call(Self.submit("n1", user: "alice", body: "Changed"))
        #expect(Self.differs(changed) && changed["seq"] == first["seq"], "\(changed.canonicalString)")
        #expect(changed["warnings"]?.arrayValue?.first?["title"]?.stringValue?.contains("seq \(first["seq"]?.intValue ?? -1)") == true,
                "the warning names the stored submit: \(changed.canonicalString)")
        #expect(try Self.submitsStored(server, id: "n1") == ["alice", "bob"])
        _ = try c.call(["op": "clock", "advanceTo": "2026-03-27T08:00:00Z"])
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        #expect(Set(try consumer.deliveries(2).map { $0["user"]?.stringValue }) == ["alice", "bob"])
    }

    @Test func idempotency_aFanOutReSentIsADuplicateAndNewRecipientsAreStored() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.authorize(c, ["alice", "bob", "carol", "dave"])
        let fan = try c.call(Self.submit("n1", users: ["alice", "bob"]))
        #expect(fan["ok"] == true && fan["events"] == 2 && fan["appended"] == 2)
        let again = try c.call(Self.submit("n1", users: ["alice", "bob"]))
        #expect(again["ok"] == true && again["duplicate"] == true && again["seq"] == fan["seq"] && again["appended"] == 0
                && again["warnings"] == [], "\(again.canonicalString)")
        let more = try c.call(Self.submit("n1", users: ["alice", "bob", "carol"]))
        #expect(more["ok"] == true && more["duplicate"] == nil && more["events"] == 3 && more["appended"] == 1, "\(more.canonicalString)")
        let bob = try c.call(Self.submit("n1", user: "bob"))
        #expect(bob["duplicate"] == true && bob["warnings"] == [], "one of its recipients alone: \(bob.canonicalString)")
        let dave = try c.call(Self.submit("n1", user: "dave"))
        #expect(dave["ok"] == true && dave["duplicate"] == nil, "a recipient it did not have: \(dave.canonicalString)")
        let changed = try c.call(Self.submit("n1", users: ["alice", "bob"], body: "Changed"))
        #expect(Self.differs(changed) && changed["seq"] == fan["seq"], "other content: \(changed.canonicalString)")
        #expect(try Self.submitsStored(server, id: "n1") == ["alice", "bob", "carol", "dave"])
    }

    /// docs/service.md: a fan-out's reply carries `events` and `appended` — also a fan-out of one
    /// user (it was answered as a plain submit), and its re-send (`appended: 0`).
    @Test func idempotency_aFanOutOfOneUserIsAnsweredWithItsCounts() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.authorize(c, ["alice"])
        let fan = try c.call(Self.submit("n1", users: ["alice"]))
        #expect(fan["ok"] == true && fan["events"] == 1 && fan["appended"] == 1, "\(fan.canonicalString)")
        let again = try c.call(Self.submit("n1", users: ["alice"]))
        #expect(again["duplicate"] == true && again["events"] == 1 && again["appended"] == 0 && again["seq"] == fan["seq"],
                "\(again.canonicalString)")
        let single = try c.call(Self.submit("n1", user: "alice"))
        #expect(single["duplicate"] == true && single["seq"] == fan["seq"] && single["warnings"] == [], "the same request: \(single.canonicalString)")
    }

    /// Two connections send one id for two users before either is answered: two keys, two
    /// notifications; and one id for one user twice: the second waits for the first (one key in
    /// flight per (app, user, id)) and is its duplicate.
    @Test func idempotency_oneIdRacingForTwoUsersStoresBothAndForOneUserStoresOne() throws {
        let server = try TestServer()
        defer { server.stop() }
        try Self.authorize(server.client(), ["alice", "bob"])
        let a = try server.client(), b = try server.client()
        try a.send(Self.submit("race", user: "alice").canonicalString)
        try b.send(Self.submit("race", user: "bob").canonicalString)
        let replies = [try a.readJSON(), try b.readJSON()]
        #expect(replies.allSatisfy { $0["ok"] == true && $0["duplicate"] == nil }, "\(replies.map(\.canonicalString))")
        try a.send(Self.submit("again", user: "alice").canonicalString)
        try b.send(Self.submit("again", user: "alice").canonicalString)
        let again = [try a.readJSON(), try b.readJSON()]
        #expect(again.filter { $0["duplicate"] == true }.count == 1 && again[0]["seq"] == again[1]["seq"], "\(again.map(\.canonicalString))")
        #expect(try Self.submitsStored(server, id: "race").count == 2)
        #expect(try Self.submitsStored(server, id: "again").count == 1)
    }

    /// A withdraw without a user sent right behind its fan-out (pipelined, before the submit's
    /// COMMIT) waits for it and then reaches every recipient.
    @Test func idempotency_aWithdrawRightBehindItsFanOutWaitsForItAndReachesEveryRecipient() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.authorize(c, ["alice", "bob"])
        _ = try c.call(["op": "focusOn", "user": "alice", "focus": "Work"])
        _ = try c.call(["op": "focusOn", "user": "bob", "focus": "Work"])
        try c.send(Self.submit("n1", users: ["alice", "bob"]).canonicalString)
        try c.send(JSONValue.object(["op": "withdraw", "app": .string(Self.mail), "id": "n1"]).canonicalString)
        let submitted = try c.readJSON(), withdrawn = try c.readJSON()
        #expect(submitted["ok"] == true && withdrawn["ok"] == true, "\(withdrawn.canonicalString)")
        let consumer = try server.client()
        _ = try consumer.call(["op": "subscribe", "consumer": "push", "from": "earliest"])
        let kinds = try consumer.deliveries(4).map { "\($0["user"]?.stringValue ?? "") \($0["kind"]?.stringValue ?? "")" }
        #expect(Set(kinds) == ["alice held", "bob held", "alice withdrawn", "bob withdrawn"], "\(kinds)")
    }
}
