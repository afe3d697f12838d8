// Time passing: the user's deadlines (deferred, expiry, summary, Focus end, snooze) in a fixed order.

/// The kinds of deadline, in the order they fire when due at the same instant: expiry
/// first (an item expiring at a summary instant is not summarized), then a Focus change
/// (its digest), then the summary, then deferred decisions (judged with the state the
/// earlier kinds left), then snoozes.
enum TimerKind: UInt8, Hashable, Comparable, Sendable {
    case expiry = 0, focusChange, summary, deferred, snooze
    static func < (a: TimerKind, b: TimerKind) -> Bool { a.rawValue < b.rawValue }
}

/// One due deadline of a user.
struct DueTimer: Hashable, Comparable, Sendable {
    var deadline: Instant
    var kind: TimerKind
    var seq: Int64
    static func < (a: DueTimer, b: DueTimer) -> Bool {
        (a.deadline, a.kind.rawValue, a.seq) < (b.deadline, b.kind.rawValue, b.seq)
    }
}

extension UserState {
    /// The earliest deadline of this user, by (deadline, kind, seq). Always inlined: it runs after
    /// every event (`fireTimers`).
    @inline(__always)
    func earliestTimer() -> DueTimer? {
        var best = earliestItemDeadline
        func consider(_ t: DueTimer) { if best == nil || t < best! { best = t } }
        if let s = summaryDue { consider(DueTimer(deadline: s, kind: .summary, seq: 0)) }
        if let f = focusCheckAt { consider(DueTimer(deadline: f, kind: .focusChange, seq: 0)) }
        for s in snoozes { consider(DueTimer(deadline: s.until, kind: .snooze, seq: s.causeSeq)) }
        return best
    }

    /// The first deferred decision, else the first snooze, due at exactly `t` (a summary instant),
    /// by seq: made before the summary due then fires.
    func decisionDue(at t: Instant) -> DueTimer? {
        var best: DueTimer?
        for i in pending.indices where pending[i].stage == .deferred && pending[i].deadline == t {
            if best == nil || pending[i].seq < best!.seq { best = DueTimer(deadline: t, kind: .deferred, seq: pending[i].seq) }
        }
        if best != nil { return best }
        for s in snoozes where s.until == t {
            if best == nil || s.causeSeq < best!.seq { best = DueTimer(deadline: t, kind: .snooze, seq: s.causeSeq) }
        }
        return best
    }

    /// The user's earliest pending deadline, nil if none (what the timing wheel holds).
    public func nextDeadline() -> Instant? { earliestTimer()?.deadline }
}

extension Engine {
    /// Fires every timer of `state` due at or before `now`, one at a time in order; each is
    /// judged at its own deadline. Returns the earliest deadline left (`nextDeadline()`,
    /// found by the same scan that stopped the loop).
    /// `byEventsVersion`: the timers an event just made due, decided by this engine's version
    /// (the event's); otherwise each by the version in force at its deadline (`RulesHistory`).
    @discardableResult
    func fireTimers(_ state: inout UserState, upTo now: Instant, apps: AppRegistry, out: inout [Delivery],
                    byEventsVersion: Bool = false) -> Instant? {
        while let timer = state.earliestTimer() {
            guard timer.deadline <= now else { return timer.deadline }
            if timer.kind == .summary {
                fire(decisionFirst(timer, state), &state, apps: apps, out: &out, byEventsVersion: byEventsVersion)
            } else {
                fire(timer, &state, apps: apps, out: &out, byEventsVersion: byEventsVersion)
            }
        }
        return nil
    }

    /// A deferred decision or snooze due at the instant of `summary` goes first (an item it
    /// queues then is in that summary). Out of line: this loop runs after every event, and the
    /// rare branch kept it from being inlined into `apply`.
    @inline(never)
    func decisionFirst(_ summary: DueTimer, _ state: UserState) -> DueTimer {
        state.decisionDue(at: summary.deadline) ?? summary
    }

    func fire(_ timer: DueTimer, _ state: inout UserState, apps: AppRegistry, out: inout [Delivery], byEventsVersion: Bool = false) {
        let t = timer.deadline
        // A timer an older build owed: decided by a copy of the engine under that build's version
        // (`RulesHistory.version(forTimerDueAt:)`).
        if !byEventsVersion && !book.latestDecides(timerDueAt: t) {
            let version = book.history.version(forTimerDueAt: t)
            if version != rulesVersion { return under(version).fire(timer, &state, apps: apps, out: &out) }
        }
        switch timer.kind {
        case .expiry:
            guard let i = state.pendingIndex(seq: timer.seq, deferred: false) else { return }
            let p = state.removePending(at: i)
            emitRemoval(p, kind: .expired, reason: Reason.expired, at: t, causeSeq: p.seq, state: &state, out: &out)
            afterPendingRemoval(&state, at: t)
        case .focusChange:
            focusChanged(&state, at: t, seq: nil, apps: apps, out: &out)
            if state.focusCheckAt == t { state.focusCheckAt = nil }  // never loop on one instant
        case .summary:
            state.summaryDue = nil
            // In seq (arrival) order, as `pending` keeps them: remembered in that order below.
            let queued = screen(state.removePending(stage: .queued), at: t, state: &state, apps: apps, out: &out)
            guard !queued.isEmpty else { return }
            let previews = state.global.showPreviews
            var items = queued.map { DeliveryItem(notification: $0.notification, seq: $0.seq, previews: previews) }
            items.sort { a, b in
                let ra = a.notification.relevanceScore ?? 0, rb = b.notification.relevanceScore ?? 0
                return ra != rb ? ra > rb : a.seq < b.seq
            }
            appendItemDeliveries(.summary, reason: Reason.summary, trace: RuleTrace(.summary, .fired), items: items,
                                 at: t, user: state.user, out: &out)
            state.remember(contentsOf: queued)
        case .deferred:
            guard let i = state.pendingIndex(seq: timer.seq, deferred: true) else { return }
            let p = state.removePending(at: i)
            // The queued and held ones of its collapse id leave now, if it reaches the user.
            if let cid = p.collapseId, !gateStops(p.notification, at: t, state: state, apps: apps) {
                replacePending(app: p.app, collapseId: cid, onlyDeferred: false, by: p.seq, at: t, state: &state, out: &out)
            }
            // Queued at one of the user's summary instants, it goes out in that summary (next in
            // this loop: decisions come before the summary due at `t`), not the next one.
            let summaryNow = state.summaryDue == nil
                && (state.summarySchedule ?? Engine.defaultSummaryCalendar).nextFiring(after: t.adding(.init(milliseconds: -1))) == t
            if summaryNow { state.summaryDue = t }
            decide(p.notification, seq: p.seq, at: t, carriedCount: nil, state: &state, apps: apps, out: &out)
            if summaryNow && state.queuedCount == 0 { state.summaryDue = nil }
        case .snooze:
            guard let si = state.snoozes.firstIndex(where: { $0.causeSeq == timer.seq && $0.until == t }) else { return }
            let s = state.snoozes.remove(at: si)
            // A snapshot's snooze whose content the restore never supplied: nothing to alert with
            // (the service's restore always supplies it, `snapshotContentNeeded`).
            guard !s.notification.isSnapshotPlaceholder else { return }
            let app = s.app
            // Still delivered (not withdrawn, replaced or long forgotten)? Or still held or queued,
            // snoozed there: it leaves its Focus or summary to be judged again now.
            let counted: Bool
            var fromPending = false
            if let rec = state.withRecent(app, { list -> DeliveredRecord? in
                list.lastIndex(where: { $0.seq == s.seq }).map { list.remove(at: $0) }
            }) ?? nil {
                counted = rec.counted
            } else if let i = state.pendingIndex(seq: s.seq, deferred: false) {
                counted = state.removePending(at: i).counted
                fromPending = true
            } else {
                return
            }
            let before = out.count
            decide(s.notification, seq: s.seq, at: t, carriedCount: counted, state: &state, apps: apps, out: &out)
            // After the decision, not before: the only queued item snoozed until the summary due
            // now, queued again, keeps that summary (cleared first, it moved to the next one).
            if fromPending { afterPendingRemoval(&state, at: t) }
            // Not delivered again (expired, suppressed…): it no longer counts toward the badge.
            if counted, let last = out.last, out.count > before,
               [.suppressed, .expired, .withdrawn].contains(last.kind) {
                let badgeOn = state.withApp(app) { a -> Bool in
                    a.badge = max(0, a.badge - 1)
                    return a.flags.contains(.badge)
                }
                // The delivery that lowered the count carries it (SPEC §3 Badge).
                if badgeOn { out[out.count - 1].presentation = Presentation(badge: Int(state.apps[app]!.badge)) }
            }
            for k in before..<out.count { out[k].causeSeq = s.causeSeq }
        }
    }
}

extension Engine {
    /// SPEC §5: a line is at most 64 KiB, delivery lines included.
    public static let maxDeliveryLineBytes = 65_536
    /// What a summary's or digest's items may take of a line: the rest of the line, its envelope
    /// (`{"cursor":n,"op":"delivery",` … `"user":…}`), is under 4 KiB, as its only unbounded
    /// members are a user and a Focus name, each at most 256 bytes before escaping.
    static let itemBytesPerLine = maxDeliveryLineBytes - 4_096
    /// How many items always fit: one is at most twice a stored notification (its content, and
    /// its app, id and thread beside it) and a little more.
    public static let itemsAlwaysFitting = itemBytesPerLine / (2 * maxPayloadBytes + 512)

    /// A summary or Focus digest carrying `items`: one delivery per line-sized run of them
    /// (`lineSizedParts`), each caused by `causeSeq` or else by its newest item.
    func appendItemDeliveries(_ kind: DeliveryKind, reason: String, trace: RuleTrace, items: [DeliveryItem], at t: Instant,
                              user: String, focus: String? = nil, causeSeq: Int64? = nil, out: inout [Delivery]) {
        let parts = lineSizedParts(items)
        for (i, part) in parts.enumerated() {
            var d = Delivery(kind: kind, user: user, app: nil, notificationId: nil, at: t, reason: reason,
                             rulesVersion: rulesVersion, causeSeq: causeSeq ?? part.map(\.seq).max()!)
            d.focus = focus
            d.items = parts.count == 1 ? items : Array(part)  // one part: the array itself, not a copy
            d.ruleTrace = trace
            // A consumer knows it has the whole summary when it has every part.
            if parts.count > 1 {
                d.part = Int32(i + 1)
                d.parts = Int32(parts.count)
            }
            out.append(d)
        }
    }

    /// `items` cut, in order, into runs whose line stays within `maxDeliveryLineBytes` (SPEC §5):
    /// a summary or digest too long for one line goes out as several at the same instant. Measured
    /// only past `itemsAlwaysFitting` items, so ordinary summaries cost nothing.
    func lineSizedParts(_ items: [DeliveryItem]) -> [ArraySlice<DeliveryItem>] {
        guard items.count > Engine.itemsAlwaysFitting else { return [items[...]] }
        var parts: [ArraySlice<DeliveryItem>] = []
        var sink = ByteSink(capacity: 2 * Engine.maxPayloadBytes)
        defer { sink.deallocate() }
        var start = 0, size = 2  // the brackets
        for i in items.indices {
            sink.removeAll()
            items[i].write(to: &sink)
            let n = sink.count + 1  // and its comma
            if i > start && size + n > Engine.itemBytesPerLine {
                parts.append(items[start..<i])
                start = i
                size = 2
            }
            size += n
        }
        parts.append(items[start...])
        return parts
    }
}
