// The store's single writer over one libpq connection: feeds libpq's results into `GroupCommitStateMachine` and performs its actions.
import CLibPQ
import HeraldCore

/// The store's single writer. Work (event appends, delivery appends, consumer acks) queues up
/// while a transaction is in flight; when it completes, everything queued is sent as the next
/// transaction (`GroupCommitStateMachine` decides what is sent and whom to tell; this type owns
/// the connection and the owner's callbacks). Completions run only after COMMIT succeeded — or
/// with an error, never with a false success — and in commit order.
///
/// A committed COPY transaction's completions run while PostgreSQL stores the next one: between
/// them the writer looks at the socket and sends the next COPY's data as soon as PostgreSQL asks
/// for it. A small batch of events (`Limits.completeFirstUpToEvents`) completes first instead, and
/// what its completions and `afterCompletions` append rides in that next transaction.
/// Loop-agnostic: the owner watches `socket` for reading always and for writing while
/// `wantsWrite`, and calls `socketReadable()` / `socketWritable()`.
public final class GroupCommitWriter {
    public typealias EventsCompletion = (Result<[AppendOutcome], StoreError>) -> Void
    /// One event's outcome (`append(event:)`): no array made for it, none taken apart.
    public typealias EventCompletion = (Result<AppendOutcome, StoreError>) -> Void
    public typealias DeliveriesCompletion = (Result<[Int64], StoreError>) -> Void
    public typealias AckCompletion = (Result<Int64, StoreError>) -> Void

    public let connection: PGConnection
    private var machine: GroupCommitStateMachine
    public var limits: Limits {
        get { machine.limits }
        set { machine.limits = newValue }
    }
    /// Called once after the completions of committed events ran while reading PostgreSQL's
    /// answers, before the next transaction is sent: appends made here (the owner's decided
    /// deliveries, in one batch) join that transaction — not a one-row transaction for the first
    /// completion's deliveries.
    public var afterCompletions: (() -> Void)?

    /// FAULT INJECTION FOR TESTS ONLY (nil in production): called each time a transaction's
    /// COMMIT has been flushed to the socket, before its reply is read, with the socket and the
    /// transaction's number of event rows. Returning true makes the writer drop the connection
    /// there, as if it had been cut: the commit's outcome is then unknown to the service
    /// (experiment 3 of docs/reliability.md).
    public var commitFlushedForTesting: ((_ socket: Int32, _ eventRows: Int) -> Bool)?
    /// Event-row counts of transactions sent but not yet flushed (only tracked with the hook set).
    private var unflushedCommits: [Int] = []
    /// Told of every committed transaction (metrics): its event rows, all its rows, and the
    /// nanoseconds from sending its COMMIT to reading its outcome (fsync-bound). Nil: not timed.
    public var onCommitted: ((_ eventRows: Int, _ rows: Int, _ nanoseconds: Int64) -> Void)?
    /// When each transaction's COMMIT in flight was sent (monotonic ns), oldest first; only with `onCommitted`.
    private var commitsSentAt = CommitTimes()

    // The owner's callbacks run inside the writer's reads; these keep them in order.
    /// Results are being read and completions run: appends they make wait for the read to end.
    private var reading = false
    /// Completions are running: a failure met meanwhile (`deferredFailure`) waits until they ran,
    /// so every waiter of a committed transaction hears of its commit before anything fails.
    private var completing = 0
    private var deferredFailure: StoreError?
    /// Looking at the socket between completions (`pollCopyIn`): not again from inside.
    private var polling = false
    /// Completions of committed events ran during this read (`afterCompletions` is due).
    private var eventsCompleted = false

    /// Takes a connected connection and puts it in non-blocking pipeline mode; the session
    /// set-up is sent without waiting (the reconnect path runs on the service loop) and its
    /// failure breaks the writer like a lost connection would.
    /// The partition appended to and the epoch that fences it.
    public let scope: AppendScope

    public init(connection: PGConnection, limits: Limits = Limits(), scope: AppendScope = .unfenced) throws(StoreError) {
        self.connection = connection
        self.scope = scope
        self.machine = GroupCommitStateMachine(limits: limits, scope: scope)
        try connection.setNonBlocking()
        try connection.enterPipelineMode()
        if send(machine.connectionOpened()) { flush() }
        if let failure = machine.failure { throw failure }
    }

    public var socket: Int32 { connection.socket }
    /// True when output is buffered and the owner should wait for the socket to be writable.
    public private(set) var wantsWrite = false
    /// Work queued or in flight.
    public var isIdle: Bool { machine.isIdle }
    public var pendingTransactions: Int { machine.pendingTransactions }
    public var queuedWork: Int { machine.queuedWork }
    /// Set once the connection failed; every later request fails at once with it.
    public var failure: StoreError? { machine.failure }
    public var isBroken: Bool { machine.isBroken }

    // MARK: Stats

    public var stats: WriterStats { machine.stats }
    public var transactionsCommitted: Int { machine.stats.transactionsCommitted }
    public var rowsCommitted: Int { machine.stats.rowsCommitted }
    public var roundTrips: Int { machine.stats.roundTrips }
    public var deliveriesCopied: Int { machine.stats.deliveriesCopied }
    public var transactionsOverlapped: Int { machine.stats.transactionsOverlapped }
    public var copiesSentWhileCompleting: Int { machine.stats.copiesSentWhileCompleting }
    public var deliveriesChained: Int { machine.stats.deliveriesChained }

    // MARK: Requests

    /// Appends events, all in one transaction, even past `maxRowsPerTransaction` (which only
    /// bounds how many requests join one): a fan-out's rows are stored together or not at all, so
    /// a re-sent one is a duplicate or a conflict as a whole (schema/017). A fan-out has at most
    /// 10,000 rows (SPEC §10).
    public func append(events rows: [EventRow], completion: @escaping EventsCompletion) {
        if machine.isBroken, let failure = machine.failure { completion(.failure(failure)); return }
        if rows.isEmpty { completion(.success([])); return }
        machine.workSubmitted(.events(rows, completion))
        pump()
    }

    /// Appends one event: `append(events:)` without the arrays around it (a submit's usual shape).
    /// `row` is consumed: moved into the queue, not copied (its strings retained once more).
    public func append(event row: consuming EventRow, completion: @escaping EventCompletion) {
        if machine.isBroken, let failure = machine.failure { completion(.failure(failure)); return }
        machine.workSubmitted(.event(consume row, completion))
        pump()
    }

    /// Appends deliveries, split into parts of at most `maxRowsPerTransaction`: a summary storm
    /// decides a million at one instant, and one statement of them would pass PostgreSQL's 1 GB
    /// message limit. Rows of a part committed before a failure are skipped when re-sent (same
    /// user, ordinal).
    public func append(deliveries rows: [DeliveryRow], completion: @escaping DeliveriesCompletion) {
        if machine.isBroken, let failure = machine.failure { completion(.failure(failure)); return }
        if rows.isEmpty { completion(.success([])); return }
        machine.deliveriesSubmitted(rows, completion)
        pump()
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
        if machine.isBroken, let failure = machine.failure { completion(.failure(failure)); return }
        if rows.isEmpty { completion(.success([])); return }
        precondition(rows.count <= limits.maxRowsPerTransaction, "a chained delivery append is one COPY transaction")
        machine.workSubmitted(.chainedDeliveries(rows, after: base, completion))
        pump()
    }

    /// Moves a consumer's acknowledged cursor in `partition` (any partition: acks are not fenced).
    public func ack(consumer: String, partition: Int32 = 0, cursor: Int64, completion: @escaping AckCompletion) {
        if machine.isBroken, let failure = machine.failure { completion(.failure(failure)); return }
        machine.workSubmitted(.ack(consumer: consumer, partition: partition, cursor: cursor, completion))
        pump()
    }

    // MARK: Loop hooks

    /// Sends the next transaction if nothing is in flight, then flushes. While results are read,
    /// only a chained delivery append goes at once (`GroupCommitStateMachine.nextTransaction`).
    public func pump() {
        guard !machine.isBroken else { return }
        if let next = machine.nextTransaction(whileReading: reading) {
            guard send(next) else { return }
        } else if reading {
            return
        }
        flush()
    }

    public func socketWritable() { flush() }

    public func socketReadable() {
        guard !machine.isBroken else { return }
        guard connection.consumeInput() else { fail(.unavailable(connection.lastErrorMessage)); return }
        readResults()
        if !machine.isBroken && connection.isBad { fail(.unavailable(connection.lastErrorMessage)) }
        if eventsCompleted {
            eventsCompleted = false
            afterCompletions?()
        }
        pump()
    }

    /// For a completion that runs long (a large delivery append's, which builds and streams its
    /// lines): answers the COPY_IN of the transaction sent meanwhile (`pump` sends a chained
    /// append at once), so that one's rows are stored while the completion goes on. Only from
    /// within this writer's own completions (its read takes what follows); elsewhere, nothing.
    public func pollWhileCompleting() {
        guard reading else { return }
        pollCopyIn()
    }

    // MARK: Reading results

    /// Feeds the results that arrived into the machine, performing what it asks for, until
    /// libpq would block or nothing is in flight.
    private func readResults() {
        reading = true
        defer { reading = false }
        while machine.awaitsResults {
            switch connection.nextResult() {
            case .wouldBlock:
                return
            case .endOfStatement:
                if machine.isCopying {
                    // The whole simple query is done (ReadyForQuery): back to pipeline mode.
                    do {
                        try connection.enterPipelineMode()
                    } catch {
                        fail(error)
                        return
                    }
                    perform(machine.copyQueryEnded(inFailedTransaction: connection.isInFailedTransaction))
                } else {
                    machine.statementEnded()
                }
            case .result(let result):
                switch result.status {
                case PGRES_PIPELINE_SYNC: perform(machine.syncReceived(inFailedTransaction: connection.isInFailedTransaction))
                case PGRES_COPY_IN: perform(machine.copyAccepted())
                default: machine.resultReceived(ServerResult(result))
                }
            }
        }
    }

    /// While a committed transaction's completions run, answers the next COPY transaction's
    /// COPY_IN at once, so PostgreSQL stores that batch while the owner runs them (acks, folds,
    /// decisions) instead of waiting for the last of them. Reads only up to the query's last COPY
    /// data or its first error: finishing the transaction waits for the read that follows. A
    /// failed read is left to that read, which meets the same error.
    private func pollCopyIn() {
        guard !polling, !machine.isBroken, deferredFailure == nil, machine.awaitsCopyData else { return }
        polling = true
        defer { polling = false }
        guard connection.consumeInput() else { return }
        while deferredFailure == nil, machine.awaitsCopyData, case .result(let result) = connection.nextResult() {
            if result.status == PGRES_COPY_IN {
                perform(machine.copyAccepted(duringCompletions: true))
            } else {
                machine.resultReceived(ServerResult(result))
            }
        }
    }

    // MARK: Performing the machine's actions

    private func perform(_ action: consuming WriterAction) {
        switch consume action {
        case .none:
            break
        case .send(let next):
            _ = send(next)
        case .sendCopyData(let data, let commitEventRows):
            let ok = data.bytes.withUnsafeBytes { connection.putCopyData($0) } && connection.putCopyEnd()
            guard ok else { fail(.unavailable(connection.lastErrorMessage)); return }
            if let rows = commitEventRows, commitFlushedForTesting != nil { unflushedCommits.append(rows) }
            if commitEventRows != nil, onCommitted != nil { commitsSentAt.sent() }
            flush()
            machine.copyDataSent()
        case .abortCopy(let reason):
            guard let h = connection.rawHandle, PQputCopyEnd(h, reason) == 1 else {
                fail(.unavailable(connection.lastErrorMessage))
                return
            }
            flush()
        case .complete(let completions, let first):
            completing += 1
            if let first, send(first) { flush() }
            run(completions)
            completing -= 1
            reportDeferredFailure()
        case .connectionUnusable(let error):
            fail(error)
        }
    }

    /// Sends a pipeline segment or starts a COPY transaction; false when the connection failed
    /// (the failure is reported, or deferred until the running completions ran).
    private func send(_ next: WriterSend) -> Bool {
        switch next {
        case .pipeline(let statements, let commitEventRows):
            var ok = true
            for statement in statements where ok {
                switch statement {
                case .sessionSetup:
                    ok = connection.send(StoreSQL.writerSessionSetup)
                case .prepareAppendEvents:
                    ok = connection.sendPrepare(name: StoreSQL.appendEventsName, StoreSQL.appendEvents(scope),
                                                parameterCount: StoreSQL.appendEventsParameterCount)
                case .prepareAppendDeliveries:
                    ok = connection.sendPrepare(name: StoreSQL.appendDeliveriesName, StoreSQL.appendDeliveries(scope),
                                                parameterCount: StoreSQL.appendDeliveriesParameterCount)
                case .rollback: ok = connection.send("ROLLBACK")
                case .begin: ok = connection.send("BEGIN")
                case .appendEvents(let rows):
                    ok = connection.sendPrepared(name: StoreSQL.appendEventsName, EventBatch.parameters(rows))
                case .appendDeliveries(let rows):
                    ok = connection.sendPrepared(name: StoreSQL.appendDeliveriesName, DeliveryBatch.parameters(rows))
                case .ack(let consumer, let partition, let cursor):
                    ok = connection.send(StoreSQL.ackConsumer, [String(partition), consumer, String(cursor)])
                case .commit: ok = connection.send("COMMIT")
                }
            }
            ok = ok && connection.sendSync()
            if let rows = commitEventRows, commitFlushedForTesting != nil { unflushedCommits.append(rows) }
            if commitEventRows != nil, onCommitted != nil { commitsSentAt.sent() }
            guard ok else { fail(.unavailable(connection.lastErrorMessage)); return false }
            return true
        case .copyQuery(let query):
            do {
                try connection.exitPipelineMode()
            } catch {
                fail(error)
                return false
            }
            guard connection.sendSimpleQuery(query) else { fail(.unavailable(connection.lastErrorMessage)); return false }
            // The first COPY's data is encoded while PostgreSQL runs BEGIN and the claims:
            // flushed first, then encoded, it is ready when COPY_IN arrives.
            flush()
            if machine.isBroken || deferredFailure != nil { return false }
            machine.copyQuerySent()
            return true
        }
    }

    private func flush() {
        guard !machine.isBroken else { wantsWrite = false; return }
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

    /// Tells a finished transaction's waiters, looking at the socket between them (`pollCopyIn`).
    private func run(_ completions: Completions) {
        completing += 1
        if completions.completedEvents { eventsCompleted = true }
        if let onCommitted { commitsSentAt.completed(completions, onCommitted) }
        completions.run(poll: pollCopyIn)
        if let error = completions.failedDeliveries {
            for completion in machine.deliveriesFailed() { completion(.failure(error)) }
        }
        completing -= 1
        reportDeferredFailure()
    }

    private func reportDeferredFailure() {
        guard completing == 0, let error = deferredFailure else { return }
        deferredFailure = nil
        fail(error)
    }

    /// The connection broke: the transaction in flight and everything queued fail (the caller
    /// must not acknowledge; a retry is answered as a duplicate if it did commit). While
    /// completions run, it waits until they ran.
    private func fail(_ error: StoreError) {
        guard !machine.isBroken else { return }
        if completing > 0 {
            if deferredFailure == nil { deferredFailure = error }
            return
        }
        wantsWrite = false
        guard let failure = machine.connectionFailed(error) else { return }
        if let requests = failure.inFlight { run(Completions(requests: requests, outcome: .failed(error))) }
        for work in failure.queued { work.fail(error) }
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

extension PGResult: ResultRows {}

extension ServerResult {
    /// A libpq result other than a pipeline Sync or a COPY's start.
    init(_ result: PGResult) {
        switch result.status {
        case PGRES_COMMAND_OK: self = .commandOK
        case PGRES_TUPLES_OK: self = .rows(result)
        case PGRES_PIPELINE_ABORTED: self = .aborted
        default: self = result.error.map { .failed($0) } ?? .other
        }
    }
}
