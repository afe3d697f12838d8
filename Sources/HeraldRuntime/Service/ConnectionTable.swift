// The client connections: the open ones by id, the limit, who gives up a slot before hello, the closed ones until freed.
import DequeModule
import HeraldCore

/// The service's client connections. It decides and counts; the service does the I/O (closing,
/// evicting), whose callbacks come back here (`closed`) as separate calls.
struct ConnectionTable {
    /// The open connections (closing ones included, until they are closed), by id.
    private(set) var open: [UInt64: ClientConnection] = [:]
    /// Connections closed and not yet freed: freed one loop turn later (`freeClosed`), since
    /// libevent may still be inside one of their callbacks.
    private var closedNotFreed: [ClientConnection] = []
    private var nextId: UInt64 = 1
    /// `--max-connections`, or fewer when the open-file limit allows fewer (`FileLimit`).
    var limit = 0
    /// Ids of connections accepted and maybe still without hello, oldest first (some said hello or
    /// closed since: skipped when met): the candidates for eviction at the limit.
    private var notHelloYet: Deque<UInt64> = []
    /// Connections closed before hello to make room at the limit (`stats`).
    private(set) var evictedBeforeHello = 0
    /// `ClientSession.refusedHellos` of the connections closed so far.
    private var hellosRefusedOnClosed = 0

    /// How many connections are open.
    var count: Int { open.count }
    /// At the limit: a new connection gets `busy`, unless one without hello gives its slot up.
    var isFull: Bool { open.count >= limit }

    /// Hellos refused on every connection so far, open or closed (`stats`: `hellosRefused`).
    var hellosRefused: Int { hellosRefusedOnClosed + open.values.reduce(0) { $0 + $1.session.refusedHellos } }

    /// The id for the next connection accepted.
    mutating func takeId() -> UInt64 {
        defer { nextId += 1 }
        return nextId
    }

    /// A connection was accepted (and has no hello yet).
    mutating func accepted(_ connection: ClientConnection) {
        open[connection.id] = connection
        notHelloYet.append(connection.id)
        // Kept within twice the open connections: ids of connections that said hello or closed
        // are dropped from the front as eviction meets them, and all at once here.
        if notHelloYet.count > 2 * open.count + 64 {
            notHelloYet = Deque(notHelloYet.filter { open[$0].map(Self.isWithoutHello) ?? false })
        }
    }

    /// At the limit, the oldest open connection without hello accepted at least `helloGrace`
    /// milliseconds before `now` (monotonic): the service evicts it (`evicted`), then asks again —
    /// as many as it takes, since a closing connection keeps its slot while it lingers. Nil when
    /// not at the limit, or when the oldest without hello is too young (so are the rest,
    /// accepted later).
    mutating func nextToEvict(now: Int64, helloGrace: Int64) -> ClientConnection? {
        while isFull, let id = notHelloYet.first {
            guard let c = open[id], Self.isWithoutHello(c) else { notHelloYet.removeFirst(); continue }
            guard now - c.acceptedAt >= helloGrace else { return nil }
            notHelloYet.removeFirst()
            return c
        }
        return nil
    }

    /// A connection returned by `nextToEvict` was evicted.
    mutating func evicted() { evictedBeforeHello += 1 }

    /// The connection is closed: it leaves the table and is freed at the next `freeClosed`.
    mutating func closed(_ connection: ClientConnection) {
        guard let c = open.removeValue(forKey: connection.id) else { return }
        hellosRefusedOnClosed += c.session.refusedHellos
        closedNotFreed.append(c)
    }

    /// Frees the connections closed before this loop turn.
    mutating func freeClosed() { closedNotFreed.removeAll() }

    /// The tokens file was read again (SIGHUP): each open connection is judged by `table`, and one
    /// whose grant it no longer gives is told `grant_revoked` and closed. Returns how many lost it.
    func tokensReloaded(_ table: TokenTable) -> Int {
        var revoked = 0
        for connection in open.values where !connection.isClosing {
            let had = connection.session.grant != nil
            connection.tokensReloaded(table)
            if had && connection.session.grant == nil { revoked += 1 }
        }
        return revoked
    }

    private static func isWithoutHello(_ c: ClientConnection) -> Bool { !c.isClosing && c.session.grant == nil }
}
