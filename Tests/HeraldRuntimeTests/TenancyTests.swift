// Experiment 9 of issue #8: a token acts only within its roles and apps; refusals store nothing and are logged.
import Foundation
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct TenancyTests {
    static let mail = "com.example.mail", bank = "com.example.bank"
    static let tokens = TokenTable([
        "mail-secret-token": Grant(name: "mail-backend", roles: [.producer], apps: [mail]),
        "bank-secret-token": Grant(name: "bank-backend", roles: [.producer], apps: [bank]),
        "ops-secret-token": Grant(name: "ops", roles: [.admin, .settings, .consumer], apps: nil),
    ])

    static func submit(_ app: String, _ id: String) -> JSONValue {
        ["op": "submit", "app": .string(app), "user": "alice", "id": .string(id), "title": "Hi", "hiddenPreviewsBodyPlaceholder": "x"]
    }

    @Test func producerForOneAppCannotSubmitWithdrawOrSubscribeForAnotherAndEachRefusalIsLogged() throws {
        let log = LogLines()
        let server = try TestServer(tokens: Self.tokens, log: log)
        defer { server.stop() }
        let ops = try server.client(token: "ops-secret-token")
        for app in [Self.mail, Self.bank] {
            #expect(try ops.call(["op": "registerApp", "app": .string(app), "entitlements": []])["ok"] == true)
            #expect(try ops.call(["op": "authorization", "user": "alice", "app": .string(app), "status": "authorized",
                                  "options": ["alert"]])["ok"] == true)
        }
        let bank = try server.client(token: "bank-secret-token")
        #expect(try bank.call(Self.submit(Self.bank, "b1"))["ok"] == true)
        let conn = try PGConnection.connect(server.url)
        let before = try conn.execute("SELECT count(*) FROM events").int64(0, 0)

        let mail = try server.client(token: "mail-secret-token")
        HostileClientTests.expectAlert(try mail.call(Self.submit(Self.bank, "m1")), code: "forbidden_app",
                                       titleHas: "“com.example.bank”", detailHas: "Use the token issued for com.example.bank")
        var fanOut = Self.submit(Self.bank, "m2")
        if case .object(var o) = fanOut { o["user"] = nil; o["users"] = ["alice", "bob"]; fanOut = .object(o) }
        HostileClientTests.expectAlert(try mail.call(fanOut), code: "forbidden_app")
        HostileClientTests.expectAlert(try mail.call(["op": "withdraw", "app": .string(Self.bank), "id": "b1"]), code: "forbidden_app")
        HostileClientTests.expectAlert(try mail.call(["op": "withdraw", "app": .string(Self.bank), "id": "b1", "user": "alice"]),
                                       code: "forbidden_app")
        HostileClientTests.expectAlert(try mail.call(["op": "subscribe", "consumer": "push", "from": "earliest"]), code: "forbidden",
                                       titleHas: "subscribe", detailHas: "consumer role")
        HostileClientTests.expectAlert(try mail.call(["op": "ack", "consumer": "push", "cursor": 1]), code: "forbidden")
        HostileClientTests.expectAlert(try mail.call(["op": "registerApp", "app": .string(Self.mail), "entitlements": ["critical"]]),
                                       code: "forbidden", detailHas: "admin role")
        HostileClientTests.expectAlert(try mail.call(["op": "settings", "user": "alice", "app": .string(Self.bank), "alert": false]),
                                       code: "forbidden", detailHas: "settings role")
        // Its own app still works on the same connection.
        #expect(try mail.call(Self.submit(Self.mail, "m3"))["ok"] == true)

        // Nothing refused was stored: one event more (m3), and b1 is neither withdrawn nor shadowed.
        #expect(try conn.execute("SELECT count(*) FROM events").int64(0, 0) == before.map { $0 + 1 })
        #expect(try conn.execute("SELECT count(*) FROM events WHERE type = 'withdraw' OR notification_id IN ('m1','m2')").int64(0, 0) == 0)
        #expect(try conn.execute("SELECT count(*) FROM events WHERE type = 'registerApp' AND body::text LIKE '%critical%'").int64(0, 0) == 0)

        // Every refusal is logged at warning level with the token's name, the op and the app; never the token.
        let refusals = log.matching("warning:", "refused", "\"mail-backend\"")
        #expect(refusals.count == 8, "one warning per refusal: \(refusals)")
        #expect(log.matching("warning:", "refused submit for app \"com.example.bank\" by token \"mail-backend\"", "forbidden_app").count == 2)
        #expect(log.matching("warning:", "refused withdraw for app \"com.example.bank\" by token \"mail-backend\"").count == 2)
        #expect(log.matching("warning:", "refused subscribe by token \"mail-backend\"", "consumer role").count == 1)
        #expect(log.matching("refused registerApp for app \"com.example.mail\" by token \"mail-backend\"", "admin role").count == 1)
        #expect(log.matching("secret-token").isEmpty, "tokens never reach the log")
    }

    /// Dev mode, or tokens without TLS, on an address other machines reach are warned about at
    /// start; on loopback they stay quiet.
    @Test func devModeOrTokensInClearOffLoopbackAreWarnedAtStart() throws {
        for (tokens, host, expected) in [(TokenTable(), "0.0.0.0", "anyone who can reach this address gets every role"),
                                         (Self.tokens, "0.0.0.0", "tokens travel in clear"),
                                         (TokenTable(), "127.0.0.1", nil), (Self.tokens, "127.0.0.1", nil)] {
            let log = LogLines()
            let server = try TestServer(tokens: tokens, log: log) { $0.host = host }
            server.stop()
            if let expected {
                #expect(log.matching("warning:", expected, "0.0.0.0:").count == 1, "\(host)")
            } else {
                #expect(log.matching("anyone who can reach").isEmpty && log.matching("travel in clear").isEmpty, "\(host)")
            }
        }
    }

    @Test func wrongTokensAreRefusedAndLoggedWithoutTheTokenAndRefusalFloodsAreCapped() throws {
        let log = LogLines()
        let server = try TestServer(tokens: Self.tokens, log: log)
        defer { server.stop() }
        let c = try server.client(hello: false)
        HostileClientTests.expectAlert(try c.call(["op": "hello", "token": "guessed-token-1"]), code: "invalid_token",
                                       titleHas: "not recognised", detailHas: "stays open")
        HostileClientTests.expectAlert(try c.call(Self.submit(Self.bank, "x")), code: "hello_required")
        #expect(log.matching("warning:", "refused hello", "invalid_token").count == 1)
        #expect(log.matching("guessed-token").isEmpty)
        // A hello without any token says so, in the reply as in the log.
        HostileClientTests.expectAlert(try c.call(["op": "hello"]), code: "invalid_token", titleHas: "no token", detailHas: "requires a token")
        // Guessing: the tenth refused hello is answered, then the connection closes with a last
        // line, so one connection cannot guess tokens unseen at tens of thousands a second.
        for i in 2..<(ClientSession.maxRefusedHellos - 1) {  // the 3rd … 9th
            HostileClientTests.expectAlert(try c.call(["op": "hello", "token": .string("guess-\(i)-xxxxxxxx")]), code: "invalid_token")
        }
        try c.send(#"{"op":"hello","token":"guess-last-xxxxxxxx","rid":7}"#)
        let last = try c.readJSON(), final = try c.readJSON()
        #expect(last["rid"] == 7 && last["error"]?["code"] == "invalid_token", "\(last.canonicalString)")
        HostileClientTests.expectAlert(final, code: "too_many_refused_hellos", detailHas: "reconnect")
        #expect(throws: WireClient.Failure.self, "closed") { try c.readLine(timeoutMilliseconds: 5_000) }
        #expect(log.matching("(invalid_token); closing: \(ClientSession.maxRefusedHellos) hellos refused on this connection").count == 1)
        let ops = try server.client(token: "ops-secret-token")
        #expect(try ops.call(["op": "stats"])["hellosRefused"] == .int(Int64(ClientSession.maxRefusedHellos)))

        // A client looping on refused requests is answered every time but logged a bounded number of times.
        let mail = try server.client(token: "mail-secret-token")
        for i in 0..<100 {
            HostileClientTests.expectAlert(try mail.call(Self.submit(Self.bank, "x\(i)")), code: "forbidden_app")
        }
        #expect(log.matching("refused submit").count == ClientSession.maxLoggedRefusals)
        #expect(log.matching("further refusals on this connection are answered but not logged").count == 1)
    }

    /// A consumer token bound to its durable names cannot take over another consumer's stream or
    /// move its cursor (experiment 9: "subscribing as a consumer it is not").
    @Test func consumerTokenBoundToItsNamesCannotSubscribeOrAckAsAnotherConsumer() throws {
        let log = LogLines()
        var tokens = Self.tokens
        tokens = TokenTable([
            "ops-secret-token": Grant(name: "ops", roles: [.admin, .settings], apps: nil),
            "push-secret-token": Grant(name: "push-gateway", roles: [.consumer], apps: nil, consumers: ["push"]),
            "inbox-secret-token": Grant(name: "inbox", roles: [.consumer], apps: nil, consumers: ["inbox"]),
        ])
        let server = try TestServer(tokens: tokens, log: log)
        defer { server.stop() }
        let inbox = try server.client(token: "inbox-secret-token")
        #expect(try inbox.call(["op": "subscribe", "consumer": "inbox", "from": "earliest"])["ok"] == true)

        let push = try server.client(token: "push-secret-token")
        HostileClientTests.expectAlert(try push.call(["op": "subscribe", "consumer": "inbox"]), code: "forbidden_consumer",
                                       titleHas: "“inbox”", detailHas: "Use the name issued with your token")
        HostileClientTests.expectAlert(try push.call(["op": "ack", "consumer": "inbox", "cursor": 5]), code: "forbidden_consumer")
        #expect(try push.call(["op": "subscribe", "consumer": "push", "from": "earliest"])["ok"] == true)

        // The inbox's stream was not taken over and its cursor stayed where its subscribe put it.
        #expect(try inbox.call(["op": "ping"])["ok"] == true, "the inbox connection is still open")
        let conn = try PGConnection.connect(server.url)
        let row = try conn.execute("SELECT acked FROM consumer_cursors WHERE partition = 0 AND name = 'inbox'")
        #expect(row.rowCount == 1 && row.int64(0, 0) == 0, "stored at its start (0), not moved to 5")
        #expect(log.matching("warning:", "refused subscribe as consumer \"inbox\" by token \"push-gateway\"", "forbidden_consumer").count == 1)
        #expect(log.matching("warning:", "refused ack as consumer \"inbox\"").count == 1)
    }

    @Test func tokensFileConsumersMustBeANonEmptyListOfNames() throws {
        let ok = try JSONValue.parse(#"{"tokens":[{"name":"p","token":"push-secret-token","roles":["consumer"],"consumers":["push"]}]}"#)
        #expect(throws: Never.self) { _ = try TokenTable.parse(ok) }
        for bad in [#""push""#, "[]", "[1]"] {
            let json = try JSONValue.parse(#"{"tokens":[{"name":"p","token":"push-secret-token","roles":["consumer"],"consumers":"# + bad + "}]}")
            #expect(throws: RequestError.self) { _ = try TokenTable.parse(json) }
        }
    }
}
