// When the writer's transactions in flight sent their COMMIT: the commit time and batch size each committed one reports.
import DequeModule
import Glibc

/// The send times of COMMITs in flight, oldest first: transactions complete in the order they
/// were sent, so each outcome read takes the oldest.
struct CommitTimes {
    private var sentAt: Deque<Int64> = []

    static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// A transaction's COMMIT was just sent.
    mutating func sent() { sentAt.append(Self.nanoseconds()) }

    /// A transaction's outcome was read: a committed one is reported with its rows and commit time.
    mutating func completed(_ completions: Completions, _ report: (Int, Int, Int64) -> Void) {
        guard let since = sentAt.popFirst() else { return }
        guard case .committed(_, _, let acks) = completions.outcome else { return }
        let r = completions.requests
        report(r.eventRowCount, r.eventRowCount + r.deliveryRowCount + acks.count, Self.nanoseconds() - since)
    }
}
