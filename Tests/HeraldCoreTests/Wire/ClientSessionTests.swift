// The connection protocol as a pure state machine: hello, roles, tenancy and reply order (SPEC §5).
import HeraldCore
import Testing

@Suite struct ClientSessionTests {
    static let tokens = TokenTable([
        "producer-token": Grant(name: "mail", roles: [.producer], apps: ["com.example.mail"]),
        "consumer-token": Grant(name: "push", roles: [.consumer], apps: nil),
    ])

    func sent(_ actions: [ClientSession.Action]) -> [JSONValue] {
        actions.flatMap { action -> [JSONValue] in
            guard case .send(let bytes) = action else { return [] }
            return bytes.split(separator: 0x0A).compactMap { try? JSONValue.parse(Array($0)) }
        }
    }

    func dispatched(_ actions: [ClientSession.Action]) -> [ClientSession.Request] {
        actions.compactMap { if case .dispatch(let r) = $0 { return r } else { return nil } }
    }

    @Test func onlyHelloAndPingAreAnsweredBeforeHello() {
        var s = ClientSession(tokens: Self.tokens, serverName: "herald/test")
        #expect(sent(s.lineReceived(Array(#"{"op":"ping","rid":1}"#.utf8)))[0]["op"] == "pong")
        #expect(sent(s.lineReceived(Array(#"{"op":"submit","app":"com.example.mail"}"#.utf8)))[0]["error"]?["code"] == "hello_required")
        #expect(sent(s.lineReceived(Array(#"{"op":"hello","token":"nope"}"#.utf8)))[0]["error"]?["code"] == "invalid_token")
        let hello = sent(s.lineReceived(Array(#"{"op":"hello","token":"producer-token"}"#.utf8)))[0]
        #expect(hello["roles"] == ["producer"] && hello["apps"] == ["com.example.mail"] && hello["server"] == "herald/test")
    }

    /// A token sent as a number is not "no token": the title says what was wrong.
    @Test func aHelloWithATokenThatIsNotAStringIsToldSo() {
        var s = ClientSession(tokens: Self.tokens, serverName: "h")
        let e = sent(s.lineReceived(Array(#"{"op":"hello","token":12345}"#.utf8)))[0]["error"]
        #expect(e?["code"] == "invalid_token" && e?["title"] == "The hello's token is an integer, not a string")
        #expect(sent(s.lineReceived(Array(#"{"op":"hello"}"#.utf8)))[0]["error"]?["title"] == "The hello carried no token")
    }

    @Test func devModeGrantsEveryRole() {
        var s = ClientSession(tokens: TokenTable(), serverName: "h")
        #expect(sent(s.lineReceived(Array(#"{"op":"hello"}"#.utf8)))[0]["roles"] == ["producer", "settings", "consumer", "admin"])
    }

    @Test func producerTokenMayNotActForAnotherAppOrUseOtherRoles() {
        var s = ClientSession(tokens: Self.tokens, serverName: "h")
        _ = s.lineReceived(Array(#"{"op":"hello","token":"producer-token"}"#.utf8))
        #expect(sent(s.lineReceived(Array(#"{"op":"submit","app":"com.example.bank","id":"x"}"#.utf8)))[0]["error"]?["code"] == "forbidden_app")
        #expect(sent(s.lineReceived(Array(#"{"op":"withdraw","app":"com.example.bank","id":"x"}"#.utf8)))[0]["error"]?["code"] == "forbidden_app")
        #expect(sent(s.lineReceived(Array(#"{"op":"subscribe","consumer":"c"}"#.utf8)))[0]["error"]?["code"] == "forbidden")
        #expect(dispatched(s.lineReceived(Array(#"{"op":"submit","app":"com.example.mail","id":"x"}"#.utf8))).count == 1)
    }

    @Test func repliesLeaveInRequestOrderWhenLaterOnesFinishFirst() {
        var s = ClientSession(tokens: TokenTable(), serverName: "h")
        _ = s.lineReceived(Array(#"{"op":"hello"}"#.utf8))
        let a = dispatched(s.lineReceived(Array(#"{"op":"submit","rid":"a"}"#.utf8)))[0]
        let b = dispatched(s.lineReceived(Array(#"{"op":"submit","rid":"b"}"#.utf8)))[0]
        #expect(s.lineReceived(Array(#"{"op":"ping","rid":"c"}"#.utf8)).isEmpty, "ping waits behind a and b")
        #expect(s.replyCompleted(ticket: b.ticket, reply: WireReply.ok(rid: "b")).isEmpty)
        #expect(s.outstanding == 3)
        let out = sent(s.replyCompleted(ticket: a.ticket, reply: WireReply.ok(rid: "a")))
        #expect(out.map { $0["rid"] } == ["a", "b", "c"])
        #expect(s.outstanding == 0)
    }

    @Test func aReplyGoesOutInPlaceOnlyWhenItIsNextAndNothingIsHeld() {
        var s = ClientSession(tokens: TokenTable(), serverName: "h")
        _ = s.lineReceived(Array(#"{"op":"hello"}"#.utf8))
        let a = dispatched(s.lineReceived(Array(#"{"op":"submit","rid":"a"}"#.utf8)))[0]
        let b = dispatched(s.lineReceived(Array(#"{"op":"submit","rid":"b"}"#.utf8)))[0]
        let c = dispatched(s.lineReceived(Array(#"{"op":"submit","rid":"c"}"#.utf8)))[0]
        let bInPlace = s.releaseReplyInPlace(ticket: b.ticket)
        #expect(!bInPlace, "b is not next: it must be held, not sent")
        let bHeld = s.releaseReply(ticket: b.ticket, reply: WireReply.ok(rid: "b"))
        #expect(bHeld == nil)
        let aInPlace = s.releaseReplyInPlace(ticket: a.ticket)
        #expect(!aInPlace, "a is next, but b waits behind it: a goes through releaseReply")
        let out = s.releaseReply(ticket: a.ticket, reply: WireReply.ok(rid: "a")).map { sent([.send($0)]) }
        #expect(out?.map { $0["rid"] } == ["a", "b"])
        let cInPlace = s.releaseReplyInPlace(ticket: c.ticket)
        #expect(cInPlace, "c is next and nothing is held")
        #expect(s.outstanding == 0)
    }

    @Test func malformedLinesAndMissingOpGetErrorsWithRid() {
        var s = ClientSession(tokens: TokenTable(), serverName: "h")
        #expect(sent(s.lineReceived(Array("{oops".utf8)))[0]["error"]?["code"] == "malformed_json")
        #expect(sent(s.lineReceived(Array("[1,2]".utf8)))[0]["error"]?["code"] == "not_an_object")
        #expect(sent(s.lineReceived(Array(#"{"rid":9}"#.utf8)))[0]["rid"] == 9)
        #expect(sent(s.lineReceived([0x7B, 0x22, 0x6F, 0x70, 0x22, 0x3A, 0x22, 0x00, 0x22, 0x7D]))[0]["error"]?["code"] == "malformed_json",
                "NUL bytes are refused (libpq would truncate them)")
    }

    @Test func tokensFileIsValidated() throws {
        let good = try JSONValue.parse(#"{"tokens":[{"name":"m","token":"12345678","roles":["producer"],"apps":["a"]}]}"#)
        #expect(try TokenTable.parse(good).grant(for: "12345678")?.apps == ["a"])
        for bad in [#"{}"#, #"{"tokens":[{"token":"short","roles":["admin"]}]}"#,
                    #"{"tokens":[{"token":"12345678","roles":["root"]}]}"#,
                    #"{"tokens":[{"token":"12345678","roles":["producer"]}]}"#] {
            #expect(throws: RequestError.self) { try TokenTable.parse(JSONValue.parse(bad)) }
        }
    }

    @Test func theUnknownOpErrorListsEveryOp() {
        let detail = RequestError.unknownOp("x").detail
        #expect(detail.contains("provisionalTurnOff") && detail.contains("clock"))
    }
}
