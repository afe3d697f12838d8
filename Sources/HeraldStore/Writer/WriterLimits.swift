// The group-commit writer's limits: how large a transaction grows, and when a small one completes before the next is sent.
extension GroupCommitWriter {
    /// Limits of one transaction. Transactions go one at a time: a COPY needs the connection out
    /// of pipeline mode, which libpq allows only when nothing is in flight.
    public struct Limits: Sendable {
        /// Requests join a transaction until it has this many rows (a single larger request goes alone).
        public var maxRowsPerTransaction: Int = 10_000
        /// A committed COPY transaction of 1 to this many events runs its completions *before*
        /// the next transaction is sent, so that what they queue (the deliveries decided from its
        /// events, through `afterCompletions`) rides in that next transaction instead of the one
        /// after it. Larger ones send the next transaction first and complete while PostgreSQL
        /// stores it (the two sides would otherwise take turns). Under light and moderate load
        /// transactions are small, and the delivery line then waits one commit less;
        /// 0: always send first.
        public var completeFirstUpToEvents: Int = 16
        public init() {}
    }
}
