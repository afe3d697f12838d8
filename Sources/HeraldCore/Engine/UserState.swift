// One user's folded state: settings, authorization, Focus, summary schedule, pending items, badges.

/// What one app may do for one user, and its badge. Plain scalars (no references), so a
/// copy is free; the recently delivered list is beside it in the user's `AppTable`.
struct AppState: Hashable, Sendable {
    var status: AuthorizationStatus = .notDetermined
    var options: AuthorizationOptions = []
    var flags: AppFlags = .defaults
    var provisionalChoice: ProvisionalChoice = .undecided
    /// Delivered, unopened notifications (SPEC §3 "Badge").
    var badge: Int32 = 0
    var mutedUntil: Instant?
}

/// A delivered notification remembered for collapse, opened, withdraw and snooze: slim
/// (no content), so remembering many stays cheap.
struct DeliveredRecord: Hashable, Sendable {
    var id: String
    var seq: Int64
    var collapseId: String?
    /// True while it counts toward the app's badge (delivered with badges on, not opened).
    var counted: Bool
}

extension DeliveredRecord {
    /// Through the memberwise initializer, which builds in place (see `InPlace`).
    init(_ n: SubmittedNotification, seq: Int64, counted: Bool) {
        self.init(id: n.id, seq: seq, collapseId: n.collapseId, counted: counted)
    }
}

/// The content of a recent delivery, kept so a snooze can deliver it again.
struct SnoozableRecord: Hashable, Sendable {
    var notification: SubmittedNotification
    var seq: Int64
}

/// Where a pending notification waits.
enum PendingStage: UInt8, Hashable, Sendable {
    /// `deliverAt` in the future: decided then.
    case deferred
    /// In the next Scheduled Summary.
    case queued
    /// Held by a Focus, listed in its digest when it ends.
    case held
}

/// A notification not yet in its final place.
///
/// Lean by design (docs/restart.md): what matching and the timers need is kept inline — the
/// key (app, id), the collapse id, the deadline, the expiry — and the notification itself
/// (`content`) is optional for a **deferred** item: nil means its content stays in `events`
/// at `seq`, and the runtime loads it (`UserState.contentNeeded(upTo:)`, `supplyContent`)
/// before the decision at `deliverAt` needs it. Queued and held items always carry content
/// (a summary or digest lists it). `content` is a cache for deferred items: `==` ignores it
/// there (the stored submit at `seq` decides it).
struct PendingItem: Sendable {
    var seq: Int64
    var app: String
    var id: String
    var collapseId: String?
    /// Deferred: `deliverAt` (the decision). Queued, held: the first expired millisecond
    /// (`expiresAt` + 1 ms), nil without an expiry.
    var deadline: Instant?
    var expiresAt: Instant?
    var stage: PendingStage
    var counted: Bool
    /// The notification; nil only for a deferred item whose content is left in `events`.
    var content: SubmittedNotification?

    /// The notification: present for queued and held items, and for deferred ones once loaded.
    var notification: SubmittedNotification {
        guard let content else {
            preconditionFailure("pending item \(seq) (\(app), \(id)) decided without its content: the runtime must supply it first (UserState.contentNeeded)")
        }
        return content
    }
}

extension PendingItem {
    /// Through the memberwise initializer, which builds in place (see `InPlace`).
    init(notification n: SubmittedNotification, seq: Int64, stage: PendingStage, counted: Bool) {
        let deadline: Instant? = switch stage {
        case .deferred: n.deliverAt ?? .epoch
        case .queued, .held: n.expiresAt.map { $0.adding(.init(milliseconds: 1)) }
        }
        self.init(seq: seq, app: n.app, id: n.id, collapseId: n.collapseId, deadline: deadline, expiresAt: n.expiresAt,
                  stage: stage, counted: counted, content: n)
    }

    /// A lean deferred item (restored from a snapshot): content left in `events` at `seq`.
    init(leanDeferred seq: Int64, app: String, id: String, collapseId: String?, deliverAt: Instant,
         expiresAt: Instant?, counted: Bool) {
        self.init(seq: seq, app: app, id: id, collapseId: collapseId, deadline: deliverAt, expiresAt: expiresAt,
                  stage: .deferred, counted: counted, content: nil)
    }
}

extension PendingItem: Hashable {
    static func == (a: PendingItem, b: PendingItem) -> Bool {
        a.seq == b.seq && a.app == b.app && a.id == b.id && a.collapseId == b.collapseId && a.deadline == b.deadline
            && a.expiresAt == b.expiresAt && a.stage == b.stage && a.counted == b.counted
            && (a.stage == .deferred || a.content == b.content)
    }

    func hash(into h: inout Hasher) {
        h.combine(seq); h.combine(app); h.combine(id); h.combine(stage); h.combine(counted)
    }
}

/// A delivered notification that alerts again once at `until`.
struct Snooze: Hashable, Sendable {
    /// The notification's key, known without its content.
    var app: String
    var id: String
    /// `UserState.placeholder` in a state decoded from a snapshot until the restore supplies it.
    var notification: SubmittedNotification
    /// The submit's seq.
    var seq: Int64
    var until: Instant
    var causeSeq: Int64

    /// The content, loaded: the key comes with it (a snapshot's snooze has only its seq).
    mutating func supply(_ n: SubmittedNotification) {
        notification = n
        app = n.app
        id = n.id
    }
}

/// A Focus as the user defined it (`focusDefine`).
public struct FocusDefinition: Hashable, Sendable {
    public var name: String
    /// Sorted, unique.
    public var allowedPeople: [String]
    /// Sorted, unique.
    public var allowedApps: [String]
    public var allowTimeSensitive: Bool
    /// The weekly schedule, if any.
    public var calendar: FocusCalendar?

    /// Creates one from its fields.
    public init(name: String, allowedPeople: [String] = [], allowedApps: [String] = [],
                allowTimeSensitive: Bool = true, calendar: FocusCalendar? = nil) {
        self.name = name
        self.allowedPeople = Array(Set(allowedPeople)).sorted()
        self.allowedApps = Array(Set(allowedApps)).sorted()
        self.allowTimeSensitive = allowTimeSensitive
        self.calendar = calendar
    }
}

/// Focus definitions and the manual switches.
struct FocusState: Hashable, Sendable {
    /// Sorted by name.
    var definitions: [FocusDefinition] = []
    /// The Focus turned on by hand, and until when (nil = until turned off).
    var manual: String?
    var manualUntil: Instant?
    /// Scheduled Focuses turned off by hand during a window: off until the window's end.
    var offUntil: [String: Instant] = [:]

    func definition(_ name: String) -> FocusDefinition? {
        definitions.first { $0.name == name }
    }

    mutating func define(_ d: FocusDefinition) {
        if let i = definitions.firstIndex(where: { $0.name == d.name }) { definitions[i] = d } else {
            definitions.append(d)
            definitions.sort { $0.name < $1.name }
        }
    }

    /// The Focus turned on by hand and still on at `t` (its `until`, if any, not reached).
    func manual(at t: Instant) -> String? {
        guard let m = manual, manualUntil.map({ t < $0 }) ?? true else { return nil }
        return m
    }

    /// The Focus active at `t`: the manual one while on, else the first (by name)
    /// scheduled one whose window contains `t` and that was not turned off by hand.
    func active(at t: Instant) -> FocusDefinition? {
        if let m = manual(at: t), let d = definition(m) { return d }
        for d in definitions {
            guard let cal = d.calendar, cal.isActive(at: t) else { continue }
            if let off = offUntil[d.name], t < off { continue }
            return d
        }
        return nil
    }

    /// The earliest instant after `t` at which `active(at:)` may change.
    func nextChange(after t: Instant) -> Instant? {
        // A manual Focus in force wins over every schedule until it ends: schedule transitions
        // before then cannot change `active(at:)`. Without this, a Focus turned on by hand for
        // years over a daily schedule, holding notifications, woke the user twice a day, each
        // wake-up finding nothing to do (found by the fuzz target advancing to the end of time:
        // 1.5M wake-ups, 28 s).
        if let m = manual(at: t), definition(m) != nil { return manualUntil }
        var best: Instant?
        func consider(_ x: Instant?) {
            guard let x, x > t else { return }
            if best == nil || x < best! { best = x }
        }
        if manual != nil { consider(manualUntil) }
        for d in definitions { consider(d.calendar?.nextTransition(after: t)) }
        for k in offUntil.keys.sorted() { consider(offUntil[k]) }
        return best
    }
}

/// One user's state: the fold of that user's events. Users are independent.
/// Small when idle: apps, pending items and Focus data are empty collections (no heap)
/// until events fill them.
public struct UserState: Hashable, Sendable {
    /// The user this state belongs to.
    public let user: String
    var global = GlobalSettings()
    /// Per app: its settings and badge, and its most recently delivered notifications (oldest
    /// first), kept for collapse onto a delivered one, snooze, `opened` and `withdraw`: the last
    /// `Engine.recentLimit` at least (see `rememberDelivered`); older ones are forgotten.
    var apps = AppTable()
    /// Deferred, queued and held notifications, in arrival (seq) order. Change only
    /// through `insertPending` / `removePending` (they keep the counts and deadlines).
    private(set) var pending: [PendingItem] = []
    private(set) var queuedCount: Int32 = 0
    private(set) var heldCount: Int32 = 0
    /// The content of the last deliveries (all apps), for snooze: at least `Engine.snoozableLimit`.
    var snoozable: [SnoozableRecord] = []
    /// When the next summary fires (set while something is queued).
    var summaryDue: Instant?
    /// Summary schedule, Focus, snoozes, attention budget and early withdrawals: fields most
    /// users never set, boxed (nil until one is), so a user costs ~110 bytes inline instead of
    /// ~250 (docs/restart.md: a million users are a million dictionary values, twice over).
    var rare = RareFields()
    /// Seq of the last event folded.
    public internal(set) var lastSeq: Int64 = 0

    /// A fresh user with every SPEC §3 default.
    public init(user: String) { self.user = user }
}

/// The rarely set parts of a user's state, in one copy-on-write box (nil = all defaults).
struct RareFields: Hashable, Sendable {
    struct Values: Hashable, Sendable {
        var summarySchedule: SummaryCalendar?
        var focus = FocusState()
        /// The Focus that holds the `held` items; nil when none are held.
        var heldFocus: String?
        /// When to check whether `heldFocus` has ended.
        var focusCheckAt: Instant?
        var snoozes: [Snooze] = []
        /// The content `supplyContent` brought for the next snooze (`contentNeeded(toApply:)`);
        /// taken by that fold.
        var prefetched: SnoozableRecord?
        /// Banner instants of the last hour (kept only while an attention budget is set).
        var bannerTimes: [Instant] = []
        /// (app, id) withdrawn before their submit arrived (bounded).
        var tombstones: [NotificationKey] = []
    }

    /// Immutable once shared; mutated in place only while uniquely referenced.
    final class Box: @unchecked Sendable {
        /// Unchecked: written only while uniquely referenced (see `values`' `_modify`).
        @exclusivity(unchecked) var values: Values
        init(_ v: Values) { values = v }
    }

    /// File-private so `UserState`'s accessors read a field through the box directly: going
    /// through `values` builds (and destroys) a whole default `Values` for every user without a
    /// box, on every read (a measurable share of replay).
    fileprivate var box: Box?

    init() {}

    /// Whether any field was ever set (the box exists).
    var isAllocated: Bool { box != nil }

    var values: Values {
        get { box?.values ?? Values() }
        _modify {
            if box == nil { box = Box(Values()) } else if !isKnownUniquelyReferenced(&box!) { box = Box(box!.values) }
            yield &box!.values
        }
    }

    /// Sets a field only when it changes something (a nil or empty write never allocates the box).
    mutating func set<T: Equatable>(_ path: WritableKeyPath<Values, T>, _ value: T) {
        if box == nil && Values()[keyPath: path] == value { return }
        values[keyPath: path] = value
    }

    static func == (a: RareFields, b: RareFields) -> Bool { a.box === b.box || a.values == b.values }
    func hash(into h: inout Hasher) { values.hash(into: &h) }
}

extension UserState {
    /// The rare fields' box, nil while none was ever set (readers that walk every field, such as
    /// the snapshot encoder, read it once instead of building defaults per getter).
    var rareBox: RareFields.Box? { rare.box }

    var summarySchedule: SummaryCalendar? {
        get { rare.box?.values.summarySchedule }
        set { rare.set(\.summarySchedule, newValue) }
    }
    /// The Focus in force at `t`, read in the box: `focus.active(at:)` builds (and destroys) a
    /// default `FocusState` first for every user who never set one — each decision asks.
    func focusInForce(at t: Instant) -> FocusDefinition? { rare.box?.values.focus.active(at: t) }
    var focus: FocusState {
        get { rare.box?.values.focus ?? FocusState() }
        _modify { yield &rare.values.focus }
    }
    var heldFocus: String? {
        get { rare.box?.values.heldFocus }
        set { rare.set(\.heldFocus, newValue) }
    }
    var focusCheckAt: Instant? {
        get { rare.box?.values.focusCheckAt }
        set { rare.set(\.focusCheckAt, newValue) }
    }
    var snoozes: [Snooze] {
        get { rare.box?.values.snoozes ?? [] }
        _modify { yield &rare.values.snoozes }
    }
    var bannerTimes: [Instant] {
        get { rare.box?.values.bannerTimes ?? [] }
        _modify { yield &rare.values.bannerTimes }
    }

    /// Drops the banner instants outside the attention budget's hour ending at `t`: a banner at
    /// b counts for (b, b + 1 h], so those at or before t − 1 h no longer do.
    mutating func forgetBanners(before t: Instant) {
        let windowStart = t.adding(.hours(-1))
        bannerTimes.removeAll { $0 <= windowStart }
    }
    var tombstones: [NotificationKey] {
        get { rare.box?.values.tombstones ?? [] }
        _modify { yield &rare.values.tombstones }
    }
}

/// (app, notification id): the idempotency key of a notification.
struct NotificationKey: Hashable, Sendable {
    var app: String
    var id: String
}

extension UserState {
    /// The user's authorization status for `app` (for inspection and tests).
    public func authorization(of app: String) -> AuthorizationStatus { apps[app]?.status ?? .notDetermined }
    /// The badge count of `app`.
    public func badge(of app: String) -> Int { Int(apps[app]?.badge ?? 0) }
    /// The global settings.
    public var globalSettings: GlobalSettings { global }
    /// Number of pending (deferred, queued, held) notifications.
    public var pendingCount: Int { pending.count }
    /// The Focus active at `t`, by name.
    public func activeFocus(at t: Instant) -> String? { focus.active(at: t)?.name }
    /// Pending notifications as (app, id, stage) for `herald pending`-style listings.
    public var pendingList: [(app: String, id: String, stage: String)] {
        pending.map { ($0.app, $0.id, "\($0.stage)") }
    }
}

extension UserState {
    /// Inserts keeping seq order.
    mutating func insertPending(_ item: consuming PendingItem) {
        // Counted first: the item is then moved into the list, not copied (a borrowed one would be).
        switch item.stage {
        case .queued: queuedCount += 1
        case .held: heldCount += 1
        case .deferred: break
        }
        let seq = item.seq
        if let last = pending.last?.seq, last > seq {
            let i = pending.firstIndex { $0.seq > seq } ?? pending.count
            pending.insert(item, at: i)
        } else {
            pending.append(item)
        }
    }

    /// Removes the pending item at `i`.
    @discardableResult
    mutating func removePending(at i: Int) -> PendingItem {
        let item = pending.remove(at: i)
        switch item.stage {
        case .queued: queuedCount -= 1
        case .held: heldCount -= 1
        case .deferred: break
        }
        return item
    }

    /// The earliest deadline of a pending item (deferred decision or expiry), by (deadline,
    /// kind, seq). Derived by a scan, not kept in a sorted side array: that array would cost 24 bytes
    /// and an allocation per pending item (240 MB at 10M timers), and users hold few items.
    @inline(__always)
    var earliestItemDeadline: DueTimer? {
        var best: DueTimer?
        // By index, reading only the fields needed: `for p in pending` copies each item
        // (retaining its strings and content) on every call, several calls per event.
        for i in pending.indices {
            guard let deadline = pending[i].deadline else { continue }
            let d = DueTimer(deadline: deadline, kind: pending[i].stage == .deferred ? .deferred : .expiry, seq: pending[i].seq)
            if best == nil || d < best! { best = d }
        }
        return best
    }

    /// The index of the pending item with `seq` that is deferred (or, `deferred` false, queued
    /// or held), reading two fields of each item where it lies: `firstIndex(where:)` handed
    /// each item it looked at to its closure as a copy.
    func pendingIndex(seq: Int64, deferred: Bool) -> Int? {
        for i in pending.indices where pending[i].seq == seq && (pending[i].stage == .deferred) == deferred { return i }
        return nil
    }

    /// Removes and returns every pending item of `stage`, in seq order.
    mutating func removePending(stage: PendingStage) -> [PendingItem] {
        let queued = Int(queuedCount), held = Int(heldCount)
        let count = stage == .queued ? queued : (stage == .held ? held : pending.count - queued - held)
        var taken: [PendingItem] = []
        // Usually every pending item is of `stage` (a summary taking what was queued for it):
        // the whole array is taken, no copy.
        if count == pending.count {
            switch stage {
            case .queued: queuedCount = 0
            case .held: heldCount = 0
            case .deferred: break
            }
            swap(&taken, &pending)
            return taken
        }
        taken.reserveCapacity(count)
        var i = 0
        while i < pending.count {
            if pending[i].stage == stage { taken.append(removePending(at: i)) } else { i += 1 }
        }
        return taken
    }

    mutating func setCounted(_ counted: Bool, where match: (PendingItem) -> Bool) {
        for i in pending.indices where match(pending[i]) { pending[i].counted = counted }
    }

    /// The deadline a pending item arms: its decision (deferred) or its expiry (queued,
    /// held: expired means t > expiresAt, so the first such millisecond).
    static func deadline(of p: PendingItem) -> DueTimer? {
        guard let d = p.deadline else { return nil }
        return DueTimer(deadline: d, kind: p.stage == .deferred ? .deferred : .expiry, seq: p.seq)
    }
}

extension UserState {
    /// Seqs of deferred items due at or before `t` whose content is not in memory: the runtime
    /// loads them from `events` and hands them to `supplyContent` before applying an event at
    /// `t` or advancing to `t` (the decision needs the notification). Cheap when none are due.
    public func contentNeeded(upTo t: Instant) -> [Int64] {
        // Read in place, the cheap tests first: the runtime asks this of up to a slice's worth of
        // users before every slice, and `for p in pending` would copy each item (retaining its
        // strings).
        var seqs: [Int64] = []
        pending.withUnsafeBufferPointer { items in
            for i in items.indices where items[i].stage == .deferred && items[i].content == nil && items[i].deadline! <= t {
                seqs.append(items[i].seq)
            }
        }
        return seqs
    }

    /// The seq of the submit whose content folding `event` needs and memory no longer holds: a
    /// `snooze` of a notification delivered before the last deliveries whose content is kept
    /// (`Engine.snoozableLimit`), still among the app's recent records. The caller reads it
    /// from `events` and hands it to `supplyContent` before `apply` — the service, replay and
    /// `herald state` alike, so each folds the same notification. Nil for every other event.
    public func contentNeeded(toApply event: StoredEvent) -> Int64? {
        guard event.kind == .snooze, case .object(let b) = event.body,
              let app = b["app"]?.stringValue, let id = b["id"]?.stringValue,
              let rec = recent(app).last(where: { $0.id == id }),
              !snoozable.contains(where: { $0.seq == rec.seq }), snoozedContent(seq: rec.seq) == nil,
              rare.box?.values.prefetched?.seq != rec.seq else { return nil }
        return rec.seq
    }

    /// The content a pending snooze holds for the submit at `seq`.
    func snoozedContent(seq: Int64) -> SubmittedNotification? {
        guard rare.isAllocated else { return nil }
        return snoozes.last(where: { $0.seq == seq && !$0.notification.isSnapshotPlaceholder })?.notification
    }

    /// Takes what `supplyContent` left for the snooze of the submit at `seq` (and drops any other).
    mutating func takePrefetched(seq: Int64) -> SubmittedNotification? {
        guard rare.isAllocated, let p = rare.values.prefetched else { return nil }
        rare.values.prefetched = nil
        return p.seq == seq ? p.notification : nil
    }

    /// Reserves room for `n` more pending items (a snapshot's decoder knows the count: no
    /// doubling slack, which at ten items a user would be a third of their memory).
    mutating func reservePending(_ n: Int) {
        pending.reserveCapacity(pending.count + n)
    }

    /// Seqs of every pending item whose content is not in memory.
    public var contentMissing: [Int64] { pending.compactMap { $0.content == nil ? $0.seq : nil } }

    /// Supplies the content of the pending item at `seq` (the stored submit, decoded), or, with
    /// none waiting for it, of the notification the next event snoozes (`contentNeeded(toApply:)`).
    public mutating func supplyContent(_ n: SubmittedNotification, seq: Int64) {
        if supplyPendingContent(n, seq: seq) { return }
        if recent(n.app).contains(where: { $0.seq == seq }) && !snoozable.contains(where: { $0.seq == seq }) {
            rare.values.prefetched = SnoozableRecord(notification: n, seq: seq)
        }
    }

    /// Supplies the content of the pending item at `seq`; false when no item has that seq.
    mutating func supplyPendingContent(_ n: SubmittedNotification, seq: Int64) -> Bool {
        guard let i = pending.firstIndex(where: { $0.seq == seq }) else { return false }
        if pending[i].content == nil { pending[i].content = n }
        return true
    }

    /// Drops the content of deferred items due after `t` (it stays in `events` at their seq):
    /// what a far-future deferred notification costs in memory is then its key and deadline.
    public mutating func dropDeferredContent(dueAfter t: Instant) {
        for i in pending.indices where pending[i].stage == .deferred && pending[i].content != nil && pending[i].deadline! > t {
            pending[i].content = nil
        }
    }
}

extension UserState {
    /// Replaces every notification this state holds (pending items, snooze content, the content
    /// kept for snoozes) by its erased form (`SubmittedNotification.erased()`): an `erase` event's
    /// fold. What is decided later for these notifications carries no content.
    mutating func eraseContent() {
        for i in pending.indices { pending[i].content = pending[i].content?.erased() }
        for i in snoozable.indices { snoozable[i].notification = snoozable[i].notification.erased() }
        guard rare.isAllocated else { return }
        for i in snoozes.indices where !snoozes[i].notification.isSnapshotPlaceholder {
            snoozes[i].notification = snoozes[i].notification.erased()
        }
        if var p = rare.values.prefetched {
            p.notification = p.notification.erased()
            rare.values.prefetched = p
        }
    }
}
