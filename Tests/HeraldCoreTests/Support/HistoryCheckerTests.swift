// The history checker on hand-made histories: it passes a clean one and flags each class of failure.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct HistoryCheckerTests {
    typealias H = HistoryChecker
    static let t0 = Instant(rfc3339: "2026-03-27T07:00:00Z")!

    static func key(_ n: Int, user: String = "u1") -> H.Key { H.Key(app: "a", id: "n\(n)", user: user) }

    /// Three submits, all acked, stored and decided once, received in order by one consumer.
    static func clean() -> H {
        var h = H()
        h.consumers = ["push"]
        for n in 1...3 {
            h.sent.append(.init(key: key(n), payload: "p\(n)"))
            h.acks.append(.init(key: key(n), seq: Int64(n)))
            h.storedEvents.append(.init(seq: Int64(n), key: key(n), payload: "p\(n)"))
            h.storedDeliveries.append(.init(cursor: Int64(n), user: "u1", userIndex: Int64(n), causeSeq: Int64(n),
                                            kind: "alert", app: "a", notification: "n\(n)", at: t0))
            h.received.append(.init(consumer: "push", session: 1, cursor: Int64(n), user: "u1", notification: "n\(n)", causeSeq: Int64(n)))
        }
        h.sessions = [.init(consumer: "push", session: 1, ackedBefore: 0)]
        return h
    }

    @Test func aCleanHistoryPasses() {
        let r = Self.clean().check()
        #expect(r.passed, "\(r)")
        #expect(r.sent == 3 && r.acked == 3 && r.stored == 3 && r.decided == 3 && r.delivered["push"] == 3 && r.okItems == 3)
        #expect(r.summary.hasPrefix("PASS"))
    }

    @Test func unackedAndUnstoredIsNotALossAndARetriedDuplicateAckIsFine() {
        var h = Self.clean()
        h.sent.append(.init(key: Self.key(9), payload: "p9"))            // never acked, never stored
        h.acks.append(.init(key: Self.key(2), seq: 2, duplicate: true))  // a retry answered as duplicate
        #expect(h.check().passed)
    }

    @Test func ackedButNotStoredIsLost() {
        var h = Self.clean()
        h.storedEvents.removeAll { $0.seq == 2 }
        h.storedDeliveries.removeAll { $0.cursor == 2 }
        h.received.removeAll { $0.cursor == 2 }
        h.received[1].cursor = 2; h.received[1].notification = "n2"; h.received[1].causeSeq = 2
        let r = h.check()
        #expect(r.lost >= 1 && !r.passed)
        #expect(r.findings.contains { $0.verdict == .lost && $0.subject == "event a/n2@u1" && $0.detail.contains("not stored") })
    }

    @Test func anAckWithAnotherSeqThanTheStoredRowIsLost() {
        var h = Self.clean()
        h.acks[0].seq = 42
        #expect(h.check().findings.contains { $0.verdict == .lost && $0.detail.contains("seq 42") })
    }

    @Test func anAckWithoutSeqStillNeedsTheRow() {
        var h = Self.clean()
        h.acks = h.acks.map { H.Ack(key: $0.key, seq: 0) }
        #expect(h.check().passed)
        h.storedEvents.removeFirst()
        #expect(h.check().findings.contains { $0.verdict == .lost && $0.detail == "acknowledged but not stored" })
    }

    @Test func aStoredSubmitNeverDecidedIsLost() {
        var h = Self.clean()
        h.sent.append(.init(key: Self.key(4), payload: "p4"))
        h.storedEvents.append(.init(seq: 4, key: Self.key(4), payload: "p4"))
        #expect(h.check().findings.contains { $0.verdict == .lost && $0.detail.contains("never decided") })
    }

    @Test func aCommittedDeliveryAConsumerNeverReceivedIsLost() {
        var h = Self.clean()
        h.received.removeLast()
        let r = h.check()
        #expect(r.findings.contains { $0.verdict == .lost && $0.subject == "delivery #3 at push" })
        #expect(r.delivered["push"] == 2)
    }

    @Test func storedTwiceIsDuplicated() {
        var h = Self.clean()
        h.storedEvents.append(.init(seq: 4, key: Self.key(1), payload: "p1"))
        #expect(h.check().findings.contains { $0.verdict == .duplicated && $0.subject == "event a/n1@u1" })
    }

    @Test func aDecisionMadeTwiceIsDuplicated() {
        var h = Self.clean()
        // The same alert again, under a new ordinal: decided twice.
        h.storedDeliveries.append(.init(cursor: 4, user: "u1", userIndex: 4, causeSeq: 1, kind: "alert", app: "a", notification: "n1", at: Self.t0))
        h.received.append(.init(consumer: "push", session: 1, cursor: 4, user: "u1", notification: "n1", causeSeq: 1))
        let r = h.check()
        #expect(r.duplicated == 1 && r.findings[0].subject.hasPrefix("decision alert of a/n1@u1"))
        // The same ordinal stored twice.
        var g = Self.clean()
        g.storedDeliveries.append(.init(cursor: 4, user: "u1", userIndex: 3, causeSeq: 9, kind: "quiet", app: "a", notification: "n3", at: Self.t0))
        g.received.append(.init(consumer: "push", session: 1, cursor: 4, user: "u1", notification: "n3", causeSeq: 9))
        #expect(g.check().findings.contains { $0.verdict == .duplicated && $0.subject == "decision u1#3" })
    }

    @Test func storedOrDeliveredButNeverSentIsUnexpected() {
        var h = Self.clean()
        h.storedEvents.append(.init(seq: 4, key: Self.key(7), payload: "x"))
        #expect(h.check().findings.contains { $0.verdict == .unexpected && $0.subject == "event a/n7@u1" })

        var g = Self.clean()
        g.storedEvents[0].payload = "tampered"
        #expect(g.check().findings.contains { $0.verdict == .unexpected && $0.detail.contains("payload") })

        var f = Self.clean()
        f.received.append(.init(consumer: "push", session: 1, cursor: 4, user: "u1", notification: "n4", causeSeq: 4))
        #expect(f.check().findings.contains { $0.verdict == .unexpected && $0.detail == "received but not stored" })
    }

    @Test func aDeferredDecisionAfterOrBeforeItsTimeIsLateOrEarly() {
        var h = Self.clean()
        h.sent[0].deliverAt = Self.t0.adding(.seconds(-1))
        h.sent[1].deliverAt = Self.t0.adding(.seconds(1))
        h.sent[2].deliverAt = Self.t0
        let r = h.check()
        #expect(r.count(.late) == 1 && r.findings.contains { $0.verdict == .late && $0.subject == "event a/n1@u1" })
        #expect(r.count(.early) == 1 && r.findings.contains { $0.verdict == .early && $0.subject == "event a/n2@u1" })
        #expect(r.okItems == 1)
    }

    @Test func cursorsGoingBackwardsSkippingOrResumingBehindTheAckAreOrderViolations() {
        var h = Self.clean()
        h.received.swapAt(1, 2)
        #expect(h.check().orderViolations.contains { $0.contains("went backwards from #3 to #2") })

        var g = Self.clean()
        g.received.remove(at: 1)
        g.received.append(.init(consumer: "push", session: 2, cursor: 2, user: "u1", notification: "n2", causeSeq: 2))
        g.sessions.append(.init(consumer: "push", session: 2, ackedBefore: 1))
        let r = g.check()
        #expect(r.orderViolations == ["push connection 1 skipped from #1 to #3"], "redelivery after a reconnect is fine; a skip inside a stream is not")
        #expect(r.findings.isEmpty)

        var f = Self.clean()
        f.received.append(.init(consumer: "push", session: 2, cursor: 2, user: "u1", notification: "n2", causeSeq: 2))
        f.sessions.append(.init(consumer: "push", session: 2, ackedBefore: 3))
        #expect(f.check().orderViolations.contains { $0.contains("behind its acknowledged cursor #3") })

        // A reconnect that resumes past the last ack sent skipped deliveries (even if another connection had them).
        var e = Self.clean()
        e.received.append(.init(consumer: "push", session: 2, cursor: 3, user: "u1", notification: "n3", causeSeq: 3))
        e.sessions.append(.init(consumer: "push", session: 2, ackedBefore: 0, ackSentBefore: 1))
        #expect(e.check().orderViolations == ["push connection 2 resumed at #3, skipping #2… after its last ack #1"])
    }
}
