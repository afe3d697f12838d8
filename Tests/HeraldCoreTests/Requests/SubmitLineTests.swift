// The fast door for plain submits (`SubmitLine`): what it reads, what it leaves to the general
// path, and that both admit every line it reads to the same events and warnings.
@testable import HeraldCore
import Testing

@Suite struct SubmitLineTests {
    let engine = Engine()

    func read(_ line: String) -> SubmitLine? {
        var line = line
        return line.withUTF8 { SubmitLine.read(UnsafeRawBufferPointer($0)) }
    }

    func agrees(_ line: String, apps: AppRegistry = AppRegistry(), now: Instant? = T0) -> Bool {
        var line = line
        return line.withUTF8 { SubmitLine.agreesWithGeneralPath(UnsafeRawBufferPointer($0), engine: engine, apps: apps, now: now) }
    }

    static let plain = #"{"op":"submit","rid":7,"id":"n1","app":"com.example.mail","user":"u1","title":"Order shipped","body":"Your order #12 has shipped.","hiddenPreviewsBodyPlaceholder":"Order update","threadId":"orders","interruptionLevel":"active"}"#

    @Test func aPlainSubmitIsReadAndAdmittedAsTheGeneralPathAdmitsIt() {
        let line = read(Self.plain)
        #expect(line?.app == "com.example.mail")
        #expect(line?.rid == .int(7))
        #expect(line?.users == ["u1"])
        #expect(line?.notification.title == "Order shipped")
        #expect(agrees(Self.plain))
    }

    /// The connection's previous app is reused when the line names the same bytes, and only then.
    @Test func aKnownAppIsSharedOnlyWhenTheLineNamesTheSameBytes() {
        func read(_ line: String, knownApp: String) -> SubmitLine? {
            var line = line
            return line.withUTF8 { SubmitLine.read(UnsafeRawBufferPointer($0), knownApp: knownApp) }
        }
        let known = "com.example.mail"
        #expect(read(Self.plain, knownApp: known)?.app == "com.example.mail")
        #expect(read(Self.plain, knownApp: "com.example.mai")?.app == "com.example.mail")
        #expect(read(Self.plain, knownApp: "com.example.mailbox")?.app == "com.example.mail")
        #expect(read(Self.plain, knownApp: "")?.app == "com.example.mail")
        // An escaped spelling of the same app is decoded, not compared as bytes.
        let escaped = #"{"op":"submit","id":"n1","app":"com.example.m\u0061il","user":"u1","title":"T","hiddenPreviewsBodyPlaceholder":"x"}"#
        #expect(read(escaped, knownApp: known)?.app == "com.example.mail")
        let other = #"{"op":"submit","id":"n1","app":"org.other.app","user":"u1","title":"T","hiddenPreviewsBodyPlaceholder":"x"}"#
        #expect(read(other, knownApp: known)?.app == "org.other.app")
        // `appIsKnown` says which: the service shares the registry's string only when it is false.
        #expect(read(Self.plain, knownApp: known)?.appIsKnown == true)
        #expect(read(Self.plain, knownApp: "com.example.mai")?.appIsKnown == false)
        #expect(read(escaped, knownApp: known)?.appIsKnown == true)  // decoded, then equal
        #expect(read(other, knownApp: known)?.appIsKnown == false)
        var shared = read(Self.plain, knownApp: "x")!
        shared.shareApp(String("com.example.") + "mail")
        #expect(shared.app == "com.example.mail" && shared.notification.app == "com.example.mail")
    }

    /// Every field the fast path reads, in many combinations, orders, spacings and spellings.
    @Test func generatedPlainSubmitsAreAdmittedAlikeOnBothPaths() {
        var rng = SplitMix(seed: 0x5EED)
        let texts = ["plain", "with \\\"quotes\\\" and \\\\ and \\n", "é accents ✓ 🙂", "\\u00e9\\ud83d\\ude42", "", " ", "ends.", "tab\\there"]
        let values: [(String, [String])] = [
            ("rid", ["1", "\"r-1\"", "null", "true", "-2.5", "[1]", "{\"a\":1}"]),
            ("token", ["\"t\"", "null", "[1,{\"x\":[]}]"]),
            ("title", texts.map { "\"\($0)\"" } + ["null"]),
            ("subtitle", texts.map { "\"\($0)\"" } + ["null"]),
            ("body", texts.map { "\"\($0)\"" } + ["null"]),
            ("hiddenPreviewsBodyPlaceholder", ["\"New\"", "null", "\"\\u004e\""]),
            ("threadId", ["\"t1\"", "null"]),
            ("collapseId", ["\"c1\"", "null"]),
            ("sound", ["\"ding\"", "null"]),
            ("interruptionLevel", ["\"active\"", "\"passive\"", "\"timeSensitive\"", "null"]),
            ("relevanceScore", ["0", "1", "0.25", "-0", "1e-3", "null"]),
            ("marketing", ["true", "false", "null"]),
            ("deliverAt", ["\"2026-03-27T08:00:00Z\"", "\"2026-03-27T10:00:00.5+02:00\"", "null"]),
            ("expiresAt", ["\"2026-03-28T08:00:00Z\"", "null"]),
            ("relevantAt", ["\"2026-03-27T09:30:00Z\"", "null"]),
            ("actions", ["null"]), ("communication", ["null"]), ("data", ["null"]),
        ]
        var read = 0
        for _ in 0..<3_000 {
            var members = ["\"op\":\"submit\"", "\"id\":\"n-\(rng.next() % 1000)\"", "\"app\":\"com.example.mail\""]
            if rng.next() % 3 == 0 {
                let n = Int(rng.next() % 4) + 1
                members.append("\"users\":[" + (0..<n).map { "\"u\($0)\"" }.joined(separator: ",") + "]")
            } else {
                members.append("\"user\":\"u\(rng.next() % 10)\"")
            }
            for (key, choices) in values where rng.next() % 2 == 0 {
                members.append("\"\(key)\":\(choices[Int(rng.next() % UInt64(choices.count))])")
            }
            members.shuffle(using: &rng)
            let space = rng.next() % 4 == 0 ? " " : ""
            let line = "\(space){\(space)" + members.joined(separator: "\(space),\(space)").replacingOccurrences(of: "\":", with: "\"\(space):\(space)") + "\(space)}\(space)"
            if self.read(line) != nil { read += 1 }
            #expect(agrees(line), "\(line)")
        }
        // Lines with spaces around ':' inside strings are still read; nearly all should be.
        #expect(read > 2_500)
    }

    /// What the general path must decide: refusals, warnings and everything unusual.
    @Test func linesTheGeneralPathMustDecideAreNotRead() {
        let base = #""op":"submit","id":"n1","app":"com.example.mail","user":"u1""#
        let declined = [
            "{\(base),\"extra\":1}",                                   // unknown field: a warning
            "{\(base),\"actions\":[{\"title\":\"Reply\"}]}",           // actions
            "{\(base),\"communication\":{\"sender\":\"a\"}}",          // communication
            "{\(base),\"data\":{\"k\":1}}",                            // data
            "{\(base),\"title\":\"a\",\"title\":\"b\"}",               // duplicate key: an error
            "{\(base),\"interruptionLevel\":\"loud\"}",                // unknown level: an error
            "{\(base),\"relevanceScore\":2}",                          // out of range
            "{\(base),\"relevanceScore\":\"1\"}",                      // wrong type
            "{\(base),\"marketing\":1}",
            "{\(base),\"deliverAt\":\"tomorrow\"}",
            "{\(base),\"title\":7}",
            "{\(base),\"users\":[\"a\"]}",                             // user and users
            #"{"op":"submit","id":"n1","app":"com.example.mail","users":["a","a"]}"#,  // a repeat: a warning
            #"{"op":"submit","id":"n1","app":"com.example.mail","users":[]}"#,
            #"{"op":"submit","id":"","app":"com.example.mail","user":"u"}"#,
            #"{"op":"submit","id":"n1","app":"com.example.mail","user":""}"#,
            #"{"op":"submit","id":"n1","app":"com.example.mail"}"#,    // no recipient
            #"{"op":"submit","app":"com.example.mail","user":"u"}"#,   // no id
            #"{"op":"withdraw","id":"n1","app":"com.example.mail","user":"u"}"#,
            #"{"op":null,"id":"n1","app":"com.example.mail","user":"u"}"#,
            #"{"\u006fp":"submit","id":"n1","app":"com.example.mail","user":"u"}"#,  // an escaped key
            "{\(base)} x",                                             // trailing text
            "{\(base),}",                                              // trailing comma
            "[{\(base)}]",
            "{\(base),\"token\":" + String(repeating: "[", count: 32) + String(repeating: "]", count: 32) + "}",  // too deep
            "{\(base),\"id\":\"" + String(repeating: "x", count: 257) + "\"}",
        ]
        for line in declined {
            #expect(read(line) == nil, "\(line)")
            #expect(agrees(line))
        }
        // Just within the depth limit, as the general path allows.
        #expect(read("{\(base),\"token\":" + String(repeating: "[", count: 31) + String(repeating: "]", count: 31) + "}") != nil)
    }

    @Test func aFanOutIsReadWithItsRecipientsInOrder() {
        let line = #"{"op":"submit","id":"n1","app":"com.example.mail","users":["b","a","c"],"hiddenPreviewsBodyPlaceholder":"x"}"#
        #expect(read(line)?.users == ["b", "a", "c"])
        #expect(agrees(line))
    }

    @Test func errorsBetweenFieldsAreTheSameOnBothPaths() {
        // Read by the fast path, refused after it: the same error either way.
        let critical = #"{"op":"submit","id":"n1","app":"com.example.mail","user":"u","interruptionLevel":"critical"}"#
        let marketing = #"{"op":"submit","id":"n1","app":"com.example.mail","user":"u","marketing":true,"interruptionLevel":"timeSensitive"}"#
        let expires = #"{"op":"submit","id":"n1","app":"com.example.mail","user":"u","deliverAt":"2026-03-28T08:00:00Z","expiresAt":"2026-03-27T08:00:00Z"}"#
        for line in [critical, marketing, expires] {
            #expect(read(line) != nil)
            #expect(agrees(line))
        }
    }

    @Test func theSessionDispatchesAPlainSubmitReadFromItsLine() {
        var s = ClientSession(tokens: TokenTable(["p": Grant(name: "mail", roles: [.producer], apps: ["com.example.mail"])]), serverName: "t")
        _ = s.lineReceived(Array(#"{"op":"hello","token":"p"}"#.utf8))
        let actions = s.lineReceived(Array(Self.plain.utf8))
        guard case .dispatch(let r)? = actions.first else { Issue.record("not dispatched: \(actions)"); return }
        #expect(r.submitLine != nil && r.op == .submit && r.rid == .int(7))
        _ = s.replyCompleted(ticket: r.ticket, reply: WireReply.ok(rid: r.rid))
        // Another app's submit is refused on the general path, as before.
        let other = Self.plain.replacingOccurrences(of: "com.example.mail", with: "com.example.bank")
        guard case .send(let reply)? = s.lineReceived(Array(other.utf8)).last else { Issue.record("no refusal"); return }
        #expect((try? JSONValue.parse(Array(reply.dropLast())))?["error"]?["code"] == "forbidden_app")
        #expect(Op.submit.requiredRole == ClientSession.submitRole)
    }
}

/// A small deterministic generator for the property tests here.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
