// A partition's lease from its holder's side: renewals on time, a lost lease stops serving.
import HeraldCore
import Testing

@Suite struct LeaseStateMachineTests {
    @Test func aHeldLeaseIsRenewedEveryThirdOfItsTTLOneRenewalAtATime() {
        var lease = LeaseStateMachine(ttlMilliseconds: 3_000)
        lease.taken(epoch: 7, sentAt: 0)
        #expect(lease.renewEveryMilliseconds == 1_000)
        #expect(lease.renewalDue(now: 1_000) == .renew(epoch: 7))
        #expect(lease.renewalDue(now: 2_000) == .none, "one renewal in flight")
        lease.renewed(sentAt: 1_000)
        #expect(lease.state == .held(epoch: 7, validUntil: 4_000, renewalInFlight: false))
        #expect(lease.renewalDue(now: 2_000) == .renew(epoch: 7))
    }

    @Test func aRenewalThatFindsAnotherEpochStopsServing() {
        var lease = LeaseStateMachine(ttlMilliseconds: 3_000)
        lease.taken(epoch: 7, sentAt: 0)
        _ = lease.renewalDue(now: 1_000)
        #expect(lease.renewalRefused() == .stopServing(epoch: 7))
        #expect(lease.state == .lost(epoch: 7))
        #expect(lease.renewalDue(now: 2_000) == .none)
        #expect(lease.epoch == nil)
    }

    /// Renewals that cannot reach the database keep the lease (the epoch check fences appends):
    /// the holder keeps renewing, and only says its view of the lease ran out.
    @Test func renewalsFailingPastTheTTLKeepRenewingAndOnlyMayHaveExpired() {
        var lease = LeaseStateMachine(ttlMilliseconds: 3_000)
        lease.taken(epoch: 2, sentAt: 100)
        for now in stride(from: Int64(1_000), to: 6_100, by: 1_000) {
            #expect(lease.renewalDue(now: now) == .renew(epoch: 2))
            lease.renewalFailed()
        }
        #expect(lease.mayHaveExpired(now: 6_100) && !lease.mayHaveExpired(now: 3_000))
        lease.renewed(sentAt: 6_000)
        #expect(!lease.mayHaveExpired(now: 6_100))
        #expect(lease.epoch == 2)
    }

    @Test func aFencedAppendLosesTheLease() {
        var lease = LeaseStateMachine(ttlMilliseconds: 5_000)
        lease.taken(epoch: 3, sentAt: 0)
        #expect(lease.appendFenced() == .stopServing(epoch: 3))
        #expect(lease.appendFenced() == .none, "once")
    }
}
