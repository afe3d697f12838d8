// The group-commit writer's requests: queued work, the waiters of one transaction, and what a finished transaction tells them.

/// One request, queued until a transaction takes it.
enum WriterWork {
    case events([EventRow], GroupCommitWriter.EventsCompletion)
    /// One event (most requests): no rows array, no outcomes array.
    case event(EventRow, GroupCommitWriter.EventCompletion)
    case deliveries([DeliveryRow], GroupCommitWriter.DeliveriesCompletion)
    /// Deliveries at cursors the owner assigned (`append(deliveries:after:)`): a transaction alone.
    case chainedDeliveries([DeliveryRow], after: Int64, GroupCommitWriter.DeliveriesCompletion)
    case ack(consumer: String, partition: Int32, cursor: Int64, GroupCommitWriter.AckCompletion)

    var rowCount: Int {
        switch self {
        case .events(let r, _): return r.count
        case .event: return 1
        case .deliveries(let r, _), .chainedDeliveries(let r, _, _): return r.count
        case .ack: return 1
        }
    }

    var isChained: Bool { if case .chainedDeliveries = self { return true } else { return false } }

    /// Tells the request that it failed.
    consuming func fail(_ error: StoreError) {
        switch self {
        case .events(_, let c): c(.failure(error))
        case .event(_, let c): c(.failure(error))
        case .deliveries(_, let c), .chainedDeliveries(_, _, let c): c(.failure(error))
        case .ack(_, _, _, let c): c(.failure(error))
        }
    }
}

// A transaction's waiters are structs, not tuples: a closure inside a tuple that is an array's
// element is kept in its most general form, and converting to and from it costs a thunk (an
// allocation) per request each way.

/// Requests whose events are rows `rows` of a transaction: told through `many` (an
/// `append(events:)`) or, for a single row, `one` (an `append(event:)`).
struct EventsWaiter {
    var rows: Range<Int>
    var many: GroupCommitWriter.EventsCompletion?
    var one: GroupCommitWriter.EventCompletion?

    /// Tells the waiter its rows' outcomes (`outcome(row)` for each of `rows`).
    func succeed(_ outcome: (Int) -> AppendOutcome) {
        if let one { one(.success(outcome(rows.lowerBound))) } else { many?(.success(rows.map(outcome))) }
    }

    func fail(_ error: StoreError) {
        if let one { one(.failure(error)) } else { many?(.failure(error)) }
    }
}

/// Requests whose deliveries are rows `rows` of a transaction.
struct DeliveriesWaiter {
    var rows: Range<Int>
    var completion: GroupCommitWriter.DeliveriesCompletion
}

/// A consumer's acknowledgement in a transaction.
struct AckWaiter {
    var consumer: String
    var partition: Int32
    var cursor: Int64
    var completion: GroupCommitWriter.AckCompletion
}

/// The requests one transaction carries, and how many rows of each kind.
struct TransactionRequests {
    var events: [EventsWaiter] = []
    var eventRowCount = 0
    var deliveries: [DeliveriesWaiter] = []
    var deliveryRowCount = 0
    var acks: [AckWaiter] = []
}

/// The events' outcomes of a committed transaction.
enum EventOutcomes: Equatable {
    /// All stored, at base + 1 … in order (by COPY, or the append function's whole-batch answer).
    case stored(after: Int64)
    /// Row by row (the append function found stored keys); nil: no answer for that row.
    case each([AppendOutcome?])

    func outcome(_ row: Int) -> AppendOutcome {
        switch self {
        case .stored(let base): return .appended(seq: base + Int64(row) + 1)
        case .each(let outcomes): return (row < outcomes.count ? outcomes[row] : nil) ?? .conflict(seq: 0)
        }
    }
}

/// The deliveries' cursors of a committed transaction.
enum DeliveryCursors: Equatable {
    /// All stored, at base + 1 … in order.
    case stored(after: Int64)
    /// Row by row (the append function skipped stored ones: cursor 0).
    case each([Int64])
}

/// What a finished transaction tells its requests: run by the writer, after COMMIT succeeded or with its error.
struct Completions {
    var requests: TransactionRequests
    var outcome: Outcome

    enum Outcome {
        /// Committed: the events' outcomes, the deliveries' cursors, and each ack's stored cursor.
        case committed(events: EventOutcomes?, deliveries: DeliveryCursors?, acks: [Int64])
        /// Not committed (nothing of it is stored, or its outcome is unknown). With deliveries
        /// in it, the delivery appends queued behind it fail too (`deliveriesFailed`).
        case failed(StoreError)
    }

    /// Completions between two calls of `poll` while a committed COPY transaction's waiters are
    /// told: each look at the socket is a `recv` (~1 µs) against ~10 µs of work per request, and
    /// PostgreSQL waits at most this many requests for the next transaction's COPY data.
    static let pollEvery = 32

    /// Committed, with events in it: the owner's `afterCompletions` runs after this read.
    var completedEvents: Bool {
        if case .committed = outcome { return !requests.events.isEmpty } else { return false }
    }

    /// The error it failed with, when it had deliveries (the ones queued behind them fail too).
    var failedDeliveries: StoreError? {
        if case .failed(let error) = outcome, !requests.deliveries.isEmpty { return error } else { return nil }
    }

    /// Tells every waiter, in order: events, deliveries, acks. Stored rows are told in runs of
    /// `pollEvery` with `poll()` between them.
    func run(poll: () -> Void) {
        switch outcome {
        case .failed(let error):
            for e in requests.events { e.fail(error) }
            for d in requests.deliveries { d.completion(.failure(error)) }
            for a in requests.acks { a.completion(.failure(error)) }
        case .committed(let events, let deliveries, let acks):
            if !requests.events.isEmpty {
                let outcomes = events ?? .each([])
                if case .stored = outcomes {
                    for (i, w) in requests.events.enumerated() {
                        w.succeed { outcomes.outcome($0) }
                        if i % Self.pollEvery == Self.pollEvery - 1 { poll() }
                    }
                } else {
                    for w in requests.events { w.succeed { outcomes.outcome($0) } }
                }
            }
            switch deliveries {
            case .stored(let base)?:
                for (i, w) in requests.deliveries.enumerated() {
                    w.completion(.success(w.rows.map { base + Int64($0) + 1 }))
                    if i % Self.pollEvery == Self.pollEvery - 1 { poll() }
                }
            case .each(let cursors)?:
                for w in requests.deliveries { w.completion(.success(Array(cursors[w.rows]))) }
            case nil:
                for w in requests.deliveries { w.completion(.success(w.rows.map { _ in 0 })) }
            }
            for (i, a) in requests.acks.enumerated() { a.completion(.success(i < acks.count ? acks[i] : a.cursor)) }
        }
    }
}
