// Start-up: rebuild every user's state and the timing wheel from the latest snapshot plus the events after it.
import HeraldCore
import HeraldStore

extension HeraldService {
    /// Loads the latest complete snapshot (if any, and if readable), then folds the events after
    /// it (before serving: blocking reads are fine here). Without a snapshot the whole log is
    /// folded, as before. Deliveries the log implies but the deliveries table lacks — decided
    /// before a crash, not yet committed — are re-derived and queued; already stored ones are
    /// recognised by (user, user_index). Deferred content due more than a minute ahead is left in
    /// `events` (loaded when it comes due): a pending timer costs its key and deadline.
    func restore(from conn: PGConnection) throws {
        let started = now()
        let keepUntil = started.adding(.init(milliseconds: RestartState.keepContentAheadMilliseconds))
        var stored: [String: Int64] = [:]
        let r = try conn.execute("SELECT user_id, max(user_index) FROM deliveries WHERE partition = $1 GROUP BY user_id", [String(partition)])
        for i in 0..<r.rowCount { if let u = r.string(i, 0), let n = r.int64(i, 1) { stored[u] = n } }
        ring.restored(head: try EventReader.deliveryHead(conn, partition: partition))
        try loadContentKeys(conn)

        // The log's events are decided by the rules versions that decided them first (this build's
        // takes over in `takeOverRules`, once the service can serve).
        engine.book.adopt(try RulesVersionStore.deciding(conn, partition: partition))

        var through: Int64 = 0
        var fromSnapshot = false
        let t0 = ClientConnection.monotonicMilliseconds()
        /// The latest engine time the restored state has seen (a manual clock resumes there).
        var latestTime = Instant.epoch
        if configuration.restoreFromSnapshots, let latest = try SnapshotStore.latest(conn, partition: partition) {
            do {
                latestTime = try loadSnapshot(latest, conn: conn, started: started, keepUntil: keepUntil)
                through = latest.throughSeq
                fromSnapshot = true
            } catch {
                log("snapshot \(latest.id) could not be loaded (\(error)); folding the whole log instead")
                users = []
                userOrdinals.removeAll()
                apps = AppRegistry()
                timers.wheel = TimingWheel(start: started)
            }
        }

        // Without its snapshot a partition whose log start was dropped would fold from its first
        // kept event into wrong states (authorizations, settings, badges archived with it).
        if !fromSnapshot, let dropped = try conn.execute("SELECT seq FROM retention_horizons WHERE partition = $1", [String(partition)]).int64(0, 0),
           dropped > 0 {
            throw StoreError.configuration("partition \(partition)'s events up to seq \(dropped) were archived by herald retain, and no snapshot "
                + "could be loaded to start from\(configuration.restoreFromSnapshots ? "" : " (snapshots are off)"): restore a backup, or import "
                + "herald export --archive into a fresh database (docs/retention.md)")
        }

        var first = !fromSnapshot
        var contentConnection: PGConnection?
        defer { contentConnection?.close() }
        var folded = 0, skipped = 0
        // One binary COPY in seq order: the server streams while the fold runs.
        let stream = try LogStream(conn, partition: partition, after: through, deliveries: false)
        stream.keys = contentKeys.ring
        let t1 = ClientConnection.monotonicMilliseconds()
        while case .event(let e)? = try stream.next() {
            latestTime = max(latestTime, e.engineTime)
            if first {
                timers.wheel = TimingWheel(start: min(e.engineTime, started))
                first = false
            }
            if fromSnapshot, let u = e.user, let o = ordinal(of: u), e.seq <= users[o].state.lastSeq {
                // Captured after this event (a later slice of the snapshot): already in the state.
                lastFoldedSeq = max(lastFoldedSeq, e.seq)
                skipped += 1
                continue
            }
            // `conn` is streaming the log: content is read back on a second connection.
            func contentSource() throws(StoreError) -> PGConnection {
                if contentConnection == nil { contentConnection = try PGConnection.connect(configuration.databaseURL) }
                return contentConnection!
            }
            if let u = e.user, let o = ordinal(of: u), !users[o].state.contentNeeded(upTo: e.engineTime).isEmpty {
                try loadContent(due: [(o, e.engineTime)], using: contentSource())
            }
            let event = e.storedEvent
            if event.kind == .snooze, let o = event.user.flatMap(ordinal(of:)) {
                try EventContent.supply(toApply: event, to: &users[o].state, keys: contentKeys.ring, connection: contentSource)
            }
            applyCommitted(event) { d, index in
                if index > stored[d.user, default: 0] { self.deliveryAppends.queue(self.sealed(Self.row(d, index: index))) }
            }
            if let u = e.user, let o = ordinal(of: u) { users[o].state.dropDeferredContent(dueAfter: keepUntil) }
            folded += 1
        }
        if first { timers.wheel = TimingWheel(start: started) }
        lastFoldedSeq = max(lastFoldedSeq, through)
        // A manual clock resumes where the last run left it: engine time never goes back.
        // The events' latest time is known from the fold (and the snapshot's capture time): no scan of
        // `events` (a sequential scan of 11M rows takes seconds of start-up).
        if engineClock.manual != nil {
            engineClock.holdAtLeast(latestTime)
            let last = try conn.execute("SELECT (extract(epoch FROM (SELECT max(at) FROM deliveries WHERE partition = $1)) * 1000)::bigint", [String(partition)])
            if let ms = last.int64(0, 0) { engineClock.holdAtLeast(Instant(millisecondsSinceEpoch: ms)) }
        }
        latestRestoredTime = latestTime
        eventsCommitted = folded
        // The head just read is where the next append's cursors start: a burst firing first
        // thing after start-up goes to both delivery writers at once instead of claiming on one
        // (a stale head fails the first chained append with a conflict, and the next one claims).
        // Re-derived deliveries claim as before: some may be stored already.
        if deliveryStores.count > 1 && deliveryAppends.unsent.isEmpty { deliveryAppends.nextCursor = deliveryHead }
        // The next snapshot is due once as many events were folded since this one as the interval says.
        restart.eventsAtLastSnapshot = 0
        let source = fromSnapshot ? "snapshot through seq \(through) + \(folded) events after it (\(skipped) already in it)" : "\(folded) events (no snapshot)"
        let t2 = ClientConnection.monotonicMilliseconds()
        log("restored \(source), \(users.count) users, \(timers.wheel.count) timers; \(deliveryAppends.unsent.count) deliveries re-derived (snapshot \(t1 - t0) ms, events after it \(t2 - t1) ms)")
    }

    /// Records, when the log's latest rules version is not this build's (or none is recorded),
    /// that this build's decides from the next event on (`RulesVersionStore.takeOver`), and
    /// decides by it. Called once the listeners are bound, so a start-up that fails earlier
    /// leaves the log as it was. Engine time then never goes back behind the switch: events
    /// after it are decided by the new version and carry a time at or after it.
    func takeOverRules() throws {
        let conn = try PGConnection.connect(configuration.databaseURL)
        defer { conn.close() }
        let before = engine.rules.latest
        let taken = try RulesVersionStore.takeOver(conn, partition: partition, version: configuration.rulesVersion, at: max(now(), latestRestoredTime))
        engine.book.adopt(taken.history)
        guard let change = taken.recorded else { return }
        engineClock.holdAtLeast(change.at)
        log(change.fromSeq == 1 ? "rules version \(change.version) decides this new log"
            : "rules version \(change.version) decides from seq \(change.fromSeq) and timers due after \(change.at.rfc3339) on (the log's was \(before)); earlier events and timers replay by their own rules")
    }

    /// Decodes every user of snapshot `latest` into `users`, loads the content its queued, held
    /// and snoozed records need, and arms each user's earliest deadline in the wheel.
    /// Returns the engine time at capture.
    func loadSnapshot(_ latest: SnapshotStore.Latest, conn: PGConnection, started: Instant, keepUntil: Instant) throws -> Instant {
        let header = try latest.decodedHeader()
        apps = header.apps
        timers.wheel = TimingWheel(start: min(header.capturedAt, started))
        users.reserveCapacity(Int(latest.users))
        userOrdinals.reserveCapacity(Int(latest.users))
        var owner: [Int64: Int] = [:]
        var interned: [String: String] = [:]
        try SnapshotStore.readParts(conn, id: latest.id) { part in
            var reader = SnapshotReader(part)
            reader.interned = interned
            interned = [:]
            while !reader.isAtEnd {
                let length = try reader.count()
                let end = reader.position + length
                let deliveryCount = try reader.int()
                let state = try UserState(snapshot: &reader)
                guard reader.position == end else { throw SnapshotFormatError("a user's state is \(length) bytes but decodes to \(reader.position - end + length)") }
                let user = state.user
                let ordinal = users.count
                state.forEachContentNeededAfterSnapshot(keepUntil: keepUntil) { owner[$0] = ordinal }
                var record = UserRecord(state: state, index: UInt64(ordinal))
                record.deliveryCount = deliveryCount
                // The wheel now, from the local copy (not three lookups in `users` later).
                if let wake = state.nextDeadline() {
                    record.wakeHandle = timers.wheel.schedule(at: wake, payload: record.index)
                    record.wakeAt = wake
                }
                guard self.ordinal(of: user, orInsert: ordinal) == nil else { throw SnapshotFormatError("user \(user) twice in the snapshot") }
                users.append(record)
            }
            interned = reader.interned
        }
        if !owner.isEmpty {
            var found = 0
            try SnapshotStore.readBodies(conn, partition: partition, seqs: Array(owner.keys), keys: contentKeys.ring) { seq, body in
                guard let o = owner[seq] else { return }
                users[o].state.supplySnapshotContent(SubmittedNotification(canonicalBody: body), seq: seq)
                found += 1
            }
            guard found == owner.count else {
                throw SnapshotFormatError("\(owner.count - found) notifications the snapshot refers to are not in events")
            }
        }
        // Content read back may only add what was missing: the deadlines armed above stand.
        lastFoldedSeq = latest.throughSeq
        defer { log("snapshot \(latest.id) through seq \(latest.throughSeq): \(users.count) users, \(latest.parts) parts, \(latest.bytes / 1024) KiB, \(owner.count) notifications read back") }
        return header.capturedAt
    }

    /// Reads from `events` the content of lean deferred items of the users (by ordinal) due at
    /// or before each one's instant (one statement for all of them), so the engine can decide
    /// them. Blocking: start-up's fold (on its own connection, before serving) and tests only —
    /// once serving, content is read without blocking the loop (HeraldService+Content).
    func loadContent(due list: some Sequence<(Int, Instant)>, using conn: PGConnection? = nil) throws {
        var wanted: [Int64: Int] = [:]
        for (o, t) in list where o < users.count {
            for seq in users[o].state.contentNeeded(upTo: t) { wanted[seq] = o }
        }
        guard !wanted.isEmpty else { return }
        let connection = try conn ?? PGConnection.connect(configuration.databaseURL)
        defer { if conn == nil { connection.close() } }
        try SnapshotStore.readBodies(connection, partition: partition, seqs: Array(wanted.keys), keys: contentKeys.ring) { seq, body in
            guard let o = wanted[seq] else { return }
            self.users[o].state.supplyContent(SubmittedNotification(canonicalBody: body), seq: seq)
        }
        restart.content.reads += 1
        restart.content.rowsRead += wanted.count
    }
}
