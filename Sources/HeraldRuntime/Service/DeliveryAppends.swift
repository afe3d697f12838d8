// Decided deliveries on their way to PostgreSQL: rows not yet sent, appends in flight in sending order, and who waits for them.
import DequeModule
import HeraldStore

/// The bookkeeping of delivery appends. The service decides where each append goes (which writer,
/// claiming or chained cursors: `HeraldService.sendDeliveryAppend`) and does the I/O; this keeps
/// the rows, the appends' order and outcomes, the cursor the next chained append follows, and the
/// waiters for "everything decided so far is committed".
struct DeliveryAppends {
    /// Deliveries decided but not yet committed (put back after a failure). An array, so that an
    /// append taking all of them moves the buffer instead of copying every row (`take`).
    private(set) var unsent: [DeliveryRow] = []
    /// Each unsent delivery's number in decision order (`queue`): a failed append's rows go back
    /// where they were decided (`appendFailed`), whatever was sent or put back meanwhile.
    private var unsentOrder: [Int] = []
    private var nextDecision = 0
    /// Appends in the order they were sent, each with its outcome once known: outcomes are handled
    /// in that order (two writers answer in any order). `firstPending` numbers the first.
    private(set) var pending: Deque<PendingDeliveryAppend> = []
    private var firstPending = 0
    /// Appends in flight on each of the delivery links (`HeraldService.deliveryLinks`).
    private(set) var perLink: [Int]
    /// With two delivery writers: the delivery head once every append sent so far has committed,
    /// so the next append's cursors follow it (`GroupCommitWriter.append(deliveries:after:)`); at
    /// start-up the head read from PostgreSQL; nil while unknown (after a failure, or while claiming
    /// appends are in flight).
    var nextCursor: Int64?
    /// Rows taken into appends (less those put back after a failure), and rows of appends
    /// committed: a waiter runs once `done` reaches its target.
    private(set) var sent = 0
    private(set) var done = 0
    private var waiters: Deque<(target: Int, run: () -> Void)> = []
    /// The pace of the last chained append: its rows over the time from hand-off to completion
    /// (its wait for the one before it included, so a pace on the slow side). 0 before the first.
    var rowsPerNanosecond: Double = 0

    init(links: Int) { perLink = Array(repeating: 0, count: links) }

    /// Appends handed to writers whose outcome is not handled yet.
    var inFlight: Int { pending.count }

    /// Queues a decided delivery, numbered in decision order.
    mutating func queue(_ row: consuming DeliveryRow) {
        unsent.append(row)
        unsentOrder.append(nextDecision)
        nextDecision += 1
    }

    /// Takes the first `n` unsent rows (and their numbers) for an append.
    mutating func take(_ n: Int) -> (rows: [DeliveryRow], order: [Int]) {
        let rows: [DeliveryRow], order: [Int]
        if n == unsent.count {
            // All of them (every append but a storm's): the buffers move, no row is copied.
            rows = unsent
            order = unsentOrder
            unsent = []
            unsent.reserveCapacity(n)
            unsentOrder = []
            unsentOrder.reserveCapacity(n)
        } else {
            rows = Array(unsent[..<n])
            order = Array(unsentOrder[..<n])
            unsent.removeFirst(n)
            unsentOrder.removeFirst(n)
        }
        sent += n
        return (rows, order)
    }

    /// An append of taken rows was handed to `carrier`, after cursor `base` (chained) or claiming
    /// its own (nil). Returns its number, which its outcome comes back with (`outcomeArrived`).
    mutating func appendSent(rows: [DeliveryRow], order: [Int], sentAt: Int64, carrier: DeliveryCarrier, base: Int64?) -> Int {
        if case .deliveryWriter(let i) = carrier { perLink[i] += 1 }
        // A claiming append moves the head where this process cannot see it until it commits.
        nextCursor = base.map { $0 + Int64(rows.count) }
        let id = firstPending + pending.count
        pending.append(PendingDeliveryAppend(rows: rows, order: order, sentAt: sentAt, carrier: carrier, base: base))
        return id
    }

    /// Append `id`'s outcome arrived (its writer is free of it).
    mutating func outcomeArrived(_ id: Int, _ result: Result<[Int64], StoreError>) {
        let slot = id - firstPending
        pending[slot].result = result
        if case .deliveryWriter(let i) = pending[slot].carrier { perLink[i] -= 1 }
    }

    /// The oldest append, once its outcome is known: outcomes are handled in sending order.
    mutating func nextOutcome() -> (PendingDeliveryAppend, Result<[Int64], StoreError>)? {
        guard let first = pending.first, let outcome = first.result else { return nil }
        pending.removeFirst()
        firstPending += 1
        return (first, outcome)
    }

    /// A handled append failed: its rows go back among the unsent ones in decision order, and the
    /// head is no longer known (the next append claims its cursors itself).
    mutating func appendFailed(_ append: PendingDeliveryAppend) {
        (unsent, unsentOrder) = Self.merged(append.rows, append.order, into: unsent, unsentOrder)
        sent -= append.rows.count
        nextCursor = nil
    }

    /// A handled append committed at `cursors`. With two delivery writers (`chaining`): after an
    /// append that claimed its own cursors (the only one in flight), the head is its last cursor;
    /// after one whose cursors are not the range asked for (the stored rows of a re-derived batch
    /// skipped by `herald_append_deliveries`), unknown.
    mutating func appendCommitted(_ append: PendingDeliveryAppend, cursors: [Int64], chaining: Bool) {
        guard chaining, let first = cursors.first, let last = cursors.last else { return }
        let contiguous = first > 0 && last - first == Int64(cursors.count - 1)
        if let base = append.base {
            if !contiguous || first != base + 1 { nextCursor = nil }
        } else if contiguous && inFlight == 0 {
            nextCursor = last
        }
    }

    /// The rows of a committed append are streamed: waiters up to them may run (`nextReadyWaiter`).
    mutating func rowsDone(_ count: Int) { done += count }

    /// `run` runs once every delivery decided so far is committed.
    mutating func whenDecidedCommitted(_ run: @escaping () -> Void) {
        waiters.append((sent + unsent.count, run))
    }

    /// The next waiter whose deliveries have all committed, in order.
    mutating func nextReadyWaiter() -> (() -> Void)? {
        guard let first = waiters.first, first.target <= done else { return nil }
        waiters.removeFirst()
        return first.run
    }

    /// `a` and `b` (each in increasing `order`) as one sequence in increasing order; `a` goes in
    /// front without comparing when all of it comes first (the usual case: usually a failed
    /// append's rows all go first; but an append may have re-taken rows another failure put back,
    /// and rows decided before its own may be back from an append sent after it).
    static func merged<Row>(_ a: [Row], _ aOrder: [Int], into b: [Row], _ bOrder: [Int]) -> ([Row], [Int]) {
        guard let firstB = bOrder.first, let lastA = aOrder.last, lastA > firstB else { return (a + b, aOrder + bOrder) }
        var rows: [Row] = [], order: [Int] = []
        rows.reserveCapacity(a.count + b.count)
        order.reserveCapacity(a.count + b.count)
        var i = 0, j = 0
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && aOrder[i] < bOrder[j]) {
                rows.append(a[i]); order.append(aOrder[i]); i += 1
            } else {
                rows.append(b[j]); order.append(bOrder[j]); j += 1
            }
        }
        return (rows, order)
    }
}

/// The writer that carries a delivery append: one of `HeraldService.deliveryLinks` (by index), or
/// the events' writer (`store`), in whose next transaction a small append rides
/// (`ServiceConfiguration.deliveriesRideBelowRows`).
enum DeliveryCarrier: Equatable {
    case deliveryWriter(Int)
    case ridingWithEvents
}

/// A delivery append handed to a writer, until its outcome has been handled (in sending order).
struct PendingDeliveryAppend {
    let rows: [DeliveryRow]
    /// The rows' numbers in decision order (`DeliveryAppends.queue`).
    let order: [Int]
    let sentAt: Int64
    /// The writer it was handed to.
    let carrier: DeliveryCarrier
    /// The cursor after which its rows were placed (a chained append), or nil (the writer claimed them).
    let base: Int64?
    var result: Result<[Int64], StoreError>? = nil
}
