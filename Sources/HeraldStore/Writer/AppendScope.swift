// Which partition a writer appends to, and the epoch that fences it.

/// A writer appends to one partition, as the holder of one epoch of its lease: every claim of
/// positions checks the epoch in the same transaction (`herald_claim_events`), so a writer whose
/// instance lost the partition can never store or acknowledge anything (SQLSTATE HE002,
/// `StoreError.fenced`).
public struct AppendScope: Sendable, Equatable {
    public var partition: Int32
    /// nil: an unfenced writer (tools and tests on a database nobody serves).
    public var epoch: Int64?

    public init(partition: Int32, epoch: Int64?) {
        self.partition = partition
        self.epoch = epoch
    }

    /// Partition 0, unfenced.
    public static let unfenced = AppendScope(partition: 0, epoch: nil)

    /// `partition, epoch` as SQL literals (both integers Herald formats).
    var sqlArguments: String { "\(partition), \(epoch.map(String.init) ?? "NULL")" }

    /// The text parameters that lead the append functions' and the ack's arguments.
    var parameters: [String?] { [String(partition), epoch.map(String.init)] }
}
