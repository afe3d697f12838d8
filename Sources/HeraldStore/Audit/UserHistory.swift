// Point-in-time folds of one user's history: what `herald state`, `explain` and `pending` show.
import HeraldCore

/// Folds the events of one user (and the global registerApp events) up to a limit.
public enum UserHistory {
    /// The user's state after every event up to `limit`, with timers fired up to the limit's instant.
    /// `deliveries` collects what the fold decided along the way.
    public static func fold(_ connection: PGConnection, user: String, limit: Replayer.Limit,
                            engine: Engine = Engine()) throws(StoreError) -> (state: UserState, apps: AppRegistry, at: Instant?, deliveries: [Delivery]) {
        var state = UserState(user: user)
        var apps = AppRegistry()
        var last: Instant?
        var deliveries: [Delivery] = []
        var after: Int64 = 0
        scan: while true {
            let r = try connection.execute("""
                SELECT seq, user_id, type, body, (extract(epoch FROM engine_time) * 1000)::bigint
                FROM events WHERE seq > $1 AND (user_id = $2 OR user_id IS NULL) ORDER BY seq LIMIT 10000
                """, [String(after), user])
            if r.rowCount == 0 { break }
            for i in 0..<r.rowCount {
                let seq = r.int64(i, 0) ?? 0
                let at = Instant(millisecondsSinceEpoch: r.int64(i, 4) ?? 0)
                if case .seq(let s) = limit, seq > s { break scan }
                if case .time(let t) = limit, at > t { break scan }
                after = seq
                last = max(last ?? at, at)
                let type = r.string(i, 2) ?? ""
                if type == "clock" { continue }  // moves time only
                let body = (try? JSONValue.parse(r.string(i, 3) ?? "{}")) ?? .object([:])
                let outcome = engine.apply(StoredEvent(seq: seq, user: r.string(i, 1), type: type, body: body, at: at),
                                           to: &state, apps: &apps)
                deliveries += outcome.deliveries
            }
        }
        // Timers fire up to the limit's instant, or up to the latest engine time the log reached
        // (a manual-clock move included), as the live service had.
        if case .time(let t) = limit { last = t }
        if let horizon = last {
            deliveries += engine.advance(&state, to: horizon, apps: apps).deliveries
        }
        return (state, apps, last, deliveries)
    }

    /// The users with any event, sorted.
    public static func users(_ connection: PGConnection) throws(StoreError) -> [String] {
        let r = try connection.execute("SELECT DISTINCT user_id FROM events WHERE user_id IS NOT NULL ORDER BY 1")
        return (0..<r.rowCount).compactMap { r.string($0, 0) }
    }
}
