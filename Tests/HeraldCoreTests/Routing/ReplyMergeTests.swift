// SPEC §9: a request sent to several partitions gets one reply, after every partition answered.
import HeraldCore
import Testing

@Suite struct ReplyMergeTests {
    func j(_ s: String) -> JSONValue { try! JSONValue.parse(Array(s.utf8)) }

    @Test func aSplitFanOutIsAcknowledgedOnceWithEveryPartitionsPositionAndTheCountsAddedUp() {
        let merged = ReplyMerge.merge(op: .submit, rid: .int(7), [
            (1, j(#"{"ok":true,"partition":1,"seq":4,"events":2,"appended":2,"warnings":[]}"#)),
            (3, j(#"{"ok":true,"partition":3,"seq":9,"events":1,"appended":0,"duplicate":true,"warnings":[]}"#)),
        ])
        #expect(merged["ok"] == true && merged["rid"] == .int(7))
        #expect(merged["partition"] == 1 && merged["seq"] == 4)
        #expect(merged["events"] == 3 && merged["appended"] == 2 && merged["duplicate"] == nil)
        #expect(merged["partitions"]?.arrayValue?.count == 2)
        #expect(merged["partitions"]?.arrayValue?[1]["seq"] == 9)
    }

    @Test func aFanOutResentEverywhereIsADuplicate() {
        let merged = ReplyMerge.merge(op: .submit, rid: nil, [
            (0, j(#"{"ok":true,"partition":0,"seq":4,"events":1,"appended":0,"duplicate":true,"warnings":[]}"#)),
            (2, j(#"{"ok":true,"partition":2,"seq":5,"events":1,"appended":0,"duplicate":true,"warnings":[]}"#)),
        ])
        #expect(merged["duplicate"] == true && merged["appended"] == 0)
    }

    /// Not stored everywhere: the client is told so and sends it again; partitions that committed
    /// answer the resend as a duplicate.
    @Test func oneFailedPartitionFailsTheRequestWithItsError() {
        let merged = ReplyMerge.merge(op: .registerApp, rid: .string("r"), [
            (0, j(#"{"ok":true,"partition":0,"seq":1,"warnings":[]}"#)),
            (1, j(#"{"ok":false,"error":{"code":"store_unavailable","title":"t","detail":"d"}}"#)),
        ])
        #expect(merged["ok"] == false && merged["error"]?["code"] == "store_unavailable" && merged["rid"] == "r")
    }

    @Test func deletingAConsumerSucceedsWhereOnePartitionDeletedIt() {
        let merged = ReplyMerge.merge(op: .deleteConsumer, rid: nil, [
            (0, j(#"{"ok":true,"op":"deleteConsumer","consumer":"c"}"#)),
            (1, j(#"{"ok":false,"error":{"code":"unknown_consumer","title":"t","detail":"d"}}"#)),
        ])
        #expect(merged["ok"] == true)
    }

    @Test func consumersAreListedOnceWithEveryPartitionsPositionAndTheirLagSummed() {
        let merged = ReplyMerge.merge(op: .consumers, rid: nil, [
            (0, j(#"{"ok":true,"op":"consumers","consumers":[{"consumer":"c","lag":2,"partitions":[{"partition":0,"acked":1,"head":3,"lag":2}],"members":[]}],"ephemeral":[]}"#)),
            (1, j(#"{"ok":true,"op":"consumers","consumers":[{"consumer":"c","lag":5,"partitions":[{"partition":1,"acked":0,"head":5,"lag":5}],"members":[]}],"ephemeral":[]}"#)),
        ])
        let list = merged["consumers"]?.arrayValue ?? []
        #expect(list.count == 1 && list[0]["lag"] == 7 && list[0]["partitions"]?.arrayValue?.count == 2)
    }
}
