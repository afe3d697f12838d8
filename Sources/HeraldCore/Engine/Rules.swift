// SPEC §3's delivery rules in order, with the §2 interruption-level table: one decision per call.

/// Stable reason codes carried by deliveries.
public enum Reason {
    public static let withdrawn = "withdrawn"
    public static let withdrawnBeforeArrival = "withdrawn_before_arrival"
    public static let withdrawnAfterDelivery = "withdrawn_after_delivery"
    public static let expired = "expired"
    public static let notAuthorized = "not_authorized"
    public static let notificationsDisabled = "notifications_disabled"
    public static let marketingNotConsented = "marketing_not_consented"
    public static let critical = "critical"
    public static let provisional = "provisional"
    public static let provisionalKept = "provisional_kept"
    public static let provisionalKeptSummary = "provisional_kept_summary"
    public static let muted = "muted"
    public static let collapsedIntoDelivered = "collapsed_into_delivered"
    public static let replacedByNewer = "replaced_by_newer"
    public static let communicationAllowedPerson = "communication_allowed_person"
    public static let summaryQueued = "summary_queued"
    public static let focusHeld = "focus_held"
    public static let focusAllowedApp = "focus_allowed_app"
    public static let focusAllowsTimeSensitive = "focus_allows_time_sensitive"
    public static let delivered = "delivered"
    public static let passive = "passive"
    public static let alertsOff = "alerts_off"
    public static let attentionBudget = "attention_budget"
    public static let summary = "summary"
    public static let focusEnded = "focus_ended"
    public static let badgeCleared = "badge_cleared"
}

extension Engine {
    /// Decides notification `n` for `state`'s user at `t` (arrival, `deliverAt`, or a
    /// snooze's end) and records the result in `state`. `carriedCount` is nil for a fresh
    /// notification; for a snoozed one it says whether it still counts toward the badge.
    func decide(_ n: SubmittedNotification, seq: Int64, at t: Instant, carriedCount: Bool?,
                state: inout UserState, apps: AppRegistry, out: inout [Delivery]) {
        var trace = RuleTrace()
        if carriedCount != nil { trace.append(.snooze, .applied) }
        // The app's entry, found once for the whole decision (nil: the user never set it up),
        // and a copy of its scalars (AppState holds no references: copying it is free).
        let appIndex = state.apps.index(of: n.app)
        let app = AppView(appIndex.map { state.apps[at: $0].state })
        let ents = apps.entitlements(of: n.app)

        func finish(_ kind: DeliveryKind, _ reason: String) {
            var d = Delivery(kind: kind, user: state.user, app: n.app, notificationId: n.id, at: t,
                             reason: reason, rulesVersion: rulesVersion, causeSeq: seq)
            d.ruleTrace = trace
            d.snoozed = carriedCount != nil
            out.append(d)
        }

        // Rules 1–4 and silence all (`gate`): the first that stops n decides.
        let criticalAllowed = app.allowsCritical(n, ents)
        let stopped = gate(n, at: t, app: app, ents: ents, criticalAllowed: criticalAllowed, state: state)
        for step in Gate.allCases {
            guard step == stopped else { trace.append(step.code, .pass); continue }
            trace.append(step.code, .decided)
            switch step {
            case .withdrawn:
                if let i = state.tombstones.firstIndex(of: NotificationKey(app: n.app, id: n.id)) { state.tombstones.remove(at: i) }
                finish(.withdrawn, Reason.withdrawnBeforeArrival)
            case .expired: finish(.expired, Reason.expired)
            case .notAuthorized: finish(.suppressed, Reason.notAuthorized)
            case .silenced: finish(.suppressed, Reason.notificationsDisabled)
            case .marketing: finish(.suppressed, Reason.marketingNotConsented)
            }
            return
        }

        // Collapse onto an already delivered notification: found now, applied below.
        var replacesRecord: DeliveredRecord?
        if carriedCount == nil, let cid = n.collapseId {
            replacesRecord = appIndex.flatMap { state.apps[at: $0].recent.last { $0.collapseId == cid } }
        }

        // 5. Critical (allowed): alert now, overriding silent, Focus, summary, mute.
        var level = n.level
        if criticalAllowed {
            trace.append(.critical, .decided)
            // Exempt from the attention budget, but counted (SPEC §10).
            if state.global.attentionBudget != nil {
                state.forgetBanners(before: t)
                state.bannerTimes.append(t)
            }
            let p = Presentation(banner: true, sound: true, lockScreen: true, notificationCenter: true, overrideSilent: true)
            land(n, seq: seq, kind: .alert, reason: Reason.critical, presentation: p, at: t, trace: trace,
                 replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
                 state: &state, out: &out)
            return
        }
        if level == .critical {
            // Entitled (checked at the door) but the user did not grant criticalAlert, or the
            // entitlement was revoked since: delivered as an ordinary `active` notification.
            level = .active
            trace.append(.critical, .downgraded)
        } else {
            trace.append(.critical, .pass)
        }
        if level == .timeSensitive && !app.flags.contains(.timeSensitive) {
            // The user turned Time Sensitive off for this app: treated as `active`.
            level = .active
            trace.append(.timeSensitiveSetting, .downgraded)
        }

        let quietPresentation = Presentation(notificationCenter: app.flags.contains(.notificationCenter))

        // 6. Provisional. Keep → Deliver in Scheduled Summary puts the app in the summary (SPEC §3
        // rule 6): it goes on to rules 7–11 as a summary app, so a mute makes it quiet, and Time
        // Sensitive and communication are not queued (rules 8 and 9).
        var keptInSummary = false
        switch app.status == .provisional ? app.provisionalChoice : nil {
        case nil:
            trace.append(.provisional, .pass)
        case .keptSummary?:
            trace.append(.provisional, .applied)
            keptInSummary = true
        case .undecided?:
            trace.append(.provisional, .decided)
            land(n, seq: seq, kind: .quiet, reason: Reason.provisional,
                 presentation: Presentation(notificationCenter: true), at: t, trace: trace,
                 replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: true, state: &state, out: &out)
            return
        case .keptImmediate?:
            // Delivered quietly as rule 6 defines quiet, without a badge (it does not count).
            trace.append(.provisional, .decided)
            land(n, seq: seq, kind: .quiet, reason: Reason.provisionalKept,
                 presentation: quietPresentation, at: t, trace: trace,
                 replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false, state: &state, out: &out,
                 badged: false)
            return
        }

        // 7. Muted until m > t.
        if let m = app.mutedUntil, m > t {
            trace.append(.muted, .decided)
            land(n, seq: seq, kind: .quiet, reason: Reason.muted, presentation: quietPresentation, at: t, trace: trace,
                 replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false, state: &state, out: &out)
            return
        }
        trace.append(.muted, .pass)

        // Collapse: the old one was already delivered → the new one is quiet, replacing it,
        // unless Time Sensitive (Critical was decided above).
        if replacesRecord != nil {
            if level != .timeSensitive {
                trace.append(.collapse, .decided)
                land(n, seq: seq, kind: .quiet, reason: Reason.collapsedIntoDelivered, presentation: quietPresentation,
                     at: t, trace: trace, replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
                     state: &state, out: &out)
                return
            }
            trace.append(.collapse, .applied)
        } else {
            trace.append(.collapse, .pass)
        }

        // 8. Communication: the sender decides Focus break-through; never summarized.
        let isCommunication = n.communication != nil && ents.contains(.communication)
        trace.append(.communication, isCommunication ? .applied : .pass)

        // 9. Scheduled Summary (passive/active only; Time Sensitive overrides).
        if !isCommunication && (app.flags.contains(.summaryDelivery) || keptInSummary) && (level == .passive || level == .active) {
            trace.append(.summary, .decided)
            land(n, seq: seq, kind: .queued, reason: keptInSummary ? Reason.provisionalKeptSummary : Reason.summaryQueued,
                 presentation: quietPresentation, at: t,
                 trace: trace, replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
                 state: &state, out: &out)
            return
        }
        trace.append(.summary, .pass)

        // 10. Focus.
        var reason = Reason.delivered
        if let f = state.focusInForce(at: t) {
            let breaks: Bool
            if isCommunication {
                breaks = n.senderAllowed(by: f.allowedPeople)
                reason = Reason.communicationAllowedPerson
            } else if f.allowedApps.contains(n.app) {
                breaks = true
                reason = Reason.focusAllowedApp
            } else {
                breaks = level == .timeSensitive && f.allowTimeSensitive
                reason = Reason.focusAllowsTimeSensitive
            }
            if !breaks {
                trace.append(.focus, .decided)
                land(n, seq: seq, kind: .held, reason: Reason.focusHeld, presentation: quietPresentation, at: t,
                     trace: trace, replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
                     state: &state, out: &out, focus: f.name)
                return
            }
            trace.append(.focus, .breaksThrough)
        } else {
            trace.append(.focus, .pass)
        }

        // 11. Normal.
        trace.append(.normal, .decided)
        if level == .passive {
            land(n, seq: seq, kind: .quiet, reason: Reason.passive, presentation: quietPresentation, at: t,
                 trace: trace, replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
                 state: &state, out: &out)
            return
        }
        var p = Presentation(banner: app.flags.contains(.alert), sound: app.flags.contains(.sound),
                             lockScreen: app.flags.contains(.lockScreen),
                             notificationCenter: app.flags.contains(.notificationCenter))
        if !p.banner && !p.sound {
            land(n, seq: seq, kind: .quiet, reason: Reason.alertsOff, presentation: p, at: t,
                 trace: trace, replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
                 state: &state, out: &out)
            return
        }
        var kind = DeliveryKind.alert
        if p.banner, let budget = state.global.attentionBudget {
            state.forgetBanners(before: t)
            if level == .active && state.bannerTimes.count >= Int(budget) {
                trace.append(.attentionBudget, .decided)
                kind = .quiet
                reason = Reason.attentionBudget
                p = quietPresentation
            } else {
                trace.append(.attentionBudget, .pass)
                state.bannerTimes.append(t)
            }
        }
        var intro = false
        if kind == .alert && level == .timeSensitive && !app.flags.contains(.timeSensitiveIntroSeen) {
            intro = true
            state.apps[at: appIndex ?? state.apps.slot(n.app)].state.flags.insert(.timeSensitiveIntroSeen)
            trace.append(.timeSensitiveIntro, .applied)
        }
        land(n, seq: seq, kind: kind, reason: reason, presentation: p, at: t, trace: trace,
             replaces: replacesRecord, appIndex: appIndex, carriedCount: carriedCount, provisional: false,
             state: &state, out: &out, timeSensitiveIntro: intro)
    }

    /// The first of rules 1–4 and silence all that stops `n` at `t` (nil: none does). Pure: `decide`
    /// acts on the answer, and a submit asks it before replacing a pending one.
    func gate(_ n: SubmittedNotification, at t: Instant, app: AppView, ents: Entitlements, criticalAllowed: Bool,
              state: UserState) -> Gate? {
        // 1. Withdrawn before t (a pending one is withdrawn by the withdraw event itself;
        // here: a withdraw that arrived before its submit).
        if state.tombstones.contains(NotificationKey(app: n.app, id: n.id)) { return .withdrawn }
        // 2. Expired: t > expiresAt.
        if let e = n.expiresAt, t > e { return .expired }
        // 3. Not authorized, with the critical exception.
        if (app.status == .notDetermined || app.status == .denied) && !criticalAllowed { return .notAuthorized }
        // Silence all: allowNotifications false lets only allowed critical and government through.
        if !state.global.allowNotifications && !criticalAllowed && !ents.contains(.government) { return .silenced }
        // 4. Marketing without consent.
        if n.marketing && !app.flags.contains(.marketingConsent) { return .marketing }
        return nil
    }

    /// Records a notification that reached the user (alert, quiet, queued, held): badge,
    /// collapse bookkeeping, pending or recent lists, and the delivery itself. `badged: false`
    /// (like `provisional`): it neither counts toward the badge nor carries it.
    func land(_ n: SubmittedNotification, seq: Int64, kind: DeliveryKind, reason: String, presentation: Presentation,
              at t: Instant, trace: RuleTrace, replaces: DeliveredRecord?, appIndex: Int?, carriedCount: Bool?, provisional: Bool,
              state: inout UserState, out: inout [Delivery], focus: String? = nil, timeSensitiveIntro: Bool = false,
              badged: Bool = true) {
        var p = presentation
        let user = state.user
        let previews = state.global.showPreviews
        // `decide` found the entry (nil: created here, with every default); nothing in between adds apps.
        let ai = appIndex ?? state.apps.slot(n.app)
        let (counted, badge) = state.apps[at: ai].count(replacing: replaces, carriedCount: carriedCount, badged: badged && !provisional)
        if let badge { p.badge = badge }
        if kind == .alert || kind == .quiet {
            state.apps[at: ai].remember(DeliveredRecord(n, seq: seq, counted: counted))
            state.rememberSnoozable(n, seq: seq)
        }
        var summaryAt: Instant?
        switch kind {
        case .queued:
            state.insertPending(PendingItem(notification: n, seq: seq, stage: .queued, counted: counted))
            if state.summaryDue == nil {
                state.summaryDue = (state.summarySchedule ?? Engine.defaultSummaryCalendar).nextFiring(after: t)
            }
            summaryAt = state.summaryDue
        case .held:
            state.insertPending(PendingItem(notification: n, seq: seq, stage: .held, counted: counted))
            if state.heldFocus == nil {
                state.heldFocus = focus
                state.focusCheckAt = state.focus.nextChange(after: t)
            }
        default:
            break
        }
        // Built by the memberwise initializer straight into the array's new slot (see `Delivery`).
        out.append(Delivery(kind: kind, user: user, app: n.app, notificationId: n.id, at: t, reason: reason,
                            presentation: p, notification: n, previews: previews, provisional: provisional,
                            replaces: replaces?.id, timeSensitiveIntro: timeSensitiveIntro, summaryAt: summaryAt,
                            focus: focus, snoozed: carriedCount != nil, ruleTrace: trace,
                            rulesVersion: rulesVersion, causeSeq: seq))
    }
}

/// Rules 1–4 and silence all, in the order `decide` checks them: each stops a notification
/// before anything is presented.
enum Gate: CaseIterable {
    case withdrawn, expired, notAuthorized, silenced, marketing

    var code: RuleCode {
        switch self {
        case .withdrawn: .withdrawn
        case .expired: .expired
        case .notAuthorized: .notAuthorized
        case .silenced: .silenceAll
        case .marketing: .marketing
        }
    }
}

/// The scalar settings of one app for one user, copied out for a decision.
struct AppView {
    var status: AuthorizationStatus = .notDetermined
    var options: AuthorizationOptions = []
    var flags: AppFlags = .defaults
    var provisionalChoice: ProvisionalChoice = .undecided
    var mutedUntil: Instant?

    init(_ a: AppState?) {
        guard let a else { return }
        status = a.status; options = a.options; flags = a.flags
        provisionalChoice = a.provisionalChoice; mutedUntil = a.mutedUntil
    }

    /// Rule 3's exception and rule 5's condition: `n` is critical, the app has the entitlement
    /// and the user granted `criticalAlert`.
    func allowsCritical(_ n: SubmittedNotification, _ ents: Entitlements) -> Bool {
        n.level == .critical && ents.contains(.critical) && options.contains(.criticalAlert)
    }
}

extension UserState {
    /// Appends to `app`'s recently delivered list (`AppTable.Entry.remember`), creating the entry if needed.
    mutating func rememberDelivered(_ r: DeliveredRecord, app: String) {
        apps[at: apps.slot(app)].remember(r)
    }
}

extension UserState {
    /// Runs `body` on the state of `app`, creating the default entry if needed.
    @inline(__always)
    mutating func withApp<R>(_ app: String, _ body: (inout AppState) -> R) -> R {
        body(&apps[at: apps.slot(app)].state)
    }

    /// Runs `body` on `app`'s recently delivered list; nil (and `body` not run) if the user has no such app.
    @inline(__always)
    mutating func withRecent<R>(_ app: String, _ body: (inout [DeliveredRecord]) -> R) -> R? {
        guard let i = apps.index(of: app) else { return nil }
        return body(&apps[at: i].recent)
    }

    /// `app`'s recently delivered list (empty if the user has no such app).
    func recent(_ app: String) -> [DeliveredRecord] {
        apps.index(of: app).map { apps[at: $0].recent } ?? []
    }

    /// Remembers a delivery's content for snooze (amortized trimming, like `AppState.remember`).
    mutating func rememberSnoozable(_ n: SubmittedNotification, seq: Int64) {
        snoozable.append(SnoozableRecord(notification: n, seq: seq))
        if snoozable.count >= 2 * Engine.snoozableLimit { snoozable.removeFirst(snoozable.count - Engine.snoozableLimit) }
    }
}
