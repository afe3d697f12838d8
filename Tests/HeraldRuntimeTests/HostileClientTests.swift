// Experiment 8 of issue #8: hostile clients over real TCP against a real service and PostgreSQL.
import Foundation
import Glibc
import HeraldCore
import HeraldRuntime
import HeraldStore
import HeraldTestSupport
import Testing

@Suite struct HostileClientTests {
    static let mail = "com.example.mail"

    /// Every error reply reads like an alert: a code, a specific title, and a detail that says what to do.
    static func expectAlert(_ reply: JSONValue, code: String, titleHas: String? = nil, detailHas: String? = nil,
                            sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply["ok"] == false, "\(reply.canonicalString)", sourceLocation: sourceLocation)
        #expect(reply["error"]?["code"]?.stringValue == code, "\(reply.canonicalString)", sourceLocation: sourceLocation)
        let title = reply["error"]?["title"]?.stringValue ?? ""
        let detail = reply["error"]?["detail"]?.stringValue ?? ""
        #expect(title.count >= 12 && detail.count >= 20, "title and detail say what and why: \(reply.canonicalString)",
                sourceLocation: sourceLocation)
        if let titleHas { #expect(title.contains(titleHas), "title: \(title)", sourceLocation: sourceLocation) }
        if let detailHas { #expect(detail.contains(detailHas), "detail: \(detail)", sourceLocation: sourceLocation) }
    }

    static func setUpAlice(_ c: WireClient) throws {
        #expect(try c.call(["op": "registerApp", "app": .string(mail), "entitlements": []])["ok"] == true)
        #expect(try c.call(["op": "authorization", "user": "alice", "app": .string(mail), "status": "authorized",
                            "options": ["alert", "sound", "badge"]])["ok"] == true)
    }

    static func eventCount(_ url: String) throws -> Int {
        try PGConnection.connect(url).execute("SELECT count(*) FROM events").int64(0, 0).map(Int.init) ?? -1
    }

    // MARK: Line length

    @Test func lineOfExactlyTheLimitIsReadAndOneByteMoreIsRefusedAndClosed() throws {
        let server = try TestServer()
        defer { server.stop() }
        func paddedPing(to total: Int) -> [UInt8] {
            let head = Array(#"{"op":"ping","rid":1,"pad":""#.utf8), tail = Array(#""}"#.utf8)
            return head + [UInt8](repeating: UInt8(ascii: "x"), count: total - head.count - tail.count) + tail + [0x0A]
        }
        let c = try server.client()
        try c.sendRaw(paddedPing(to: 64 * 1024))
        #expect(try c.readJSON()["op"] == "pong", "a line of exactly 64 KiB is a request")
        try c.sendRaw(paddedPing(to: 64 * 1024 + 1))
        Self.expectAlert(try c.readJSON(), code: "line_too_long", titleHas: "64 KiB", detailHas: "65536 bytes")
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
        #expect(try server.client().call(["op": "ping"])["op"] == "pong")
    }

    /// Pipelined submits for alice (rid 1, 2, …) and then a ping padded past the line limit.
    static func submitsThenALineTooLong(ids: [String], padding: Int) -> [UInt8] {
        var batch: [UInt8] = []
        for (i, id) in ids.enumerated() {
            batch += Array(#"{"op":"submit","rid":\#(i + 1),"app":"com.example.mail","user":"alice","id":"\#(id)","title":"Hi"}"#.utf8) + [0x0A]
        }
        return batch + Array(#"{"op":"ping","pad":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: padding) + Array(#""}"#.utf8) + [0x0A]
    }

    /// SPEC §5: replies come in request order, and a committed request's ack is owed. Requests
    /// pipelined before a line too long are answered first; the refusal comes last, then the
    /// close — not sent at once: both submits are stored, so both acks are owed and arrive.
    @Test func lineTooLongComesAfterTheRepliesOwedToTheRequestsBeforeIt() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        try c.sendRaw(Self.submitsThenALineTooLong(ids: ["a1", "a2"], padding: 70_000))
        let first = try c.readJSON(), second = try c.readJSON()
        #expect(first["rid"] == 1 && first["ok"] == true && first["seq"] != nil, "\(first.canonicalString)")
        #expect(second["rid"] == 2 && second["ok"] == true, "\(second.canonicalString)")
        Self.expectAlert(try c.readJSON(), code: "line_too_long")
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
        #expect(try Self.eventCount(server.url) == 4, "registerApp, authorization and both submits are stored")
    }

    /// The same when the client reads late: closing a socket with the rest of the long line
    /// still unread makes the kernel send a reset, which would destroy the acks and the refusal
    /// still on their way.
    /// The connection lingers: it sends its FIN after the output and drops what still comes in.
    @Test func aClientReadingLateStillGetsEveryReplyAndTheRefusalAfterALineTooLong() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        try c.sendRaw(Self.submitsThenALineTooLong(ids: (0..<3_000).map { "late\($0)" }, padding: 200_000))
        usleep(1_000_000)  // a client busy elsewhere: the server has closed meanwhile
        var acks = 0
        while let line = try? c.readLine(timeoutMilliseconds: 20_000), let reply = try? JSONValue.parse(line) {
            if reply["ok"] == true { acks += 1; continue }
            Self.expectAlert(reply, code: "line_too_long")
            break
        }
        #expect(acks == 3_000, "every committed submit is acknowledged")
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
    }

    /// A client that sends its requests and then closes its sending side (`nc -N`, a batch
    /// loader) still gets every reply, then the connection closes.
    @Test func aHalfClosedClientGetsTheRepliesToWhatItSent() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        try c.sendRaw(Array((#"{"op":"submit","rid":1,"app":"com.example.mail","user":"alice","id":"h1","title":"Hi"}"# + "\n"
            + #"{"op":"ping","rid":2}"# + "\n").utf8))
        #expect(shutdown(c.fileDescriptor, Int32(SHUT_WR)) == 0)
        let ack = try c.readJSON(), pong = try c.readJSON()
        #expect(ack["rid"] == 1 && ack["ok"] == true && pong["rid"] == 2 && pong["op"] == "pong")
        #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
        #expect(try server.client().call(["op": "ping"])["op"] == "pong")
    }

    @Test func clientStreamingAGibibyteWithoutNewlineIsCutOffOncePastTheLimit() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
        var sent = 0, waits = 0, cutOff = false
        // Claims a 1 GiB line; stops as soon as the server has cut the connection.
        while sent < 1 << 30 && waits < 20_000 {
            guard let n = c.trySend(chunk) else { cutOff = true; break }
            sent += n
            if n == 0 {
                if c.isClosedByPeer() { cutOff = true; break }
                waits += 1
                usleep(1_000)
            }
        }
        print("hostile: 1 GiB line without newline cut off after \(sent) bytes accepted by the socket")
        #expect(cutOff, "the server closes the connection instead of reading on")
        // What the server read is at most the limit plus a read; the rest sat in kernel socket buffers.
        #expect(sent < 32 << 20, "cut off after \(sent) bytes, far below 1 GiB")
        _ = c.isClosedByPeer()
        if let line = c.bufferedLines().first, let reply = try? JSONValue.parse(line) {
            Self.expectAlert(reply, code: "line_too_long")
        }
        #expect(try server.client().call(["op": "ping"])["op"] == "pong", "others are unaffected")
    }

    // MARK: Packets

    @Test func requestSplitByteByByteIsAnsweredAsIfSentAtOnce() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client(hello: false)
        let text = #"{"op":"hello","token":"t","rid":"h"}"# + "\r\n" + #"{"op":"registerApp","app":"com.example.mail","entitlements":[],"rid":2}"# + "\n"
        for byte in Array(text.utf8) {
            try c.sendRaw([byte])
            usleep(200)  // separate segments, not a timing assertion
        }
        let hello = try c.readJSON(), ack = try c.readJSON()
        #expect(hello["rid"] == "h" && hello["op"] == "hello")
        #expect(ack["rid"] == 2 && ack["ok"] == true && ack["seq"] != nil)
    }

    @Test func thousandsOfRequestsInOneWriteAreAnsweredInRequestOrder() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        // Immediate replies (ping) and replies after a COMMIT (submit) interleaved in one write.
        var text = ""
        for i in 0..<3000 {
            if i % 500 == 250 {
                text += #"{"op":"submit","app":"com.example.mail","user":"alice","id":"n\#(i)","title":"Hi","hiddenPreviewsBodyPlaceholder":"x","rid":\#(i)}"# + "\n"
            } else {
                text += #"{"op":"ping","rid":\#(i)}"# + "\n"
            }
        }
        try c.sendRaw(Array(text.utf8))
        var rids: [Int64] = []
        for _ in 0..<3000 {
            let r = try c.readJSON()
            #expect(r["ok"] == true)
            rids.append(r["rid"]?.intValue ?? -1)
        }
        #expect(rids == Array(0..<3000).map(Int64.init), "replies leave in request order")
    }

    // MARK: Bytes that are not text

    @Test func nulBytesAndInvalidUTF8AreRefusedWithAClearErrorAndNothingIsStored() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        let before = try Self.eventCount(server.url)
        func submit(title: [UInt8]) -> [UInt8] {
            Array(#"{"op":"submit","app":"com.example.mail","user":"alice","id":"n1","title":""#.utf8) + title + Array("\"}\n".utf8)
        }
        let cases: [(bytes: [UInt8], titleHas: String)] = [
            (submit(title: Array("app-a".utf8) + [0] + Array("x".utf8)), "NUL"),                 // raw NUL in a string
            (submit(title: Array(#"app-a\u0000x"#.utf8)), "NUL"),                                // escaped NUL
            (Array(#"{"op":"ping"}"#.utf8).dropLast() + [0] + Array("}\n".utf8), "NUL"),         // NUL between tokens
            (submit(title: [0x63, 0x61, 0x66, 0xC3, 0x28]), "Invalid UTF-8"),                    // truncated sequence
            (submit(title: [0xC0, 0xAF]), "Invalid UTF-8"),                                      // overlong "/"
            (submit(title: [0xED, 0xA0, 0x80]), "Invalid UTF-8"),                                // encoded surrogate
            (submit(title: [0xF4, 0x90, 0x80, 0x80]), "Invalid UTF-8"),                          // above U+10FFFF
            (submit(title: [0xFF]), "Invalid UTF-8"),
            (submit(title: Array(#"\uD800"#.utf8)), "surrogate"),                                // lone surrogate escape
        ]
        for (bytes, titleHas) in cases {
            try c.sendRaw(bytes)
            Self.expectAlert(try c.readJSON(), code: "malformed_json", titleHas: titleHas, detailHas: "UTF-8")
        }
        #expect(try c.call(["op": "ping"])["op"] == "pong", "the connection lives on")
        #expect(try Self.eventCount(server.url) == before, "nothing was stored")
    }

    @Test func deeplyNestedJSONIsRefusedWithoutAStackOverflow() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        try c.sendRaw([UInt8](repeating: UInt8(ascii: "["), count: 60_000) + [0x0A])
        Self.expectAlert(try c.readJSON(), code: "malformed_json", titleHas: "Nesting deeper than 32 levels", detailHas: "one JSON object per line")
        try c.send(String(repeating: #"{"a":"#, count: 10_000))
        Self.expectAlert(try c.readJSON(), code: "malformed_json", titleHas: "Nesting deeper")
        let deepData = String(repeating: #"{"a":"#, count: 40) + "1" + String(repeating: "}", count: 40)
        try c.send(#"{"op":"submit","app":"com.example.mail","user":"alice","id":"n1","data":\#(deepData)}"#)
        Self.expectAlert(try c.readJSON(), code: "malformed_json", titleHas: "Nesting deeper")
        #expect(try c.call(["op": "ping"])["op"] == "pong")
        // 100k brackets are over the line limit as well: cut off, and the server lives.
        try c.sendRaw([UInt8](repeating: UInt8(ascii: "["), count: 100_000) + [0x0A])
        Self.expectAlert(try c.readJSON(), code: "line_too_long")
        #expect(try server.client().call(["op": "ping"])["op"] == "pong")
    }

    // MARK: Time values

    @Test func extremeTimestampsAreRefusedWithAClearErrorOrAcceptedExactly() throws {
        let server = try TestServer(start: "2026-03-27T07:00:00Z")
        defer { server.stop() }
        let c = try server.client()
        try Self.setUpAlice(c)
        func submit(_ id: String, _ extra: [String: JSONValue]) -> JSONValue {
            var o: [String: JSONValue] = ["op": "submit", "app": .string(Self.mail), "user": "alice", "id": .string(id),
                                          "title": "Hi", "hiddenPreviewsBodyPlaceholder": "x"]
            for (k, v) in extra { o[k] = v }
            return .object(o)
        }
        let refused: [JSONValue] = [
            "0000-01-01T00:00:00Z", "10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z", "2016-12-31T23:59:60Z",
            "2026-02-30T00:00:00Z", "2026-03-27T24:00:00Z", "2026-03-27T07:00:00+24:00", "2026-03-27T07:00:00",
            "2026-03-27", "", "yesterday", "2026-03-27T07:00:00.Z", "1e308", .int(1_790_000_000), .double(1e300),
        ]
        for (i, value) in refused.enumerated() {
            let reply = try c.call(submit("bad-\(i)", ["deliverAt": value]))
            #expect(reply["ok"] == false, "deliverAt \(value.canonicalString) is refused")
            let title = reply["error"]?["title"]?.stringValue ?? ""
            #expect(title.contains("deliverAt"), "the error names the field: \(reply.canonicalString)")
            #expect((reply["error"]?["detail"]?.stringValue ?? "").count >= 20)
        }
        #expect(try c.call(["op": "mute", "user": "alice", "app": .string(Self.mail), "until": "2016-12-31T23:59:60Z"])["ok"] == false)

        // The ends of the range are accepted and kept exactly.
        let far = try c.call(submit("far", ["deliverAt": "9999-12-31T23:59:59.999Z", "expiresAt": "9999-12-31T23:59:59.999Z"]))
        #expect(far["ok"] == true, "\(far.canonicalString)")
        let past = try c.call(submit("past", ["deliverAt": "0001-01-01T00:00:00Z"]))
        #expect(past["ok"] == true, "\(past.canonicalString)")
        let conn = try PGConnection.connect(server.url)
        let body = try #require(try conn.execute("SELECT body FROM events WHERE notification_id = 'far'").string(0, 0))
        #expect(try JSONValue.parse(body)["deliverAt"] == "9999-12-31T23:59:59.999Z")
        #expect(try c.call(["op": "focusOn", "user": "alice", "focus": "Sleep", "until": "9999-12-31T23:59:59Z"])["ok"] == true)
        #expect(try c.call(["op": "clock", "advanceTo": "2026-03-28T07:00:00Z"])["ok"] == true)
        let stats = try c.call(["op": "stats"])
        #expect(stats["timers"]?.intValue ?? 0 >= 1, "the year-9999 notification is still pending")
    }

    @Test func unknownAndPathLikeTimeZonesAreRefusedWithAClearError() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        let zones: [String] = [
            "Mars/Olympus_Mons", "", "GMT+5", "UTC-03:00", "../../../../etc/passwd", "/etc/localtime",
            "Europe/../../../etc/passwd", "Europe/Berlin\n", String(repeating: "A", count: 300),
            "'; DROP TABLE events; --",
        ]
        for zone in zones {
            let reply = try c.call(["op": "summarySchedule", "user": "alice", "times": ["08:00"], "timeZone": .string(zone)])
            #expect(reply["ok"] == false, "time zone \(JSONValue.string(zone).canonicalString) is refused: \(reply.canonicalString)")
            let text = (reply["error"]?["title"]?.stringValue ?? "") + " " + (reply["error"]?["detail"]?.stringValue ?? "")
            #expect(text.contains("IANA") || text.contains("time zone"), "the error says what a zone is: \(reply.canonicalString)")
        }
        for zone in ["UTC", "Asia/Kolkata", "America/Los_Angeles", "Etc/GMT-14", "Pacific/Kiritimati"] {
            #expect(try c.call(["op": "summarySchedule", "user": "alice", "times": ["08:00"], "timeZone": .string(zone)])["ok"] == true,
                    "\(zone) is a valid IANA zone")
        }
    }

    // MARK: Strings that look like SQL

    @Test func sqlLookingStringsInEveryFieldAreStoredAndReadBackByteForByte() throws {
        let server = try TestServer()
        defer { server.stop() }
        let c = try server.client()
        let nasty = [
            "'; DROP TABLE events; --", "$1", "\\", "\\\\x00", "\"", "''", "Robert'); DELETE FROM deliveries;--",
            "%s%n%x", "$$ $body$ $$", "E'\\047'", "\\N", "\\.", "NULL", "{\"a\",NULL}", "\u{7F}\u{1B}[31m", "e\u{301}",
            "🚀", "/* */ -- ;", "COPY events FROM PROGRAM 'id'", "\t\r\n",
        ]
        // Identifiers must be NFC (docs/engine.md): a decomposed one is refused, its NFC spelling taken;
        // texts keep any spelling.
        func identifier(_ s: String) -> String { s.isNFC ? s : s.precomposedStringWithCanonicalMapping }
        for (i, s) in nasty.enumerated() {
            if !s.isNFC {
                #expect(try c.call(["op": "registerApp", "app": .string("app" + s), "entitlements": []])["error"]?["code"] == "identifier_not_nfc")
            }
            let app = "app" + identifier(s), user = "user" + identifier(s), id = "id" + identifier(s)
            #expect(try c.call(["op": "registerApp", "app": .string(app), "entitlements": []])["ok"] == true)
            #expect(try c.call(["op": "authorization", "user": .string(user), "app": .string(app), "status": "authorized",
                                "options": ["alert", "sound", "badge"]])["ok"] == true)
            let fields: [String: JSONValue] = [
                "title": .string(s), "subtitle": .string(s), "body": .string(s), "hiddenPreviewsBodyPlaceholder": .string(s),
                "threadId": .string(s), "collapseId": .string(s), "sound": .string(s),
                "actions": [["id": .string(s), "title": .string("t" + s)]],
                "data": .object([s: .string(s), "k": .array([.string(s)])]),
            ]
            var request = fields
            request["op"] = "submit"; request["app"] = .string(app); request["user"] = .string(user); request["id"] = .string(id)
            let ack = try c.call(.object(request))
            #expect(ack["ok"] == true, "string \(i) \(JSONValue.string(s).canonicalString): \(ack.canonicalString)")
            let conn = try PGConnection.connect(server.url)
            let r = try conn.execute("SELECT user_id, app, notification_id, body FROM events WHERE type = 'submit' AND app = $1", [app])
            #expect(r.rowCount == 1)
            #expect(r.string(0, 0) == user && r.string(0, 1) == app && r.string(0, 2) == id, "columns byte for byte")
            // Content is stored sealed: opened with the user's key, it is what was sent.
            let keys = try KeyRing.load(conn, user: user)
            let body = try JSONValue.parse(keys.readable(r.bytes(0, 3) ?? [], user: user))
            for (k, v) in fields where k != "actions" { #expect(body[k] == v, "field \(k) of string \(i) stored unchanged") }
            // Actions are stored normalized (with "destructive": false); their strings are unchanged.
            let action = body["actions"]?.arrayValue?.first
            #expect(action?["id"] == .string(s) && action?["title"] == .string("t" + s))
            #expect(Array((r.string(0, 1) ?? "").utf8) == Array(app.utf8), "same bytes, not just canonically equivalent")
        }
        // Read back through a consumer: the delivered content is the submitted content.
        let consumer = try server.client()
        #expect(try consumer.call(["op": "subscribe", "consumer": "audit", "from": "earliest"])["ok"] == true)
        let ds = try consumer.deliveries(nasty.count)
        for (d, s) in zip(ds, nasty) {
            let name = identifier(s)
            #expect(d["app"] == .string("app" + name) && d["user"] == .string("user" + name) && d["notification"] == .string("id" + name))
            #expect(d["content"]?["title"] == .string(s) && d["content"]?["body"] == .string(s))
        }
        let tables = try PGConnection.connect(server.url).execute("SELECT count(*) FROM pg_tables WHERE tablename IN ('events','deliveries')")
        #expect(tables.int64(0, 0) == 2, "no table was dropped")
    }

    // MARK: Slow, many and half-open clients

    @Test func slowlorisConnectionsAreClosedAtTheirDeadlinesWhileOthersAreAnswered() throws {
        let server = try TestServer { $0.helloTimeoutMilliseconds = 600; $0.idleTimeoutMilliseconds = 900 }
        defer { server.stop() }
        let good = try server.client()
        try Self.setUpAlice(good)
        // Ten never say hello, ten say hello; all then trickle one byte of a line that never ends,
        // more often than either deadline (a read-inactivity timeout would never fire).
        var slow: [WireClient] = try (0..<10).map { _ in try server.client(hello: false) }
        slow += try (0..<10).map { _ in try server.client() }
        for s in slow { _ = s.trySend(Array(#"{"op":"ping","x":""#.utf8)) }
        var open = Set(slow.indices)
        var answered = 0, rounds = 0
        while !open.isEmpty && rounds < 200 {
            rounds += 1
            for i in open {
                if slow[i].trySend([UInt8(ascii: "z")]) == nil || slow[i].isClosedByPeer() { open.remove(i) }
            }
            let r = try good.call(["op": "submit", "app": .string(Self.mail), "user": "alice", "id": .string("g\(rounds)"),
                                   "title": "Hi", "hiddenPreviewsBodyPlaceholder": "x"])
            if r["ok"] == true { answered += 1 }
            usleep(100_000)
        }
        print("hostile: slowloris — 20 trickling connections closed after \(rounds) rounds of 100 ms; \(answered) requests of another client answered meanwhile")
        #expect(open.isEmpty, "every trickling connection was closed at its deadline (\(open.count) left)")
        #expect(answered == rounds, "the well-behaved client got every answer")
        for s in slow.prefix(10) {
            if let line = s.bufferedLines().first, let reply = try? JSONValue.parse(line) {
                Self.expectAlert(reply, code: "hello_timeout", titleHas: "0.6 s", detailHas: "hello")
            }
        }
        #expect(try server.statsWhen { $0["connections"]?.intValue == 2 }["connections"] == 2, "their slots are free again")
    }

    @Test func connectionFloodPastTheMaximumIsRefusedAtOnceWithBusy() throws {
        let server = try TestServer { $0.maxConnections = 5 }
        defer { server.stop() }
        let kept = try (0..<5).map { _ in try server.client() }
        var refused = 0
        for _ in 0..<200 {
            let c = try WireClient(port: server.port)
            let reply = try c.readJSON(timeoutMilliseconds: 5_000)
            Self.expectAlert(reply, code: "busy", titleHas: "connection limit", detailHas: "Retry with backoff")
            if reply["error"]?["code"] == "busy" { refused += 1 }
            #expect(throws: WireClient.Failure.self) { _ = try c.readLine(timeoutMilliseconds: 5_000) }
        }
        #expect(refused == 200)
        for c in kept { #expect(try c.call(["op": "ping"])["op"] == "pong", "connections within the limit are served") }
        kept[0].close()
        // The freed slot is usable once the server has seen the close.
        var admitted = false
        for _ in 0..<250 where !admitted {
            let c = try WireClient(port: server.port)
            if let r = try? c.call(["op": "hello", "token": "t"]), r["ok"] == true { admitted = true } else { usleep(20_000) }
        }
        #expect(admitted)
    }

    /// Connections that never say hello must not hold every slot until their hello deadline, so
    /// that an operator's hello does not get `busy`. At the limit, the oldest one without hello
    /// for `evictBeforeHelloMilliseconds` gives its slot to the new client, with a last line; one
    /// younger than that, or one that said hello, keeps its slot.
    @Test func connectionsThatNeverSayHelloGiveTheirSlotsToNewClients() throws {
        let server = try TestServer {
            $0.maxConnections = 3
            $0.evictBeforeHelloMilliseconds = 200
        }
        defer { server.stop() }
        let helloed = try server.client()
        let silent = try (0..<2).map { _ in try WireClient(port: server.port) }
        for _ in 0..<250 where try helloed.call(["op": "stats"])["connections"] != 3 { usleep(20_000) }
        usleep(300_000)  // the silent ones pass the (shortened) eviction age
        let operatorClient = try server.client()  // evicts silent[0], the oldest without hello
        Self.expectAlert(try silent[0].readJSON(), code: "evicted_before_hello", detailHas: "hello")
        #expect(throws: WireClient.Failure.self) { _ = try silent[0].readLine(timeoutMilliseconds: 5_000) }
        let another = try server.client()  // evicts silent[1]
        Self.expectAlert(try silent[1].readJSON(), code: "evicted_before_hello")
        // Now every slot said hello: a new client gets busy, and nobody is evicted.
        let late = try WireClient(port: server.port)
        Self.expectAlert(try late.readJSON(), code: "busy")
        for c in [helloed, operatorClient, another] { #expect(try c.call(["op": "ping"])["op"] == "pong") }
        let stats = try helloed.call(["op": "stats"])
        #expect(stats["evictedBeforeHello"] == 2 && stats["connections"] == 3, "\(stats.canonicalString)")
    }

    @Test func clientThatStopsReadingIsReclaimedAndItsRepliesAreNotBufferedWithoutBound() throws {
        let server = try TestServer {
            $0.writeTimeoutMilliseconds = 500
            $0.consumerBufferBytes = 64 * 1024
        }
        defer { server.stop() }
        let c = try server.client()
        c.setReceiveBuffer(bytes: 4096)
        // Pipelines pings and never reads a reply: the server stops reading it once 64 KiB of replies
        // wait, and closes it when no byte of output is taken for 500 ms.
        let pings = Array(String(repeating: #"{"op":"ping"}"# + "\n", count: 4096).utf8)
        var sent = 0
        for _ in 0..<2_000 {
            guard let n = c.trySend(pings) else { break }
            sent += n
            if n == 0 { usleep(2_000) }
            if sent > 64 << 20 { break }
        }
        print("hostile: a client that never reads got \(sent) bytes of requests into the socket before the server stopped reading it")
        #expect(sent < 64 << 20, "the server stopped reading a client that does not read its replies")
        let after = try server.statsWhen { $0["connections"]?.intValue == 1 }
        #expect(after["connections"]?.intValue == 1, "the stalled connection was reclaimed: \(after.canonicalString)")
    }

    @Test func clientThatGoesSilentWithoutAFINIsReclaimedAtTheIdleDeadline() throws {
        let server = try TestServer { $0.idleTimeoutMilliseconds = 400; $0.helloTimeoutMilliseconds = 400 }
        defer { server.stop() }
        // Says hello, then nothing: to the server this is a peer that vanished without a FIN.
        let silent = try server.client()
        _ = silent
        let watcher = try WireClient(port: server.port)
        #expect(try watcher.call(["op": "hello", "token": "t"])["ok"] == true)
        var connections: Int64 = 2
        for _ in 0..<300 where connections > 1 {
            usleep(20_000)
            connections = try watcher.call(["op": "stats"])["connections"]?.intValue ?? 0
        }
        #expect(connections == 1, "the silent connection was closed; the active one stays")
    }
}
