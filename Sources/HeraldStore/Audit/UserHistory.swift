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
        // A log whose start `herald retain` dropped is folded from the snapshot restart uses.
        if let start = try retainedStart(connection, partition: partition, user: user, keys: keys) {
            switch limit {
            case .seq(let s) where s < start.throughSeq:
                throw .configuration("seq \(s) is before the retention horizon's snapshot (through seq \(start.throughSeq)): the events before it are archived; "
                    + "export the whole log with herald export --archive and import it into a fresh database to look further back")
            case .time(let t) where t < start.capturedAt:
                throw .configuration("\(t.rfc3339) is before the retention horizon's snapshot (\(start.capturedAt.rfc3339)): the events before it are archived; "
                    + "export the whole log with herald export --archive and import it into a fresh database to look further back")
            default: break
            }
            state = start.state
            apps = start.apps
            after = start.throughSeq
            last = start.capturedAt
        }
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
                if let u = e.row.user, u == user, e.seq <= state.lastSeq { continue }  // in the snapshot's state already
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

    /// On a log `herald retain` dropped the start of: the user's state in the latest snapshot (with
    /// the content it refers to), the app registry and the instant it was captured at. Nil when
    /// nothing was dropped.
    static func retainedStart(_ connection: PGConnection, partition: Int, user: String, keys: KeyRing)
        throws(StoreError) -> (state: UserState, apps: AppRegistry, throughSeq: Int64, capturedAt: Instant)? {
        let horizon = try connection.execute("SELECT seq FROM retention_horizons WHERE partition = $1", [String(partition)]).int64(0, 0) ?? 0
        guard horizon > 0 else { return nil }
        guard let latest = try SnapshotStore.latest(connection, partition: partition) else {
            throw .configuration("the log's start was dropped by herald retain but no complete snapshot is stored")
        }
        do {
            let header = try latest.decodedHeader()
            var found: UserState?
            try RetainedSnapshot.forEachState(connection, id: latest.id) { state in
                if state.user == user { found = state }
                return found == nil
            }
            var state = found ?? UserState(user: user)
            var seqs: [Int64] = []
            state.forEachContentNeededAfterSnapshot(keepUntil: .latestRepresentable) { seqs.append($0) }
            try SnapshotStore.readBodies(connection, partition: partition, seqs: seqs, keys: keys) { seq, body in
                state.supplySnapshotContent(SubmittedNotification(canonicalBody: body), seq: seq)
            }
            return (state, header.apps, latest.throughSeq, header.capturedAt)
        } catch let error as StoreError {
            throw error
        } catch {
            throw .configuration("the snapshot \(latest.id) the retained log starts from cannot be read: \(error)")
        }
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

    /// The users with any event, sorted (on a retained log, also those whose events are all archived).
    public static func users(_ connection: PGConnection) throws(StoreError) -> [String] {
        let r = try connection.execute("SELECT DISTINCT user_id FROM events WHERE user_id IS NOT NULL ORDER BY 1")
        let hot = (0..<r.rowCount).compactMap { r.string($0, 0) }
        let retained = try RetainedSnapshot.users(connection)
        return retained.isEmpty ? hot : Set(hot).union(retained).sorted()
    }
}
