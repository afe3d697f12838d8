// An instance's membership, event by event: heartbeat, view, takes, starts, hand-overs, a graceful stop.
import HeraldCore
import Testing

@Suite struct MembershipStateMachineTests {
    static func view(live: [String], owners: [Int: (String, Int64, Bool)] = [:], partitions: Int = 4) -> ClusterView {
        ClusterView(liveInstances: live, partitions: (0..<partitions).map { p in
            let o = owners[p]
            return ClusterView.Partition(partition: p, epoch: o?.1 ?? 0, owner: o?.0, address: nil, leaseLive: o?.2 ?? false)
        })
    }

    /// A machine for "a" (TTL 3 s) that joined alone and serves every partition of a fresh 4-partition database.
    static func servingAll() -> MembershipStateMachine {
        var m = MembershipStateMachine(instance: "a", ttlMilliseconds: 3_000)
        _ = m.startRequested(now: 0)
        _ = m.heartbeatCompleted(ok: true)
        _ = m.viewRead(view(live: ["a"]))
        for p in 0..<4 {
            _ = m.takeCompleted(partition: p, epoch: 1)
            _ = m.partitionStarted(partition: p)
        }
        return m
    }

    @Test func joiningHeartbeatsReadsTheViewTakesAndStartsItsShare() {
        var m = MembershipStateMachine(instance: "a", ttlMilliseconds: 3_000)
        #expect(m.startRequested(now: 0) == [.heartbeat, .armTick(milliseconds: 1_000)])
        #expect(m.state == .joining)
        #expect(m.heartbeatCompleted(ok: true) == [.readView])
        #expect(m.viewRead(Self.view(live: ["a", "b"])) == [.take(partition: 0, expectedEpoch: 0), .take(partition: 2, expectedEpoch: 0)])
        #expect(m.state == .member)
        #expect(m.takeCompleted(partition: 0, epoch: 1) == [.startServing(partition: 0, epoch: 1)])
        #expect(m.takeCompleted(partition: 2, epoch: nil) == [], "not takeable: another instance was faster")
        #expect(m.epoch(of: 0) == 1 && m.serving.isEmpty)
        #expect(m.partitionStarted(partition: 0) == [])
        #expect(m.serving == [0: 1])
    }

    /// A free partition whose row is locked (an owner paused in the middle of an append): the take
    /// that gave up waiting is not tried again for a tick, then is.
    @Test func aTakeThatFoundTheRowLockedIsTriedAgainATickLater() {
        var m = MembershipStateMachine(instance: "a", ttlMilliseconds: 3_000)
        _ = m.startRequested(now: 0)
        _ = m.heartbeatCompleted(ok: true)
        #expect(m.viewRead(Self.view(live: ["a"], partitions: 2)) == [.take(partition: 0, expectedEpoch: 0), .take(partition: 1, expectedEpoch: 0)])
        #expect(m.takeCompleted(partition: 0, epoch: 1) == [.startServing(partition: 0, epoch: 1)])
        #expect(m.takeFoundRowLocked(partition: 1, now: 100) == [])
        #expect(m.takesDeferred == [1: 1_100] && m.taking.isEmpty)
        // A round soon after (a link was lost): partition 1 is let be.
        _ = m.tickDue(now: 600)
        _ = m.heartbeatCompleted(ok: true)
        #expect(m.viewRead(Self.view(live: ["a"], owners: [0: ("a", 1, true)], partitions: 2)) == [])
        // A tick later it is taken again.
        _ = m.tickDue(now: 1_100)
        _ = m.heartbeatCompleted(ok: true)
        #expect(m.viewRead(Self.view(live: ["a"], owners: [0: ("a", 1, true)], partitions: 2)) == [.take(partition: 1, expectedEpoch: 0)])
        #expect(m.takesDeferred.isEmpty)
        #expect(m.takeFoundRowLocked(partition: 0, now: 1_200) == [], "not a take in flight")
    }

    @Test func aRoundEveryThirdOfTheTTLOneAtATime() {
        var m = MembershipStateMachine(instance: "a", ttlMilliseconds: 3_000)
        _ = m.startRequested(now: 0)
        #expect(m.tickDue(now: 1_000) == [.armTick(milliseconds: 1_000)], "the first round is still in flight")
        _ = m.heartbeatCompleted(ok: true)
        _ = m.viewRead(Self.view(live: ["a"], owners: [0: ("b", 4, true), 1: ("b", 4, true), 2: ("b", 4, true), 3: ("b", 4, true)]))
        #expect(m.tickDue(now: 2_000) == [.heartbeat, .armTick(milliseconds: 1_000)])
        #expect(m.tickDue(now: 3_000) == [.armTick(milliseconds: 1_000)])
        #expect(m.tickDue(now: 5_000) == [.heartbeat, .armTick(milliseconds: 1_000)], "a round unanswered for a TTL is abandoned")
    }

    /// A heartbeat not written keeps every partition served; the round goes on with the view,
    /// where the last heartbeat written may still count.
    @Test func aHeartbeatThatFailsDoesNotStopServing() {
        var m = Self.servingAll()
        #expect(m.tickDue(now: 1_000) == [.heartbeat, .armTick(milliseconds: 1_000)])
        #expect(m.heartbeatCompleted(ok: false) == [.readView])
        #expect(m.viewReadFailed() == [])
        #expect(m.serving.count == 4 && m.state == .member)
        #expect(m.heartbeatMayHaveExpired(now: 3_100) && !m.heartbeatMayHaveExpired(now: 2_900))
        #expect(m.tickDue(now: 2_000) == [.heartbeat, .armTick(milliseconds: 1_000)])
        #expect(m.heartbeatCompleted(ok: false) == [.readView])
        #expect(m.viewRead(Self.view(live: [], owners: [0: ("a", 1, true), 1: ("a", 1, true), 2: ("a", 1, true), 3: ("a", 1, true)])) == [],
                "not live in the view: plans nothing, serves on")
        #expect(m.serving.count == 4)
    }

    /// When a second instance joins, one partition is handed over per round; after the drain the
    /// next one goes.
    @Test func aboveItsShareItHandsOverOnePartitionPerRound() {
        var m = Self.servingAll()
        let all = Dictionary(uniqueKeysWithValues: (0..<4).map { ($0, ("a", Int64(1), true)) })
        _ = m.tickDue(now: 1_000)
        _ = m.heartbeatCompleted(ok: true)
        #expect(m.viewRead(Self.view(live: ["a", "b"], owners: all)) == [.handOver(partition: 1)])
        #expect(m.handingOver == [1: 1] && m.serving.count == 3)
        _ = m.tickDue(now: 2_000)
        _ = m.heartbeatCompleted(ok: true)
        #expect(m.viewRead(Self.view(live: ["a", "b"], owners: all)) == [.handOver(partition: 3)])
        #expect(m.handOverCompleted(partition: 1) == [])
        _ = m.tickDue(now: 3_000)
        _ = m.heartbeatCompleted(ok: true)
        var balanced = all
        balanced[1] = ("b", 2, true)
        balanced[3] = ("a", 1, false)
        #expect(m.viewRead(Self.view(live: ["a", "b"], owners: balanced)) == [], "at its share: neither gives nor takes")
    }

    @Test func aLostPartitionIsNoLongerServed() {
        var m = Self.servingAll()
        #expect(m.partitionLost(partition: 2) == [])
        #expect(m.serving.keys.sorted() == [0, 1, 3])
        #expect(m.epoch(of: 2) == nil)
    }

    /// A stop hands every served partition over, then leaves; takes and starts in flight settle
    /// first (a partition taken meanwhile is released, one started is handed over).
    @Test func aGracefulStopHandsEverythingOverThenLeaves() {
        var m = MembershipStateMachine(instance: "a", ttlMilliseconds: 3_000)
        _ = m.startRequested(now: 0)
        _ = m.heartbeatCompleted(ok: true)
        _ = m.viewRead(Self.view(live: ["a"]))
        _ = m.takeCompleted(partition: 0, epoch: 1)
        _ = m.partitionStarted(partition: 0)
        _ = m.takeCompleted(partition: 1, epoch: 1)  // starting
        // 2 and 3: takes in flight
        #expect(m.stopRequested() == [.handOver(partition: 0)])
        #expect(m.state == .leaving)
        #expect(m.tickDue(now: 1_000) == [], "no more rounds")
        #expect(m.heartbeatCompleted(ok: true) == [])
        #expect(m.takeCompleted(partition: 2, epoch: 5) == [.release(partition: 2, epoch: 5)])
        #expect(m.takeCompleted(partition: 3, epoch: nil) == [])
        #expect(m.partitionStarted(partition: 1) == [.handOver(partition: 1)])
        #expect(m.handOverCompleted(partition: 0) == [])
        #expect(m.handOverCompleted(partition: 1) == [.leave])
        #expect(m.state == .left)
        #expect(m.stopRequested() == [])
    }

    @Test func aStopWithNothingServedLeavesAtOnce() {
        var m = MembershipStateMachine(instance: "a", ttlMilliseconds: 3_000)
        _ = m.startRequested(now: 0)
        #expect(m.stopRequested() == [.leave])
        #expect(m.state == .left)
        var idle = MembershipStateMachine(instance: "b", ttlMilliseconds: 3_000)
        #expect(idle.stopRequested() == [] && idle.state == .left, "never joined: nothing to leave")
    }

    /// A partition lost while stopping counts as handed over.
    @Test func aPartitionLostWhileStoppingCountsAsGone() {
        var m = Self.servingAll()
        #expect(m.stopRequested() == (0..<4).map { .handOver(partition: $0) })
        for p in 0..<3 { #expect(m.handOverCompleted(partition: p) == []) }
        #expect(m.partitionLost(partition: 3) == [.leave])
    }
}
