// What the group-commit writer has done so far, counted by its state machine for `stats` and benchmarks.

/// Counters of one writer (one connection); the service sums them over its writers.
public struct WriterStats: Sendable, Equatable {
    public var transactionsCommitted = 0
    /// Event, delivery and ack rows of committed transactions.
    public var rowsCommitted = 0
    /// Waits for PostgreSQL's answer (round trips): one per pipeline segment, one per COPY query
    /// and one per COPY's data, counted as they are sent, set-up and ROLLBACK segments included.
    public var roundTrips = 0
    /// Deliveries committed by COPY (the rest went through `herald_append_deliveries`).
    public var deliveriesCopied = 0
    /// COPY transactions whose completions ran while the next transaction was already being stored.
    public var transactionsOverlapped = 0
    /// COPY transactions whose first data was sent while the previous one's completions ran.
    public var copiesSentWhileCompleting = 0
    /// Deliveries committed at cursors the owner assigned (`append(deliveries:after:)`).
    public var deliveriesChained = 0
    public init() {}
}
