// State-changing requests: admit, append, and on COMMIT fold, acknowledge and decide.
import HeraldCore
import HeraldStore

extension HeraldService {
    func submitEvent(_ request: ClientSession.Request, reply: Reply) {
        let at = now()
        let admission = engine.admit(request, apps: apps, now: at)
        guard case .accepted(var accepted) = admission else {
            if case .rejected(let error) = admission {
                requestsRejected += 1
                reply(WireReply.error(rid: request.rid, error))
            }
            reply.connection.releaseDispatch()  // a withdraw admitted again after a wait, now refused
            return
        }
        // A withdraw that names no user applies to every recipient of the original submit.
        if request.submitLine == nil, request.op == .withdraw, accepted.events.contains(where: { $0.user == nil }) {
            resolveWithdraw(request, accepted: accepted, reply: reply)
            return
        }
        if request.submitLine == nil, request.op == .withdraw, let w = nothingToWithdraw(accepted) { accepted.warnings.append(w) }
        append(accepted, request: request, at: at, reply: reply)
    }

    /// `nothing_to_withdraw`: a withdraw naming its user, when that user has nothing of that id
    /// pending, snoozed or among the deliveries kept (never sent to that user — another recipient
    /// named by mistake —, withdrawn, suppressed or replaced already, or long ago). It is stored all
    /// the same: it cancels a submit of that id to that user in advance. Judged from the states in memory, no read; not
    /// said while a submit of that id is in flight, or while a fold waits for content.
    private func nothingToWithdraw(_ accepted: AcceptedRequest) -> RequestWarning? {
        guard accepted.events.count == 1, let user = accepted.events[0].user, let app = accepted.events[0].app,
              let id = accepted.events[0].notificationId, restart.content.heldFolds.isEmpty,
              !appendsInFlight.isInFlight(InFlightKey(app: app, id: id, user: user)) else { return nil }
        if let ordinal = ordinal(of: user), users[ordinal].state.knows(app: app, id: id) { return nil }
        return RequestWarning(code: "nothing_to_withdraw",
            title: "\(user) has no notification “\(id)” from \(app) pending, snoozed or among the deliveries Herald keeps",
            detail: "It was never sent to this user, or it was withdrawn, suppressed or replaced already, or it is older. The withdraw is stored: if “\(id)” was never submitted, it is cancelled for \(user) in advance. To withdraw it from whoever received it, leave out “user”.")
    }

    /// The warning judged as a committed event is folded, from the service's state just before
    /// the fold (exact: every earlier event of the log is folded): `focus_not_on` for a
    /// `focusOff`, `app_not_registered` for a submit. `app`: the event's app (read only for a submit).
    func foldWarning(_ event: StoredEvent, app: @autoclosure () -> String?) -> RequestWarning? {
        switch event.kind {
        case .focusOff: focusNotOn(event)
        case .submit: app().flatMap(appNotRegistered)
        default: nil
        }
    }

    /// `app_not_registered`: a submit for an app that no `registerApp` named. It is stored and
    /// judged as any other (an app without entitlements: users who never authorized it get it
    /// `suppressed`); the producer hears of it in the ack, not only the consumers. Judged from
    /// the registry in memory (every earlier `registerApp` is folded, a pipelined one included);
    /// not said while folds wait for content, when the registry may lag the log.
    func appNotRegistered(_ app: String) -> RequestWarning? {
        guard restart.content.heldFolds.isEmpty, apps.registeredName(app) == nil else { return nil }
        return RequestWarning(code: "app_not_registered", title: "\(app) was never registered",
            detail: "The submit is stored and judged as one from an app without entitlements: users who have not authorized \(app) get it as suppressed. Check the app's name, or have an admin register it ({\"op\":\"registerApp\",\"app\":…,\"entitlements\":[…]}).")
    }

    /// `focus_not_on`: a `focusOff` whose Focus is not on for its user at the event's time — not
    /// on by hand, not inside a window of its schedule (or turned off already), or not defined at
    /// all (a misspelt name). Judged after COMMIT, just before the fold, from the user's state then
    /// (exact: earlier events of the user are folded); not said while folds wait for content.
    /// The event is stored all the same, and changes nothing.
    func focusNotOn(_ event: StoredEvent) -> RequestWarning? {
        guard restart.content.heldFolds.isEmpty, let user = event.user, let name = event.body["focus"]?.stringValue else { return nil }
        let finding = ordinal(of: user).map { users[$0].state.focusOffFinds(name, at: event.at) } ?? .undefined
        switch finding {
        case .on:
            return nil
        case .undefined:
            return RequestWarning(code: "focus_not_on", title: "\(user) has no Focus “\(name)”",
                detail: "None of that name was defined or turned on, so nothing was turned off. Check the name (Focus names are case-sensitive); the focusOff is stored and changes nothing.")
        case .notOn:
            return RequestWarning(code: "focus_not_on", title: "\(user)'s Focus “\(name)” is not on at \(event.at.rfc3339)",
                detail: "It is not on by hand, and no window of its schedule is active (or it was turned off already), so nothing was turned off. A scheduled Focus can be turned off only during one of its windows; the focusOff is stored and changes nothing.")
        }
    }

    /// Finds the recipients of (app, id) and withdraws it for each. A submit of (app, id) still in
    /// flight is waited for (the withdraw is then admitted afresh): its recipients are in the log
    /// once it committed.
    /// The connection's later requests are held meanwhile (`ClientConnection.holdDispatch`), so
    /// they are stored after this withdraw, as sent.
    func resolveWithdraw(_ request: ClientSession.Request, accepted: AcceptedRequest, reply: Reply) {
        guard let draft = accepted.events.first, let app = draft.app, let id = draft.notificationId else { return }
        reply.connection.holdDispatch()
        if let key = appendsInFlight.anyInFlight(app: app, id: id) {
            appendsInFlight.wait(for: key) { [unretained] in unretained.object?.submitEvent(request, reply: reply) }
            return
        }
        reader.query("SELECT DISTINCT user_id FROM events WHERE app = $1 AND notification_id = $2 AND type = 'submit' ORDER BY 1",
                     [app, id]) { [unretained] result in
            guard let self = unretained.object else { return }
            // Appended (or answered) first, then the connection's next requests go.
            defer { reply.connection.releaseDispatch() }
            switch result {
            case .failure(let error):
                reply(WireReply.error(rid: request.rid, self.requestError(error)))
            case .success(let r):
                let users = (0..<r.rowCount).compactMap { r.string($0, 0) }
                guard !users.isEmpty else {
                    reply(WireReply.error(rid: request.rid, RequestError(
                        code: "unknown_notification", title: "No notification “\(id)” from \(app) was submitted",
                        detail: "A withdraw without a user applies to the recipients of the stored submit, and there is none. To cancel a notification before it is submitted, include its user.")))
                    return
                }
                var perUser = accepted
                perUser.events = users.map { draft.withUser($0) }
                // Engine time is taken now, after the look-up: timers may have fired meanwhile,
                // and an event must never be folded behind timers later than its own time.
                self.append(perUser, request: request, at: self.now(), reply: reply)
            }
        }
    }

    /// Appends admitted events; on COMMIT folds them, answers, and commits their deliveries.
    func append(_ accepted: AcceptedRequest, request: ClientSession.Request, at: Instant, reply: Reply) {
        let reply = configuration.acknowledgeBeforeCommitForTesting ? acknowledgeNowForTesting(request, reply) : reply
        if accepted.events.count == 1 && !accepted.fanOut {
            appendOne(accepted, request: request, at: at, reply: reply)
            return
        }
        // A fan-out's rows are numbered 0 … n-1 among its recipients (the store's key: events_notification_once).
        var rows = accepted.events.map { Self.row($0, at: at) }
        for i in rows.indices where rows[i].notificationId != nil { rows[i].recipientIndex = Int32(i) }
        let warnings = accepted.warnings
        let rid = request.rid

        // A re-send racing its original (an idempotency key already in flight) waits for it and is
        // then admitted afresh: the store answers it as a duplicate (or conflict) of the committed
        // original, and its engine time is taken then, so it never lands behind fired timers.
        let keys = Array(Set(accepted.events.compactMap(InFlightKey.init)))
        if let busy = keys.first(where: { appendsInFlight.isInFlight($0) }) {
            appendsInFlight.wait(for: busy) { [unretained] in unretained.object?.submitEvent(request, reply: reply) }
            return
        }

        guard let writer = writerOrRefuse(rid: rid, reply: reply) else { return }
        do {
            for i in rows.indices { try sealForStore(&rows[i]) }
        } catch {
            reply(WireReply.error(rid: rid, requestError(error)))
            return
        }
        for key in keys { _ = appendsInFlight.claim(key) }
        appendsInFlight.sent(at: at)
        writer.append(events: rows) { [unretained] result in
            guard let self = unretained.object else { return }
            self.appendsInFlight.answered()
            // Waiters run after this request's own reply and fold, whatever the outcome.
            let waiters = keys.flatMap { self.appendsInFlight.release($0) }
            defer { waiters.forEach { $0() } }
            switch result {
            case .failure(let error):
                self.appendFailed(error, at: at, rid: rid, reply: reply)
            case .success(let outcomes):
                var warnings = warnings
                if accepted.events.first?.type == "submit", let app = accepted.events.first?.app,
                   let w = self.appNotRegistered(app) { warnings.append(w) }
                // By index: `for (outcome, draft) in zip(…)` would copy every draft.
                for (i, outcome) in zip(accepted.events.indices, outcomes) {
                    if case .appended(let seq) = outcome {
                        self.eventsCommitted += 1
                        // Carries the door's decoded notification, so the fold does not parse the body again.
                        self.applyCommitted(StoredEvent(accepted.events[i], seq: seq, at: at))
                    }
                }
                reply(self.replyFor(outcomes: outcomes, rid: rid, warnings: warnings, counted: accepted.fanOut))
                // Not `flushDeliveries()` here: a committed batch completes its requests one by
                // one, and the first request's deliveries would go alone. The writer calls
                // `afterCompletions` once the batch is complete (installed in `start`).
                self.fireTimersSoon()
            }
        }
        store.kick()
    }

    /// `append` of a request with one event (a submit to one user, and most other ops): the
    /// same steps without the arrays of rows, keys and outcomes around the one event.
    private func appendOne(_ accepted: AcceptedRequest, request: ClientSession.Request, at: Instant, reply: Reply) {
        // The draft is read where it lies, field by field through the array's buffer: a copy of
        // it (captured by the completion), or `accepted.events[0]` passed as `borrowing`, would
        // retain and release each of its seven strings and arrays once more per use.
        let key = accepted.events.withUnsafeBufferPointer { InFlightKey(draftAt: $0.baseAddress!) }
        // One look-up for the usual case (not in flight): claim the key, and give it back to
        // its waiters in the rare one.
        if let key, !appendsInFlight.claim(key) {
            appendsInFlight.wait(for: key) { [unretained] in unretained.object?.submitEvent(request, reply: reply) }
            return
        }
        let rid = request.rid
        guard let writer = writerOrRefuse(rid: rid, reply: reply) else {
            if let key { _ = appendsInFlight.release(key) }
            return
        }
        var row = accepted.events.withUnsafeBufferPointer { Self.row(draftAt: $0.baseAddress!, at: at) }
        do {
            try sealForStore(&row)
        } catch {
            if let key { _ = appendsInFlight.release(key) }
            reply(WireReply.error(rid: rid, requestError(error)))
            return
        }
        appendsInFlight.sent(at: at)
        // `self` strongly: a weak capture would cost a weak reference made, loaded and destroyed
        // per submit, on the service's side table. The cycle (service →
        // writer → this completion) lasts until the writer completes or fails the append, which it
        // always does: shutdown waits for the writer to be idle, and a broken writer fails all it holds.
        writer.append(event: row) { [self] result in
            self.appendsInFlight.answered()
            // Waiters run after this request's own reply and fold, whatever the outcome.
            let waiters = key.map { self.appendsInFlight.release($0) }
            defer { waiters?.forEach { $0() } }
            switch result {
            case .failure(let error):
                self.appendFailed(error, at: at, rid: rid, reply: reply)
            case .success(let outcome):
                if case .appended(let seq) = outcome {
                    self.eventsCommitted += 1
                    let event = accepted.events.withUnsafeBufferPointer { StoredEvent(draftAt: $0.baseAddress!, seq: seq, at: at) }
                    let foldWarning = self.foldWarning(event, app: accepted.events.withUnsafeBufferPointer { $0[0].app })
                    self.applyCommitted(event)
                    reply.appended(rid: rid, partition: partition, seq: seq, warnings: foldWarning.map { accepted.warnings + [$0] } ?? accepted.warnings,
                                   in: self.replyScratch)
                } else {
                    reply(self.replyFor(outcome: outcome, rid: rid, warnings: accepted.warnings))
                }
                self.fireTimersSoon()  // see `append`
            }
        }
        store.kick()
    }

    /// The row of an admitted event. Only a submit carries the idempotency key in its row:
    /// withdraw, snooze and opened name the notification in their body, and must not collide
    /// with the submit's unique key.
    private static func row(_ draft: borrowing EventDraft, at: Instant) -> EventRow {
        withUnsafePointer(to: draft) { row(draftAt: $0, at: at) }
    }

    /// `row(_:at:)` of the draft at `d`, its fields read one by one where they lie. The body is
    /// the field `canonicalBody` when the door wrote it (every submit); only otherwise the
    /// computed `storedBody`, a getter called on the whole draft (which copies it).
    private static func row(draftAt d: UnsafePointer<EventDraft>, at: Instant) -> EventRow {
        EventRow(user: d.pointee.user, type: d.pointee.type, app: d.pointee.app,
                 notificationId: d.pointee.type == "submit" ? d.pointee.notificationId : nil,
                 bodyBytes: d.pointee.canonicalBody ?? d.pointee.storedBody, engineTime: at)
    }

    /// An append failed: the connection broke with it in flight, so it may have committed
    /// (reconciled after the reconnect); the client is told it was not stored for sure.
    private func appendFailed(_ error: StoreError, at: Instant, rid: JSONValue?, reply: Reply) {
        if !store.isReady { appendsInFlight.outcomeLost(at: at) }
        reply(WireReply.error(rid: rid, requestError(error)))
        if case .fenced = error, case .stopServing(let epoch) = lease.appendFenced() {
            leaseLost(epoch: epoch, why: "an append was refused by the epoch check: another instance took it over")
        }
    }

    /// The negative control (tests only, `acknowledgeBeforeCommitForTesting`): answers success now,
    /// before anything is stored, and returns a reply that drops the real outcome.
    func acknowledgeNowForTesting(_ request: ClientSession.Request, _ reply: Reply) -> Reply {
        reply(WireReply.ok(rid: request.rid, ["partition": .int(Int64(partition)), "seq": .int(0), "warnings": .array([])]))
        var dropped = reply
        dropped.dropped = true
        return dropped
    }

    /// The store's writer, or nil after answering `store_unavailable` (PostgreSQL is being reconnected).
    func writerOrRefuse(rid: JSONValue?, reply: Reply) -> GroupCommitWriter? {
        if appendsInFlight.unknownCommitSince != nil {
            reply(WireReply.error(rid: rid, .storeUnavailable("Herald is reading back appends whose commit it could not confirm")))
            return nil
        }
        switch store.currentWriter() {
        case .success(let writer):
            return writer
        case .failure(let error):
            reply(WireReply.error(rid: rid, requestError(error)))
            return nil
        }
    }

    /// After a reconnect: folds the events that committed although their COMMIT reply was lost
    /// with the connection (seq above the last one folded), so a retry answered as a duplicate
    /// finds its event decided, in log order. Blocking read (as at start-up); on failure it is
    /// tried again on the next reconnect or after a second.
    func reconcileUnknownCommits() {
        guard appendsInFlight.unknownCommitSince != nil else { return }
        do {
            let conn = try PGConnection.connect(configuration.databaseURL)
            defer { conn.close() }
            var found = 0
            // After what is folded or waiting to fold (events held for lean content are known already).
            var after = lastCommittedSeq
            while true {
                let page = try EventReader.events(conn, partition: partition, after: after, limit: 10_000)
                if page.isEmpty { break }
                for var e in page {
                    eventsCommitted += 1
                    found += 1
                    e.row.bodyBytes = contentKeys.ring.readable(e.row.bodyBytes, user: e.row.user)
                    applyCommitted(e.storedEvent)
                    after = e.seq
                }
            }
            appendsInFlight.reconciled()
            log("after the reconnect: \(found) event(s) whose COMMIT reply was lost had committed; folded")
            fireTimersSoon()
        } catch {
            log("could not read back appends of unknown outcome (\(error)); retrying")
            retryReconcile = loop.timer { [unretained] in
                unretained.object?.reconcileUnknownCommits()
                unretained.object?.flushDeliveries()
            }
            retryReconcile?.arm(afterMilliseconds: 1_000)
        }
    }

    /// The in-flight key of a submit: (app, id, user), unique forever (SPEC §3; a fan-out has
    /// one key per recipient). Other events carry none. Three fields, not one joined `String`:
    /// joining them would allocate per submit.
    /// The strings are hashed once, when the key is made: the key is looked up, inserted
    /// and removed again, and each of those would otherwise hash all its strings.
    /// The hash is over the strings' UTF-8 bytes, as the store's unique index tells keys apart
    /// (PostgreSQL compares bytes); `String.hash(into:)` would check each string's normalization
    /// first. It is a multiply-fold hash (wyhash's mixing)
    /// seeded at random per process, and the dictionary mixes it with its seed by one multiply
    /// (`_rawHashValue`): the seeded `Hasher` (SipHash) over the bytes and once more over the
    /// result is measurably slower per submit. The keys are those in flight only,
    /// and the seed is unknown to clients, so colliding keys cannot be chosen; equality still
    /// compares the strings.
    struct InFlightKey: Hashable {
        let app: String
        let id: String
        let user: String
        private let hash: Int

        private static let seed = UInt64.random(in: .min ... .max)

        /// The 128-bit product's halves folded together: every input bit reaches every output bit.
        @inline(__always)
        private static func fold(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let p = a.multipliedFullWidth(by: b)
            return p.high ^ p.low
        }

        /// Mixes a string's bytes, eight at a time, then its last bytes with its length: the
        /// length keeps the fields apart (("ab", "c") and ("a", "bc") differ).
        @inline(__always)
        private static func mix(_ s: String, into h: inout UInt64) {
            s.withUTF8Bytes { b in
                let n = b.count
                var k = 0
                if let raw = UnsafeRawPointer(b.baseAddress) {
                    while k + 8 <= n {
                        h = fold(h ^ raw.loadUnaligned(fromByteOffset: k, as: UInt64.self), 0x9E37_79B9_7F4A_7C15)
                        k += 8
                    }
                }
                var tail = UInt64(truncatingIfNeeded: n) << 56
                var shift: UInt64 = 0
                while k < n {
                    tail |= UInt64(b[k]) << shift
                    shift += 8
                    k += 1
                }
                h = fold(h ^ tail, 0xBF58_476D_1CE4_E5B9)
            }
        }

        /// Equal hashes (of the bytes) first, so equal keys always hash alike; then `String ==`,
        /// which for the short ids in keys compares their inline bits.
        static func == (a: InFlightKey, b: InFlightKey) -> Bool {
            a.hash == b.hash && a.id == b.id && a.user == b.user && a.app == b.app
        }

        func hash(into h: inout Hasher) { h.combine(hash) }

        /// What `Dictionary` and `Set` use: the key's own hash, mixed with the table's seed once
        /// (one multiply, not a SipHash over it).
        func _rawHashValue(seed: Int) -> Int {
            Int(truncatingIfNeeded: Self.fold(UInt64(truncatingIfNeeded: hash) ^ UInt64(truncatingIfNeeded: seed), 0x94D0_49BB_1331_11EB))
        }
    }
}

extension HeraldService.InFlightKey {
    init(app: String, id: String, user: String) {
        self.init(app: app, id: id, user: user, hash: Self.hashOf(app: app, id: id, user: user))
    }

    init?(_ draft: borrowing EventDraft) {
        guard let key = withUnsafePointer(to: draft, { Self(draftAt: $0) }) else { return nil }
        self = key
    }

    /// The key of the draft at `d`, its fields read where they lie (a `borrowing` draft taken
    /// from an array would be copied whole, seven strings and arrays retained and released). Built
    /// by the memberwise initializer: one that set the fields one by one would copy the key whole
    /// (see `InPlace` in HeraldCore).
    init?(draftAt d: UnsafePointer<EventDraft>) {
        guard d.pointee.type == "submit", let id = d.pointee.notificationId, let app = d.pointee.app,
              let user = d.pointee.user else { return nil }
        self.init(app: app, id: id, user: user, hash: Self.hashOf(app: app, id: id, user: user))
    }

    private static func hashOf(app: String, id: String, user: String) -> Int {
        var h = seed
        mix(app, into: &h); mix(id, into: &h); mix(user, into: &h)
        return Int(truncatingIfNeeded: fold(h, 0x2D35_8DCC_AA6C_78A5))
    }
}

extension HeraldService {
    /// The reply to a request of several events, or to a fan-out (`counted`, even of one user):
    /// the first seq, `events` and `appended`.
    func replyFor(outcomes: [AppendOutcome], rid: JSONValue?, warnings: [RequestWarning], counted: Bool = false) -> [UInt8] {
        guard let first = outcomes.first else { return WireReply.ok(rid: rid, ["warnings": .array(warnings.map(\.json))]) }
        if outcomes.count > 1 || counted {
            // Each recipient is its own key (SPEC §3): the new ones are appended, the known ones
            // answered by their stored rows; `duplicate` when none was new.
            let appended = outcomes.filter { if case .appended = $0 { return true } else { return false } }.count
            let conflict = outcomes.first { if case .conflict = $0 { return true } else { return false } }
            var fields: [String: JSONValue] = ["partition": .int(Int64(partition)), "seq": .int(first.seq), "events": .int(Int64(outcomes.count)),
                                               "appended": .int(Int64(appended)), "warnings": .array(warnings.map(\.json))]
            if appended == 0 {
                fields["duplicate"] = true
                fields["warnings"] = .array([])
            }
            if let conflict {
                fields["warnings"] = .array((fields["warnings"]?.arrayValue ?? []) + [Self.duplicateDiffers(seq: conflict.seq).json])
            }
            return WireReply.ok(rid: rid, fields)
        }
        return replyFor(outcome: first, rid: rid, warnings: warnings)
    }

    func replyFor(outcome: AppendOutcome, rid: JSONValue?, warnings: [RequestWarning]) -> [UInt8] {
        switch outcome {
        case .appended(let seq):
            return WireReply.appended(rid: rid, partition: partition, seq: seq, warnings: warnings, using: &replyScratch.sink)
        case .duplicate(let seq):
            return WireReply.ok(rid: rid, ["partition": .int(Int64(partition)), "seq": .int(seq), "duplicate": true, "warnings": .array([])])
        case .conflict(let seq):
            // SPEC §3: re-submitting a used id is acknowledged as a duplicate, whatever it carries;
            // the warning says the stored request differs (nothing of this one was kept).
            return WireReply.ok(rid: rid, ["partition": .int(Int64(partition)), "seq": .int(seq), "duplicate": true, "warnings": .array([Self.duplicateDiffers(seq: seq).json])])
        }
    }

    /// The warning of a re-sent id whose payload or recipients differ from the stored request's.
    static func duplicateDiffers(seq: Int64) -> RequestWarning {
        RequestWarning(code: "duplicate_differs", title: "This id was already used: the submit stored at seq \(seq) stands",
                       detail: "App and id are unique forever, whoever the users: this submit, whose payload or recipients differ, was neither stored nor delivered. Use a new id for new content or other users.")
    }

    func requestError(_ error: StoreError) -> RequestError {
        if error.isRetryable { return .storeUnavailable(error.clientReason) }
        if case .fenced = error {
            return RequestError(code: "not_owner", title: "This instance no longer owns the partition",
                                detail: "Another instance took the partition over; nothing of this request was stored. Send it again to another instance (idempotency makes that safe).")
        }
        return RequestError(code: "store_error", title: "The request could not be stored",
                            detail: "PostgreSQL refused it: \(error). This is a server-side problem; report it with the time of the request.")
    }
}
