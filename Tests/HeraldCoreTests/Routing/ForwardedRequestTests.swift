// SPEC §9 routing: where a router may send a request, when it waits for an owner, and when it refuses it — by who sent it.
import HeraldCore
import Testing

@Suite struct ForwardedRequestTests {
    func request(_ origin: ForwardedRequest.Origin, at now: Int64 = 1_000) -> ForwardedRequest {
        ForwardedRequest(origin: origin, partition: 3, now: now, parkLimitMilliseconds: 30_000)
    }

    @Test func aClientsRequestGoesToWhicheverOwnerIsKnown() {
        var local = request(.client)
        #expect(local.ownerLookedUp(.localService, now: 1_000) == .send(.localService))
        #expect(local.state == .sent(.localService))
        var remote = request(.client)
        #expect(remote.ownerLookedUp(.otherInstance, now: 1_000) == .send(.otherInstance))
        #expect(remote.answerReceived(notOwner: false, now: 1_010) == .relay)
        #expect(remote.state == .finished)
    }

    @Test func aClientsRequestWaitsForAnOwnerUntilTheLimitThenIsRefused() {
        var r = request(.client)
        #expect(r.ownerLookedUp(.unknown, now: 1_000) == .park)
        #expect(r.ownerLookedUp(.unknown, now: 30_999) == .park)
        #expect(r.state == .parked)
        #expect(r.ownerLookedUp(.unknown, now: 31_000) == .refuseUnavailable(waited: 30_000))
        #expect(r.state == .finished)
    }

    @Test func aClientsRequestRefusedByAFormerOwnerWaitsForTheNextOne() {
        var r = request(.client)
        _ = r.ownerLookedUp(.otherInstance, now: 1_000)
        #expect(r.answerReceived(notOwner: true, now: 1_200) == .park)
        #expect(r.ownerLookedUp(.localService, now: 1_300) == .send(.localService))
        // Past the limit, the owner's refusal is the answer.
        #expect(r.answerReceived(notOwner: true, now: 31_000) == .relay)
    }

    @Test func aClientsRequestOnALostLinkWaitsAnewForTheOwner() {
        var r = request(.client)
        _ = r.ownerLookedUp(.otherInstance, now: 1_000)
        #expect(r.linkLost(now: 25_000) == .park)
        #expect(r.since == 25_000)
        #expect(r.ownerLookedUp(.unknown, now: 50_000) == .park)
        #expect(r.ownerLookedUp(.unknown, now: 55_000) == .refuseUnavailable(waited: 30_000))
    }

    /// The zombie deadlock: two members each sent the other's requests on to the other, and each
    /// link's head waited on the other link. A peer's request never leaves this member.
    @Test func aPeersRequestIsServedOnlyByThisMembersOwnService() {
        var served = request(.peer)
        #expect(served.ownerLookedUp(.localService, now: 1_000) == .send(.localService))
        var elsewhere = request(.peer)
        #expect(elsewhere.ownerLookedUp(.otherInstance, now: 1_000) == .refuseNotOwner)
        #expect(elsewhere.state == .finished)
        var nobody = request(.peer)
        #expect(nobody.ownerLookedUp(.unknown, now: 1_000) == .refuseNotOwner)
    }

    @Test func aPeersRequestIsNeverParkedHereItsSenderReRoutesIt() {
        // This member's service lost the partition and refused: the refusal goes back as it is.
        var refused = request(.peer)
        _ = refused.ownerLookedUp(.localService, now: 1_000)
        #expect(refused.answerReceived(notOwner: true, now: 1_100) == .relay)
        // The service stopped with the request unanswered: refused, not sent to the new owner.
        var lost = request(.peer)
        _ = lost.ownerLookedUp(.localService, now: 1_000)
        #expect(lost.linkLost(now: 1_100) == .refuseNotOwner)
        #expect(lost.state == .finished)
    }
}
