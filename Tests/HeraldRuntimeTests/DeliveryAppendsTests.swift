// Delivery append bookkeeping: rows taken in order, outcomes handled in sending order, failures put back, waiters released.
import HeraldCore
@testable import HeraldRuntime
import HeraldStore
import Testing

@Suite struct DeliveryAppendsTests {
    static func row(_ n: Int) -> DeliveryRow {
        DeliveryRow(user: "u\(n)", userIndex: Int64(n), causeSeq: Int64(n), kind: "alert", app: "a", notificationId: "n\(n)",
                    reason: "r", at: .epoch, rulesVersion: "1", trace: "[]", body: "{}")
    }

    static func queued(_ count: Int, links: Int = 2) -> DeliveryAppends {
        var d = DeliveryAppends(links: links)
        for n in 1...count { d.queue(row(n)) }
        return d
    }

    @Test func rowsAreTakenInDecisionOrderAllOrAPrefix() {
        var d = Self.queued(5)
        let (first, order) = d.take(2)
        #expect(first.map(\.userIndex) == [1, 2] && order == [0, 1] && d.unsent.map(\.userIndex) == [3, 4, 5] && d.sent == 2)
        let (rest, restOrder) = d.take(3)
        #expect(rest.map(\.userIndex) == [3, 4, 5] && restOrder == [2, 3, 4] && d.unsent.isEmpty && d.sent == 5)
    }

    @Test func outcomesAreHandledInSendingOrderWhateverOrderTheyArriveIn() {
        var d = Self.queued(4)
        let a = d.take(2), b = d.take(2)
        let first = d.appendSent(rows: a.rows, order: a.order, sentAt: 1, carrier: .deliveryWriter(0), base: 10)
        #expect(d.nextCursor == 12)
        let second = d.appendSent(rows: b.rows, order: b.order, sentAt: 2, carrier: .deliveryWriter(1), base: 12)
        #expect(d.nextCursor == 14 && d.inFlight == 2 && d.perLink == [1, 1])
        d.outcomeArrived(second, .success([13, 14]))
        let early = d.nextOutcome()
        #expect(d.perLink == [1, 0] && early == nil, "the first append's outcome is awaited")
        d.outcomeArrived(first, .success([11, 12]))
        let one = d.nextOutcome(), two = d.nextOutcome(), three = d.nextOutcome()
        #expect(one?.0.base == 10 && two?.0.base == 12 && three == nil && d.inFlight == 0 && d.perLink == [0, 0])
    }

    @Test func aFailedAppendsRowsGoBackWhereTheyWereDecided() {
        var d = Self.queued(4)
        let a = d.take(2)
        d.queue(Self.row(5))
        let id = d.appendSent(rows: a.rows, order: a.order, sentAt: 1, carrier: .deliveryWriter(0), base: 7)
        d.outcomeArrived(id, .failure(.conflict("test")))
        let failed = d.nextOutcome()!
        d.appendFailed(failed.0)
        #expect(d.unsent.map(\.userIndex) == [1, 2, 3, 4, 5] && d.sent == 0 && d.nextCursor == nil)
    }

    @Test func mergingPutsRowsBackByTheirNumbers() {
        let front = DeliveryAppends.merged(["a", "b"], [0, 1], into: ["c"], [2])
        #expect(front.0 == ["a", "b", "c"] && front.1 == [0, 1, 2])
        let m = DeliveryAppends.merged(["b", "d"], [1, 3], into: ["a", "c", "e"], [0, 2, 4])
        #expect(m.0 == ["a", "b", "c", "d", "e"] && m.1 == [0, 1, 2, 3, 4])
    }

    @Test func theHeadFollowsAClaimingAppendOnlyWhenNothingElseIsInFlight() {
        var d = Self.queued(2)
        let a = d.take(2)
        let id = d.appendSent(rows: a.rows, order: a.order, sentAt: 1, carrier: .deliveryWriter(0), base: nil)
        #expect(d.nextCursor == nil)
        d.outcomeArrived(id, .success([21, 22]))
        let done = d.nextOutcome()!
        d.appendCommitted(done.0, cursors: [21, 22], chaining: true)
        #expect(d.nextCursor == 22)
        // A chained append whose cursors are not the range asked for: the head is unknown again.
        let chained = PendingDeliveryAppend(rows: a.rows, order: a.order, sentAt: 2, carrier: .deliveryWriter(1), base: 22)
        d.appendCommitted(chained, cursors: [0, 24], chaining: true)
        #expect(d.nextCursor == nil)
    }

    @Test func waitersRunOnceEverythingDecidedBeforeThemIsCommitted() {
        var d = Self.queued(3)
        var ran: [String] = []
        d.whenDecidedCommitted { ran.append("after 3") }
        let a = d.take(3)
        _ = d.appendSent(rows: a.rows, order: a.order, sentAt: 1, carrier: .ridingWithEvents, base: nil)
        d.queue(Self.row(4))
        d.whenDecidedCommitted { ran.append("after 4") }
        let none = d.nextReadyWaiter()
        #expect(none == nil)
        d.rowsDone(3)
        while let run = d.nextReadyWaiter() { run() }
        #expect(ran == ["after 3"])
        d.rowsDone(1)
        while let run = d.nextReadyWaiter() { run() }
        #expect(ran == ["after 3", "after 4"])
    }
}
