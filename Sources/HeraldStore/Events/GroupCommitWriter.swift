// Group commit over one libpq connection (pipeline mode, COPY for events): all work that queued while a transaction was in flight goes into the next.
import CLibPQ
import HeraldCore
import DequeModule

/// The store's single writer. Work (event appends, delivery appends, consumer acks) queues up
/// while a transaction is in flight; when it completes, everything queued is sent as the next
/// transaction — before the completed one's completions run, and between them the writer looks at
/// the socket and sends the next one's COPY data as soon as PostgreSQL asks for it (`pollCopyIn`),
/// so PostgreSQL stores a batch while the owner handles the previous one.
/// A small batch of events (`Limits.completeFirstUpToEvents`) completes first instead, and what
/// its completions and `afterCompletions` append (the deliveries it decided) rides in that next
/// transaction.
/// With events in it (and `Limits.copyEvents`, the default), it leaves pipeline mode:
/// `BEGIN; UPDATE event_head … RETURNING; COPY events … FROM STDIN (FORMAT binary)[; COMMIT]`,
/// the rows encoded at the claimed positions once the base arrives (two round trips), then any
/// deliveries and acks with COMMIT as one pipeline segment; a stored key rolls the COPY back and
/// the transaction goes again through the append function, which reports duplicates. Deliveries
/// go by COPY as well, beside the events or alone (`Limits.copyDeliveries`). Otherwise:
/// `BEGIN; <one batch statement per kind>; COMMIT; Sync` in one write (pipeline mode, one round
/// trip). Appends made by completions join the next transaction. The batch statements are prepared once per connection and take
/// binary array parameters; the session is set up (`StoreSQL.writerSessionSetup`) in a pipeline
/// segment of its own queued by `init`, ahead of the first transaction. Completions run only
/// after COMMIT succeeded — or with an error, never with a false success. Loop-agnostic: the owner watches `socket` for reading always
/// and for writing while `wantsWrite`, and calls `socketReadable()` / `socketWritable()`.
public final class GroupCommitWriter {
    public typealias EventsCompletion = (Result<[AppendOutcome], StoreError>) -> Void
    /// One event's outcome (`append(event:)`): no array made for it, none taken apart.
    public typealias EventCompletion = (Result<AppendOutcome, StoreError>) -> Void
    public typealias DeliveriesCompletion = (Result<[Int64], StoreError>) -> Void
    public typealias AckCompletion = (Result<Int64, StoreError>) -> Void

    /// Limits of one transaction, and how many may be in flight at once (1 = classic group commit).
    public struct Limits: Sendable {
        public var maxRowsPerTransaction: Int = 10_000
        /// Pipelined transactions in flight. A COPY transaction runs alone (COPY cannot be
        /// pipelined), so with `copyEvents` transactions go one at a time whatever this says.
        public var maxTransactionsInFlight: Int = 1
        /// Events go by `COPY … FROM STDIN (FORMAT binary)` at positions claimed first in the same
        /// transaction; a stored key makes the batch go again through `herald_append_events`.
        /// Off: every batch goes through the function (the path before migration 004).
        public var copyEvents: Bool = true
        /// Deliveries go by `COPY deliveries … FROM STDIN (FORMAT binary)` at cursors claimed
        /// first in the same transaction: a second COPY in the events' query when they share a
        /// transaction, or a COPY transaction of their own (`BEGIN; UPDATE delivery_head …
        /// RETURNING; COPY deliveries …[; COMMIT]`, two round trips) when they are alone, as in a
        /// summary storm. A stored (user, user_index) — a delivery re-derived after a restart —
        /// makes the batch go again through `herald_append_deliveries`, which skips it. Only with
        /// `copyEvents` (COPY needs transactions one at a time); off: every batch through the function.
        public var copyDeliveries: Bool = true
        /// A committed COPY transaction of 1 to this many events runs its completions *before*
        /// the next transaction is sent, so that what they queue (the deliveries decided from its
        /// events, through `afterCompletions`) rides in that next transaction instead of the one
        /// after it. Larger ones send the next transaction first and complete while PostgreSQL
        /// stores it (the two sides would otherwise take turns). Under light and moderate load
        /// transactions are small, and the delivery line then waits one commit less
        /// (docs/store-performance.md, session 9); 0: always send first.
        public var completeFirstUpToEvents: Int = 16
        public init() {}
    }

    private enum Work {
        case events([EventRow], EventsCompletion)
        /// One event (most requests): no rows array, no outcomes array.
        case event(EventRow, EventCompletion)
        case deliveries([DeliveryRow], DeliveriesCompletion)
        /// Deliveries at cursors the owner assigned (`append(deliveries:after:)`): a transaction alone.
        case chainedDeliveries([DeliveryRow], after: Int64, DeliveriesCompletion)
        case ack(consumer: String, cursor: Int64, AckCompletion)

        var rowCount: Int {
            switch self {
            case .events(let r, _): return r.count
            case .event: return 1
            case .deliveries(let r, _), .chainedDeliveries(let r, _, _): return r.count
            case .ack: return 1
            }
        }

        var isChained: Bool { if case .chainedDeliveries = self { return true } else { return false } }
    }

    // A transaction's waiters are structs, not tuples: a closure inside a tuple that is an
    // array's element is kept in its most general form, and converting to and from it costs a
    // thunk (an allocation) per request each way.

    /// Requests whose events are rows `rows` of a transaction: told through `many` (an
    /// `append(events:)`) or, for a single row, `one` (an `append(event:)`).
    private struct EventsWaiter {
        var rows: Range<Int>
        var many: EventsCompletion?
        var one: EventCompletion?

        /// Tells the waiter its rows' outcomes (`outcome(row)` for each of `rows`).
        func succeed(_ outcome: (Int) -> AppendOutcome) {
            if let one { one(.success(outcome(rows.lowerBound))) } else { many?(.success(rows.map(outcome))) }
        }

        func fail(_ error: StoreError) {
            if let one { one(.failure(error)) } else { many?(.failure(error)) }
        }
    }

    /// Requests whose deliveries are rows `rows` of a transaction.
    private struct DeliveriesWaiter {
        var rows: Range<Int>
        var completion: DeliveriesCompletion
    }

    /// A consumer's acknowledgement in a transaction.
    private struct AckWaiter {
        var consumer: String
        var cursor: Int64
        var completion: AckCompletion
    }

    /// Completions held back while the next transaction is started (`committedNotCompleted`).
    private struct HeldCompletions {
        var run: () -> Void
    }

    /// One transaction on the wire and what its results mean.
    private struct Transaction {
        var events: [EventsWaiter] = []
        var eventRowCount = 0
        var deliveries: [DeliveriesWaiter] = []
        var deliveryRowCount = 0
        var acks: [AckWaiter] = []
        /// Statement kinds in the order sent (BEGIN and COMMIT included).
        var statements: [Statement] = []
        /// The first result of each statement, in order.
        var results: [PGResult] = []
        var currentStatementHasResult = false
        /// The session set-up segment queued by `init`, or a lone ROLLBACK after a failed
        /// transaction (no BEGIN/COMMIT, no waiters).
        var isSetup = false
        /// The events were stored by COPY at base + 1 … in this transaction (a tail segment).
        var copyBase: Int64?
        /// The deliveries were stored by COPY at base + 1 … in this transaction (a tail segment).
        var deliveryCopyBase: Int64?
        /// A tail segment: a COPY query opened the transaction (BEGIN was in it).
        var continuesCopy: Bool { copyBase != nil || deliveryCopyBase != nil }
        /// A COPY transaction (simple query, outside pipeline mode), with the rows it still needs:
        /// the events to encode once the base is known and, for the tail or a fallback, the deliveries.
        var copy: CopyState?
    }

    /// Where a COPY transaction stands. The simple query is `BEGIN; [UPDATE event_head … RETURNING;]
    /// [UPDATE delivery_head … RETURNING;] [COPY events …;] [COPY deliveries …]` (+ `COMMIT` when no
    /// acks or function-appended deliveries follow in a pipeline segment): events, deliveries, or both.
    private struct CopyState {
        var events: [EventRow]
        var deliveries: [DeliveryRow]
        /// The deliveries go by a COPY of the query (otherwise, in the tail segment or not at all).
        var deliveriesByCopy: Bool
        /// COMMIT is part of the simple query (nothing follows in a pipeline segment).
        var commitsInQuery: Bool
        /// The cursors were assigned by the owner (`deliveryBase` known from the start), and the
        /// query moves the head from there after its COPY (`DeliveryCopy.chainedQuery`).
        var advancesHead = false
        var base: Int64?
        var deliveryBase: Int64?
        /// The events' COPY data encoded at base 0 while PostgreSQL claims their positions
        /// (`BinaryCopy.rebase` moves it there once the base arrives).
        var eventData: CopyData?
        /// The deliveries' COPY data encoded at base 0 while PostgreSQL stores the events' COPY
        /// (or, alone, while it claims their cursors).
        var deliveryData: CopyData?
        /// COPY data sent for the events (their COPY_IN result arrived).
        var dataSent = false
        /// COPY data sent for the deliveries (their COPY_IN result arrived).
        var deliveryDataSent = false
        /// Successful results after the data: the COPYs', then COMMIT's.
        var okAfterData = 0
        var error: StoreError?
        var eventsByCopy: Bool { !events.isEmpty }
        /// Successful results expected after the data when the query commits.
        var expectedOKAfterData: Int {
            (eventsByCopy ? 1 : 0) + (deliveriesByCopy ? 1 : 0) + (advancesHead ? 1 : 0) + (commitsInQuery ? 1 : 0)
        }
        /// Every claim the query makes has answered (the UPDATEs come before the COPYs).
        var claimed: Bool { (!eventsByCopy || base != nil) && (!deliveriesByCopy || deliveryBase != nil) }
        /// The COPY whose COPY_IN result arrives next: the events' first, then the deliveries'.
        var nextCopyIsEvents: Bool { eventsByCopy && !dataSent }
        /// The data of the query's last COPY is the one sent now (COMMIT, if in the query, follows it).
        func isLastCopy(events: Bool) -> Bool { events ? !deliveriesByCopy : true }
        /// Every COPY of the query got its data.
        var allDataSent: Bool { (!eventsByCopy || dataSent) && (!deliveriesByCopy || deliveryDataSent) }
    }

    private enum Statement: Equatable { case begin, events, deliveries, ack(Int), commit, setup, rollback }

    public let connection: PGConnection
    public var limits: Limits
    /// Moved in and out (`MoveQueue`): a `Deque`'s append copied each request's row once more.
    private var queue = MoveQueue<Work>()
    private var inFlight: Deque<Transaction> = []
    private var broken: StoreError? { didSet { isBroken = broken != nil } }
    /// `broken != nil`, kept as a flag: reading the optional error copied it (retaining its
    /// strings, ~300 instructions) on every append and every readiness check.
    public private(set) var isBroken = false
    /// The set-up segment is still in flight (it does not count against `maxTransactionsInFlight`).
    private var setupPending = false
    /// Results are being read and completions run: `pump` waits until they are all done.
    private var draining = false
    /// Completions of a committed transaction ran during this read (see `afterCompletions`).
    private var completionsRan = false
    /// Called once after the completions run while reading PostgreSQL's answers, before the next
    /// transaction is sent: appends made here (the owner's decided deliveries, in one batch) join
    /// that transaction — not a one-row transaction for the first completion's deliveries.
    public var afterCompletions: (() -> Void)?
    /// A COPY met a stored key: batches go through the function (which reports duplicates at no
    /// extra cost) until one comes back without any, so a storm of client retries after an outage
    /// does not pay for a failed COPY in every batch.
    private var functionUntilACleanBatch = false
    /// Completions of a committed COPY transaction held back while the next transaction, already
    /// queued, is started (`finishCopy`); they run right after, while PostgreSQL works on it (its
    /// COPY data sent between them, `pollCopyIn`), so the two do not take turns. Always run in
    /// commit order, before any later completion or failure.
    private var committedNotCompleted: [HeldCompletions] = []
    /// Requests completed between two looks at the socket while the next COPY transaction may be
    /// waiting for its data (`pollCopyIn`): each look is a `recv` (~1 µs) against ~10 µs of work
    /// per request, and PostgreSQL waits at most this many requests for its COPY data.
    static let pollEveryCompletions = 32
    /// Inside `pollCopyIn`: a failure is deferred to `deferredFailure`.
    private var polling = false
    /// A failure met while polling, reported once the completions being run have all run.
    private var deferredFailure: StoreError?

    /// FAULT INJECTION FOR TESTS ONLY (nil in production): called each time a transaction's
    /// COMMIT has been flushed to the socket, before its reply is read, with the socket and the
    /// transaction's number of event rows. Returning true makes the writer drop the connection
    /// there, as if it had been cut: the commit's outcome is then unknown to the service
    /// (experiment 3 of docs/reliability.md).
    public var commitFlushedForTesting: ((_ socket: Int32, _ eventRows: Int) -> Bool)?
    /// Event-row counts of transactions sent but not yet flushed (only tracked with the hook set).
    private var unflushedCommits: [Int] = []

    /// Counters for `stats` and benchmarks.
    public private(set) var transactionsCommitted = 0
    public private(set) var rowsCommitted = 0
    /// Waits for PostgreSQL's answer (round trips): one per pipeline segment, two per COPY (its
    /// start, then its data), counted as they are sent, set-up and ROLLBACK segments included.
    public private(set) var roundTrips = 0
    /// Deliveries committed by COPY (the rest went through `herald_append_deliveries`).
    public private(set) var deliveriesCopied = 0
    /// COPY transactions whose completions ran while the next transaction was already being stored.
    public private(set) var transactionsOverlapped = 0
    /// COPY transactions whose (first) data was sent while the previous one's completions ran (`pollCopyIn`).
    public private(set) var copiesSentWhileCompleting = 0
    /// Deliveries committed at cursors the owner assigned (`append(deliveries:after:)`).
    public private(set) var deliveriesChained = 0

    /// Takes a connected connection and puts it in non-blocking pipeline mode.
    public init(connection: PGConnection, limits: Limits = Limits()) throws(StoreError) {
        self.connection = connection
        self.limits = limits
        try connection.setNonBlocking()
        try connection.enterPipelineMode()
        try sendSetup()
    }

    /// Queues the session settings and the two prepared batch statements, then a Sync. Sent
    /// without waiting (the reconnect path runs on the service loop); their results are checked
    /// in `finish` and a failure breaks the writer like a lost connection would.
    private func sendSetup() throws(StoreError) {
        var tx = Transaction()
        tx.isSetup = true
        var ok = connection.send(StoreSQL.writerSessionSetup)
        ok = ok && connection.sendPrepare(name: StoreSQL.appendEventsName, StoreSQL.appendEvents,
                                          parameterCount: StoreSQL.appendEventsParameterCount)
        ok = ok && connection.sendPrepare(name: StoreSQL.appendDeliveriesName, StoreSQL.appendDeliveries,
                                          parameterCount: StoreSQL.appendDeliveriesParameterCount)
        ok = ok && connection.sendSync()
        guard ok else { throw .unavailable(connection.lastErrorMessage) }
        tx.statements = [.setup, .setup, .setup]
        inFlight.append(tx)
        roundTrips += 1
        setupPending = true
        flush()
        if isBroken, let broken { throw broken }
    }

    public var socket: Int32 { connection.socket }
    /// True when output is buffered and the owner should wait for the socket to be writable.
    public private(set) var wantsWrite = false
    /// Work queued or in flight.
    public var isIdle: Bool { queue.isEmpty && inFlight.isEmpty && committedNotCompleted.isEmpty }
    public var pendingTransactions: Int { inFlight.count - (setupPending ? 1 : 0) }
    public var queuedWork: Int { queue.count }
    /// Set once the connection failed; every later request fails at once with it.
    public var failure: StoreError? { broken }

    // MARK: Requests

    /// Appends events, all in one transaction, even past `maxRowsPerTransaction` (which only
    /// bounds how many requests join one): a fan-out's rows are stored together or not at all, so
    /// a re-sent one is a duplicate or a conflict as a whole (schema/017). A fan-out has at most
    /// 10,000 rows (SPEC §10).
    public func append(events rows: [EventRow], completion: @escaping EventsCompletion) {
        if isBroken, let broken { completion(.failure(broken)); return }
        if rows.isEmpty { completion(.success([])); return }
        queue.append(.events(rows, completion))
        pump()
    }

    /// Appends one event: `append(events:)` without the arrays around it (a submit's usual shape).
    /// `row` is consumed: moved into the queue, not copied (its strings retained once more).
    public func append(event row: consuming EventRow, completion: @escaping EventCompletion) {
        if isBroken, let broken { completion(.failure(broken)); return }
        queue.append(.event(consume row, completion))
        pump()
    }

    /// Appends deliveries, split like `append(events:)`: a summary storm decides a million at
    /// one instant, and one statement of them would pass PostgreSQL's 1 GB message limit.
    /// Rows of a part committed before a failure are skipped when re-sent (same user, ordinal).
    public func append(deliveries rows: [DeliveryRow], completion: @escaping DeliveriesCompletion) {
        if isBroken, let broken { completion(.failure(broken)); return }
        if rows.isEmpty { completion(.success([])); return }
        if rows.count <= limits.maxRowsPerTransaction {
            queue.append(.deliveries(rows, completion))
        } else {
            for (part, done) in Self.split(rows, by: limits.maxRowsPerTransaction, completion) { queue.append(.deliveries(part, done)) }
        }
        pump()
    }

    /// Cuts `rows` into parts of at most `size`, each with a completion; `completion` runs once:
    /// with the parts' results joined in order when all succeeded, or with the first failure.
    private static func split<Row, Outcome>(_ rows: [Row], by size: Int,
                                            _ completion: @escaping (Result<[Outcome], StoreError>) -> Void)
        -> [([Row], (Result<[Outcome], StoreError>) -> Void)] {
        let size = max(size, 1)
        if rows.count <= size { return [(rows, completion)] }
        let starts = Array(stride(from: 0, to: rows.count, by: size))
        let join = PartsJoin<Outcome>(starts.count)
        return starts.enumerated().map { i, start in
            (Array(rows[start..<min(start + size, rows.count)]), { result in
                guard !join.failed else { return }
                switch result {
                case .failure(let error):
                    join.failed = true
                    completion(.failure(error))
                case .success(let outcomes):
                    join.parts[i] = outcomes
                    join.remaining -= 1
                    if join.remaining == 0 { completion(.success(join.parts.flatMap { $0! })) }
                }
            })
        }
    }

    /// Appends deliveries at cursors the owner assigned, `base + 1 … base + rows.count`, so that two
    /// writers can store batches of one delivery stream at the same time (the owner keeps the
    /// head). The transaction is `BEGIN; COPY deliveries …; <move the head from base>; COMMIT`: the
    /// head moves last, so it waits for the transaction that moved the head to `base` and commits
    /// after it (cursors stay in commit order), and it fails with `StoreError.conflict` — nothing
    /// stored — when the head is not at `base` (that transaction rolled back, or another writer
    /// moved the head), which the owner answers by appending again without a base. A stored
    /// (user, user_index) goes through `herald_append_deliveries` as usual: its cursors are then
    /// claimed there, not `base + 1 …`. At most `maxRowsPerTransaction` rows; alone in its transaction.
    public func append(deliveries rows: [DeliveryRow], after base: Int64, completion: @escaping DeliveriesCompletion) {
        if isBroken, let broken { completion(.failure(broken)); return }
        if rows.isEmpty { completion(.success([])); return }
        precondition(rows.count <= limits.maxRowsPerTransaction && limits.copyEvents && limits.copyDeliveries,
                     "a chained delivery append is one COPY transaction")
        queue.append(.chainedDeliveries(rows, after: base, completion))
        pump()
    }

    public func ack(consumer: String, cursor: Int64, completion: @escaping AckCompletion) {
        if isBroken, let broken { completion(.failure(broken)); return }
        queue.append(.ack(consumer: consumer, cursor: cursor, completion))
        pump()
    }

    // MARK: Loop hooks

    /// Sends the next transaction(s) if the pipeline has room, then flushes.
    public func pump() {
        // Appends made by completions while results are read join the next transaction, sent
        // once the reading is done (`socketReadable` pumps then), rather than a 1-row one each time.
        // A chained delivery append is a transaction of its own (nothing joins it): sent at once
        // when the connection is free, so its backend stores it while the completion that queued
        // it — the one before it, whose lines are built and streamed — runs (~3 ms a 4,000-row
        // append, when the backend had sat idle).
        guard !isBroken, !draining || (inFlight.isEmpty && !queue.isEmpty && queue[0].isChained) else { return }
        // With COPY every transaction waits for the previous one (and for the set-up segment):
        // COPY needs the connection out of pipeline mode, which libpq allows only when idle.
        let limit = limits.copyEvents ? 1 : limits.maxTransactionsInFlight
        while limits.copyEvents ? inFlight.isEmpty : inFlight.count - (setupPending ? 1 : 0) < limit, !queue.isEmpty {
            if !sendNextTransaction() { return }
        }
        flush()
    }

    public func socketWritable() { flush() }

    public func socketReadable() {
        guard !isBroken else { return }
        guard connection.consumeInput() else { fail(.unavailable(connection.lastErrorMessage)); return }
        drainResults()
        if let error = deferredFailure {
            // Met while polling between completions that were not the held ones (cannot happen
            // today: only `finishCopy` polls with a transaction in flight); reported all the same.
            deferredFailure = nil
            fail(error)
        }
        if !isBroken && connection.isBad { fail(.unavailable(connection.lastErrorMessage)) }
        if completionsRan {
            completionsRan = false
            afterCompletions?()
        }
        pump()
    }

    private func flush() {
        guard !isBroken else { wantsWrite = false; return }
        switch connection.flush() {
        case 0:
            wantsWrite = false
            if let hook = commitFlushedForTesting, !unflushedCommits.isEmpty {
                let flushed = unflushedCommits
                unflushedCommits.removeAll()
                for rows in flushed where hook(connection.socket, rows) {
                    fail(.unavailable("the connection was cut after COMMIT was sent (test fault injection); the outcome is unknown"))
                    return
                }
            }
        case 1: wantsWrite = true
        default: fail(.unavailable(connection.lastErrorMessage))
        }
    }

    // MARK: Building a transaction

    private func sendNextTransaction() -> Bool {
        var tx = Transaction()
        var events: [EventRow] = []
        var deliveries: [DeliveryRow] = []
        var rows = 0
        if !queue.isEmpty, queue[0].isChained, case .chainedDeliveries(let r, let base, let c) = queue.removeFirst() {
            tx.deliveries = [DeliveriesWaiter(rows: 0..<r.count, completion: c)]
            tx.deliveryRowCount = r.count
            return sendCopyTransaction(tx, events: [], deliveries: r, chainedAfter: base)
        }
        // The head is looked at in place and then moved out: `while let work = queue.first` copied
        // every queued request (its row's strings retained and released once more).
        while !queue.isEmpty, !queue[0].isChained,
              rows == 0 || rows + queue[0].rowCount <= limits.maxRowsPerTransaction {
            let work = queue.removeFirst()
            rows += work.rowCount
            switch consume work {
            case .events(let r, let c):
                tx.events.append(EventsWaiter(rows: events.count..<(events.count + r.count), many: c))
                if events.isEmpty { events = r } else { events += r }  // the first part shared, not copied row by row
            case .event(let r, let c):
                if events.isEmpty { events.reserveCapacity(min(queue.count + 1, limits.maxRowsPerTransaction)) }
                tx.events.append(EventsWaiter(rows: events.count..<(events.count + 1), one: c))
                events.append(r)
            case .deliveries(let r, let c):
                tx.deliveries.append(DeliveriesWaiter(rows: deliveries.count..<(deliveries.count + r.count), completion: c))
                if deliveries.isEmpty { deliveries = r } else { deliveries += r }
            case .ack(let name, let cursor, let c):
                tx.acks.append(AckWaiter(consumer: name, cursor: cursor, completion: c))
            case .chainedDeliveries:
                preconditionFailure("a chained delivery append goes alone")
            }
        }
        tx.eventRowCount = events.count
        tx.deliveryRowCount = deliveries.count
        if limits.copyEvents && !functionUntilACleanBatch && !events.isEmpty {
            return sendCopyTransaction(tx, events: events, deliveries: deliveries)
        }
        if limits.copyEvents && limits.copyDeliveries && events.isEmpty && !deliveries.isEmpty {
            // Deliveries alone (a storm's summaries, timers' decisions): a COPY transaction of their own.
            return sendCopyTransaction(tx, events: [], deliveries: deliveries)
        }
        return sendPipelined(tx, events: events, deliveries: deliveries, rollbackFirst: false)
    }

    /// Sends `tx` as one pipeline segment: `[ROLLBACK;] BEGIN; <events through the function>;
    /// <deliveries>; <acks>; COMMIT; Sync`. After a COPY query (`tx.continuesCopy`) the transaction
    /// is open and what it copied is in it; only the rest follows: `[<deliveries>;] <acks>; COMMIT; Sync`.
    private func sendPipelined(_ tx: Transaction, events: [EventRow], deliveries: [DeliveryRow], rollbackFirst: Bool) -> Bool {
        var tx = tx
        var ok = true
        if rollbackFirst {
            ok = connection.send("ROLLBACK")
            tx.statements.append(.rollback)
        }
        if !tx.continuesCopy {
            ok = ok && connection.send("BEGIN")
            tx.statements.append(.begin)
            if !events.isEmpty {
                ok = ok && connection.sendPrepared(name: StoreSQL.appendEventsName, EventBatch.parameters(events))
                tx.statements.append(.events)
            }
        }
        if !deliveries.isEmpty && tx.deliveryCopyBase == nil {
            ok = ok && connection.sendPrepared(name: StoreSQL.appendDeliveriesName, DeliveryBatch.parameters(deliveries))
            tx.statements.append(.deliveries)
        }
        for (i, a) in tx.acks.enumerated() {
            ok = ok && connection.send(StoreSQL.ackConsumer, [a.consumer, String(a.cursor)])
            tx.statements.append(.ack(i))
        }
        ok = ok && connection.send("COMMIT")
        tx.statements.append(.commit)
        ok = ok && connection.sendSync()
        inFlight.append(tx)
        roundTrips += 1
        if commitFlushedForTesting != nil { unflushedCommits.append(tx.eventRowCount) }
        if !ok { fail(.unavailable(connection.lastErrorMessage)); return false }
        return true
    }

    /// Starts a COPY transaction (nothing else is in flight): leaves pipeline mode and sends the
    /// simple query that claims `events.count` positions and/or `deliveries.count` cursors and
    /// starts the COPY(s). Each COPY's data follows when its COPY_IN result arrives, the bases known
    /// by then (`drainCopy`): two round trips for one COPY, three for two; one more when acks (or
    /// deliveries through the function) share the transaction (their pipeline segment ends it).
    /// With `chainedAfter` (deliveries alone, `append(deliveries:after:)`), the cursors are known
    /// and the query is `BEGIN; COPY deliveries …; <move the head>; COMMIT` (two round trips).
    private func sendCopyTransaction(_ tx: Transaction, events: [EventRow], deliveries: [DeliveryRow],
                                     chainedAfter: Int64? = nil) -> Bool {
        var tx = tx
        let deliveriesByCopy = limits.copyDeliveries && !deliveries.isEmpty
        let commitsInQuery = (deliveries.isEmpty || deliveriesByCopy) && tx.acks.isEmpty
        tx.copy = CopyState(events: events, deliveries: deliveries, deliveriesByCopy: deliveriesByCopy,
                            commitsInQuery: commitsInQuery)
        if let base = chainedAfter {
            tx.copy!.deliveryBase = base
            tx.copy!.advancesHead = true
        }
        do {
            try connection.exitPipelineMode()
        } catch {
            inFlight.append(tx)
            fail(error)
            return false
        }
        let query = chainedAfter.map { DeliveryCopy.chainedQuery(after: $0, count: deliveries.count) }
            ?? EventCopy.startQuery(count: events.count, deliveries: deliveriesByCopy ? deliveries.count : 0,
                                    commit: commitsInQuery)
        precondition(!events.isEmpty || deliveriesByCopy, "a COPY transaction copies something")
        let ok = connection.sendSimpleQuery(query)
        inFlight.append(tx)
        roundTrips += 1
        if !ok { fail(.unavailable(connection.lastErrorMessage)); return false }
        // The first COPY's data is encoded while PostgreSQL runs BEGIN and the claims: flushed
        // first, then encoded, it is ready when COPY_IN arrives.
        flush()
        if isBroken { return false }
        if !events.isEmpty {
            inFlight[inFlight.count - 1].copy!.eventData = EventCopy.encode(events, base: 0)
        } else {
            inFlight[inFlight.count - 1].copy!.deliveryData = DeliveryCopy.encode(deliveries, base: 0)
        }
        return true
    }

    // MARK: Reading results

    private func drainResults() {
        draining = true
        defer { draining = false }
        while !isBroken, !inFlight.isEmpty {
            if inFlight[0].copy != nil {
                if drainCopy() { continue } else { return }
            }
            switch connection.nextResult() {
            case .wouldBlock:
                return
            case .endOfStatement:
                if inFlight[0].currentStatementHasResult { inFlight[0].currentStatementHasResult = false }
            case .result(let result):
                if result.status == PGRES_PIPELINE_SYNC {
                    let tx = inFlight.removeFirst()
                    finish(tx)
                } else if !inFlight[0].currentStatementHasResult {
                    inFlight[0].results.append(result)
                    inFlight[0].currentStatementHasResult = true
                }
            }
        }
    }

    /// Reads the results of the COPY transaction at the head of `inFlight` (outside pipeline mode:
    /// one result per statement of the simple query, then nil once the server is ready again).
    /// Sends the COPY data as soon as the COPY_IN result arrives. Returns false when it must wait
    /// for more input.
    private func drainCopy() -> Bool {
        while !isBroken {
            switch connection.nextResult() {
            case .wouldBlock:
                return false
            case .result(let result):
                // Taken out while it changes, so the batch's encoded data has one owner and is
                // rebased in place (a copy left behind cost a copy of every byte of it).
                var state = inFlight[0].copy.take()!
                let connected = apply(result, to: &state)
                if !isBroken, !inFlight.isEmpty { inFlight[0].copy = state }
                if !connected { return true }
            case .endOfStatement:
                // The whole simple query is done (ReadyForQuery): decide, and go back to pipeline mode.
                let tx = inFlight.removeFirst()
                finishCopy(tx)
                return true
            }
        }
        return false
    }

    /// Takes one result of a COPY transaction's simple query into `state`: a claimed base, a
    /// COPY_IN (its data is encoded and sent at once), an error, or a success after the data.
    /// Returns false when the connection failed (the writer is broken, or — while polling — will be).
    private func apply(_ result: PGResult, to state: inout CopyState) -> Bool {
        if result.status == PGRES_COPY_IN {
            // The next COPY of the query starts: the events' first, then the deliveries'.
            let events = state.nextCopyIsEvents
            if events { state.dataSent = true } else { state.deliveryDataSent = true }
            guard state.error == nil, state.claimed else {
                // Cannot happen (the UPDATEs precede the COPYs): end the COPY with an error
                // so the server rolls the transaction back (and skips what follows).
                state.error = state.error ?? .unavailable("the heads were not claimed before COPY")
                return abortCopy(events ? "herald: no positions" : "herald: no cursors")
            }
            var data: CopyData
            if events {
                data = state.eventData.take() ?? EventCopy.encode(state.events, base: 0)
                BinaryCopy.rebase(&data, by: state.base!)
            } else {
                data = state.deliveryData.take() ?? DeliveryCopy.encode(state.deliveries, base: 0)
                BinaryCopy.rebase(&data, by: state.deliveryBase!)
            }
            guard sendCopy(data, commitsAfter: state.commitsInQuery && state.isLastCopy(events: events),
                           eventRows: state.events.count) else { return false }
            if events && state.deliveriesByCopy {
                // The deliveries' COPY comes next: encoded while PostgreSQL stores the events.
                state.deliveryData = DeliveryCopy.encode(state.deliveries, base: 0)
            }
            return true
        }
        if let error = result.error {
            if state.error == nil { state.error = error }
        } else if !state.dataSent && !state.deliveryDataSent {
            // BEGIN, then the UPDATEs' one row each: the position (then the cursor) before the batch.
            if result.status == PGRES_TUPLES_OK {
                if state.eventsByCopy && state.base == nil {
                    state.base = result.int64(0, 0)
                } else {
                    state.deliveryBase = result.int64(0, 0)
                }
            }
        } else {
            state.okAfterData += 1
        }
        return true
    }

    /// For a completion that runs long (a large delivery append's, which builds and streams its
    /// lines): answers the COPY_IN of the transaction it sent meanwhile (`pump` sends a chained
    /// append at once), so that one's rows are stored while the completion goes on. Only from
    /// within this writer's own completions (its drain reads what follows); elsewhere, nothing.
    public func pollWhileCompleting() {
        guard draining else { return }
        pollCopyIn()
    }

    /// While a committed transaction's completions run (`finishCopy`), answers the next COPY
    /// transaction's COPY_IN at once, so PostgreSQL stores that batch while the owner runs them
    /// (acks, folds, decisions) instead of waiting for the last of them. Reads only up to the
    /// query's last COPY data or its first error: finishing the transaction, and its own
    /// completions, wait for the drain that follows. A failure here is deferred until the
    /// completions have run (`deferredFailure`), so they all hear of their commit first.
    private func pollCopyIn() {
        guard polling == false, !isBroken, deferredFailure == nil, inFlight.count == 1,
              inFlight[0].copy?.allDataSent == false, inFlight[0].copy?.error == nil else { return }
        var state = inFlight[0].copy.take()!   // one owner of the encoded data, as in `drainCopy`
        polling = true
        defer {
            polling = false
            inFlight[0].copy = state   // failures are deferred while polling: the transaction is still here
        }
        // A failed read is left to the drain after the completions, which reads the same error.
        guard connection.consumeInput() else { return }
        while deferredFailure == nil, !state.allDataSent, state.error == nil,
              case .result(let result) = connection.nextResult() {
            let sentBefore = state.dataSent || state.deliveryDataSent
            _ = apply(result, to: &state)
            if !sentBefore && (state.dataSent || state.deliveryDataSent) { copiesSentWhileCompleting += 1 }
        }
    }

    /// Sends one COPY's whole data and ends it; false when the connection failed (the writer is broken).
    private func sendCopy(_ data: CopyData, commitsAfter: Bool, eventRows: Int) -> Bool {
        roundTrips += 1
        let ok = data.bytes.withUnsafeBytes { connection.putCopyData($0) } && connection.putCopyEnd()
        guard ok else { fail(.unavailable(connection.lastErrorMessage)); return false }
        if commitsAfter, commitFlushedForTesting != nil { unflushedCommits.append(eventRows) }
        flush()
        return true
    }

    /// Ends the COPY in progress with an error (the server fails it and rolls the transaction
    /// back); false when the connection failed.
    private func abortCopy(_ reason: String) -> Bool {
        guard let h = connection.rawHandle, PQputCopyEnd(h, reason) == 1 else {
            fail(.unavailable(connection.lastErrorMessage))
            return false
        }
        flush()
        return true
    }

    /// The simple query of a COPY transaction ended: complete it (COMMIT was in the query), send its
    /// tail (deliveries, acks, COMMIT), or — when the COPY met a stored key — roll back and send
    /// the whole transaction again through the append function, which reports duplicates.
    private func finishCopy(_ tx: Transaction) {
        let state = tx.copy!
        do {
            try connection.enterPipelineMode()
        } catch {
            complete(tx, with: error)
            fail(error)
            return
        }
        var plain = tx
        plain.copy = nil
        let succeeded = state.error == nil && state.allDataSent && state.claimed
        if succeeded && state.commitsInQuery {
            guard state.okAfterData == state.expectedOKAfterData else {
                complete(tx, with: .unavailable("the COPY transaction did not commit"))
                rollBackIfNeeded()
                return
            }
            transactionsCommitted += 1
            rowsCommitted += tx.eventRowCount + tx.deliveryRowCount
            let completeAll = { [unowned self] in
                if let base = state.base { completeEvents(tx, base: base) }
                if let deliveryBase = state.deliveryBase { completeDeliveries(tx, base: deliveryBase, chained: state.advancesHead) }
            }
            let completeFirst = tx.eventRowCount > 0 && tx.eventRowCount <= limits.completeFirstUpToEvents
            guard !queue.isEmpty, inFlight.isEmpty, !completeFirst else {
                // Nothing to overlap with, or a small batch of events: complete first; `socketReadable`
                // then runs `afterCompletions` and sends what is queued, their appends included.
                // (Deliveries alone — a storm's — always overlap: their completions decide nothing.)
                runCommittedCompletions()
                completeAll()
                return
            }
            // Work queued while this transaction ran: start it, then run these completions while
            // PostgreSQL works on it — its COPY data is sent between them as soon as PostgreSQL
            // asks for it (`pollCopyIn`). Appends they make join the transaction after it.
            committedNotCompleted.append(HeldCompletions(run: completeAll))
            transactionsOverlapped += 1
            guard sendNextTransaction() else { return }   // failed: the completions ran first
            flush()
            runCommittedCompletions()
            return
        }
        if succeeded {
            // The events (and deliveries) are in the open transaction; the rest, acks and COMMIT follow.
            plain.copyBase = state.base
            if state.deliveriesByCopy { plain.deliveryCopyBase = state.deliveryBase }
            _ = sendPipelined(plain, events: [], deliveries: state.deliveriesByCopy ? [] : state.deliveries, rollbackFirst: false)
            return
        }
        if case .duplicate = state.error {
            // A stored key (or one repeated in the batch), or a stored (user, user_index): nothing
            // of the transaction is stored. The functions' careful paths report duplicates and
            // conflicts with their original seq, and skip stored deliveries (cursor 0).
            // Only a stored *key* keeps events on the function for a while (client retries come in
            // bursts); a re-derived delivery is rare and costs one failed COPY per batch that has one.
            if !state.deliveryDataSent { functionUntilACleanBatch = true }
            _ = sendPipelined(plain, events: state.events, deliveries: state.deliveries,
                              rollbackFirst: connection.isInFailedTransaction)
            return
        }
        complete(tx, with: state.error ?? .unavailable("the COPY transaction did not complete"))
        rollBackIfNeeded()
    }

    /// After a failed transaction inside BEGIN, the session waits for a ROLLBACK before it runs
    /// anything else: send one, in a segment of its own (its failure breaks the writer).
    private func rollBackIfNeeded() {
        guard !isBroken, connection.isInFailedTransaction else { return }
        var tx = Transaction()
        tx.isSetup = true
        tx.statements = [.rollback]
        guard connection.send("ROLLBACK"), connection.sendSync() else {
            fail(.unavailable(connection.lastErrorMessage))
            return
        }
        inFlight.append(tx)
        roundTrips += 1
    }

    /// Completes a transaction whose Sync arrived: success only if every statement, COMMIT included, succeeded.
    private func finish(_ tx: Transaction) {
        let firstError = tx.results.lazy.compactMap { r -> StoreError? in
            r.status == PGRES_PIPELINE_ABORTED ? nil : r.error
        }.first
        if tx.isSetup {
            if tx.statements != [.rollback] { setupPending = false }
            if let error = firstError ?? (tx.results.count == tx.statements.count ? nil
                                          : .unavailable("the writer's session set-up did not complete")) {
                fail(error)
            }
            return
        }
        let committed = tx.results.count == tx.statements.count
            && tx.results.last.map { $0.status == PGRES_COMMAND_OK } == true
            && firstError == nil
        guard committed else {
            let error = firstError ?? .unavailable("the transaction did not commit")
            complete(tx, with: error)
            rollBackIfNeeded()
            return
        }
        transactionsCommitted += 1
        rowsCommitted += tx.eventRowCount + tx.deliveryRowCount + tx.acks.count
        runCommittedCompletions()
        if let base = tx.copyBase { completeEvents(tx, base: base) }
        if let base = tx.deliveryCopyBase { completeDeliveries(tx, base: base) }
        for (index, statement) in tx.statements.enumerated() {
            let result = tx.results[index]
            switch statement {
            case .begin, .commit, .setup, .rollback:
                break
            case .events:
                completionsRan = true
                var outcomes = [AppendOutcome?](repeating: nil, count: tx.eventRowCount)
                if let base = Self.wholeBatchBase(result) {
                    // The whole batch was appended at base + ord (see herald_append_events): no
                    // stored key in it, so the next batch may try COPY again.
                    functionUntilACleanBatch = false
                    for i in 0..<tx.eventRowCount { outcomes[i] = .appended(seq: base + Int64(i) + 1) }
                } else {
                    for r in 0..<result.rowCount {
                        guard let ord = result.int64(r, 0), let seq = result.int64(r, 1) else { continue }
                        let outcome: AppendOutcome
                        switch result.string(r, 2) {
                        case "duplicate": outcome = .duplicate(seq: seq)
                        case "conflict": outcome = .conflict(seq: seq)
                        default: outcome = .appended(seq: seq)
                        }
                        outcomes[Int(ord) - 1] = outcome
                    }
                }
                for w in tx.events { w.succeed { outcomes[$0] ?? .conflict(seq: 0) } }
            case .deliveries:
                var cursors = [Int64](repeating: 0, count: tx.deliveryRowCount)
                if let base = Self.wholeBatchBase(result) {
                    // The whole batch was stored at base + ord (see herald_append_deliveries).
                    for i in 0..<tx.deliveryRowCount { cursors[i] = base + Int64(i) + 1 }
                } else {
                    for r in 0..<result.rowCount {
                        guard let ord = result.int64(r, 0), let cursor = result.int64(r, 1) else { continue }
                        cursors[Int(ord) - 1] = cursor
                    }
                }
                for w in tx.deliveries { w.completion(.success(Array(cursors[w.rows]))) }
            case .ack(let i):
                tx.acks[i].completion(.success(result.int64(0, 0) ?? tx.acks[i].cursor))
            }
        }
    }

    /// Completes the events of `tx`, stored by COPY at base + 1 … and now committed.
    private func completeEvents(_ tx: Transaction, base: Int64) {
        completionsRan = true
        for (i, w) in tx.events.enumerated() {
            w.succeed { .appended(seq: base + Int64($0) + 1) }
            if i % Self.pollEveryCompletions == Self.pollEveryCompletions - 1 { pollCopyIn() }
        }
    }

    /// Completes the deliveries of `tx`, stored by COPY at base + 1 … and now committed.
    private func completeDeliveries(_ tx: Transaction, base: Int64, chained: Bool = false) {
        deliveriesCopied += tx.deliveryRowCount
        if chained { deliveriesChained += tx.deliveryRowCount }
        for (i, w) in tx.deliveries.enumerated() {
            w.completion(.success(w.rows.map { base + Int64($0) + 1 }))
            if i % Self.pollEveryCompletions == Self.pollEveryCompletions - 1 { pollCopyIn() }
        }
    }

    /// The base position when the append functions answered with their one-row "whole batch" form (ord 0).
    private static func wholeBatchBase(_ result: PGResult) -> Int64? {
        guard result.rowCount == 1, result.int64(0, 0) == 0 else { return nil }
        return result.int64(0, 1)
    }

    /// Runs the held-back completions of committed transactions (see `committedNotCompleted`), oldest first.
    /// A failure met while polling between them (`deferredFailure`) is reported after them.
    private func runCommittedCompletions() {
        while !committedNotCompleted.isEmpty { committedNotCompleted.removeFirst().run() }
        if let error = deferredFailure {
            deferredFailure = nil
            fail(error)
        }
    }

    private func complete(_ tx: Transaction, with error: StoreError) {
        runCommittedCompletions()
        for e in tx.events { e.fail(error) }
        for d in tx.deliveries { d.completion(.failure(error)) }
        for a in tx.acks { a.completion(.failure(error)) }
        if !tx.deliveries.isEmpty { failQueuedDeliveries(error) }
    }

    /// Deliveries are one ordered stream: when a transaction with deliveries fails, the delivery
    /// appends queued behind it fail too (in order), so none commits ahead of rows its owner will
    /// send again. Queued events and acks stay.
    private func failQueuedDeliveries(_ error: StoreError) {
        var failed: [DeliveriesCompletion] = []
        queue.removeAll { work in
            switch copy work {
            case .deliveries(_, let completion), .chainedDeliveries(_, _, let completion):
                failed.append(completion)
                return true
            case .events, .event, .ack:
                return false
            }
        }
        for completion in failed { completion(.failure(error)) }
    }

    /// The connection broke: nothing in flight is known to have committed, so every waiter gets
    /// the error (the caller must not acknowledge; a retry is answered as a duplicate if it did commit).
    private func fail(_ error: StoreError) {
        guard !isBroken else { return }
        if polling {
            // Inside a committed transaction's completions: they run to the end first.
            if deferredFailure == nil { deferredFailure = error }
            return
        }
        broken = error
        wantsWrite = false
        // Committed before the failure: they succeeded, and are told so before anything fails.
        runCommittedCompletions()
        let transactions = inFlight
        inFlight.removeAll()
        setupPending = false
        var work = queue.take()
        for tx in transactions { complete(tx, with: error) }
        while let w = work.popFirst() {
            switch w {
            case .events(_, let c): c(.failure(error))
            case .event(_, let c): c(.failure(error))
            case .deliveries(_, let c), .chainedDeliveries(_, _, let c): c(.failure(error))
            case .ack(_, _, let c): c(.failure(error))
            }
        }
    }

    // MARK: Blocking driver (tools and tests)

    /// Drives the connection with poll(2) until no work is queued or in flight, or the timeout passes.
    /// Returns false on timeout. Not for the service loop, which uses `socketReadable`/`socketWritable`.
    @discardableResult
    public func runUntilIdle(timeoutMilliseconds: Int32 = 30_000) -> Bool {
        pump()
        while !isIdle && !isBroken {
            guard PGPoll.wait(socket: socket, read: true, write: wantsWrite, timeoutMilliseconds: timeoutMilliseconds) else {
                return false
            }
            if wantsWrite { socketWritable() }
            socketReadable()
        }
        return true
    }
}

/// Parameters of the batch event insert: one binary array per column.
enum EventBatch {
    static func parameters(_ rows: [EventRow]) -> PGBinaryParameters {
        var capacity = 120
        for r in rows { capacity += r.bodyBytes.count + (r.user?.utf8.count ?? 0) + (r.app?.utf8.count ?? 0)
                                    + (r.notificationId?.utf8.count ?? 0) + r.type.utf8.count + 48 }
        var p = PGBinaryParameters(capacity: capacity)
        p.appendText(rows.lazy.map(\.user))
        p.appendText(rows.lazy.map(\.type))
        p.appendText(rows.lazy.map(\.app))
        p.appendText(rows.lazy.map(\.notificationId))
        p.appendText(bytes: rows.lazy.map(\.bodyBytes))
        p.appendTimestamptz(rows.lazy.map(\.engineTime.millisecondsSinceEpoch))
        p.appendInt32(rows.lazy.map(\.recipientIndex))
        return p
    }
}

/// The parts of a split append, joined: their results in order, or the first failure.
private final class PartsJoin<Outcome> {
    var parts: [[Outcome]?]
    var remaining: Int
    var failed = false
    init(_ n: Int) { parts = Array(repeating: nil, count: n); remaining = n }
}

/// Parameters of the batch delivery insert: one binary array per column, written in one pass
/// into a buffer of the exact size (a length and a memcpy per element; no per-element `String`
/// copies or generic appends — these were ~10k instructions per delivery).
enum DeliveryBatch {
    static func parameters(_ rows: [DeliveryRow]) -> PGBinaryParameters {
        let n = rows.count
        let header = 20, element = 4
        var total = 0
        func textColumn(_ length: (DeliveryRow) -> Int?) -> Int {
            var size = header
            for r in rows { size += element + (length(r) ?? 0) }
            return size
        }
        let sizes = [
            textColumn { $0.user.utf8.count },
            header + n * 12, header + n * 12,
            textColumn { $0.kind.utf8.count },
            textColumn { $0.app?.utf8.count },
            textColumn { $0.notificationId?.utf8.count },
            textColumn { $0.reason.utf8.count },
            header + n * 12,
            textColumn { $0.rulesVersion.utf8.count },
            textColumn { $0.traceBytes.count },
            textColumn { $0.bodyBytes.count },
        ]
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(sizes.count)
        for size in sizes { ranges.append(total..<(total + size)); total += size }
        let bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            var w = BigEndianWriter(base: UnsafeMutableRawPointer(buffer.baseAddress!))
            func text(_ value: (DeliveryRow) -> String?) {
                let hasNull = rows.contains { value($0) == nil }
                w.header(count: n, hasNull: hasNull, element: PGBinaryParameters.textOID)
                for r in rows {
                    guard let v = value(r) else { w.be32(UInt32(bitPattern: -1)); continue }
                    v.withUTF8Bytes { w.be32(UInt32($0.count)); w.copy(UnsafeRawBufferPointer($0)) }
                }
            }
            func bytes(_ value: (DeliveryRow) -> [UInt8]) {
                w.header(count: n, hasNull: false, element: PGBinaryParameters.textOID)
                for r in rows { value(r).withUnsafeBytes { w.be32(UInt32($0.count)); w.copy($0) } }
            }
            func int64(_ element: UInt32, _ value: (DeliveryRow) -> Int64) {
                w.header(count: n, hasNull: false, element: element)
                for r in rows { w.be32(8); w.be64(UInt64(bitPattern: value(r))) }
            }
            text { $0.user }
            int64(PGBinaryParameters.int8OID) { $0.userIndex }
            int64(PGBinaryParameters.int8OID) { $0.causeSeq }
            text { $0.kind }
            text { $0.app }
            text { $0.notificationId }
            text { $0.reason }
            int64(PGBinaryParameters.timestamptzOID) { ($0.at.millisecondsSinceEpoch - PGBinaryParameters.postgresEpochMilliseconds) * 1000 }
            text { $0.rulesVersion }
            bytes { $0.traceBytes }
            bytes { $0.bodyBytes }
            precondition(w.at == total, "delivery parameters: wrote \(w.at) bytes of \(total)")
            initialized = total
        }
        return PGBinaryParameters(bytes: bytes, ranges: ranges)
    }
}

extension BigEndianWriter {
    /// Header of a one-dimensional array with lower bound 1 (as `PGBinaryParameters`).
    mutating func header(count: Int, hasNull: Bool, element: UInt32) {
        be32(1); be32(hasNull ? 1 : 0); be32(element); be32(UInt32(count)); be32(1)
    }
}
