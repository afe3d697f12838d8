// One subscribed consumer on one connection: its position, and its catch-up read from PostgreSQL.
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

    init(name: String, connection: ClientConnection, position: Int64) {
        self.name = name; self.connectionRef = connection.unretained; self.position = position
    }
}
