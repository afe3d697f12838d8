// The producer's state machine alone: replies matched in order, the window, resending after a reconnect.
@testable import HeraldClient
import Testing

@Suite struct RequestPipelineTests {
    typealias Pipeline = RequestPipeline<String, String>

    static func body(_ name: String) -> [UInt8] { Array(#""op":"ping","n":"\#(name)"}"#.utf8) + [0x0A] }
    static func reply(_ rid: Int64, ok: Bool = true) -> (line: [UInt8], head: ReplyHead) {
        replyLine(ok ? ["ok": true, "rid": .int(rid), "seq": .int(rid * 10), "warnings": []]
                 : ["ok": false, "rid": .int(rid), "error": ["code": "unknown_notification", "title": "t", "detail": "d"]])
    }
    static func replyLine(_ json: HeraldJSON) -> (line: [UInt8], head: ReplyHead) {
        let line = Array(json.jsonString.utf8)
        return (line, ReplyHead.scan(line)!)
    }
    static func settled(_ actions: [Pipeline.Action]) -> [String] {
        actions.compactMap { if case .settle(let w, let r) = $0 { return "\(w):" + ((try? r.get()).map { _ in "ok" } ?? "error") }; return nil }
    }

    @Test func requestsGetRidsAndRepliesSettleThemInOrder() {
        var p = Pipeline(window: 8)
        _ = p.connectionEstablished()
        var actions: [Pipeline.Action] = []
        #expect(p.requestQueued(body: Self.body("a"), waiter: "a", admission: "", actions: &actions))
        #expect(p.requestQueued(body: Self.body("b"), waiter: "b", admission: "", actions: &actions))
        #expect(String(decoding: p.takeOutbox(), as: UTF8.self) == "{\"rid\":1,\"op\":\"ping\",\"n\":\"a\"}\n{\"rid\":2,\"op\":\"ping\",\"n\":\"b\"}\n")
        actions = []
        #expect(p.replyReceived(Self.reply(1).line, Self.reply(1).head, actions: &actions) == nil)
        #expect(p.replyReceived(Self.reply(2, ok: false).line, Self.reply(2, ok: false).head, actions: &actions) == nil)
        #expect(Self.settled(actions) == ["a:ok", "b:error"])
        #expect(p.count == 0)
    }

    @Test func aFullWindowParksRequestsUntilASixteenthOfItIsAnswered() {
        var p = Pipeline(window: 2)
        _ = p.connectionEstablished()
        var actions: [Pipeline.Action] = []
        #expect(p.requestQueued(body: Self.body("a"), waiter: "a", admission: "A", actions: &actions))
        #expect(p.requestQueued(body: Self.body("b"), waiter: "b", admission: "B", actions: &actions))
        #expect(!p.requestQueued(body: Self.body("c"), waiter: "c", admission: "C", actions: &actions), "parked")
        #expect(!p.admitsNow && p.count == 2)
        actions = []
        _ = p.replyReceived(Self.reply(1).line, Self.reply(1).head, actions: &actions)
        let admitted = actions.compactMap { if case .admit(let a) = $0 { return a }; return nil }
        #expect(admitted == ["C"] && p.count == 2)

        var wide = Pipeline(window: 32)
        _ = wide.connectionEstablished()
        for i in 0..<33 { _ = wide.requestQueued(body: Self.body("\(i)"), waiter: "\(i)", admission: "A\(i)", actions: &actions) }
        actions = []
        _ = wide.replyReceived(Self.reply(1).line, Self.reply(1).head, actions: &actions)
        #expect(!actions.contains { if case .admit = $0 { return true }; return false }, "one reply is not enough room")
        _ = wide.replyReceived(Self.reply(2).line, Self.reply(2).head, actions: &actions)
        #expect(actions.contains { if case .admit("A32") = $0 { return true }; return false }, "a sixteenth of the window is")
    }

    @Test func aReconnectSendsAgainEveryRequestNotAnsweredInOrder() {
        var p = Pipeline(window: 8)
        _ = p.connectionEstablished()
        var actions: [Pipeline.Action] = []
        for w in ["a", "b", "c"] { _ = p.requestQueued(body: Self.body(w), waiter: w, admission: "", actions: &actions) }
        _ = p.replyReceived(Self.reply(1).line, Self.reply(1).head, actions: &actions)
        p.connectionLost()
        _ = p.requestQueued(body: Self.body("d"), waiter: "d", admission: "", actions: &actions)
        #expect(p.takeOutbox().isEmpty, "nothing is written while disconnected")
        let resent = String(decoding: p.connectionEstablished(), as: UTF8.self)
        #expect(resent.split(separator: "\n").map { $0.prefix(9) } == [#"{"rid":2,"#, #"{"rid":3,"#, #"{"rid":4,"#])
    }

    @Test func anErrorWithoutOurRidIsTheConnectionsAndEndingFailsEverything() {
        var p = Pipeline(window: 8)
        _ = p.connectionEstablished()
        var actions: [Pipeline.Action] = []
        _ = p.requestQueued(body: Self.body("a"), waiter: "a", admission: "", actions: &actions)
        let unsolicited = Self.replyLine(["ok": false, "error": ["code": "grant_revoked", "title": "t", "detail": "d"]])
        let revoked = p.replyReceived(unsolicited.line, unsolicited.head, actions: &actions)
        #expect(revoked?.code == "grant_revoked" && revoked?.isFinal == true)
        actions = []
        p.sessionEnded(revoked!, actions: &actions)
        #expect(Self.settled(actions) == ["a:error"])
        actions = []
        _ = p.requestQueued(body: Self.body("b"), waiter: "b", admission: "", actions: &actions)
        #expect(Self.settled(actions) == ["b:error"], "a request after the end fails at once")
    }
}

@Suite struct ReplyScanTests {
    /// An ack is read from its bytes: seq, partition, duplicate and warnings; `raw` has every member.
    @Test func anAckIsReadFromItsLineWithoutADictionary() {
        let line = Array(#"{"duplicate":true,"ok":true,"partition":3,"rid":"x\"}","seq":1042,"warnings":[{"code":"c","detail":"d","title":"t"}]}"#.utf8)
        let head = ReplyHead.scan(line)
        #expect(head?.ok == true && head?.hasRid == true && head?.rid == nil, "a string rid is not ours")
        let ack = Ack(line: line)
        #expect(ack.seq == 1042 && ack.partition == 3 && ack.duplicate && ack.warnings.map(\.code) == ["c"])
        #expect(ack.raw["rid"] == "x\"}" && ack.raw.count == 6)
        let plain = Ack(line: Array(#"{"ok":true,"rid":7,"seq":9,"warnings":[]}"#.utf8))
        #expect(plain.seq == 9 && plain.partition == 0 && !plain.duplicate && plain.warnings.isEmpty)
        #expect(ReplyHead.scan(Array(#"{"cursor":5,"op":"delivery","user":"u"}"#.utf8)) == nil, "a delivery is not a reply")
        #expect(ReplyHead.scan(Array(#"{"error":{"code":"busy"},"ok":false}"#.utf8))?.ok == false)
    }
}
