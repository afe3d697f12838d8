// The group-commit writer's protocol as a pure state machine: requests and PostgreSQL's answers in, what to send and whom to tell out.
import DequeModule
import HeraldCore

/// Decides the writer's transactions, without I/O: `GroupCommitWriter` feeds it the requests and
/// libpq's results and performs the actions it returns.
///
/// Requests queue while a transaction is in flight; when it finishes, everything queued (up to
/// `Limits.maxRowsPerTransaction` rows) goes in the next one. One transaction is on the wire at a
/// time. With events in it, a transaction leaves pipeline mode:
/// `BEGIN; SELECT herald_claim_events(…); [SELECT herald_claim_deliveries(…);] COPY events …;
/// [COPY deliveries …][; COMMIT]`, each COPY's data encoded at the claimed positions once the
/// base arrives; any acks and COMMIT then follow as one pipeline segment (the tail). Deliveries
/// alone go by a COPY transaction of their own; chained deliveries (`append(deliveries:after:)`)
/// by `BEGIN; COPY deliveries …; <move the head from base>; COMMIT`. A stored key rolls the COPY
/// back and the transaction goes again through the append functions, which report duplicates
/// (and, for events, stay in use until a batch comes back without one). Acks alone:
/// `BEGIN; <acks>; COMMIT; Sync`. The session is set up by a pipeline segment of its own first.
/// Completions are returned only after COMMIT succeeded, or with an error: never a false success.
struct GroupCommitStateMachine: ~Copyable {
    enum State {
        /// Nothing in flight: the next transaction may be sent.
        case idle
        /// A pipeline segment in flight: the set-up, a lone ROLLBACK, a transaction, or the tail of a COPY one.
        case pipelined(PipelineSegment)
        /// A COPY transaction's simple query in flight (outside pipeline mode).
        case copying(CopyTransaction)
        /// The connection failed: every request fails with this error.
        case broken(StoreError)
        /// Only inside a transition, while the payload is taken out to be changed in place.
        case modifying
    }

    /// How events are appended.
    enum EventRoute {
        /// By COPY at claimed positions.
        case copy
        /// A COPY met a stored key: through `herald_append_events` (which reports duplicates at
        /// no extra cost) until a batch comes back without any, so a storm of client retries
        /// after an outage does not pay for a failed COPY in every batch.
        case functionUntilACleanBatch
    }

    var limits: GroupCommitWriter.Limits
    /// The partition appended to, and the epoch that fences every claim.
    let scope: AppendScope
    private(set) var state: State = .idle
    private(set) var eventRoute = EventRoute.copy
    private(set) var stats = WriterStats()
    /// Requests not yet in a transaction, in arrival order.
    private var queue = Deque<WriterWork>()

    init(limits: GroupCommitWriter.Limits, scope: AppendScope = .unfenced) {
        self.limits = limits
        self.scope = scope
    }

    // MARK: Looking at it

    var isBroken: Bool { if case .broken = state { return true } else { return false } }

    var failure: StoreError? { if case .broken(let error) = state { return error } else { return nil } }

    /// Nothing queued, nothing in flight.
    var isIdle: Bool {
        guard queue.isEmpty else { return false }
        switch state {
        case .idle, .broken: return true
        case .pipelined, .copying, .modifying: return false
        }
    }

    /// Transactions in flight (a lone ROLLBACK counts; the set-up does not).
    var pendingTransactions: Int {
        switch state {
        case .pipelined(let segment): return segment.purpose == .setup ? 0 : 1
        case .copying: return 1
        case .idle, .broken, .modifying: return 0
        }
    }

    var queuedWork: Int { queue.count }

    /// Results are still to come.
    var awaitsResults: Bool {
        switch state {
        case .pipelined, .copying: return true
        case .idle, .broken, .modifying: return false
        }
    }

    /// A COPY transaction's simple query is in flight (its end is `copyQueryEnded`, not `statementEnded`).
    var isCopying: Bool { if case .copying = state { return true } else { return false } }

    /// A COPY transaction in flight still waits for one of its COPYs' data.
    var awaitsCopyData: Bool {
        guard case .copying(let tx) = state else { return false }
        return !tx.allDataSent && tx.error == nil
    }

    // MARK: Inputs

    /// The connection is open and in pipeline mode: set the session up (its settings and the two
    /// prepared batch statements), ahead of the first transaction.
    mutating func connectionOpened() -> WriterSend {
        state = .pipelined(PipelineSegment(purpose: .setup, statements: [.setup, .setup, .setup]))
        stats.roundTrips += 1
        return .pipeline([.sessionSetup, .prepareAppendEvents, .prepareAppendDeliveries], commitEventRows: nil)
    }

    /// A request arrived (the writer fails requests itself once broken, and completes empty ones).
    mutating func workSubmitted(_ work: consuming WriterWork) {
        queue.append(work)
    }

    /// Deliveries split into parts of at most `maxRowsPerTransaction` rows, queued in order.
    mutating func deliveriesSubmitted(_ rows: [DeliveryRow], _ completion: @escaping GroupCommitWriter.DeliveriesCompletion) {
        if rows.count <= limits.maxRowsPerTransaction {
            queue.append(.deliveries(rows, completion))
        } else {
            for (part, done) in splitAppend(rows, by: limits.maxRowsPerTransaction, completion) { queue.append(.deliveries(part, done)) }
        }
    }

    /// The writer may send: the next transaction when nothing is in flight and work is queued.
    /// `whileReading`: results are being read and completions run, so appends they make join the
    /// next transaction, sent once the reading is done, rather than a one-row one each; only a
    /// chained delivery append (a transaction of its own) goes at once, so its backend stores it
    /// while the completion that queued it runs on.
    mutating func nextTransaction(whileReading: Bool) -> WriterSend? {
        guard case .idle = state, !queue.isEmpty else { return nil }
        if whileReading && !queue[0].isChained { return nil }
        return startNextTransaction()
    }

    /// The COPY query went out: the first COPY's data is encoded (at base 0, rebased once the
    /// base arrives) while PostgreSQL runs BEGIN and the claims.
    mutating func copyQuerySent() {
        let partition = scope.partition
        modifyCopy { tx in
            if !tx.events.isEmpty {
                tx.eventData = EventCopy.encode(tx.events, base: 0, partition: partition)
            } else {
                tx.deliveryData = DeliveryCopy.encode(tx.deliveries, base: 0, partition: partition)
            }
        }
    }

    /// A statement's result (not a Sync, not a COPY's start).
    mutating func resultReceived(_ result: ServerResult) {
        switch state {
        case .pipelined:
            modifySegment { segment in segment.take(result) }
        case .copying:
            modifyCopy { tx in tx.take(result) }
        case .idle, .broken, .modifying:
            break
        }
    }

    /// In pipeline mode, a statement's results ended.
    mutating func statementEnded() {
        modifySegment { $0.statementHasResult = false }
    }

    /// The segment's Sync arrived: it finished. `inFailedTransaction`: the session now waits for a ROLLBACK.
    mutating func syncReceived(inFailedTransaction: Bool) -> WriterAction {
        guard case .pipelined(let segment) = state else { return .none }
        state = .idle
        let firstError = segment.firstError
        switch segment.purpose {
        case .setup, .rollback:
            if let error = firstError ?? (segment.results.count == segment.statements.count ? nil
                                          : .unavailable("the writer's session set-up did not complete")) {
                return .connectionUnusable(error)
            }
            return .none
        case .transaction:
            guard segment.committed else {
                return failed(segment.requests, firstError ?? .unavailable("the transaction did not commit"),
                              inFailedTransaction: inFailedTransaction)
            }
            let requests = segment.requests
            stats.transactionsCommitted += 1
            stats.rowsCommitted += requests.eventRowCount + requests.deliveryRowCount + requests.acks.count
            var events = segment.copiedEventsAfter.map { EventOutcomes.stored(after: $0) }
            var deliveries = segment.copiedDeliveriesAfter.map { DeliveryCursors.stored(after: $0) }
            if segment.copiedDeliveriesAfter != nil { stats.deliveriesCopied += requests.deliveryRowCount }
            var acks: [Int64] = []
            for (index, statement) in segment.statements.enumerated() {
                switch (statement, segment.results[index]) {
                case (.events, .events(let outcomes)):
                    // The whole batch was appended at base + ord: no stored key in it, so the
                    // next batch may try COPY again.
                    if case .stored = outcomes { eventRoute = .copy }
                    events = outcomes
                case (.deliveries, .deliveries(let cursors)):
                    deliveries = cursors
                case (.ack(let i), let result):
                    if case .ack(let cursor) = result { acks.append(cursor ?? requests.acks[i].cursor) } else { acks.append(requests.acks[i].cursor) }
                default:
                    break
                }
            }
            return .complete(Completions(requests: requests, outcome: .committed(events: events, deliveries: deliveries, acks: acks)),
                             sendingFirst: nil)
        }
    }

    /// PostgreSQL asks for the next COPY's data (COPY_IN): the events' first, then the deliveries'.
    /// `duringCompletions`: the previous transaction's completions are running.
    mutating func copyAccepted(duringCompletions: Bool = false) -> WriterAction {
        guard case .copying(var tx) = state else { return .none }
        state = .modifying
        let events = tx.nextCopyIsEvents
        if duringCompletions && !tx.dataSent && !tx.deliveryDataSent { stats.copiesSentWhileCompleting += 1 }
        if events { tx.dataSent = true } else { tx.deliveryDataSent = true }
        guard tx.error == nil, tx.claimed else {
            // Cannot happen (the UPDATEs precede the COPYs): end the COPY with an error so the
            // server rolls the transaction back (and skips what follows).
            tx.error = tx.error ?? .unavailable("the heads were not claimed before COPY")
            state = .copying(tx)
            return .abortCopy(reason: events ? "herald: no positions" : "herald: no cursors")
        }
        var data: CopyData
        if events {
            data = tx.eventData.take() ?? EventCopy.encode(tx.events, base: 0, partition: scope.partition)
            BinaryCopy.rebase(&data, by: tx.base!)
        } else {
            data = tx.deliveryData.take() ?? DeliveryCopy.encode(tx.deliveries, base: 0, partition: scope.partition)
            BinaryCopy.rebase(&data, by: tx.deliveryBase!)
        }
        let commits = tx.commitsInQuery && (!events || !tx.deliveriesByCopy)
        let eventRows = tx.events.count
        state = .copying(tx)
        stats.roundTrips += 1
        return .sendCopyData(data, commitEventRows: commits ? eventRows : nil)
    }

    /// A COPY's data went out: the deliveries' COPY, when one follows the events', is encoded
    /// while PostgreSQL stores the events.
    mutating func copyDataSent() {
        let partition = scope.partition
        modifyCopy { tx in
            if tx.deliveriesByCopy, tx.dataSent, !tx.deliveryDataSent, tx.deliveryData == nil {
                tx.deliveryData = DeliveryCopy.encode(tx.deliveries, base: 0, partition: partition)
            }
        }
    }

    /// The COPY transaction's simple query ended (ReadyForQuery) and the connection is back in
    /// pipeline mode: complete it (COMMIT was in the query), send its tail (acks, COMMIT), or —
    /// when a COPY met a stored key — send the whole transaction again through the append
    /// functions, which report duplicates (a ROLLBACK first when the session needs one).
    mutating func copyQueryEnded(inFailedTransaction: Bool) -> WriterAction {
        guard case .copying(let tx) = state else { return .none }
        state = .idle
        let succeeded = tx.error == nil && tx.allDataSent && tx.claimed
        if succeeded && tx.commitsInQuery {
            guard tx.okAfterData == tx.expectedOKAfterData else {
                return failed(tx.requests, .unavailable("the COPY transaction did not commit"), inFailedTransaction: inFailedTransaction)
            }
            let requests = tx.requests
            stats.transactionsCommitted += 1
            stats.rowsCommitted += requests.eventRowCount + requests.deliveryRowCount
            if tx.deliveryBase != nil {
                stats.deliveriesCopied += requests.deliveryRowCount
                if tx.advancesHead { stats.deliveriesChained += requests.deliveryRowCount }
            }
            let completions = Completions(requests: requests, outcome: .committed(
                events: tx.base.map { .stored(after: $0) }, deliveries: tx.deliveryBase.map { .stored(after: $0) }, acks: []))
            // A small batch of events completes first, so that the deliveries decided from it
            // ride in the next transaction (deliveries alone always overlap: their completions
            // decide nothing). Otherwise the work queued meanwhile is sent first, and these
            // completions run while PostgreSQL stores it.
            let completeFirst = requests.eventRowCount > 0 && requests.eventRowCount <= limits.completeFirstUpToEvents
            guard !queue.isEmpty, !completeFirst else { return .complete(completions, sendingFirst: nil) }
            stats.transactionsOverlapped += 1
            return .complete(completions, sendingFirst: startNextTransaction())
        }
        if succeeded {
            // The events (and deliveries) are in the open transaction; the acks and COMMIT follow.
            var tail = PipelineSegment(purpose: .transaction, requests: tx.requests)
            tail.copiedEventsAfter = tx.base
            tail.copiedDeliveriesAfter = tx.deliveryBase
            return .send(sendPipelined(tail, events: [], deliveries: [], rollbackFirst: false))
        }
        if case .duplicate = tx.error {
            // A stored key (or one repeated in the batch), or a stored (user, user_index): nothing
            // of the transaction is stored. The functions' careful paths report duplicates and
            // conflicts with their original seq, and skip stored deliveries (cursor 0). Only a
            // stored *key* keeps events on the function for a while (client retries come in
            // bursts); a re-derived delivery is rare and costs one failed COPY per batch that has one.
            if !tx.deliveryDataSent { eventRoute = .functionUntilACleanBatch }
            return .send(sendPipelined(PipelineSegment(purpose: .transaction, requests: tx.requests),
                                       events: tx.events, deliveries: tx.deliveries, rollbackFirst: inFailedTransaction))
        }
        return failed(tx.requests, tx.error ?? .unavailable("the COPY transaction did not complete"),
                      inFailedTransaction: inFailedTransaction)
    }

    /// The owner was told a delivery append failed: deliveries are one ordered stream, so the
    /// delivery appends queued behind it fail too (returned in order), and none commits ahead of
    /// rows its owner will send again. Queued events and acks stay.
    mutating func deliveriesFailed() -> [GroupCommitWriter.DeliveriesCompletion] {
        var failed: [GroupCommitWriter.DeliveriesCompletion] = []
        queue.removeAll { work in
            switch copy work {
            case .deliveries(_, let completion), .chainedDeliveries(_, _, let completion):
                failed.append(completion)
                return true
            case .events, .event, .ack:
                return false
            }
        }
        return failed
    }

    /// The connection broke: nothing in flight is known to have committed, so the transaction in
    /// flight and every queued request fail (a retry is answered as a duplicate if it did commit).
    /// Nil when it was broken already.
    mutating func connectionFailed(_ error: StoreError) -> WriterFailure? {
        var inFlight: TransactionRequests?
        switch state {
        case .broken: return nil
        case .pipelined(let segment): if segment.purpose == .transaction { inFlight = segment.requests }
        case .copying(let tx): inFlight = tx.requests
        case .idle, .modifying: break
        }
        state = .broken(error)
        let queued = Array(queue)
        queue.removeAll()
        return WriterFailure(error: error, inFlight: inFlight, queued: queued)
    }

    // MARK: Building a transaction

    /// Takes the next transaction's requests off the queue and starts it (nothing is in flight).
    private mutating func startNextTransaction() -> WriterSend {
        var requests = TransactionRequests()
        if queue[0].isChained, case .chainedDeliveries(let rows, let base, let completion) = queue.removeFirst() {
            requests.deliveries = [DeliveriesWaiter(rows: 0..<rows.count, completion: completion)]
            requests.deliveryRowCount = rows.count
            var tx = CopyTransaction(requests: requests, events: [], deliveries: rows, commitsInQuery: true)
            tx.deliveryBase = base
            tx.advancesHead = true
            return sendCopy(tx, query: DeliveryCopy.chainedQuery(after: base, count: rows.count, scope: scope))
        }
        var events: [EventRow] = []
        var deliveries: [DeliveryRow] = []
        var rows = 0
        // The head is looked at in place and then moved out: `while let work = queue.first` would copy
        // every queued request (its row's strings retained and released once more).
        while !queue.isEmpty, !queue[0].isChained,
              rows == 0 || rows + queue[0].rowCount <= limits.maxRowsPerTransaction {
            let work = queue.removeFirst()
            rows += work.rowCount
            switch consume work {
            case .events(let r, let c):
                requests.events.append(EventsWaiter(rows: events.count..<(events.count + r.count), many: c))
                if events.isEmpty { events = r } else { events += r }  // the first part shared, not copied row by row
            case .event(let r, let c):
                if events.isEmpty { events.reserveCapacity(min(queue.count + 1, limits.maxRowsPerTransaction)) }
                requests.events.append(EventsWaiter(rows: events.count..<(events.count + 1), one: c))
                events.append(r)
            case .deliveries(let r, let c):
                requests.deliveries.append(DeliveriesWaiter(rows: deliveries.count..<(deliveries.count + r.count), completion: c))
                if deliveries.isEmpty { deliveries = r } else { deliveries += r }
            case .ack(let name, let partition, let cursor, let c):
                requests.acks.append(AckWaiter(consumer: name, partition: partition, cursor: cursor, completion: c))
            case .chainedDeliveries:
                preconditionFailure("a chained delivery append goes alone")
            }
        }
        requests.eventRowCount = events.count
        requests.deliveryRowCount = deliveries.count
        if (eventRoute == .copy && !events.isEmpty) || (events.isEmpty && !deliveries.isEmpty) {
            // Events by COPY (deliveries beside them by a second COPY), or deliveries alone (a
            // storm's summaries, timers' decisions) by a COPY transaction of their own. COMMIT is
            // in the query unless acks follow in a pipeline segment.
            let commitsInQuery = requests.acks.isEmpty
            let tx = CopyTransaction(requests: requests, events: events, deliveries: deliveries, commitsInQuery: commitsInQuery)
            return sendCopy(tx, query: EventCopy.startQuery(count: events.count, deliveries: deliveries.count, commit: commitsInQuery, scope: scope))
        }
        return sendPipelined(PipelineSegment(purpose: .transaction, requests: requests),
                             events: events, deliveries: deliveries, rollbackFirst: false)
    }

    private mutating func sendCopy(_ tx: CopyTransaction, query: String) -> WriterSend {
        state = .copying(tx)
        stats.roundTrips += 1
        return .copyQuery(query)
    }

    /// `segment` as one pipeline segment: `[ROLLBACK;] BEGIN; [<events through the function>;]
    /// [<deliveries through the function>;] <acks>; COMMIT`. After a COPY query (the tail) the
    /// transaction is open and what it copied is in it; only the acks and COMMIT follow.
    private mutating func sendPipelined(_ segment: PipelineSegment, events: [EventRow], deliveries: [DeliveryRow],
                                        rollbackFirst: Bool) -> WriterSend {
        var segment = segment
        var statements: [PipelineStatement] = []
        if rollbackFirst {
            statements.append(.rollback)
            segment.statements.append(.rollback)
        }
        if !segment.continuesCopy {
            statements.append(.begin)
            segment.statements.append(.begin)
            if !events.isEmpty {
                statements.append(.appendEvents(events))
                segment.statements.append(.events)
            }
        }
        if !deliveries.isEmpty && segment.copiedDeliveriesAfter == nil {
            statements.append(.appendDeliveries(deliveries))
            segment.statements.append(.deliveries)
        }
        for (i, a) in segment.requests.acks.enumerated() {
            statements.append(.ack(consumer: a.consumer, partition: a.partition, cursor: a.cursor))
            segment.statements.append(.ack(i))
        }
        statements.append(.commit)
        segment.statements.append(.commit)
        let eventRows = segment.requests.eventRowCount
        state = .pipelined(segment)
        stats.roundTrips += 1
        return .pipeline(statements, commitEventRows: eventRows)
    }

    /// A transaction did not commit: its completions fail; a lone ROLLBACK goes first when the
    /// session waits for one (its failure breaks the connection).
    private mutating func failed(_ requests: TransactionRequests, _ error: StoreError, inFailedTransaction: Bool) -> WriterAction {
        var rollback: WriterSend?
        if inFailedTransaction {
            state = .pipelined(PipelineSegment(purpose: .rollback, statements: [.rollback]))
            stats.roundTrips += 1
            rollback = .pipeline([.rollback], commitEventRows: nil)
        }
        return .complete(Completions(requests: requests, outcome: .failed(error)), sendingFirst: rollback)
    }

    // MARK: Changing a state's payload in place

    /// Changes the pipeline segment in flight, taken out of `state` so it has one owner.
    private mutating func modifySegment(_ change: (inout PipelineSegment) -> Void) {
        guard case .pipelined(var segment) = state else { return }
        state = .modifying
        change(&segment)
        state = .pipelined(segment)
    }

    /// Changes the COPY transaction in flight, taken out of `state` so that its encoded data has
    /// one owner and is rebased in place (a copy left behind would cost a copy of every byte of it).
    private mutating func modifyCopy(_ change: (inout CopyTransaction) -> Void) {
        guard case .copying(var tx) = state else { return }
        state = .modifying
        change(&tx)
        state = .copying(tx)
    }
}
