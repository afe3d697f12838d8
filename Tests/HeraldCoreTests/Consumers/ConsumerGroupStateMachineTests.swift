// The consumer group rule on one partition: who streams, when it changes, and which acks count.
import HeraldCore
import Testing

@Suite struct ConsumerGroupStateMachineTests {
    @Test func theFirstMemberStreamsAndAJoinerNewerThanItTakesTheOnlyPartition() {
        var g = ConsumerGroupStateMachine(partition: 0, partitionCount: 1)
        #expect(g.memberJoined("001-a-1") == .init(revoked: nil, assigned: "001-a-1", generation: 1))
        #expect(g.memberJoined("002-a-2") == .init(revoked: "001-a-1", assigned: "002-a-2", generation: 2))
        #expect(g.memberJoined("002-a-2") == nil, "a known member joining again changes nothing")
        #expect(g.ackReceived(from: "001-a-1") == .refuse(streamer: "002-a-2", generation: 2))
        #expect(g.ackReceived(from: "002-a-2") == .accept)
        #expect(g.ackReceived(from: nil) == .accept)
    }

    @Test func aLeavingStreamerHandsThePartitionToTheNextAndTheLastLeavingRevokesIt() {
        var g = ConsumerGroupStateMachine(partition: 0, partitionCount: 1)
        _ = g.memberJoined("001-a-1")
        _ = g.memberJoined("002-a-2")
        #expect(g.memberLeft("001-a-1") == nil, "an idle member leaving moves nothing")
        _ = g.memberJoined("003-a-3")
        #expect(g.memberLeft("003-a-3") == .init(revoked: "003-a-3", assigned: "002-a-2", generation: 4))
        #expect(g.memberLeft("002-a-2") == .init(revoked: "002-a-2", assigned: nil, generation: 5))
        #expect(g.memberLeft("002-a-2") == nil)
        #expect(g.ackReceived(from: "002-a-2") == .accept, "nobody streams: an ack is the only news of the cursor")
    }

    /// Every partition's service applies the rule alone: across the partitions of one database
    /// the members get shares within one of each other, and each partition has one streamer.
    @Test func partitionsAreDividedWithinOneOfEachOtherWhateverTheOrderOfJoins() {
        let ids = (1...5).map { ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: Int64($0 * 7), instance: "i\($0 % 2)", serial: UInt64($0)) }
        for m in 1...5 {
            var shares: [String: Int] = [:]
            for p in 0..<16 {
                var g = ConsumerGroupStateMachine(partition: p, partitionCount: 16)
                // Each partition hears of the members in another order.
                for id in ids.prefix(m).shuffled() { _ = g.memberJoined(id) }
                shares[g.streamer!, default: 0] += 1
            }
            #expect(shares.count == m)
            #expect(shares.values.max()! - shares.values.min()! <= 1, "\(shares)")
        }
    }

    @Test func memberIDsSortByJoinTime() {
        let older = ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: 999, instance: "zeta", serial: 9)
        let newer = ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: 1_000, instance: "alpha", serial: 1)
        #expect(newer > older)
        let ninth = ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: 1_000, instance: "a", serial: 9)
        let tenth = ConsumerGroupStateMachine.memberID(joinedAtMilliseconds: 1_000, instance: "a", serial: 10)
        #expect(tenth > ninth, "within one millisecond, by serial")
    }
}
