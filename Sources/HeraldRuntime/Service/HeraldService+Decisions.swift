// Folding committed events into user state, firing timers, and committing the deliveries they produce.
import HeraldCore
import HeraldStore

extension HeraldService {
    /// Creates the user's record on first sight. Records are then only mutated in place
    /// (`users[user]!.…`): a copy taken out of the dictionary and mutated would copy every
    /// buffer of the user's state on each event (copy-on-write with two owners).
    func ensureRecord(for user: String) {
        guard users[user] == nil else { return }
        users[user] = UserRecord(state: UserState(user: user), index: UInt64(userIds.count))
        userIds.append(user)
    }

    /// Folds one committed event; its deliveries queue for commit, its next wake goes to the wheel.
    func applyCommitted(_ event: StoredEvent, collect: ((Delivery, Int64) -> Void)? = nil) {
        if event.type == "clock" { lastFoldedSeq = max(lastFoldedSeq, event.seq); return }  // a manual-clock move: no state, timers fire by time
        guard let user = event.user else {
            lastFoldedSeq = max(lastFoldedSeq, event.seq)
            var scratch = UserState(user: "")
            _ = engine.apply(event, to: &scratch, apps: &apps)
            return
        }
        ensureRecord(for: user)
        lastFoldedSeq = max(lastFoldedSeq, event.seq)
        ensureContent(users: CollectionOfOne(user), upTo: event.at)  // lean deferred items due by now (docs/restart.md)
        let outcome = engine.apply(event, to: &users[user]!.state, apps: &apps)
        take(outcome, user: user, collect: collect)
    }

    func take(_ outcome: Outcome, user: String, collect: ((Delivery, Int64) -> Void)? = nil) {
        guard let record = users[user] else { return }
        var count = record.deliveryCount
        for d in outcome.deliveries {
            count += 1
            if let collect { collect(d, count) } else { unsentDeliveries.append(Self.row(d, index: count)) }
        }
        users[user]!.deliveryCount = count
        if outcome.nextWake != record.wakeAt {
            if let h = record.wakeHandle { timers.wheel.cancel(h) }
            users[user]!.wakeHandle = outcome.nextWake.map { timers.wheel.schedule(at: $0, payload: record.index) }
            users[user]!.wakeAt = outcome.nextWake
        }
    }

    static func row(_ d: Delivery, index: Int64) -> DeliveryRow {
        DeliveryRow(user: d.user, userIndex: index, causeSeq: d.causeSeq, kind: d.kind.rawValue, app: d.app,
                    notificationId: d.notificationId, reason: d.reason, at: d.at, rulesVersion: d.rulesVersion,
                    trace: d.traceJSON.canonicalString, body: String(decoding: d.bodyBytes, as: UTF8.self))
    }

    /// Fires due timers once, at the end of this loop turn: a committed batch completes its
    /// requests one by one, and checking the wheel (a clock read and a timer re-arm) after each
    /// of thousands would repeat the same work.
    func fireTimersSoon() {
        guard !(timerCheck?.isArmed ?? true) else { return }
        timerCheck?.arm(afterMilliseconds: 0)
    }

    /// Fires every wake-up due by now — but never past an event appended and not yet committed,
    /// so timers and events meet each user's state in the same order replay will use.
    func fireTimers() {
        var horizon = now()
        if let oldest = inFlightTimes.first { horizon = min(horizon, oldest) }
        if let unknown = unknownCommitSince { horizon = min(horizon, unknown) }
        var due: [UInt64] = []
        timers.advance(to: horizon) { _, payload in due.append(payload) }
        ensureContent(users: due.lazy.map { self.userIds[Int($0)] }, upTo: horizon)  // one read for every lean item due
        for index in due {
            let user = userIds[Int(index)]
            guard users[user] != nil else { continue }
            users[user]!.wakeHandle = nil
            users[user]!.wakeAt = nil
            let outcome = engine.advance(&users[user]!.state, to: horizon, apps: apps)
            take(outcome, user: user)
        }
        flushDeliveries()
        timers.rearm()
    }

    /// Commits decided deliveries (one batch in flight at a time), then streams them.
    func flushDeliveries(then done: (() -> Void)? = nil) {
        if let done { deliveryWaiters.append(done) }
        guard !deliveriesInFlight else { return }
        guard !unsentDeliveries.isEmpty else {
            let waiters = deliveryWaiters
            deliveryWaiters.removeAll()
            waiters.forEach { $0() }
            return
        }
        guard case .success(let writer) = store.currentWriter() else { return }  // retried on reconnect
        let rows = unsentDeliveries
        unsentDeliveries.removeAll()
        deliveriesInFlight = true
        let waiters = deliveryWaiters
        deliveryWaiters.removeAll()
        writer.append(deliveries: rows) { [weak self] result in
            guard let self else { return }
            self.deliveriesInFlight = false
            switch result {
            case .failure(let error):
                self.log("deliveries not committed yet (\(error)); will retry")
                self.unsentDeliveries = rows + self.unsentDeliveries
                self.deliveryWaiters = waiters + self.deliveryWaiters
            case .success(let cursors):
                for (row, cursor) in zip(rows, cursors) where cursor > 0 {
                    self.deliveriesCommitted += 1
                    self.committed(row, cursor: cursor)
                }
                // A row stored already (cursor 0) committed in an append whose outcome this
                // process never learned (a COMMIT reply lost, a failed later part of a split
                // append): consumers must still be told the head moved past it.
                if cursors.contains(0) { self.refreshDeliveryHead() }
                waiters.forEach { $0() }
                self.publish()
                if !self.unsentDeliveries.isEmpty || !self.deliveryWaiters.isEmpty { self.flushDeliveries() }
            }
        }
        store.kick()
    }

    /// Reads the committed delivery head from PostgreSQL (blocking, rare: only after an append
    /// of unknown outcome); consumers then read what they lack from the table.
    func refreshDeliveryHead() {
        do {
            let conn = try PGConnection.connect(configuration.databaseURL)
            defer { conn.close() }
            if let head = try conn.execute("SELECT cursor FROM delivery_head").int64(0, 0), head > deliveryHead {
                log("deliveries up to cursor \(head) had committed without this process learning their cursors; consumers read them from PostgreSQL")
                deliveryHead = head
                // The ring holds no line past its end: start it after the head, so every consumer
                // reads the rows it lacks from the table (the ring is only a cache).
                ring.removeAll()
                ringFirstCursor = head + 1
            }
        } catch {
            log("could not read the delivery head (\(error)); consumers catch up with the next delivery")
        }
    }

    /// The wire line of a committed delivery: its stored body with op and cursor.
    static func line(_ body: String, cursor: Int64) -> [UInt8] {
        var out = Array("{\"cursor\":\(cursor),\"op\":\"delivery\",".utf8)
        out += body.utf8.dropFirst()
        out.append(0x0A)
        return out
    }

    func committed(_ row: DeliveryRow, cursor: Int64) {
        if ring.isEmpty { ringFirstCursor = cursor }
        if cursor != ringFirstCursor + Int64(ring.count) {
            // Another writer took cursors in between: restart the ring here (consumers read the gap from PostgreSQL).
            ring.removeAll()
            ringFirstCursor = cursor
        }
        ring.append(Self.line(row.body, cursor: cursor))
        if ring.count > configuration.deliveryRingCapacity {
            ring.removeFirst()
            ringFirstCursor += 1
        }
        deliveryHead = max(deliveryHead, cursor)
    }
}
