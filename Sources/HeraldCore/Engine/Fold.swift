// Folding one committed event into a user's state; submits and withdraws emit decisions.

extension Engine {
    /// Folds `event` into `state`. Never fails: a committed event already happened, so a
    /// malformed or stale field is ignored (the door rejects such requests before storage).
    func fold(_ event: StoredEvent, into state: inout UserState, apps: AppRegistry, out: inout [Delivery]) {
        // A submit reads `decoded` (its body may be held as bytes only: not parsed here).
        let b = event.kind == .submit && event.decoded != nil ? JSONValue.null : event.body
        let t = event.at
        switch event.kind {
        case .submit:
            foldSubmit(event.decoded ?? SubmittedNotification(body: b), seq: event.seq, at: t, state: &state, apps: apps, out: &out)
        case .withdraw:
            guard let app = event.target?.app ?? b["app"]?.stringValue,
                  let id = event.target.map({ $0.id }) ?? b["id"]?.stringValue else { return }
            foldWithdraw(app: app, id: id, seq: event.seq, at: t, state: &state, out: &out)
        case .authorization:
            guard let app = b["app"]?.stringValue.map(apps.sharedName),
                  let status = b["status"]?.stringValue.flatMap(AuthorizationStatus.init(rawValue:)) else { return }
            var opts: AuthorizationOptions = []
            for o in b["options"]?.arrayValue ?? [] {
                if let name = o.stringValue, let (_, f) = AuthorizationOptions.wireNames.first(where: { $0.0 == name }) {
                    opts.insert(f)
                }
            }
            state.withApp(app) { a in
                a.status = status
                a.options = opts
                a.provisionalChoice = .undecided
                if status == .authorized || status == .provisional {
                    a.flags.remove([.alert, .sound, .badge])
                    if opts.contains(.alert) { a.flags.insert(.alert) }
                    if opts.contains(.sound) { a.flags.insert(.sound) }
                    if opts.contains(.badge) { a.flags.insert(.badge) }
                }
            }
        case .settings:
            foldSettings(b, state: &state, apps: apps)
        case .provisionalKeep:
            guard let app = b["app"]?.stringValue.map(apps.sharedName) else { return }
            let summary = b["delivery"]?.stringValue == DeliveryMode.summary.rawValue
            state.withApp(app) { a in
                if summary { a.flags.insert(.summaryDelivery) } else { a.flags.remove(.summaryDelivery) }
                if a.status == .provisional { a.provisionalChoice = summary ? .keptSummary : .keptImmediate }
            }
        case .provisionalTurnOff:
            guard let app = b["app"]?.stringValue.map(apps.sharedName) else { return }
            state.withApp(app) { a in
                a.status = .denied
                a.provisionalChoice = .undecided
            }
        case .summarySchedule:
            let times = (b["times"]?.arrayValue ?? []).compactMap { $0.stringValue.flatMap(LocalTime.init) }
            let zone = b["timeZone"]?.stringValue ?? "UTC"
            state.summarySchedule = try? SummaryCalendar(times: times, timeZone: zone)
            if state.summaryDue != nil {
                state.summaryDue = (state.summarySchedule ?? Engine.defaultSummaryCalendar).nextFiring(after: t)
            }
        case .focusDefine:
            guard let name = b["focus"]?.stringValue else { return }
            var calendar: FocusCalendar?
            if let sched = b["schedule"]?.arrayValue, !sched.isEmpty {
                let windows: [FocusWindow] = sched.compactMap { w in
                    guard let s = w["start"]?.stringValue.flatMap(LocalTime.init),
                          let e = w["end"]?.stringValue.flatMap(LocalTime.init) else { return nil }
                    let days = (w["days"]?.arrayValue ?? []).compactMap { $0.intValue.map(Int.init) }
                    return FocusWindow(days: days, start: s, end: e)
                }
                calendar = try? FocusCalendar(windows: windows, timeZone: b["timeZone"]?.stringValue ?? "UTC")
            }
            state.focus.define(FocusDefinition(
                name: name,
                allowedPeople: (b["allowedPeople"]?.arrayValue ?? []).compactMap(\.stringValue),
                allowedApps: (b["allowedApps"]?.arrayValue ?? []).compactMap(\.stringValue),
                allowTimeSensitive: b["allowTimeSensitive"]?.boolValue ?? true,
                calendar: calendar))
            focusChanged(&state, at: t, seq: event.seq, apps: apps, out: &out)
        case .focusOn:
            guard let name = b["focus"]?.stringValue else { return }
            if state.focus.definition(name) == nil { state.focus.define(FocusDefinition(name: name)) }
            state.focus.manual = name
            state.focus.manualUntil = b["until"]?.stringValue.flatMap(Instant.init(rfc3339:))
            state.focus.offUntil[name] = nil
            focusChanged(&state, at: t, seq: event.seq, apps: apps, out: &out)
        case .focusOff:
            guard let name = b["focus"]?.stringValue else { return }
            if state.focus.manual == name {
                state.focus.manual = nil
                state.focus.manualUntil = nil
            }
            if let cal = state.focus.definition(name)?.calendar, cal.isActive(at: t), var end = cal.activeUntil(t) {
                // A schedule covering the whole week never ends, so off "until the window ends" would
                // be off for good; it comes back at the next start of one of its windows (the next
                // day's, for an all-day window every day).
                if end == Instant.latestRepresentable, let next = cal.nextWindowStart(after: t) { end = next }
                state.focus.offUntil[name] = end
            }
            focusChanged(&state, at: t, seq: event.seq, apps: apps, out: &out)
        case .mute:
            guard let app = b["app"]?.stringValue.map(apps.sharedName) else { return }
            let until = b["until"]?.stringValue.flatMap(Instant.init(rfc3339:))
            state.withApp(app) { $0.mutedUntil = until.flatMap { $0 > t ? $0 : nil } }
        case .snooze:
            guard let app = b["app"]?.stringValue, let id = b["id"]?.stringValue,
                  let until = b["until"]?.stringValue.flatMap(Instant.init(rfc3339:)) else { return }
            guard let rec = state.recent(app).last(where: { $0.id == id }) else {
                // A held or queued one is in Notification Center too (SPEC §3 rules 9, 10), so the
                // user can snooze it.
                guard let i = state.pending.firstIndex(where: { $0.app == app && $0.id == id && $0.stage != .deferred })
                else { return }
                state.snooze(Snooze(app: app, id: id, notification: state.pending[i].notification, seq: state.pending[i].seq,
                                    until: max(until, t), causeSeq: event.seq))
                return
            }
            // The content of the user's last deliveries is in memory (`snoozable`), and that of a
            // notification snoozed already; an older one's was read from `events` by the caller
            // (`contentNeeded(toApply:)`). Without any (a tool folding without a store) the snooze
            // is ignored.
            let prefetched = state.takePrefetched(seq: rec.seq)
            guard let content = state.snoozable.last(where: { $0.seq == rec.seq })?.notification
                    ?? state.snoozedContent(seq: rec.seq) ?? prefetched
            else { return }
            // An `until` already past alerts again now (at the event's time, not in the past).
            state.snooze(Snooze(app: app, id: id, notification: content, seq: rec.seq, until: max(until, t), causeSeq: event.seq))
        case .opened:
            guard let app = event.target?.app ?? b["app"]?.stringValue else { return }
            let id = event.target.map({ $0.id }) ?? b["id"]?.stringValue
            // An id not remembered as counting (withdrawn, suppressed, never sent, or older than
            // the records kept) lowers nothing: a withdraw racing the user's tap lowers the badge once.
            var lower = id == nil
            if let id, let was = state.withRecent(app, { list -> Bool? in
                guard let i = list.lastIndex(where: { $0.id == id }) else { return nil }
                defer { list[i].counted = false }
                return list[i].counted
            }) ?? nil {
                lower = was
            } else if let id, let p = state.pending.first(where: { $0.app == app && $0.id == id }) {
                lower = p.counted  // opened from "upcoming summary" or while held
                state.setCounted(false) { $0.app == app && $0.id == id }
            } else if id == nil {
                // The newest counted notification (delivered, queued or held) is the one opened, so
                // a later withdraw or expiry of it does not lower the count again.
                let delivered = state.recent(app).last(where: \.counted)?.seq ?? -1
                let pending = state.pending.last(where: { $0.app == app && $0.counted })?.seq ?? -1
                if delivered > pending {
                    state.withRecent(app) { list in
                        if let i = list.lastIndex(where: { $0.seq == delivered }) { list[i].counted = false }
                    }
                } else if pending >= 0 {
                    state.setCounted(false) { $0.seq == pending }
                }
            }
            if lower { state.withApp(app) { $0.badge = max(0, $0.badge - 1) } }
        case .badgeClear:
            guard let app = b["app"]?.stringValue else { return }
            let badgeOn = state.withApp(app) { a -> Bool in
                a.badge = 0
                return a.flags.contains(.badge)
            }
            state.withRecent(app) { list in for i in list.indices { list[i].counted = false } }
            state.setCounted(false) { $0.app == app }
            var d = Delivery(kind: .cleared, user: state.user, app: app, notificationId: nil, at: t,
                             reason: Reason.badgeCleared, rulesVersion: rulesVersion, causeSeq: event.seq)
            if badgeOn { d.presentation = Presentation(badge: 0) }
            d.ruleTrace = RuleTrace(.badgeClear, .decided)
            out.append(d)
        case .erase:
            state.eraseContent()  // the user's content is erased: what stays pending decides without it
        case .registerApp, .clock, .other:
            break  // registerApp is folded by `apply`; clock moves time only; unknown types (from a newer build) are ignored
        }
    }

    func foldSubmit(_ n: SubmittedNotification, seq: Int64, at t: Instant, state: inout UserState,
                    apps: AppRegistry, out: inout [Delivery]) {
        // Idempotency is the runtime's ((app, id) unique forever: a duplicate is acked and
        // never stored). As a cheap second line of defence a duplicate of a pending one is ignored.
        if !state.pending.isEmpty,
           state.pending.contains(where: { $0.seq != seq && $0.id == n.id && $0.app == n.app }) {
            return
        }
        // Collapse: a pending notification with the same (user, app, collapseId) is replaced now,
        // only by one that reaches the user (`stopsAtArrival`). A deferred one replaces only the
        // scheduled ones now (a reschedule); the queued and held ones, already in Notification
        // Center, at its `deliverAt` (`fire`, `.deferred`).
        if let cid = n.collapseId, !stopsAtArrival(n, at: t, state: state, apps: apps) {
            let deferred = n.deliverAt.map { $0 > t } ?? false
            replacePending(app: n.app, collapseId: cid, onlyDeferred: deferred, by: seq, at: t,
                           state: &state, out: &out)
        }
        if let da = n.deliverAt, da > t {
            state.insertPending(PendingItem(notification: n, seq: seq, stage: .deferred, counted: false))
            return
        }
        decide(n, seq: seq, at: t, carriedCount: nil, state: &state, apps: apps, out: &out)
    }

    /// Collapse: every pending notification of `app` with `collapseId` (only the deferred ones,
    /// `onlyDeferred`) leaves as `replaced` (`replaced_by_newer`), caused by `seq`.
    func replacePending(app: String, collapseId cid: String, onlyDeferred: Bool, by seq: Int64, at t: Instant,
                        state: inout UserState, out: inout [Delivery]) {
        var i = 0
        while i < state.pending.count {
            if state.pending[i].app == app && state.pending[i].collapseId == cid
                && (!onlyDeferred || state.pending[i].stage == .deferred) {
                let p = state.removePending(at: i)
                emitRemoval(p, kind: .replaced, reason: Reason.replacedByNewer, at: t, causeSeq: seq,
                            state: &state, out: &out)
            } else {
                i += 1
            }
        }
        afterPendingRemoval(&state, at: t)
    }

    /// Whether rules 1–4 or silence all stop `n` at its arrival `t`: then it is never presented and
    /// replaces nothing (SPEC §3 Collapse, "one thing, one notification"). A deferred one is judged
    /// at `deliverAt`, so at arrival only an earlier withdraw of it stops it.
    func stopsAtArrival(_ n: SubmittedNotification, at t: Instant, state: UserState, apps: AppRegistry) -> Bool {
        if let da = n.deliverAt, da > t { return state.tombstones.contains(NotificationKey(app: n.app, id: n.id)) }
        return gateStops(n, at: t, state: state, apps: apps)
    }

    /// Whether rules 1–4 or silence all stop `n` at `t` (`gate`, with the app's state and entitlements looked up).
    func gateStops(_ n: SubmittedNotification, at t: Instant, state: UserState, apps: AppRegistry) -> Bool {
        let app = AppView(state.apps.index(of: n.app).map { state.apps[at: $0].state })
        let ents = apps.entitlements(of: n.app)
        let criticalAllowed = app.allowsCritical(n, ents)
        return gate(n, at: t, app: app, ents: ents, criticalAllowed: criticalAllowed, state: state) != nil
    }

    func foldWithdraw(app: String, id: String, seq: Int64, at t: Instant, state: inout UserState, out: inout [Delivery]) {
        if !state.snoozes.isEmpty { state.snoozes.removeAll { $0.app == app && $0.id == id } }
        if let i = state.pending.firstIndex(where: { $0.app == app && $0.id == id }) {
            let p = state.removePending(at: i)
            emitRemoval(p, kind: .withdrawn, reason: Reason.withdrawn, at: t, causeSeq: seq, state: &state, out: &out)
            afterPendingRemoval(&state, at: t)
            return
        }
        if let rec = state.withRecent(app, { list -> DeliveredRecord? in
            list.lastIndex(where: { $0.id == id }).map { list.remove(at: $0) }
        }) ?? nil {
            emitRemoval(PendingItem(notification: SubmittedNotification(id: id, app: app), seq: rec.seq, stage: .held, counted: rec.counted),
                        kind: .withdrawn, reason: Reason.withdrawnAfterDelivery, at: t, causeSeq: seq,
                        state: &state, out: &out)
            return
        }
        // Not known yet (or long forgotten): remember it so a later submit is not delivered.
        let key = NotificationKey(app: app, id: id)
        if !state.tombstones.contains(key) {
            state.tombstones.append(key)
            if state.tombstones.count > Engine.tombstoneLimit { state.tombstones.removeFirst() }
        }
    }

    /// Emits the end of a pending (or delivered) notification: replaced, withdrawn, expired
    /// (or suppressed, `screen`; `rule` names the deciding rule when the reason does not).
    /// Lowers the badge if it counted, and carries the new count.
    func emitRemoval(_ p: PendingItem, kind: DeliveryKind, reason: String, at t: Instant, causeSeq: Int64,
                     state: inout UserState, out: inout [Delivery], rule: RuleCode? = nil) {
        let badgeOn = state.withApp(p.app) { a -> Bool in
            if p.counted { a.badge = max(0, a.badge - 1) }
            return a.flags.contains(.badge)
        }
        var d = Delivery(kind: kind, user: state.user, app: p.app, notificationId: p.id,
                         at: t, reason: reason, rulesVersion: rulesVersion, causeSeq: causeSeq)
        if badgeOn && p.counted { d.presentation = Presentation(badge: Int(state.apps[p.app]!.badge)) }
        d.ruleTrace = RuleTrace(rule ?? (reason == Reason.expired ? .expired : (kind == .replaced ? .collapse : .withdrawn)), .decided)
        out.append(d)
    }

    /// The queued or held `items` a summary or Focus digest may still carry. An item
    /// whose app the user no longer authorizes (denied, Turn Off) or, under silence all, whose app
    /// lacks `government`, leaves it with a `suppressed` delivery (rule 3's or silence all's
    /// reason; the client removes it from "upcoming summary" or Notification Center), lowering the
    /// badge if it counted.
    func screen(_ items: [PendingItem], at t: Instant, state: inout UserState, apps: AppRegistry,
                out: inout [Delivery]) -> [PendingItem] {
        // By app name: handing each item to a closure would copy it (retains of all its strings).
        func stop(_ app: String) -> RuleCode? {
            let status = state.apps.index(of: app).map { state.apps[at: $0].state.status } ?? .notDetermined
            if status == .notDetermined || status == .denied { return .notAuthorized }
            if !state.global.allowNotifications && !apps.entitlements(of: app).contains(.government) { return .silenceAll }
            return nil
        }
        // The usual case, every item still allowed, makes no new array (the 08:00 storm).
        guard items.indices.contains(where: { stop(items[$0].app) != nil }) else { return items }
        var kept: [PendingItem] = []
        for p in items {
            guard let rule = stop(p.app) else { kept.append(p); continue }
            emitRemoval(p, kind: .suppressed, reason: rule == .notAuthorized ? Reason.notAuthorized : Reason.notificationsDisabled,
                        at: t, causeSeq: p.seq, state: &state, out: &out, rule: rule)
        }
        return kept
    }

    /// Clears summary / Focus bookkeeping when no queued / held items remain.
    func afterPendingRemoval(_ state: inout UserState, at t: Instant) {
        if state.queuedCount == 0 { state.summaryDue = nil }
        if state.heldCount == 0 {
            state.heldFocus = nil
            state.focusCheckAt = nil
        }
    }

    func foldSettings(_ b: JSONValue, state: inout UserState, apps: AppRegistry) {
        if let app = b["app"]?.stringValue.map(apps.sharedName) {
            state.withApp(app) { a in
                var presentationChanged = false
                for (name, flag) in AppFlags.settingNames {
                    guard let v = b[name]?.boolValue else { continue }
                    if v { a.flags.insert(flag) } else { a.flags.remove(flag) }
                    if flag != .marketingConsent && flag != .timeSensitive { presentationChanged = true }
                }
                if let d = b["delivery"]?.stringValue.flatMap(DeliveryMode.init(rawValue:)) {
                    if d == .summary { a.flags.insert(.summaryDelivery) } else { a.flags.remove(.summaryDelivery) }
                    presentationChanged = true
                }
                // A provisional app whose presentation the user set by hand is no longer
                // provisional: the user decided ("until settings change", SPEC §3 rule 6).
                if presentationChanged && a.status == .provisional {
                    a.status = .authorized
                    a.provisionalChoice = .undecided
                }
            }
            return
        }
        if let v = b["allowNotifications"]?.boolValue { state.global.allowNotifications = v }
        if let v = b["showPreviews"]?.stringValue.flatMap(ShowPreviews.init(rawValue:)) { state.global.showPreviews = v }
        if let v = b["attentionBudget"] {
            if case .int(let n) = v { state.global.attentionBudget = Int32(clamping: n) } else if v == .null {
                state.global.attentionBudget = nil
                if !state.bannerTimes.isEmpty { state.bannerTimes = [] }
            }
        }
    }

    /// After a Focus event or a Focus transition: if the Focus holding items is no longer
    /// the active one, emit its digest; else re-arm the check.
    func focusChanged(_ state: inout UserState, at t: Instant, seq: Int64?, apps: AppRegistry, out: inout [Delivery]) {
        guard let holding = state.heldFocus else { return }
        if state.focusInForce(at: t)?.name == holding {
            state.focusCheckAt = state.focus.nextChange(after: t)
            return
        }
        let removed = state.removePending(stage: .held)
        state.heldFocus = nil
        state.focusCheckAt = nil
        let held = screen(removed, at: t, state: &state, apps: apps, out: &out)
        guard !held.isEmpty else { return }
        let items = held.map { DeliveryItem(notification: $0.notification, seq: $0.seq, previews: state.global.showPreviews) }
        appendItemDeliveries(.focusDigest, reason: Reason.focusEnded, trace: RuleTrace(.focus, .ended), items: items,
                             at: t, user: state.user, focus: holding, causeSeq: seq, out: &out)
        state.remember(contentsOf: held)
    }
}

extension UserState {
    /// Whether a withdraw of (app, id) finds something: pending, snoozed, or among the app's
    /// deliveries kept (`recent`). The service's `nothing_to_withdraw` warning.
    public func knows(app: String, id: String) -> Bool {
        pending.contains { $0.app == app && $0.id == id } || snoozes.contains { $0.app == app && $0.id == id }
            || recent(app).contains { $0.id == id }
    }

    /// What a `focusOff` of `name` at `t` would find: a Focus on by hand (its `until` not
    /// reached), or a scheduled one inside a window and not turned off already — or neither
    /// (`notOn`), or no Focus of that name at all. The service's `focus_not_on` warning.
    public func focusOffFinds(_ name: String, at t: Instant) -> FocusOffFinding {
        if focus.manual(at: t) == name { return .on }
        guard let definition = focus.definition(name) else { return .undefined }
        guard let cal = definition.calendar, cal.isActive(at: t) else { return .notOn }
        if let off = focus.offUntil[name], t < off { return .notOn }
        return .on
    }

    /// Snoozes a notification: replaces any earlier snooze of it (by its submit's seq or its id).
    mutating func snooze(_ s: Snooze) {
        if !snoozes.isEmpty { snoozes.removeAll { $0.seq == s.seq || ($0.app == s.app && $0.id == s.id) } }
        snoozes.append(s)
    }

    /// Moves a formerly pending notification to the app's recently delivered list.
    mutating func remember(_ p: PendingItem) {
        rememberDelivered(DeliveredRecord(p.notification, seq: p.seq, counted: p.counted), app: p.notification.app)
        rememberSnoozable(p.notification, seq: p.seq)
    }

    /// Moves the items a summary or digest delivered to their apps' recently delivered lists.
    /// A list still empty gets room for all of them at once: a user's first summary grew each
    /// list 1 → 2 → 4 (an allocation and a copy each, for every user at a shared summary instant).
    mutating func remember(contentsOf items: [PendingItem]) {
        if snoozable.isEmpty { snoozable.reserveCapacity(items.count) }
        for i in items.indices {
            let slot = apps.slot(items[i].app)
            if apps[at: slot].recent.isEmpty { apps[at: slot].recent.reserveCapacity(items.count) }
            remember(items[i])
        }
    }
}

/// What a `focusOff` finds (`UserState.focusOffFinds`).
public enum FocusOffFinding: Sendable {
    case on, notOn, undefined
}
