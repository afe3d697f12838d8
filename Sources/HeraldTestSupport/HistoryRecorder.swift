// Records an experiment's history from many threads, then reads what PostgreSQL holds, for the checker.
import HeraldCore
import HeraldStore
import Synchronization

/// The thread-safe side of `HistoryChecker`: producers and consumers call it as things happen;
/// `history(from:)` adds the stored rows and returns the checker ready to `check()`.
public final class HistoryRecorder: Sendable {
    private let state = Mutex(HistoryChecker())
    /// The last acknowledged (confirmed) cursor of each consumer, and its connection count.
    private let consumerState = Mutex<[String: (acked: Int64, sent: Int64, sessions: Int)]>([:])

    public init(consumers: [String] = []) {
        state.withLock { $0.consumers = consumers }
    }

    public func sent(_ key: HistoryChecker.Key, payload: String, deliverAt: Instant? = nil) {
        state.withLock { $0.sent.append(.init(key: key, payload: payload, deliverAt: deliverAt)) }
    }

    public func acked(_ key: HistoryChecker.Key, seq: Int64, duplicate: Bool) {
        state.withLock { $0.acks.append(.init(key: key, seq: seq, duplicate: duplicate)) }
    }

    /// A consumer connected and subscribed: returns its connection number for `received`.
    public func consumerSubscribed(_ consumer: String) -> Int {
        let (session, acked, sent) = consumerState.withLock { s -> (Int, Int64, Int64) in
            var c = s[consumer] ?? (0, 0, 0)
            c.sessions += 1
            s[consumer] = c
            return (c.sessions, c.acked, c.sent)
        }
        state.withLock { $0.sessions.append(.init(consumer: consumer, session: session, ackedBefore: acked, ackSentBefore: sent)) }
        return session
    }

    /// The last cursor the consumer had confirmed by the server (0 before any).
    public func consumerConfirmed(_ consumer: String) -> Int64 { consumerState.withLock { $0[consumer]?.acked ?? 0 } }

    /// The consumer sent an ack of `cursor` (it may commit even if the reply never comes).
    public func consumerSentAck(_ consumer: String, cursor: Int64) {
        consumerState.withLock { s in s[consumer, default: (0, 0, 0)].sent = max(s[consumer]?.sent ?? 0, cursor) }
    }

    /// The server confirmed the consumer's ack of `cursor`.
    public func consumerAcked(_ consumer: String, cursor: Int64) {
        consumerState.withLock { s in s[consumer, default: (0, 0, 0)].acked = max(s[consumer]?.acked ?? 0, cursor) }
    }

    public func received(_ consumer: String, session: Int, cursor: Int64, user: String, notification: String?, causeSeq: Int64) {
        state.withLock { $0.received.append(.init(consumer: consumer, session: session, cursor: cursor, user: user,
                                                  notification: notification, causeSeq: causeSeq)) }
    }

    /// Counts so far (for progress and for choosing kill moments).
    public var ackedCount: Int { state.withLock { $0.acks.count } }

    /// The recorded history plus the submit events and deliveries PostgreSQL holds at `url`.
    public func history(from url: String, payloadField: String = "body") throws -> HistoryChecker {
        var checker = state.withLock { $0 }
        let conn = try PGConnection.connect(url)
        defer { conn.close() }
        checker.storedEvents = try Self.storedSubmits(conn, payloadField: payloadField)
        checker.storedDeliveries = try Self.storedDeliveries(conn)
        return checker
    }

    /// Every submit row: seq, key and the payload field of its body (opened with the content keys).
    public static func storedSubmits(_ conn: PGConnection, payloadField: String = "body") throws -> [HistoryChecker.StoredEvent] {
        let keys = try KeyRing.load(conn)
        let r = try conn.execute("""
            SELECT seq, app, notification_id, user_id, body FROM events
            WHERE type = 'submit' AND notification_id IS NOT NULL ORDER BY seq
            """)
        return (0..<r.rowCount).map { i in
            let body = keys.readable(r.bytes(i, 4) ?? [], user: r.string(i, 3))
            let payload = (try? JSONValue.parse(body))?[payloadField]
            return HistoryChecker.StoredEvent(seq: r.int64(i, 0) ?? 0,
                                              key: .init(app: r.string(i, 1) ?? "", id: r.string(i, 2) ?? "", user: r.string(i, 3) ?? ""),
                                              payload: payload?.stringValue ?? payload?.canonicalString ?? "")
        }
    }

    /// Every delivery row, in cursor order.
    public static func storedDeliveries(_ conn: PGConnection) throws -> [HistoryChecker.StoredDelivery] {
        let r = try conn.execute("""
            SELECT cursor, user_id, user_index, cause_seq, kind, app, notification_id,
                   (extract(epoch FROM at) * 1000)::bigint FROM deliveries ORDER BY cursor
            """)
        return (0..<r.rowCount).map { i in
            HistoryChecker.StoredDelivery(cursor: r.int64(i, 0) ?? 0, user: r.string(i, 1) ?? "", userIndex: r.int64(i, 2) ?? 0,
                                          causeSeq: r.int64(i, 3) ?? 0, kind: r.string(i, 4) ?? "",
                                          app: r.string(i, 5), notification: r.string(i, 6),
                                          at: Instant(millisecondsSinceEpoch: r.int64(i, 7) ?? 0))
        }
    }
}
