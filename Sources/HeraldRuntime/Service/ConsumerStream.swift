// One subscribed consumer on one connection: its position, and its catch-up read from PostgreSQL.
import HeraldCore
import HeraldStore

/// One subscribed consumer on one connection.
final class ConsumerStream {
    let name: String
    /// Nil once the connection is gone (`Unretained`: a `weak` one gave every connection a side table).
    var connection: ClientConnection? {
        get { connectionRef?.object }
        set { connectionRef = newValue?.unretained }
    }
    private var connectionRef: Unretained<ClientConnection>?
    /// The last cursor sent on this connection.
    var position: Int64
    /// A catch-up read from PostgreSQL is in flight.
    var reading = false
    /// Set once the subscribe reply has gone out: no delivery line goes before it.
    var started = false
    /// The last page read from PostgreSQL and its first row not yet sent: sent a batch at a time as
    /// the consumer drains, instead of being read again (memory: the consumer buffer plus this page).
    var page: PGResult?
    var pageNext = 0
    /// Pumps again after a catch-up read failed (PostgreSQL away); armed by `retryCatchUp`.
    var retry: LoopEvent?
    /// Catch-up reads failed in a row (logged at the first; reset by one that works).
    var failedReads = 0

    /// The deliveries it is sent (nil: all). Lines left out still advance its cursor: see `lastSent`.
    let filter: ConsumerFilter?
    /// Reads without a durable cursor (`subscribe` with `ephemeral`): no ack moves anything for it.
    let ephemeral: Bool
    /// The cursor of the last line actually sent (a filter leaves lines out: `position` runs ahead).
    var lastSent: Int64
    /// The highest cursor the consumer acknowledged since it subscribed (its start before any).
    var clientAcked: Int64
    /// The durable cursor as this stream last stored or read it.
    var durableAcked: Int64
    /// An ack of skipped lines (`HeraldService.advanceOverSkipped`) is being stored.
    var advancing = false

    init(name: String, connection: ClientConnection, position: Int64, filter: ConsumerFilter? = nil,
         ephemeral: Bool = false, durableAcked: Int64? = nil) {
        self.name = name; self.connectionRef = connection.unretained; self.position = position
        self.filter = filter; self.ephemeral = ephemeral
        lastSent = position; clientAcked = position; self.durableAcked = durableAcked ?? position
    }

    /// A filtered stream whose every sent line is acknowledged, with lines left out after them
    /// that the durable cursor has not passed: storing `position` then loses nothing.
    var mayAdvanceOverSkipped: Bool {
        filter != nil && !ephemeral && clientAcked >= lastSent && position > durableAcked
    }
}
