// The two shapes of a transaction on the wire: a pipeline segment and a COPY transaction's simple query, each with what its results mean.

/// A pipeline segment in flight (statements then a Sync) and the first result of each statement.
struct PipelineSegment {
    enum Purpose: Equatable {
        /// The session's settings and prepared statements (sent once, first).
        case setup
        /// A lone ROLLBACK after a failed transaction.
        case rollback
        /// A transaction with requests (or the tail of a COPY one).
        case transaction
    }

    /// What each statement is, in the order sent, so its result can be read.
    enum Statement: Equatable { case setup, rollback, begin, events, deliveries, ack(Int), commit }

    /// A statement's first result, read as it arrives.
    enum Result {
        case commandOK, other, aborted
        case failed(StoreError)
        case events(EventOutcomes)
        case deliveries(DeliveryCursors)
        case ack(Int64?)
    }

    var purpose: Purpose
    var requests = TransactionRequests()
    var statements: [Statement] = []
    var results: [Result] = []
    /// The current statement's first result arrived (later ones are ignored).
    var statementHasResult = false
    /// The events were stored by the COPY query before this tail, at base + 1 ….
    var copiedEventsAfter: Int64?
    /// The deliveries were stored by the COPY query before this tail, at base + 1 ….
    var copiedDeliveriesAfter: Int64?

    init(purpose: Purpose, requests: TransactionRequests = TransactionRequests(), statements: [Statement] = []) {
        self.purpose = purpose
        self.requests = requests
        self.statements = statements
    }

    /// A tail: a COPY query opened the transaction (BEGIN was in it).
    var continuesCopy: Bool { copiedEventsAfter != nil || copiedDeliveriesAfter != nil }

    /// The first error of the segment (a skipped statement's is not one).
    var firstError: StoreError? {
        for result in results { if case .failed(let error) = result { return error } }
        return nil
    }

    /// Every statement answered, none failed, and COMMIT succeeded.
    var committed: Bool {
        guard results.count == statements.count, firstError == nil, case .commandOK? = results.last else { return false }
        return true
    }

    /// Takes a statement's result: the first one only, read for what the statement is.
    mutating func take(_ result: ServerResult) {
        guard !statementHasResult else { return }
        statementHasResult = true
        let statement = results.count < statements.count ? statements[results.count] : nil
        switch result {
        case .commandOK: results.append(.commandOK)
        case .other: results.append(.other)
        case .aborted: results.append(.aborted)
        case .failed(let error): results.append(.failed(error))
        case .rows(let rows):
            switch statement {
            case .events?: results.append(.events(Self.eventOutcomes(rows, count: requests.eventRowCount)))
            case .deliveries?: results.append(.deliveries(Self.deliveryCursors(rows, count: requests.deliveryRowCount)))
            case .ack?: results.append(.ack(rows.int64(0, 0)))
            default: results.append(.other)
            }
        }
    }

    /// `herald_append_events`' answer: one row (ord 0, base) when the whole batch was appended
    /// at base + ord, else one row per event (ord, seq, status).
    static func eventOutcomes(_ rows: any ResultRows, count: Int) -> EventOutcomes {
        if let base = wholeBatchBase(rows) { return .stored(after: base) }
        var outcomes = [AppendOutcome?](repeating: nil, count: count)
        for r in 0..<rows.rowCount {
            guard let ord = rows.int64(r, 0), let seq = rows.int64(r, 1), ord >= 1, ord <= count else { continue }
            switch rows.string(r, 2) {
            case "duplicate": outcomes[Int(ord) - 1] = .duplicate(seq: seq)
            case "conflict": outcomes[Int(ord) - 1] = .conflict(seq: seq)
            default: outcomes[Int(ord) - 1] = .appended(seq: seq)
            }
        }
        return .each(outcomes)
    }

    /// `herald_append_deliveries`' answer: one row (ord 0, base) when the whole batch was stored
    /// at base + ord, else one row per delivery (ord, cursor; 0 for a stored one skipped).
    static func deliveryCursors(_ rows: any ResultRows, count: Int) -> DeliveryCursors {
        if let base = wholeBatchBase(rows) { return .stored(after: base) }
        var cursors = [Int64](repeating: 0, count: count)
        for r in 0..<rows.rowCount {
            guard let ord = rows.int64(r, 0), let cursor = rows.int64(r, 1), ord >= 1, ord <= count else { continue }
            cursors[Int(ord) - 1] = cursor
        }
        return .each(cursors)
    }

    /// The base position when the append functions answered with their one-row "whole batch" form (ord 0).
    static func wholeBatchBase(_ rows: any ResultRows) -> Int64? {
        guard rows.rowCount == 1, rows.int64(0, 0) == 0 else { return nil }
        return rows.int64(0, 1)
    }
}

/// A COPY transaction in flight: the simple query `BEGIN; [SELECT herald_claim_events(…);]
/// [SELECT herald_claim_deliveries(…);] [COPY events …;] [COPY deliveries …][; COMMIT]` (or a
/// chained one, `DeliveryCopy.chainedQuery`), with the rows it still needs and how far it got.
struct CopyTransaction {
    var requests: TransactionRequests
    var events: [EventRow]
    var deliveries: [DeliveryRow]
    /// COMMIT is part of the simple query (no acks follow in a pipeline segment).
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
    /// Successful results after the data: the COPYs', the head's move, then COMMIT's.
    var okAfterData = 0
    var error: StoreError?

    init(requests: TransactionRequests, events: [EventRow], deliveries: [DeliveryRow], commitsInQuery: Bool) {
        self.requests = requests
        self.events = events
        self.deliveries = deliveries
        self.commitsInQuery = commitsInQuery
    }

    var eventsByCopy: Bool { !events.isEmpty }
    var deliveriesByCopy: Bool { !deliveries.isEmpty }
    /// Successful results expected after the data when the query commits.
    var expectedOKAfterData: Int {
        (eventsByCopy ? 1 : 0) + (deliveriesByCopy ? 1 : 0) + (advancesHead ? 1 : 0) + (commitsInQuery ? 1 : 0)
    }
    /// Every claim the query makes has answered (the UPDATEs come before the COPYs).
    var claimed: Bool { (!eventsByCopy || base != nil) && (!deliveriesByCopy || deliveryBase != nil) }
    /// The COPY whose COPY_IN result arrives next: the events' first, then the deliveries'.
    var nextCopyIsEvents: Bool { eventsByCopy && !dataSent }
    /// Every COPY of the query got its data.
    var allDataSent: Bool { (!eventsByCopy || dataSent) && (!deliveriesByCopy || deliveryDataSent) }

    /// Takes one result of the query other than a COPY's start: an error, a claimed base (BEGIN,
    /// then the UPDATEs' one row each: the position, then the cursor, before the batch), or a
    /// success after the data.
    mutating func take(_ result: ServerResult) {
        if case .failed(let error) = result {
            if self.error == nil { self.error = error }
        } else if case .aborted = result {
            if self.error == nil { self.error = .unavailable("a statement of the COPY transaction was skipped") }
        } else if !dataSent && !deliveryDataSent {
            if case .rows(let rows) = result {
                if eventsByCopy && base == nil { base = rows.int64(0, 0) } else { deliveryBase = rows.int64(0, 0) }
            }
        } else {
            okAfterData += 1
        }
    }
}
