// A test driver: admits wire requests, stores them as events with seqs and times, applies them.
import HeraldCore
import Testing

/// Drives the engine the way the runtime does: admit → store (seq, engine time) → apply;
/// `advance` lets time pass for every user.
struct EngineHarness {
    var engine = Engine()
    var apps = AppRegistry()
    var states: [String: UserState] = [:]
    var events: [StoredEvent] = []
    var seq: Int64 = 0
    var now: Instant
    /// Every delivery produced so far, in order.
    var log: [Delivery] = []
    /// Whether `apply` reads content back from `events` when a fold needs it (as a store does).
    var supplyFromLog = true

    init(now: Instant = T0) { self.now = now }

    /// A harness with com.example.mail authorized for "u" (alert, sound, badge) when `authorizingMail`.
    init(authorizingMail: Bool) {
        self.init()
        if authorizingMail { authorize() }
    }

    /// Admits and applies one request at `now`; fails the test expectation if rejected.
    @discardableResult
    mutating func send(_ op: String, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) -> [Delivery] {
        let request = try! JSONValue.parse(json)
        switch engine.admit(op: op, request: request, apps: apps, now: now) {
        case .rejected(let e):
            Issue.record("\(op) rejected: \(e.code): \(e.title)", sourceLocation: sourceLocation)
            return []
        case .accepted(let a):
            var out: [Delivery] = []
            for d in a.events {
                seq += 1
                // Alternate between the decoded cache and parsing the body: both must agree.
                var ev = StoredEvent(d, seq: seq, at: now)
                if seq % 2 == 0 { ev.decoded = nil }
                events.append(ev)
                out += apply(ev)
            }
            return out
        }
    }

    mutating func apply(_ ev: StoredEvent) -> [Delivery] {
        let user = ev.user ?? ""
        var state = states[user] ?? UserState(user: user)
        // As the service and replay do: content the fold needs and the state no longer holds is
        // read back from the log (a snooze of an older notification).
        if supplyFromLog, let wanted = state.contentNeeded(toApply: ev), let submit = events.first(where: { $0.seq == wanted }) {
            state.supplyContent(SubmittedNotification(body: submit.body), seq: wanted)
        }
        let o = engine.apply(ev, to: &state, apps: &apps)
        if ev.user != nil { states[user] = state }
        log += o.deliveries
        return o.deliveries
    }

    /// Moves the clock to `t` and fires every user's due timers (users in sorted order).
    @discardableResult
    mutating func advance(to t: Instant) -> [Delivery] {
        now = t
        var out: [Delivery] = []
        for u in states.keys.sorted() {
            var s = states[u]!
            out += engine.advance(&s, to: t, apps: apps).deliveries
            states[u] = s
        }
        log += out
        return out
    }

    mutating func advance(by d: Instant.Duration) -> [Delivery] { advance(to: now.adding(d)) }

    /// Registers an app with entitlements.
    mutating func register(_ app: String, _ ents: [String] = []) {
        let list = ents.map { "\"\($0)\"" }.joined(separator: ",")
        send("registerApp", #"{"app":"\#(app)","entitlements":[\#(list)]}"#)
    }

    /// Authorizes `app` for `user` with the options.
    mutating func authorize(_ user: String = "u", _ app: String = "com.example.mail",
                            status: String = "authorized", options: [String] = ["alert", "sound", "badge"]) {
        let list = options.map { "\"\($0)\"" }.joined(separator: ",")
        send("authorization", #"{"user":"\#(user)","app":"\#(app)","status":"\#(status)","options":[\#(list)]}"#)
    }

    /// Submits a notification; `extra` is more JSON members, e.g. `"interruptionLevel":"passive"`.
    @discardableResult
    mutating func submit(_ id: String, user: String = "u", app: String = "com.example.mail", _ extra: String = "",
                         sourceLocation: SourceLocation = #_sourceLocation) -> [Delivery] {
        let more = extra.isEmpty ? "" : "," + extra
        return send("submit", #"{"id":"\#(id)","app":"\#(app)","user":"\#(user)","title":"Hello","body":"World","hiddenPreviewsBodyPlaceholder":"New mail"\#(more)}"#,
                    sourceLocation: sourceLocation)
    }

    func state(_ user: String = "u") -> UserState { states[user] ?? UserState(user: user) }
}

/// Monday 2026-01-05 12:00:00 UTC: the default start of a test.
let T0 = Instant(rfc3339: "2026-01-05T12:00:00Z")!

/// An instant from RFC 3339 text (tests only).
func at(_ text: String) -> Instant { Instant(rfc3339: text)! }

/// The single delivery of `ds`, recording an issue when there is not exactly one.
func only(_ ds: [Delivery], sourceLocation: SourceLocation = #_sourceLocation) -> Delivery {
    if ds.count != 1 {
        Issue.record("expected one delivery, got \(ds.map { "\($0.kind)/\($0.reason)" })", sourceLocation: sourceLocation)
    }
    return ds.first ?? Delivery(kind: .cleared, user: "", app: nil, notificationId: nil, at: .epoch, reason: "none",
                                rulesVersion: "", causeSeq: 0)
}

extension EngineHarness {
    /// User "u" with mail authorized for alerts, sounds and badges, and chat authorized as well.
    static func mailAndChatAuthorized() -> EngineHarness {
        var h = EngineHarness()
        h.authorize(options: ["alert", "sound", "badge"])
        h.authorize("u", "com.example.chat")
        return h
    }
}
