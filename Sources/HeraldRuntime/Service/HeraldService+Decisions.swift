// Folding committed events into user state, firing timers, and committing the deliveries they produce.
import HeraldCore
import HeraldStore

extension HeraldService {
    /// The user's ordinal (its index in `users` and its payload in the wheel), creating its record
    /// on first sight: one hash lookup of the user's id per event. Records are then only mutated
    /// in place (`users[ordinal].…`): a copy taken out of the array and mutated would copy every
    /// buffer of the user's state on each event (copy-on-write with two owners).
    @discardableResult
    func ensureRecord(for user: String) -> Int {
        let ordinal = users.count
        if let found = self.ordinal(of: user, orInsert: ordinal) { return found }
        users.append(UserRecord(state: UserState(user: user), index: UInt64(ordinal)))
        return ordinal
    }

    /// The user's ordinal, nil for a user never seen (`userOrdinals`, checked against the record's id).
    @inline(__always)
    func ordinal(of user: String) -> Int? {
        users.withUnsafeBufferPointer { records in
            userOrdinals.ordinal(of: user) { records[$0].state.user == user }
        }
    }

    /// The user's ordinal when it has one (nothing added); else `ordinal` is given to the user
    /// (its record must be appended there next) and nil returned — one hash of the id for both.
    @inline(__always)
    func ordinal(of user: String, orInsert ordinal: Int) -> Int? {
        users.withUnsafeBufferPointer { records in
            userOrdinals.ordinal(of: user, orInsert: ordinal) { records[$0].state.user == user }
        }
    }

    /// Folds one committed event; its deliveries queue for commit, its next wake goes to the wheel.
    /// Events fold in seq order: one whose user has lean content due by its time waits for it to be
    /// read (asynchronously), and every event committed after it waits behind it (HeraldService+Content).
    func applyCommitted(_ event: StoredEvent, collect: ((Delivery, Int64) -> Void)? = nil) {
        if restart.content.heldFolds.isEmpty, fold(event, collect: collect) { return }
        precondition(collect == nil, "start-up reads lean content before folding each event")
        holdFold(event)
    }

    /// Folds one committed event unless its user's lean content due by the event's time is not in
    /// memory yet: then asks for it and returns false (the caller holds the event).
    func fold(_ event: StoredEvent, collect: ((Delivery, Int64) -> Void)? = nil) -> Bool {
        if event.kind == .clock {  // a manual-clock move: no state, timers fire by time
            lastFoldedSeq = max(lastFoldedSeq, event.seq)
            if let manual = engineClock.manual { engineClock.manual = max(manual, event.at) }  // read back after a lost COMMIT reply
            return true
        }
        guard let user = event.user else {
            lastFoldedSeq = max(lastFoldedSeq, event.seq)
            var scratch = UserState(user: "")
            _ = engine.apply(event, to: &scratch, apps: &apps)
            return true
        }
        let ordinal = ensureRecord(for: user)
        // Lean deferred items due by now (docs/restart.md), and an older notification a snooze names.
        guard contentReady(ordinal: ordinal, upTo: event.at) else { return false }
        if event.kind == .snooze, !snoozedContentReady(ordinal: ordinal, snooze: event) { return false }
        lastFoldedSeq = max(lastFoldedSeq, event.seq)
        let nextWake = engine.apply(event, to: &users[ordinal].state, apps: &apps, appendingTo: &decided)
        take(nextWake: nextWake, ordinal: ordinal, collect: collect)
        if event.kind == .erase { erasureFolded(event) }
        return true
    }

    /// Queues the deliveries just decided into `decided` (or hands them to `collect`), empties
    /// it for the next decision, and moves the user's wake-up.
    func take(nextWake: Instant?, ordinal: Int, collect: ((Delivery, Int64) -> Void)? = nil) {
        var count = users[ordinal].deliveryCount
        // Borrowed from the buffer: `for d in decided` would copy each delivery.
        decided.withUnsafeBufferPointer { deliveries in
            for i in deliveries.indices {
                count += 1
                if let collect { collect(deliveries[i], count) } else { deliveryAppends.queue(row(deliveryAt: deliveries.baseAddress! + i, index: count)) }
            }
        }
        decided.removeAll(keepingCapacity: true)
        users[ordinal].deliveryCount = count
        if nextWake != users[ordinal].wakeAt {
            if let h = users[ordinal].wakeHandle { timers.wheel.cancel(h) }
            users[ordinal].wakeHandle = nextWake.map { timers.wheel.schedule(at: $0, payload: UInt64(ordinal)) }
            users[ordinal].wakeAt = nextWake
        }
    }

    /// The stored row of a delivery: the body encoded once, into bytes, through the service's
    /// reusable sink; the trace's bytes shared with every earlier row that had the same trace.
    /// The delivery is read where it lies (`d`, in the decided buffer), its fields one by one:
    /// passed as a `borrowing` value from the buffer, or a method called on it there, it would
    /// be copied whole first.
    func row(deliveryAt d: UnsafePointer<Delivery>, index: Int64) -> DeliveryRow {
        let body = Delivery.storedBody(at: d, using: &rowScratch.sink)
        return sealed(Self.row(at: d, index: index, body: body, trace: traceBytes.bytes(for: d.pointee.ruleTrace)))
    }

    /// The stored row of a delivery (start-up and tools: a sink of its own).
    static func row(_ d: Delivery, index: Int64) -> DeliveryRow {
        var sink = ByteSink(capacity: 1024)
        defer { sink.deallocate() }
        let (body, trace) = d.storedBytes(using: &sink)
        return withUnsafePointer(to: d) { row(at: $0, index: index, body: body, trace: trace) }
    }

    /// The row's fields, read where the delivery lies.
    private static func row(at d: UnsafePointer<Delivery>, index: Int64, body: [UInt8], trace: [UInt8]) -> DeliveryRow {
        DeliveryRow(user: d.pointee.user, userIndex: index, causeSeq: d.pointee.causeSeq, kind: d.pointee.kind.rawValue,
                    app: d.pointee.app, notificationId: d.pointee.notificationId, reason: d.pointee.reason,
                    at: d.pointee.at, rulesVersion: d.pointee.rulesVersion, traceBytes: trace, bodyBytes: body)
    }

    /// Fires due timers once, at the end of this loop turn: a committed batch completes its
    /// requests one by one, and checking the wheel (a clock read and a timer re-arm) after each
    /// of thousands would repeat the same work.
    func fireTimersSoon() {
        guard !(timerCheck?.isArmed ?? true) else { return }
        timerCheck?.arm(afterMilliseconds: 0)
    }

    /// Takes every wake-up due by now from the wheel — but never past an event appended and not
    /// yet committed, so timers and events meet each user's state in the same order replay will
    /// use — and fires them a slice at a time (`fireDueSlice`).
    func fireTimers() {
        var horizon = appendsInFlight.timersMayFire(upTo: now())
        if let held = restart.content.heldFolds.first { horizon = min(horizon, held.at) }  // committed, waiting to fold
        timers.advance(to: horizon) { _, payload in
            // The wheel forgot this handle: an event folded before the user's slice comes up
            // must not cancel it (the slot may hold another timer by then).
            let ordinal = Int(payload)
            guard ordinal < users.count else { return }
            users[ordinal].wakeHandle = nil
            users[ordinal].wakeAt = nil
            dueUsers.taken(ordinal: ordinal, horizon: horizon)
        }
        fireDueSlice()
        timers.rearm()
    }

    /// Fires the timers of up to `timerSliceUsers` due users and appends their deliveries; the
    /// rest wait for the next loop turn (or, while deliveries pile up uncommitted, for the append
    /// in flight to commit). Each user is advanced to the horizon it was taken at: later events
    /// carry later times, and an event folded for a user still waiting here advances the user's
    /// timers itself first (`Engine.apply`), so every user sees timers and events in replay's order.
    /// Whether firing may go on: fewer than `unsentAppendsAhead` appends' worth of rows wait unsent.
    private var mayFireAhead: Bool { deliveryAppends.unsent.count < Self.unsentAppendsAhead * configuration.deliveryAppendRows }

    func fireDueSlice() {
        var fired = 0
        var waitingForContent = false
        let sliceStart = FiringPhases.now()
        var t = sliceStart
        let budget = configuration.timerSliceMicroseconds * 1_000
        while fired < configuration.timerSliceUsers, mayFireAhead,
              budget <= 0 || t - sliceStart < budget,
              let (ordinal, horizon) = dueUsers.first {
            // A user's lean items due now are read first, asynchronously; until then the slice
            // stops before that user, and `contentArrived` fires the next one (docs/restart.md).
            guard nextDueUserContentReady() else {
                waitingForContent = true
                break
            }
            dueUsers.fired()
            let o = Int(ordinal)
            let nextWake = engine.advance(&users[o].state, to: horizon, apps: apps, appendingTo: &decided)
            let decidedAt = FiringPhases.now()
            take(nextWake: nextWake, ordinal: o)
            let taken = FiringPhases.now()
            phases.engineNanoseconds += decidedAt - t
            phases.encodeNanoseconds += taken - decidedAt
            t = taken
            fired += 1
        }
        if fired > 0 {
            if phases.slices == 0 || phases.firstSliceAt == 0 { phases.firstSliceAt = sliceStart }
            phases.slices += 1
            phases.usersFired += fired
            phases.sliceNanoseconds += t - sliceStart
            phases.lastSliceAt = t
        }
        flushDeliveries()
        if dueUsers.isEmpty {
            for w in dueUsers.takeWaiters() { flushDeliveries(then: w) }
        } else if !waitingForContent && mayFireAhead {
            fireTimersSoon()  // the next slice in the next loop turn
        }
        // Otherwise the next append's commit continues (`flushDeliveries`): while PostgreSQL is
        // slow or away, decided rows do not pile up and the loop does not spin.
    }

    /// Runs `done` once every timer taken from the wheel so far has fired and its deliveries committed.
    func afterDueTimers(_ done: @escaping () -> Void) {
        if !dueUsers.wait(done) { flushDeliveries(then: done) }
    }

    /// Commits decided deliveries (appends of at most `deliveryAppendRows`, up to
    /// `maxDeliveryAppends` handed to the writers at a time), then streams them. `done` runs once
    /// every delivery decided before it is committed.
    func flushDeliveries(then done: (() -> Void)? = nil) {
        if let done { deliveryAppends.whenDecidedCommitted(done) }
        runDeliveryWaiters()
        while deliveryAppendsInFlight < Self.maxDeliveryAppends, !deliveryAppends.unsent.isEmpty, sendDeliveryAppend() {}
    }

    /// Hands the next append to a delivery writer; false when none can take it now (retried when
    /// an append completes or a writer reconnects). The first writer takes appends as they come
    /// (up to two queued, each claiming its cursors as it commits). A burst — a whole append's
    /// worth of rows waiting, or timers due now still to fire, as in a summary storm — goes to
    /// both writers, one append each, at cursors assigned here (`DeliveryAppends.nextCursor`, chained:
    /// both store at once and commit in cursor order), once the head is known and the first
    /// writer's own appends have committed.
    /// Small appends are not chained: more commits at once make the delivery line's p99 worse
    /// under load.
    private func sendDeliveryAppend() -> Bool {
        // A failed outcome not yet handled (an earlier append's is awaited): the head and the
        // rows still to send are about to change; wait for it.
        if deliveryAppends.pending.contains(where: { if case .failure? = $0.result { return true } else { return false } }) { return false }
        let links = deliveryLinks
        let chainedInFlight = deliveryAppends.pending.contains { $0.base != nil }
        let claimingInFlight = deliveryAppends.pending.contains { $0.base == nil }
        // A burst: a whole append's worth of rows waiting, or a firing still under way (users due
        // now wait for the next slice), whose rows are coming. Both writers then take appends as
        // they free up; otherwise the first writer claimed append after append while the second
        // sat idle until a whole append's worth had piled up (a third of a 20,000-job peer burst).
        let firing = !dueUsers.isEmpty
        let burst = links.count > 1 && (firing || deliveryAppends.unsent.count >= max(configuration.deliveryAppendRows, 1))
        // Chained while chained ones are in flight (the head known), or to start a burst with
        // nothing in flight; otherwise claiming, on the first writer, never beside a chained one
        // (its claim would take the cursors the chained one was given).
        let chained = chainedInFlight || (burst && !claimingInFlight && deliveryAppends.nextCursor != nil)
        // A burst waits for the claiming appends in flight: once they commit the head is known
        // and the burst goes chained (under steady firing one would otherwise always be in flight).
        if !chained && burst && claimingInFlight { return false }
        let carrier: DeliveryCarrier
        if chained {
            guard deliveryAppends.nextCursor != nil,
                  let free = links.indices.first(where: { deliveryAppends.perLink[$0] == 0 && links[$0].isReady }) else { return false }
            carrier = .deliveryWriter(free)
        } else {
            // No chained append is in flight (`chained` would be true). Claiming appends in flight
            // are all on one carrier — the first delivery writer, or the events' writer they ride
            // with — so they claim their cursors in the order they were sent; a change of carrier
            // waits until none is in flight.
            let current = deliveryAppends.pending.last?.carrier
            // Riding pays only when the events' writer has work the rows can join; idle, it would
            // commit them alone, and the next event would wait behind them.
            let ride = !deliveryStores.isEmpty && !burst && deliveryAppends.unsent.count < configuration.deliveriesRideBelowRows
                && !(store.writer?.isIdle ?? true)
            if current == .deliveryWriter(0) || (current == nil && !ride) {
                carrier = .deliveryWriter(0)
            } else if ride {
                carrier = .ridingWithEvents
            } else {
                return false   // riding appends in flight, and more rows than ride: wait for them
            }
        }
        let link: StoreLink
        switch carrier {
        case .ridingWithEvents: link = store
        case .deliveryWriter(let i): link = links[i]
        }
        guard case .success(let writer) = link.currentWriter() else { return false }  // retried on reconnect
        var n = min(deliveryAppends.unsent.count, max(configuration.deliveryAppendRows, 1))
        if chained, !firing, case .deliveryWriter(let i) = carrier { n = min(n, burstTailShare(writer: i)) }
        let (rows, order) = deliveryAppends.take(n)
        let base = chained ? deliveryAppends.nextCursor : nil
        let id = deliveryAppends.appendSent(rows: rows, order: order, sentAt: FiringPhases.now(), carrier: carrier, base: base)
        // One writer completes appends in order, and fails the deliveries queued behind a failed
        // one (`GroupCommitStateMachine.deliveriesFailed`); two writers' outcomes are taken in the order the
        // appends were sent (`deliveryAppendDone`), and a chained append whose predecessor failed
        // fails too. Either way no append commits ahead of an earlier one that failed.
        let done: GroupCommitWriter.DeliveriesCompletion = { [unretained] result in unretained.object?.deliveryAppendDone(id, result) }
        if let base { writer.append(deliveries: rows, after: base, completion: done) } else { writer.append(deliveries: rows, completion: done) }
        link.kick()
        if base != nil { startWALNudges() }
        return true
    }

    /// The rows writer `i` takes of a burst's last ones (no user left to fire): its share, so that
    /// the writers finish together. Another writer free takes the rest in this same flush; a busy
    /// one counts with the rows it has still to store, estimated at the pace of the last append
    /// (a writer given the whole rest while the other is finishing stores it alone, one core
    /// idle, for 20–25 ms at the end of a 20,000-job burst). Neither the rest nor what a share
    /// would leave is split below `splitBurstTailAbove` rows.
    private func burstTailShare(writer i: Int) -> Int {
        let unsent = deliveryAppends.unsent.count
        guard unsent > Self.splitBurstTailAbove else { return unsent }
        let now = FiringPhases.now()
        var othersStillToStore: [Int] = []
        for j in deliveryLinks.indices where j != i && deliveryLinks[j].isReady {
            guard deliveryAppends.perLink[j] > 0,
                  let busy = deliveryAppends.pending.last(where: { $0.carrier == .deliveryWriter(j) }) else {
                othersStillToStore.append(0)
                continue
            }
            let stored = deliveryAppends.rowsPerNanosecond * Double(now - busy.sentAt)
            othersStillToStore.append(max(0, busy.rows.count - Int(stored.rounded(.down))))
        }
        return Self.tailShare(unsent: unsent, othersStillToStore: othersStillToStore,
                              smallest: Self.splitBurstTailAbove)
    }

    /// `burstTailShare`'s arithmetic: of `unsent` rows, the share of one writer among itself and
    /// the others (each with the rows it has still to store), so that all finish together; the
    /// whole rest when there are no others, or when the rest or what the share would leave is
    /// `smallest` rows or fewer.
    static func tailShare(unsent: Int, othersStillToStore: [Int], smallest: Int) -> Int {
        guard unsent > smallest, !othersStillToStore.isEmpty else { return unsent }
        let writers = othersStillToStore.count + 1
        let share = max(smallest, (unsent + othersStillToStore.reduce(0, +) + writers - 1) / writers)
        // A remainder too small to split goes with this share (not in an append of its own).
        return unsent - share <= smallest ? unsent : share
    }

    /// Records an append's outcome, then handles the outcomes of the appends sent before it first.
    private func deliveryAppendDone(_ id: Int, _ result: Result<[Int64], StoreError>) {
        deliveryAppends.outcomeArrived(id, result)
        while let next = deliveryAppends.nextOutcome() { finishDeliveryAppend(next.0, next.1) }
    }

    private func finishDeliveryAppend(_ append: PendingDeliveryAppend, _ result: Result<[Int64], StoreError>) {
        let rows = append.rows
        let doneAt = FiringPhases.now()
        defer { phases.completionNanoseconds += FiringPhases.now() - doneAt }
        switch result {
        case .failure(let error):
            log("deliveries not committed yet (\(error)); will retry")
            // Its rows go back in decision order; the head is no longer known.
            deliveryAppends.appendFailed(append)
            // A chained append behind a failed one (or a head moved by another writer) fails with
            // a conflict on a healthy connection: nothing else would send the rows again.
            if case .conflict = error, deliveryAppendsInFlight == 0 { flushDeliveries() }
        case .success(let cursors):
            phases.appends += 1
            phases.appendRows += rows.count
            phases.appendNanoseconds += doneAt - append.sentAt
            phases.lastCommitAt = doneAt
            if append.base != nil, doneAt > append.sentAt {
                deliveryAppends.rowsPerNanosecond = Double(rows.count) / Double(doneAt - append.sentAt)
            }
            deliveryAppends.appendCommitted(append, cursors: cursors, chaining: deliveryLinks.count > 1)
            // The writer is free: the next append goes out before this one's lines are built and
            // streamed, so PostgreSQL stores it meanwhile (a 4,000-row append's completion is
            // ~3 ms of the loop, during which the writer's backend sat idle).
            if !deliveryAppends.unsent.isEmpty { flushDeliveries() }
            // By index: `for (row, cursor) in zip(…)` would copy every row. Every 512 lines, the
            // append just sent to this writer gets its data as soon as PostgreSQL asks for it.
            let writer: GroupCommitWriter? = if case .deliveryWriter(let w) = append.carrier { deliveryLinks[w].writer } else { nil }
            for (i, cursor) in zip(rows.indices, cursors) where cursor > 0 {
                deliveriesCommitted += 1
                ring.committed(rows[i].liveBody ?? rows[i].bodyBytes, tag: DeliveryTag(kindCode: ConsumerFilter.kindCode(of: rows[i].kind), app: rows[i].app), cursor: cursor)
                if i & 511 == 511 { writer?.pollWhileCompleting() }
            }
            // A row stored already (cursor 0) committed in an append whose outcome this
            // process never learned (a COMMIT reply lost, a failed later part of a split
            // append): consumers must still be told the head moved past it.
            if cursors.contains(0) { refreshDeliveryHead() }
            deliveryAppends.rowsDone(rows.count)
            runDeliveryWaiters()
            publish()
            if !dueUsers.isEmpty { fireTimersSoon() }
        }
    }

    /// Runs the waiters whose deliveries have all committed, in order.
    private func runDeliveryWaiters() {
        while let run = deliveryAppends.nextReadyWaiter() { run() }
    }

    /// Reads the committed delivery head from PostgreSQL (blocking, rare: only after an append
    /// of unknown outcome); consumers then read what they lack from the table.
    func refreshDeliveryHead() {
        do {
            let conn = try PGConnection.connect(configuration.databaseURL)
            defer { conn.close() }
            if case let head = try EventReader.deliveryHead(conn, partition: partition), ring.headFoundAhead(head) {
                log("deliveries up to cursor \(head) had committed without this process learning their cursors; consumers read them from PostgreSQL")
            }
        } catch {
            log("could not read the delivery head (\(error)); consumers catch up with the next delivery")
        }
    }

    /// The most bytes a wire line adds to its stored body: `{"cursor":` (10), a sign and up to
    /// 19 digits, `,"op":"delivery","partition":` (29), up to 4 digits and a comma, and the newline,
    /// less the body's own `{`.
    static let lineOverhead = 10 + 20 + 29 + 5 + 1

    /// Appends the wire line of a committed delivery to `out`: `{"cursor":n,"op":"delivery","partition":p,`
    /// then the stored body after its `{`, then a newline. Consumers' batches are built from the
    /// ring's bodies and from catch-up pages this way: no line array per delivery, one capacity
    /// check and two copies per line.
    static func appendLine(_ body: UnsafeRawBufferPointer, partition: Int = 0, cursor: Int64, to out: inout ByteSink) {
        let rest = max(body.count - 1, 0)
        out.appendInPlace(maximum: rest + lineOverhead) { base in
            let head: StaticString = "{\"cursor\":"
            let tail: StaticString = ",\"op\":\"delivery\",\"partition\":"
            base.update(from: head.utf8Start, count: head.utf8CodeUnitCount)
            var at = head.utf8CodeUnitCount
            if cursor < 0 { base[at] = 0x2D; at += 1 }
            var v = cursor.magnitude, digits = 0
            repeat { digits += 1; v /= 10 } while v > 0
            v = cursor.magnitude
            for i in stride(from: at + digits - 1, through: at, by: -1) {
                base[i] = UInt8(truncatingIfNeeded: v % 10) &+ 0x30
                v /= 10
            }
            at += digits
            (base + at).update(from: tail.utf8Start, count: tail.utf8CodeUnitCount)
            at += tail.utf8CodeUnitCount
            var p = min(max(partition, 0), 9_999), pDigits = 0
            repeat { pDigits += 1; p /= 10 } while p > 0
            p = min(max(partition, 0), 9_999)
            for i in stride(from: at + pDigits - 1, through: at, by: -1) {
                base[i] = UInt8(truncatingIfNeeded: p % 10) &+ 0x30
                p /= 10
            }
            at += pDigits
            base[at] = UInt8(ascii: ","); at += 1
            if rest > 0 { UnsafeMutableRawPointer(base + at).copyMemory(from: body.baseAddress! + 1, byteCount: rest) }
            at += rest
            base[at] = 0x0A
            return at + 1
        }
    }
}

/// A reusable byte sink owned by a class, so its memory is freed with the service.
final class ScratchSink {
    var sink = ByteSink(capacity: 4096)
    deinit { sink.deallocate() }
}
