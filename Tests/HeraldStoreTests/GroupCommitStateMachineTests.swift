// The group-commit writer's state machine without PostgreSQL: inputs in, the expected actions out.
import HeraldCore
@testable import HeraldStore
import Testing

@Suite struct GroupCommitStateMachineTests {
    /// Result rows as text, the way libpq hands them over.
    struct Rows: ResultRows {
        var cells: [[String?]]
        var rowCount: Int { cells.count }
        func string(_ row: Int, _ column: Int) -> String? { cells[row][column] }
        func int64(_ row: Int, _ column: Int) -> Int64? { string(row, column).flatMap { Int64($0) } }
    }

    /// What the requests were told, in the order told.
    final class Told {
        var lines: [String] = []
    }

    static func event(_ i: Int) -> EventRow { CopyAppendTests.event(i) }
    static func delivery(_ i: Int64) -> DeliveryRow { CopyAppendTests.delivery(i) }

    static func submit(_ m: inout GroupCommitStateMachine, event i: Int, _ told: Told) {
        m.workSubmitted(.event(event(i), { result in
            switch result {
            case .success(let outcome): told.lines.append("event \(i): \(outcome)")
            case .failure(let error): told.lines.append("event \(i) failed: \(error)")
            }
        }))
    }

    static func submit(_ m: inout GroupCommitStateMachine, deliveries ids: [Int64], after base: Int64? = nil, _ told: Told) {
        let rows = ids.map { delivery($0) }
        let done: GroupCommitWriter.DeliveriesCompletion = { result in
            switch result {
            case .success(let cursors): told.lines.append("deliveries \(ids): \(cursors)")
            case .failure(let error): told.lines.append("deliveries \(ids) failed: \(error)")
            }
        }
        if let base { m.workSubmitted(.chainedDeliveries(rows, after: base, done)) } else { m.deliveriesSubmitted(rows, done) }
    }

    static func submit(_ m: inout GroupCommitStateMachine, ack cursor: Int64, _ told: Told) {
        m.workSubmitted(.ack(consumer: "c", partition: 0, cursor: cursor, { result in
            switch result {
            case .success(let stored): told.lines.append("ack \(cursor): \(stored)")
            case .failure(let error): told.lines.append("ack \(cursor) failed: \(error)")
            }
        }))
    }

    /// A machine whose session set-up has finished.
    static func ready(_ limits: GroupCommitWriter.Limits = .init()) -> GroupCommitStateMachine {
        var m = GroupCommitStateMachine(limits: limits)
        _ = m.connectionOpened()
        for _ in 0..<3 { m.resultReceived(.commandOK); m.statementEnded() }
        _ = m.syncReceived(inFailedTransaction: false)
        return m
    }

    /// Runs the completions of a `.complete` action (and returns what it sent first).
    @discardableResult
    static func complete(_ action: WriterAction, polls: inout Int) -> WriterSend? {
        guard case .complete(let completions, let first) = action else {
            Issue.record("expected completions, got \(action)")
            return nil
        }
        completions.run { polls += 1 }
        return first
    }

    @discardableResult
    static func complete(_ action: WriterAction) -> WriterSend? {
        var polls = 0
        return complete(action, polls: &polls)
    }

    /// Answers a COPY transaction of events (and deliveries) the way PostgreSQL does, up to ReadyForQuery.
    static func answerCopy(_ m: inout GroupCommitStateMachine, eventsBase: Int64?, deliveriesBase: Int64? = nil,
                           okAfterData: Int) -> [WriterAction] {
        var sent: [WriterAction] = []
        m.copyQuerySent()
        m.resultReceived(.commandOK)   // BEGIN
        if let eventsBase { m.resultReceived(.rows(Rows(cells: [["\(eventsBase)"]]))) }
        if let deliveriesBase { m.resultReceived(.rows(Rows(cells: [["\(deliveriesBase)"]]))) }
        for _ in 0..<((eventsBase != nil ? 1 : 0) + (deliveriesBase != nil ? 1 : 0)) {
            let action = m.copyAccepted()
            sent.append(action)
            m.copyDataSent()
        }
        for _ in 0..<okAfterData { m.resultReceived(.commandOK) }
        return sent
    }

    @Test func theSessionIsSetUpBeforeTheFirstTransaction() {
        var m = GroupCommitStateMachine(limits: .init())
        let setup = m.connectionOpened()
        #expect(setup == .pipeline([.sessionSetup, .prepareAppendEvents, .prepareAppendDeliveries], commitEventRows: nil))
        let told = Told()
        Self.submit(&m, event: 1, told)
        let early = m.nextTransaction(whileReading: false)
        #expect(early == nil, "the set-up is in flight")
        let pendingDuringSetUp = m.pendingTransactions
        #expect(pendingDuringSetUp == 0)
        for _ in 0..<3 { m.resultReceived(.commandOK); m.statementEnded() }
        guard case .none = m.syncReceived(inFailedTransaction: false) else { Issue.record("set-up failed"); return }
        let first = m.nextTransaction(whileReading: false)
        #expect(first == .copyQuery(EventCopy.startQuery(count: 1, commit: true)))
        let pending = m.pendingTransactions
        #expect(pending == 1)
    }

    @Test func aFailedSetUpMakesTheConnectionUnusable() {
        var m = GroupCommitStateMachine(limits: .init())
        _ = m.connectionOpened()
        m.resultReceived(.commandOK); m.statementEnded()
        m.resultReceived(.failed(.rejected(sqlstate: "42601", message: "syntax", detail: nil, hint: nil))); m.statementEnded()
        m.resultReceived(.aborted); m.statementEnded()
        guard case .connectionUnusable(.rejected(let sqlstate, _, _, _)) = m.syncReceived(inFailedTransaction: false) else {
            Issue.record("expected the connection unusable"); return
        }
        #expect(sqlstate == "42601")
    }

    @Test func eventsGoByCopyAtTheClaimedPositionsAndAreToldOnlyAfterCommit() {
        var m = Self.ready()
        let told = Told()
        Self.submit(&m, event: 1, told)
        Self.submit(&m, event: 2, told)
        let query = m.nextTransaction(whileReading: false)
        #expect(query == .copyQuery(EventCopy.startQuery(count: 2, commit: true)))
        let sent = Self.answerCopy(&m, eventsBase: 10, okAfterData: 1)   // the COPY's result; COMMIT's still to come
        guard case .sendCopyData(let data, let commitEventRows) = sent.first else { Issue.record("no COPY data"); return }
        #expect(data == EventCopy.encode([Self.event(1), Self.event(2)], base: 10))
        #expect(commitEventRows == 2, "COMMIT follows the data in the query")
        #expect(told.lines.isEmpty)
        m.resultReceived(.commandOK)   // COMMIT
        Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(told.lines == ["event 1: appended(seq: 11)", "event 2: appended(seq: 12)"])
        let stats = m.stats, idle = m.isIdle
        #expect(stats.transactionsCommitted == 1 && stats.rowsCommitted == 2)
        #expect(stats.roundTrips == 3, "set-up, the COPY query, its data")
        #expect(idle)
    }

    @Test func aCopyWithoutItsCommitsResultFailsItsRequests() {
        var m = Self.ready()
        let told = Told()
        Self.submit(&m, event: 1, told)
        _ = m.nextTransaction(whileReading: false)
        _ = Self.answerCopy(&m, eventsBase: 0, okAfterData: 1)   // COMMIT never answered
        let rollback = Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(rollback == nil)
        #expect(told.lines == [#"event 1 failed: \#(StoreError.unavailable("the COPY transaction did not commit"))"#])
    }

    @Test func workQueuedDuringATransactionGoesInTheNextOneAndLargeBatchesOverlap() {
        var limits = GroupCommitWriter.Limits()
        limits.completeFirstUpToEvents = 1
        var m = Self.ready(limits)
        let told = Told()
        Self.submit(&m, event: 1, told)
        Self.submit(&m, event: 2, told)
        _ = m.nextTransaction(whileReading: false)
        Self.submit(&m, event: 3, told)
        Self.submit(&m, event: 4, told)
        Self.submit(&m, ack: 7, told)
        let second = m.nextTransaction(whileReading: false)
        let queued = m.queuedWork
        #expect(second == nil, "one transaction at a time")
        #expect(queued == 3)
        _ = Self.answerCopy(&m, eventsBase: 0, okAfterData: 2)
        // Two events (more than `completeFirstUpToEvents`): the next transaction goes first, and
        // these complete while PostgreSQL stores it. With an ack in it, COMMIT is not in the query.
        let next = Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(next == .copyQuery(EventCopy.startQuery(count: 2, commit: false)))
        #expect(told.lines == ["event 1: appended(seq: 1)", "event 2: appended(seq: 2)"])
        let (pending, queuedAfter, overlapped) = (m.pendingTransactions, m.queuedWork, m.stats.transactionsOverlapped)
        #expect(pending == 1 && queuedAfter == 0)
        #expect(overlapped == 1)
        // The tail: the ack and COMMIT in a pipeline segment once the COPY query ended.
        m.copyQuerySent()
        m.resultReceived(.commandOK)
        m.resultReceived(.rows(Rows(cells: [["2"]])))
        let awaited = m.awaitsCopyData
        #expect(awaited)
        guard case .sendCopyData(_, nil) = m.copyAccepted(duringCompletions: true) else { Issue.record("no COPY data"); return }
        let (awaitedAfter, sentWhileCompleting) = (m.awaitsCopyData, m.stats.copiesSentWhileCompleting)
        #expect(!awaitedAfter)
        #expect(sentWhileCompleting == 1)
        m.resultReceived(.commandOK)
        guard case .send(let tail) = m.copyQueryEnded(inFailedTransaction: false) else { Issue.record("no tail"); return }
        #expect(tail == .pipeline([.ack(consumer: "c", partition: 0, cursor: 7), .commit], commitEventRows: 2))
        #expect(told.lines.count == 2, "nothing told before COMMIT")
        m.resultReceived(.rows(Rows(cells: [["7"]]))); m.statementEnded()
        m.resultReceived(.commandOK); m.statementEnded()
        Self.complete(m.syncReceived(inFailedTransaction: false))
        #expect(told.lines[2...] == ["event 3: appended(seq: 3)", "event 4: appended(seq: 4)", "ack 7: 7"])
        let stats = m.stats
        #expect(stats.transactionsCommitted == 2 && stats.rowsCommitted == 5)
    }

    @Test func aSmallBatchCompletesBeforeTheNextTransactionIsSent() {
        var m = Self.ready()   // completes first up to 16 events
        let told = Told()
        Self.submit(&m, event: 1, told)
        _ = m.nextTransaction(whileReading: false)
        Self.submit(&m, event: 2, told)
        _ = Self.answerCopy(&m, eventsBase: 0, okAfterData: 2)
        let first = Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(first == nil)
        let (queued, pending) = (m.queuedWork, m.pendingTransactions)
        #expect(queued == 1 && pending == 0)
        let whileReading = m.nextTransaction(whileReading: true)
        #expect(whileReading == nil, "appends made while reading wait for the read to end")
        let next = m.nextTransaction(whileReading: false)
        #expect(next == .copyQuery(EventCopy.startQuery(count: 1, commit: true)))
    }

    @Test func aChainedDeliveryAppendGoesAtOnceEvenWhileReading() {
        var m = Self.ready()
        let told = Told()
        Self.submit(&m, deliveries: [1, 2], after: 40, told)
        let query = m.nextTransaction(whileReading: true)
        #expect(query == .copyQuery(DeliveryCopy.chainedQuery(after: 40, count: 2)))
        m.copyQuerySent()
        m.resultReceived(.commandOK)   // BEGIN
        m.resultReceived(.commandOK)   // the lock
        guard case .sendCopyData(let data, 0?) = m.copyAccepted() else { Issue.record("no COPY data"); return }
        #expect(data == DeliveryCopy.encode([Self.delivery(1), Self.delivery(2)], base: 40))
        for _ in 0..<3 { m.resultReceived(.commandOK) }   // COPY, the head's move, COMMIT
        Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(told.lines == ["deliveries [1, 2]: [41, 42]"])
        let stats = m.stats
        #expect(stats.deliveriesChained == 2 && stats.deliveriesCopied == 2)
    }

    @Test func aStoredKeySendsTheTransactionAgainThroughTheFunctionsUntilACleanBatch() {
        var m = Self.ready()
        let told = Told()
        Self.submit(&m, event: 1, told)
        Self.submit(&m, deliveries: [5], told)
        _ = m.nextTransaction(whileReading: false)
        m.copyQuerySent()
        m.resultReceived(.commandOK)
        m.resultReceived(.rows(Rows(cells: [["3"]])))
        m.resultReceived(.rows(Rows(cells: [["8"]])))
        _ = m.copyAccepted()
        m.copyDataSent()
        m.resultReceived(.failed(.duplicate(constraint: "events_key", message: "duplicate key")))
        guard case .send(let again) = m.copyQueryEnded(inFailedTransaction: true) else { Issue.record("not sent again"); return }
        #expect(again == .pipeline([.rollback, .begin, .appendEvents([Self.event(1)]), .appendDeliveries([Self.delivery(5)]), .commit],
                                   commitEventRows: 1))
        let route = m.eventRoute
        #expect(route == .functionUntilACleanBatch)
        for result: ServerResult in [.commandOK, .commandOK, .rows(Rows(cells: [["1", "2", "duplicate"]])),
                                     .rows(Rows(cells: [["0", "8"]])), .commandOK] {
            m.resultReceived(result); m.statementEnded()
        }
        Self.complete(m.syncReceived(inFailedTransaction: false))
        #expect(told.lines == ["event 1: duplicate(seq: 2)", "deliveries [5]: [9]"])
        let copied = m.stats.deliveriesCopied
        #expect(copied == 0)
        // The next batch of events goes through the function; a whole-batch answer brings COPY back.
        Self.submit(&m, event: 2, told)
        let byFunction = m.nextTransaction(whileReading: false)
        #expect(byFunction == .pipeline([.begin, .appendEvents([Self.event(2)]), .commit], commitEventRows: 1))
        for result: ServerResult in [.commandOK, .rows(Rows(cells: [["0", "4"]])), .commandOK] { m.resultReceived(result); m.statementEnded() }
        Self.complete(m.syncReceived(inFailedTransaction: false))
        #expect(told.lines.last == "event 2: appended(seq: 5)")
        let routeAfter = m.eventRoute
        #expect(routeAfter == .copy)
    }

    @Test func aFailedTransactionIsRolledBackAndTheDeliveriesQueuedBehindItFail() {
        var m = Self.ready()
        let told = Told()
        Self.submit(&m, ack: 3, told)
        let acks = m.nextTransaction(whileReading: false)
        #expect(acks == .pipeline([.begin, .ack(consumer: "c", partition: 0, cursor: 3), .commit], commitEventRows: 0))
        Self.submit(&m, deliveries: [1], told)
        Self.submit(&m, event: 9, told)
        Self.submit(&m, deliveries: [2], told)
        let error = StoreError.rejected(sqlstate: "XX000", message: "boom", detail: nil, hint: nil)
        for result: ServerResult in [.commandOK, .failed(error), .aborted] { m.resultReceived(result); m.statementEnded() }
        guard case .complete(let ackFailed, let rollback) = m.syncReceived(inFailedTransaction: true) else {
            Issue.record("expected completions"); return
        }
        #expect(rollback == .pipeline([.rollback], commitEventRows: nil), "a ROLLBACK goes first")
        ackFailed.run {}
        #expect(told.lines == ["ack 3 failed: \(error)"])
        #expect(ackFailed.failedDeliveries == nil, "no deliveries in it: the queued ones stay")
        let (queued, pending) = (m.queuedWork, m.pendingTransactions)
        #expect(queued == 3)
        #expect(pending == 1, "the ROLLBACK")
        m.resultReceived(.commandOK); m.statementEnded()
        guard case .none = m.syncReceived(inFailedTransaction: false) else { Issue.record("the ROLLBACK failed"); return }
        // Now a transaction with deliveries fails: those queued behind it fail too, events stay.
        _ = m.nextTransaction(whileReading: false)
        Self.submit(&m, deliveries: [3], told)
        Self.submit(&m, event: 10, told)
        m.copyQuerySent()
        m.resultReceived(.commandOK)
        m.resultReceived(.failed(error))
        guard case .complete(let completions, let secondRollback) = m.copyQueryEnded(inFailedTransaction: true) else {
            Issue.record("expected completions"); return
        }
        #expect(secondRollback == .pipeline([.rollback], commitEventRows: nil))
        completions.run {}
        #expect(completions.failedDeliveries == error)
        for failed in m.deliveriesFailed() { failed(.failure(error)) }
        #expect(told.lines[1...] == ["event 9 failed: \(error)", "deliveries [1] failed: \(error)", "deliveries [2] failed: \(error)",
                                     "deliveries [3] failed: \(error)"])
        let left = m.queuedWork
        #expect(left == 1, "event 10 stays")
    }

    @Test func aBrokenConnectionFailsTheTransactionInFlightThenTheQueueInOrder() {
        var m = Self.ready()
        let told = Told()
        Self.submit(&m, event: 1, told)
        _ = m.nextTransaction(whileReading: false)
        Self.submit(&m, ack: 2, told)
        Self.submit(&m, deliveries: [3], told)
        let error = StoreError.unavailable("server closed the connection unexpectedly")
        guard let failure = m.connectionFailed(error) else { Issue.record("no failure"); return }
        Completions(requests: failure.inFlight!, outcome: .failed(error)).run {}
        for work in failure.queued { work.fail(error) }
        #expect(told.lines == ["event 1 failed: \(error)", "ack 2 failed: \(error)", "deliveries [3] failed: \(error)"])
        let (broken, failed, idle) = (m.isBroken, m.failure, m.isIdle)
        #expect(broken && failed == error && idle)
        let brokenOnce = m.connectionFailed(.unavailable("again")) == nil
        #expect(brokenOnce, "broken once")
        let next = m.nextTransaction(whileReading: false)
        #expect(next == nil)
    }

    @Test func aLargeDeliveryAppendIsSplitIntoTransactionsOfTheLimit() {
        var limits = GroupCommitWriter.Limits()
        limits.maxRowsPerTransaction = 2
        var m = Self.ready(limits)
        let told = Told()
        Self.submit(&m, deliveries: [1, 2, 3], told)
        let parts = m.queuedWork
        #expect(parts == 2)
        let first = m.nextTransaction(whileReading: false)
        #expect(first == .copyQuery(EventCopy.startQuery(count: 0, deliveries: 2, commit: true)))
        _ = Self.answerCopy(&m, eventsBase: nil, deliveriesBase: 0, okAfterData: 2)
        // Deliveries alone overlap (their completions decide nothing): the second part goes first.
        let next = Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(next == .copyQuery(EventCopy.startQuery(count: 0, deliveries: 1, commit: true)))
        #expect(told.lines.isEmpty, "told once, with every part")
        _ = Self.answerCopy(&m, eventsBase: nil, deliveriesBase: 2, okAfterData: 2)
        Self.complete(m.copyQueryEnded(inFailedTransaction: false))
        #expect(told.lines == ["deliveries [1, 2, 3]: [1, 2, 3]"])
    }

    @Test func committedCopyCompletionsLookAtTheSocketEveryRunOfRequests() {
        var m = Self.ready()
        let told = Told()
        for i in 1...70 { Self.submit(&m, event: i, told) }
        _ = m.nextTransaction(whileReading: false)
        _ = Self.answerCopy(&m, eventsBase: 0, okAfterData: 2)
        var polls = 0
        Self.complete(m.copyQueryEnded(inFailedTransaction: false), polls: &polls)
        #expect(told.lines.count == 70)
        #expect(polls == 2, "after the 32nd and the 64th")
    }
}
