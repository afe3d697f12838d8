// What the group-commit state machine is told of PostgreSQL's answers, and what it asks to be sent.

/// The rows of a result, read as text (`PGResult` in the writer; plain arrays in tests).
protocol ResultRows {
    var rowCount: Int { get }
    func int64(_ row: Int, _ column: Int) -> Int64?
    func string(_ row: Int, _ column: Int) -> String?
}

/// One statement's result, as the machine needs it (a pipeline Sync and a COPY's start are inputs of their own).
enum ServerResult {
    /// The statement succeeded without rows (BEGIN, COMMIT, SET, PREPARE, a COPY's end).
    case commandOK
    /// The statement returned rows.
    case rows(any ResultRows)
    /// The statement failed.
    case failed(StoreError)
    /// Skipped: an earlier statement of the pipeline segment failed.
    case aborted
    /// Anything else (not sent by the writer).
    case other
}

/// A statement of a pipeline segment; the writer sends them in order, then a Sync.
enum PipelineStatement: Equatable {
    /// `StoreSQL.writerSessionSetup`.
    case sessionSetup
    /// Prepares `StoreSQL.appendEvents`.
    case prepareAppendEvents
    /// Prepares `StoreSQL.appendDeliveries`.
    case prepareAppendDeliveries
    case rollback
    case begin
    /// The prepared `herald_append_events` call for these rows.
    case appendEvents([EventRow])
    /// The prepared `herald_append_deliveries` call for these rows.
    case appendDeliveries([DeliveryRow])
    /// `StoreSQL.ackConsumer`.
    case ack(consumer: String, partition: Int32, cursor: Int64)
    case commit
}

/// What to send to start (or continue) a transaction.
enum WriterSend: Equatable {
    /// The statements in pipeline mode, then a Sync. `commitEventRows`: the segment ends with
    /// COMMIT, for a transaction with that many event rows (nil: set-up or a lone ROLLBACK).
    case pipeline([PipelineStatement], commitEventRows: Int?)
    /// Leave pipeline mode and send this simple query, which starts one or two COPYs; then
    /// tell the machine `copyQuerySent()`.
    case copyQuery(String)
}

/// What the writer does after an input.
enum WriterAction {
    case none
    case send(WriterSend)
    /// The COPY that started gets its whole data, then its end; then tell the machine
    /// `copyDataSent()`. `commitEventRows`: COMMIT follows this data in the query (for a
    /// transaction with that many event rows).
    case sendCopyData(CopyData, commitEventRows: Int?)
    /// End the COPY that started with this error: the server rolls the transaction back.
    case abortCopy(reason: String)
    /// A transaction finished: send `first` (the next transaction, or a ROLLBACK), then run the completions.
    case complete(Completions, sendingFirst: WriterSend?)
    /// The connection cannot be used (its set-up or a ROLLBACK failed): treat it as broken (`connectionFailed`).
    case connectionUnusable(StoreError)
}

/// What a broken connection fails: the transaction in flight, then the queued requests in order.
struct WriterFailure {
    var error: StoreError
    var inFlight: TransactionRequests?
    var queued: [WriterWork]
}
