// Point-in-time folds of one user's history: what `herald state`, `explain` and `pending` show.
import HeraldCore

/// Folds the events of one user (and the global registerApp events) up to a limit.
public enum UserHistory {
    /// The user's state after every event up to `limit`, with timers fired up to the limit's instant.
    /// `deliveries` collects what the fold decided along the way. `rulesVersion`: decide by that
    /// version instead of those `rules_versions` records.
    public static func fold(_ connection: PGConnection, user: String, limit: Replayer.Limit,
                            rulesVersion: String? = nil) throws(StoreError) -> (state: UserState, apps: AppRegistry, at: Instant?, deliveries: [Delivery]) {
        // The user's events are in its partition's log (SPEC §9), which decides it alone.
        let partition = try EventReader.partitioning(connection).partition(of: user)
        // By the rules versions the log records (or the one asked for), as replay decides.
        let engine = try Engine(rules: RulesVersionStore.deciding(connection, partition: partition, only: rulesVersion))
        var state = UserState(user: user)
        var apps = AppRegistry()
        var last: Instant?
        var deliveries: [Delivery] = []
        var after: Int64 = 0
        // Sealed content opened with the user's keys (the erased form where they are gone).
        let keys = try KeyRing.load(connection, user: user)
        scan: while true {
            let page = try EventReader.events(connection, partition: partition, user: user, after: after)
            if page.isEmpty { break }
            for var e in page {
                e.row.bodyBytes = keys.readable(e.row.bodyBytes, user: e.row.user)
                let at = e.row.engineTime
                if case .seq(let s) = limit, e.seq > s { break scan }
                if case .time(let t) = limit, at > t { break scan }
                after = e.seq
                last = max(last ?? at, at)
                if e.row.type == "clock" { continue }  // moves time only
                let event = e.storedEvent
                try EventContent.supply(toApply: event, to: &state, keys: keys) { () throws(StoreError) -> PGConnection in connection }
                deliveries += engine.apply(event, to: &state, apps: &apps).deliveries
            }
        }
        // Timers fire up to the instant the limit ends at, as the live service had fired them:
        // - a time: that instant;
        // - seq s: the log as it stood before event s + 1 (whoever's it was) was folded — timers
        //   due by its instant had fired, as `herald replay --until s` compares;
        // - the whole log (or s at the head): the latest instant the log shows the service
        //   reached (`latestInstant`). Under the system clock no event records time passing, so a
        //   deferred decision fired after the user's last event is known only by its delivery.
        let reached: Instant?
        switch limit {
        case .time(let t): reached = t
        case .seq(let s):
            // (Not `??`: its autoclosure would throw an untyped error.)
            if let next = try LogStream.engineTime(ofSeq: s + 1, partition: partition, connection) { reached = next } else { reached = try latestInstant(connection, partition: partition, user: user) }
        case .everything: reached = try latestInstant(connection, partition: partition, user: user)
        }
        if let reached { last = max(last ?? reached, reached) }
        if let horizon = last {
            deliveries += engine.advance(&state, to: horizon, apps: apps).deliveries
        }
        return (state, apps, last, deliveries)
    }

    /// The latest instant the log shows the service reached, as far as `user` is concerned: the
    /// newest event's engine time (engine times never go back along the log) or the user's
    /// latest delivery (by the per-user index). Nil for an empty log.
    static func latestInstant(_ connection: PGConnection, partition: Int, user: String) throws(StoreError) -> Instant? {
        let r = try connection.execute("""
            SELECT (extract(epoch FROM greatest((SELECT engine_time FROM events WHERE partition = $2 ORDER BY seq DESC LIMIT 1),
                                                (SELECT max(at) FROM deliveries WHERE partition = $2 AND user_id = $1))) * 1000)::bigint
            """, [user, String(partition)])
        return r.int64(0, 0).map(Instant.init(millisecondsSinceEpoch:))
    }

    /// The users with any event, sorted.
    public static func users(_ connection: PGConnection) throws(StoreError) -> [String] {
        let r = try connection.execute("SELECT DISTINCT user_id FROM events WHERE user_id IS NOT NULL ORDER BY 1")
        return (0..<r.rowCount).compactMap { r.string($0, 0) }
    }
}
