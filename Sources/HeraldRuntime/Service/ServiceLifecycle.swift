// Where the service is in its life (serving, draining on SIGTERM, stopped), and the steps of a graceful stop.

/// The service's phase, as a state machine: facts in (`shutdownRequested`, `drainChecked`,
/// `finalSnapshotStepped`), the next step of a graceful stop out (`ShutdownStep`), performed by
/// `HeraldService.shutdownStep`.
///
/// A stop drains in order: every connection is told `goodbye` and read no more, and closes
/// once the requests it had read are answered; the in-flight commits are answered and decided
/// deliveries committed (`finishingCommits`); then every connection still open is closed and
/// given a bounded time to send its last replies (`closingConnections`); then the final
/// snapshot is written; then the loop stops.
enum ServiceLifecycle: Equatable {
    /// Accepting connections and requests.
    case serving
    /// SIGTERM: no new connections, goodbye said, nothing more read; waiting for in-flight
    /// commits and deliveries.
    case finishingCommits
    /// Connections closed at `since` (monotonic milliseconds): their last replies are on their way.
    case closingConnections(since: Int64)
    /// The loop is stopping (or stopped).
    case stopped

    /// What `HeraldService.shutdownStep` does next.
    enum ShutdownStep: Equatable {
        /// Look again after this many milliseconds.
        case checkAgain(afterMilliseconds: Int64)
        /// Close every connection (each sends what it owes, then lingers), then look again at once.
        case closeConnections
        /// Write a slice of the final snapshot: check again after `snapshotSliceMilliseconds` while
        /// it has more to do (`finalSnapshotStepped`), else stop.
        case writeFinalSnapshot
        /// Stop the snapshots and the loop.
        case stop
    }

    /// How long a stop waits for closed connections to deliver their last replies (a client that
    /// does not read them is let go then).
    static let drainMilliseconds: Int64 = 10_000
    /// How often a stop looks again while commits finish or connections drain.
    static let checkMilliseconds: Int64 = 10
    /// How soon the next slice of the final snapshot is written.
    static let snapshotSliceMilliseconds: Int64 = 5

    /// Whether new connections are accepted (and periodic snapshots begun).
    var isServing: Bool { self == .serving }

    /// SIGTERM (or `requestShutdown`): true the first time, when the stop begins; false after.
    mutating func shutdownRequested() -> Bool {
        guard self == .serving else { return false }
        self = .finishingCommits
        return true
    }

    /// One look at the drain. `idle`: no commit in flight, no delivery decided and not committed,
    /// no timer due or fold waiting that could still be decided. `writersReady`: every writer's
    /// connection is up — without PostgreSQL nothing more will commit, so waiting is pointless
    /// (everything acknowledged is in the log; the next start re-derives the rest). `storeReady`:
    /// the events' writer is up (the final snapshot is written through it). `openConnections`:
    /// connections not yet gone. `now`: monotonic milliseconds.
    mutating func drainChecked(idle: Bool, writersReady: Bool, storeReady: Bool, openConnections: Int, now: Int64) -> ShutdownStep? {
        switch self {
        case .serving, .stopped:
            return nil
        case .finishingCommits:
            if !idle && writersReady { return .checkAgain(afterMilliseconds: Self.checkMilliseconds) }
            // The caller closes every connection and looks again at once (`closingConnections`).
            self = .closingConnections(since: now)
            return .closeConnections
        case .closingConnections(let since):
            if !idle && writersReady { return .checkAgain(afterMilliseconds: Self.checkMilliseconds) }
            // The replies written must reach their clients: wait, within `drainMilliseconds`, until
            // every connection has sent its output and lingered (a process exiting with a client's
            // input unread makes the kernel reset the connection, destroying acks on their way).
            if openConnections > 0 && now - since < Self.drainMilliseconds {
                return .checkAgain(afterMilliseconds: Self.checkMilliseconds)
            }
            if storeReady { return .writeFinalSnapshot }
            self = .stopped
            return .stop
        }
    }

    /// A slice of the final snapshot was written; `moreToDo`: it is not finished.
    mutating func finalSnapshotStepped(moreToDo: Bool) -> ShutdownStep {
        if moreToDo { return .checkAgain(afterMilliseconds: Self.snapshotSliceMilliseconds) }
        self = .stopped
        return .stop
    }
}
