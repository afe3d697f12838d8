// The decision engine's entry points: admit a request, apply a committed event, let time pass.

/// A committed event as the store hands it back: what the engine folds.
public struct StoredEvent: Hashable, Sendable {
    /// Global, gap-free sequence number.
    public var seq: Int64
    /// The user (partition key); nil for global events (`registerApp`).
    public var user: String?
    /// The op that produced it (`submit`, `settings`, …).
    public var type: String { didSet { kind = EventKind(type) } }
    /// `type`, decoded (what the engine branches on).
    public private(set) var kind: EventKind
    /// The normalized request body (see `EventDraft.body`): parsed from `bodyBytes` when the
    /// event came from a door-admitted submit (the fold reads `decoded` instead).
    public var body: JSONValue {
        get { bodyBytes.flatMap { try? JSONValue.parse($0) } ?? bodyValue }
        set { bodyValue = newValue; bodyBytes = nil }
    }
    private var bodyValue: JSONValue
    private var bodyBytes: [UInt8]?
    /// The engine time at which it was accepted.
    public var at: Instant
    /// For a `submit`: the notification already decoded from `body` (by `admit`, see
    /// `EventDraft.decoded`), so the hot path does not parse the body twice. A cache only:
    /// nil (as after a read from the store) means "parse `body`"; it must equal
    /// `SubmittedNotification(body: body)` and is ignored by `==` and `hash`.
    public var decoded: SubmittedNotification?
    /// For a `withdraw` or `opened` read from the store: the app and notification id its body
    /// names (all the fold reads of it), so replay and start-up need not build the body's
    /// dictionary. A cache like `decoded`: nil means "read `body`".
    public var target: NotificationTarget?

    /// Equal when the fields are (caches excluded).
    public static func == (a: StoredEvent, b: StoredEvent) -> Bool {
        a.seq == b.seq && a.user == b.user && a.type == b.type && a.body == b.body && a.at == b.at
    }

    /// Hashes the fields that `==` compares.
    public func hash(into h: inout Hasher) {
        h.combine(seq); h.combine(user); h.combine(type); h.combine(body); h.combine(at)
    }
}

extension StoredEvent {
    /// Creates one from its fields.
    public init(seq: Int64, user: String?, type: String, body: JSONValue, at: Instant,
                decoded: SubmittedNotification? = nil, target: NotificationTarget? = nil) {
        self.init(seq: seq, user: user, kind: EventKind(type), type: type, body: body, at: at, decoded: decoded, target: target)
    }

    /// Creates one whose `type` was already decoded (`kind` must be `EventKind(type)`).
    public init(seq: Int64, user: String?, kind: EventKind, type: String, body: JSONValue, at: Instant,
                decoded: SubmittedNotification? = nil, target: NotificationTarget? = nil) {
        self.init(seq: seq, user: user, kind: kind, type: type, body: body, bodyBytes: nil, at: at, decoded: decoded, target: target)
    }

    /// Every stored property at once: setting `bodyBytes` after a delegating init copies the
    /// whole event twice.
    private init(seq: Int64, user: String?, kind: EventKind, type: String, body: JSONValue, bodyBytes: [UInt8]?, at: Instant,
                 decoded: SubmittedNotification?, target: NotificationTarget?) {
        self.init(seq: seq, user: user, type: type, kind: kind, bodyValue: body, bodyBytes: bodyBytes, at: at,
                  decoded: decoded, target: target)  // the memberwise one: builds in place (see `InPlace`)
    }

    /// A stored event from a draft, with its seq and engine time (keeps the decoded cache). A
    /// submit the door admitted keeps its body as bytes, parsed only if `body` is asked for.
    public init(_ draft: borrowing EventDraft, seq: Int64, at: Instant) {
        self = withUnsafePointer(to: draft) { StoredEvent(draftAt: $0, seq: seq, at: at) }
    }

    /// `init(_:seq:at:)` of the draft at `d` (e.g. an element of an array, read through its
    /// buffer): its fields are read one by one where they lie. A `borrowing` draft passed from an
    /// array is copied whole first (its seven strings and arrays retained and released), and an
    /// event set field by field here would be built in a temporary and copied whole (`InPlace`).
    public init(draftAt d: UnsafePointer<EventDraft>, seq: Int64, at: Instant) {
        let bytes = !d.pointee.holdsBodyValue && d.pointee.decoded != nil ? d.pointee.canonicalBody : nil
        self.init(seq: seq, user: d.pointee.user, type: d.pointee.type, kind: EventKind(d.pointee.type),
                  bodyValue: bytes == nil ? d.pointee.body : .null, bodyBytes: bytes, at: at, decoded: d.pointee.decoded,
                  target: nil)
    }
}

/// What applying an event or letting time pass produced.
public struct Outcome: Hashable, Sendable {
    /// The decisions, in order.
    public var deliveries: [Delivery]
    /// The user's earliest pending deadline after this, nil if none. The runtime arms the
    /// timing wheel with it; a spurious or late wake is harmless.
    public var nextWake: Instant?
    /// Creates one from its fields.
    public init(deliveries: [Delivery], nextWake: Instant?) {
        self.deliveries = deliveries; self.nextWake = nextWake
    }
}

/// The decision engine: a value holding the rules version. Pure: every input (time
/// included) is an argument, every output a return value.
public struct Engine: Sendable {
    /// The version of the rules this build implements; recorded in every delivery.
    public static let currentRulesVersion = "1"
    /// How many delivered notifications per (user, app) are remembered for collapse,
    /// snooze, `opened` and `withdraw`.
    public static let recentLimit = 64
    /// How many recent deliveries per user keep their content so a snooze can deliver them
    /// again (at least this many, at most twice; an older one's is read back from the log by the
    /// fold's caller, see `UserState.contentNeeded(toApply:)`).
    public static let snoozableLimit = 16
    /// How many early withdrawals (withdraw before its submit) a user remembers.
    public static let tombstoneLimit = 64
    /// The summary times used when an app is set to summary delivery but the user has no
    /// schedule: 08:00 and 18:00 UTC (SPEC §3).
    public static var defaultSummaryCalendar: SummaryCalendar { SummaryCalendar.defaultSchedule }

    /// Every rules version this build can decide by (`RulesHistory`), oldest first. A change that
    /// can alter a stored delivery or timer of an existing log adds a version and keeps the older
    /// ones' code paths (docs/decisions/0002-rules-versions.md).
    public static let knownRulesVersions = ["1"]

    /// Which version decides each event and timer of the log being folded. A reference, so an
    /// engine copies as one word and a small string, and the service can adopt the log's history
    /// at start-up (`RulesBook.adopt`) while its engine stays a `let` its hot path borrows (a
    /// stored `var` engine would be copied at every call).
    public let book: RulesBook
    /// Set on a copy deciding what an older build owed (`under`).
    private var olderVersion: String?

    /// The rules version stamped on deliveries: the one deciding now.
    public var rulesVersion: String { olderVersion ?? book.latest }
    /// Which version decided each event and timer of the log.
    public var rules: RulesHistory { book.history }

    /// An engine deciding everything by one version (tools and tests without a store).
    public init(rulesVersion: String = Engine.currentRulesVersion) {
        self.init(rules: .only(rulesVersion))
    }

    /// An engine deciding each event and timer by the version `rules` says was in force.
    public init(rules: RulesHistory) {
        book = RulesBook(rules)
    }

    /// This engine deciding by `version` (a copy; only for what an older build owed).
    func under(_ version: String) -> Engine {
        var e = self
        e.olderVersion = version
        return e
    }

    /// Apply one committed event (with its global seq and the engine time it was accepted
    /// at). First advances the user's own timers to `event.at` (a timer due at exactly
    /// `event.at` fires before the event), then folds the event and decides, then fires
    /// anything the event made due at or before `event.at`. `registerApp` updates `apps`
    /// and leaves `state` alone.
    public func apply(_ event: StoredEvent, to state: inout UserState, apps: inout AppRegistry) -> Outcome {
        var out: [Delivery] = []
        let next = apply(event, to: &state, apps: &apps, appendingTo: &out)
        return Outcome(deliveries: out, nextWake: next)
    }

    /// `apply`, appending the decisions to `out` (a buffer the caller empties and reuses: the
    /// service folds every event this way, without an array per event); returns `nextWake`.
    public func apply(_ event: StoredEvent, to state: inout UserState, apps: inout AppRegistry,
                      appendingTo out: inout [Delivery]) -> Instant? {
        if event.kind == .registerApp {
            foldRegisterApp(event.body, apps: &apps)
            return state.nextDeadline()
        }
        fireTimers(&state, upTo: event.at, apps: apps, out: &out)
        // The event, and the timers it makes due at once (a snooze whose `until` has passed), by
        // the event's rules version: the common case is the latest, without a look-up.
        let next: Instant?
        if book.latestDecides(eventAt: event.seq) {
            fold(event, into: &state, apps: apps, out: &out)
            next = fireTimers(&state, upTo: event.at, apps: apps, out: &out, byEventsVersion: true)
        } else {
            let older = under(book.history.version(forEventAt: event.seq))
            older.fold(event, into: &state, apps: apps, out: &out)
            next = older.fireTimers(&state, upTo: event.at, apps: apps, out: &out, byEventsVersion: true)
        }
        state.lastSeq = event.seq
        return next
    }

    /// `apply` for a request that is not in the log (a what-if's injected change): decided by
    /// `version` (`RulesHistory.version(forInjectionAfter:at:)`), not by the seq it borrows from
    /// the event before it. Timers due before it go by their deadlines, as always.
    public func apply(_ event: StoredEvent, decidedBy version: String, to state: inout UserState,
                      apps: inout AppRegistry) -> Outcome {
        var out: [Delivery] = []
        if event.kind == .registerApp {
            foldRegisterApp(event.body, apps: &apps)
            return Outcome(deliveries: out, nextWake: state.nextDeadline())
        }
        fireTimers(&state, upTo: event.at, apps: apps, out: &out)
        let decider = under(version)
        decider.fold(event, into: &state, apps: apps, out: &out)
        let next = decider.fireTimers(&state, upTo: event.at, apps: apps, out: &out, byEventsVersion: true)
        state.lastSeq = event.seq
        return Outcome(deliveries: out, nextWake: next)
    }

    /// Time passing for one user: fires everything due at or before `now`, ordered by
    /// deadline, then kind (expiry, Focus end, summary, deferred decision, snooze), then seq.
    /// Timed decisions are judged at their deadline and carry `at` = the deadline.
    public func advance(_ state: inout UserState, to now: Instant, apps: AppRegistry) -> Outcome {
        var out: [Delivery] = []
        let next = advance(&state, to: now, apps: apps, appendingTo: &out)
        return Outcome(deliveries: out, nextWake: next)
    }

    /// `advance`, appending the decisions to `out` (see `apply(_:to:apps:appendingTo:)`).
    public func advance(_ state: inout UserState, to now: Instant, apps: AppRegistry, appendingTo out: inout [Delivery]) -> Instant? {
        fireTimers(&state, upTo: now, apps: apps, out: &out)
    }

    func foldRegisterApp(_ body: JSONValue, apps: inout AppRegistry) {
        guard let app = body["app"]?.stringValue else { return }
        var ents: Entitlements = []
        for e in body["entitlements"]?.arrayValue ?? [] {
            if let name = e.stringValue, let (_, flag) = Entitlements.wireNames.first(where: { $0.0 == name }) {
                ents.insert(flag)
            }
        }
        apps.register(app, entitlements: ents)
    }
}

/// The notification a `withdraw` or `opened` event names: its app and (when given) its id.
public struct NotificationTarget: Hashable, Sendable {
    public var app: String
    public var id: String?
    public init(app: String, id: String?) { self.app = app; self.id = id }

    /// Reads `app` and `id` from a canonical stored body without building its dictionary; nil
    /// when the body is not canonical or has no string `app` (then the body is parsed instead).
    /// With `interner`, the app id is shared (see `StringInterner`).
    public init?(canonicalBody bytes: UnsafeRawBufferPointer, interner: StringInterner? = nil) {
        var app: String?, id: String?
        func isApp(_ key: UnsafeRawBufferPointer) -> Bool {
            key.count == 3 && key[0] == UInt8(ascii: "a") && key[1] == UInt8(ascii: "p") && key[2] == UInt8(ascii: "p")
        }
        func isId(_ key: UnsafeRawBufferPointer) -> Bool {
            key.count == 2 && key[0] == UInt8(ascii: "i") && key[1] == UInt8(ascii: "d")
        }
        let canonical = JSONValue.visitCanonicalObject(bytes, { key, v in
            if isApp(key) { app = v.stringValue } else if isId(key) { id = v.stringValue }
        }, plainString: { key, raw in
            if isApp(key) { app = interner?.string(raw) ?? String(decoding: raw, as: UTF8.self) }
            else if isId(key) { id = String(decoding: raw, as: UTF8.self) }
        })
        guard canonical, let app else { return nil }
        self.init(app: app, id: id)
    }
}
