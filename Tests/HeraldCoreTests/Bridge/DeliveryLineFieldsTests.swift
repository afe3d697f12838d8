// The bridge's scan of a delivery line finds what a full parse finds, and gives up on what it does not read.
@testable import HeraldCore
import Testing

@Suite struct DeliveryLineFieldsTests {
    static func scan(_ s: String) -> DeliveryLineFields? { Array(s.utf8).withUnsafeBytes { DeliveryLineFields.scan($0) } }

    @Test func aDeliveryLinesRoutingMembersAreFoundPastNestedValues() {
        let line = #"{"cursor":812,"op":"delivery","app":"com.example.mail","at":"2026-03-27T07:00:00Z","causeSeq":17,"content":{"body":"A \"quoted\" }{ body","kind":"not this","title":"T"},"items":[{"app":"x"},[1,2]],"kind":"alert","partition":3,"presentation":{"badge":1},"reason":"delivered","user":"alice"}"#
        #expect(Self.scan(line) == DeliveryLineFields(op: "delivery", cursor: 812, partition: 3, app: "com.example.mail", kind: "alert"))
        let full = try! JSONValue.parse(Array(line.utf8))
        #expect(full["kind"] == "alert" && full["cursor"] == 812)
    }

    @Test func repliesAndGoodbyesAreReadToo() {
        #expect(Self.scan(#"{"cursor":5,"ok":true}"#) == DeliveryLineFields(cursor: 5))
        #expect(Self.scan(#"{"op":"goodbye","reason":"stopping"}"#) == DeliveryLineFields(op: "goodbye"))
        #expect(Self.scan(#"{"error":{"code":"consumer_deleted"},"ok":false}"#) == DeliveryLineFields())
        #expect(Self.scan("{}") == DeliveryLineFields())
    }

    @Test func whatItDoesNotReadIsLeftToTheFullParse() {
        #expect(Self.scan(#"{"app":"a\"b","cursor":1}"#) == nil, "an escape in a routed string")
        #expect(Self.scan(#"{"cursor":1.5}"#) == nil)
        #expect(Self.scan(#"{"cursor":1"#) == nil)
        #expect(Self.scan("[1]") == nil)
        #expect(Self.scan(#"{"cursor":99999999999999999999}"#) == nil)
    }
}
