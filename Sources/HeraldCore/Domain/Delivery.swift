// A decision the engine made about a notification, and its canonical JSON form (SPEC §5).

/// What happened to a notification (the `kind` of a delivery line).
public enum DeliveryKind: String, Hashable, Sendable, CaseIterable {
    case alert, quiet, queued, held, summary, focusDigest, suppressed, expired, replaced, withdrawn, cleared

    /// The raw value as a quoted JSON string literal, for the byte writers (no `String` built).
    var quotedJSON: StaticString {
        switch self {
        case .alert: "\"alert\""
        case .quiet: "\"quiet\""
        case .queued: "\"queued\""
        case .held: "\"held\""
        case .summary: "\"summary\""
        case .focusDigest: "\"focusDigest\""
        case .suppressed: "\"suppressed\""
        case .expired: "\"expired\""
        case .replaced: "\"replaced\""
        case .withdrawn: "\"withdrawn\""
        case .cleared: "\"cleared\""
        }
    }
}

/// How a delivered notification is presented on the device.
public struct Presentation: Hashable, Sendable {
    public var banner = false
    public var sound = false
    /// The app's new badge count, or nil when the user's badge setting is off.
    public var badge: Int?
    public var lockScreen = false
    public var notificationCenter = false
    public var overrideSilent = false
    /// Creates one from its fields.
    public init(banner: Bool = false, sound: Bool = false, badge: Int? = nil, lockScreen: Bool = false,
                notificationCenter: Bool = false, overrideSilent: Bool = false) {
        self.banner = banner; self.sound = sound; self.badge = badge; self.lockScreen = lockScreen
        self.notificationCenter = notificationCenter; self.overrideSilent = overrideSilent
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "banner": .bool(banner), "sound": .bool(sound), "lockScreen": .bool(lockScreen),
            "notificationCenter": .bool(notificationCenter), "overrideSilent": .bool(overrideSilent),
        ]
        if let badge { o["badge"] = .int(Int64(badge)) }
        return .object(o)
    }
}

/// One notification listed in a `summary` or `focusDigest` delivery.
public struct DeliveryItem: Hashable, Sendable {
    public var notification: SubmittedNotification
    /// Global seq of the submit event: the arrival order.
    public var seq: Int64
    public var previews: ShowPreviews

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "app": .string(notification.app), "notification": .string(notification.id),
            "content": notification.contentJSON(previews: previews),
        ]
        if let t = notification.threadId { o["threadId"] = .string(t) }
        if let r = notification.relevanceScore { o["relevanceScore"] = .double(r) }
        return .object(o)
    }
}

/// One evaluated rule of a decision's trace, in evaluation order (SPEC §10 "Explain").
public struct RuleStep: Hashable, Sendable {
    /// The rule's stable code, e.g. `not_authorized`, `focus`.
    public var rule: String
    /// `pass` (did not apply), `decided` (this rule decided), `applied` (adjusted the
    /// outcome), `downgraded`, `breaks_through`, `ended`, `fired`.
    public var outcome: String
    /// Creates one from its fields.
    public init(_ rule: String, _ outcome: String) { self.rule = rule; self.outcome = outcome }

    /// The step as the deliveries table stores it: the bare rule for `pass` (most steps),
    /// `rule:outcome` otherwise — a plain alert's 13 steps in ~190 bytes instead of ~490.
    public var storedText: String { outcome == "pass" ? rule : rule + ":" + outcome }
    /// `storedText` as a JSON string (one element of the stored trace array).
    public var json: JSONValue { .string(storedText) }
    /// The expanded form `{"rule":…,"outcome":…}` (what `herald explain --json` prints).
    public var expandedJSON: JSONValue { .object(["rule": .string(rule), "outcome": .string(outcome)]) }

    /// Reads one stored step: `"rule"`, `"rule:outcome"`, or the expanded form
    /// `{"rule":…,"outcome":…}`. Nil for anything else.
    public init?(stored: JSONValue) {
        if let text = stored.stringValue {
            guard let colon = text.firstIndex(of: ":") else { self.init(text, "pass"); return }
            self.init(String(text[..<colon]), String(text[text.index(after: colon)...]))
        } else if let rule = stored["rule"]?.stringValue, let outcome = stored["outcome"]?.stringValue {
            self.init(rule, outcome)
        } else {
            return nil
        }
    }

    /// The steps of a stored trace column (either format); nil when it is not a trace.
    public static func steps(storedTrace: String) -> [RuleStep]? {
        guard let array = (try? JSONValue.parse(storedTrace))?.arrayValue else { return nil }
        let steps = array.compactMap(RuleStep.init(stored:))
        return steps.count == array.count ? steps : nil
    }
}

/// The rules the engine evaluates (trace codes), in evaluation order.
public enum RuleCode: UInt8, CaseIterable, Sendable {
    case withdrawn, expired, notAuthorized, silenceAll, marketing, critical, timeSensitiveSetting, provisional,
         muted, collapse, communication, summary, focus, normal, attentionBudget, timeSensitiveIntro, snooze, badgeClear

    /// The stable snake_case code (`staticText`, in Delivery+Row.swift, is the one list of them).
    public var text: String { staticText.description }
}

/// What a rule did in a decision.
public enum RuleOutcome: UInt8, CaseIterable, Sendable {
    case pass, decided, applied, downgraded, breaksThrough, ended, fired

    /// The stable snake_case code (`staticText`, in Delivery+Row.swift, is the one list of them).
    public var text: String { staticText.description }
}

/// A decision's trace, stored inline (one byte a step, up to 24 steps): building it costs
/// no allocation on the hot path; `steps` expands it for explain and the deliveries table.
public struct RuleTrace: Hashable, Sendable {
    private var w0: UInt64 = 0, w1: UInt64 = 0, w2: UInt64 = 0
    /// Number of steps.
    public private(set) var count: UInt8 = 0
    /// The most steps a trace holds (more are dropped; the rules have at most 17).
    public static let capacity = 24

    /// Creates one from its fields.
    public init() {}
    /// Creates one from its fields.
    public init(_ rule: RuleCode, _ outcome: RuleOutcome) { append(rule, outcome) }

    /// Adds a step.
    public mutating func append(_ rule: RuleCode, _ outcome: RuleOutcome) {
        guard Int(count) < RuleTrace.capacity else { return }
        let byte = UInt64(rule.rawValue) << 3 | UInt64(outcome.rawValue)
        let shift = UInt64(count % 8) * 8
        switch count / 8 {
        case 0: w0 |= byte << shift
        case 1: w1 |= byte << shift
        default: w2 |= byte << shift
        }
        count += 1
    }

    /// The packed step `i` (rule code << 3 | outcome), for the byte writer (`writeJSON(to:)`).
    func byte(at i: Int) -> UInt8 {
        let w = i < 8 ? w0 : (i < 16 ? w1 : w2)
        return UInt8(truncatingIfNeeded: w >> (UInt64(i % 8) * 8))
    }

    /// The steps in order.
    public var steps: [RuleStep] {
        (0..<Int(count)).map { i in
            let w = i < 8 ? w0 : (i < 16 ? w1 : w2)
            let byte = UInt8(truncatingIfNeeded: w >> (UInt64(i % 8) * 8))
            return RuleStep(RuleCode(rawValue: byte >> 3)!.text, RuleOutcome(rawValue: byte & 7)!.text)
        }
    }
}

/// A decision about a notification (or a user's summary / digest / badge), emitted to
/// consumers and stored. Deterministic: `body` is a pure function of the fields.
///
/// Its initializers live in an extension, so the compiler's memberwise initializer exists: a
/// hand-written initializer that sets the fields one by one builds the value in a temporary and
/// copies it whole (every string retained and released once more; Swift 6.3 -O), and one that
/// delegates to the memberwise initializer does not (see `InPlace`).
public struct Delivery: Hashable, Sendable {
    public var kind: DeliveryKind
    public var user: String
    public var app: String?
    /// The notification's id (nil for summary and focusDigest, and for cleared).
    public var notificationId: String?
    /// The engine instant the decision was made at (a timer's deadline for timed decisions).
    public var at: Instant
    /// The code of the rule that decided.
    public var reason: String
    public var presentation: Presentation?
    /// The notification whose content this delivery carries, if any.
    public var notification: SubmittedNotification?
    /// The user's preview setting at decision time: shapes `content`.
    public var previews: ShowPreviews = .whenUnlocked
    /// The content object as delivered (shaped by `previews`), nil when there is none.
    public var content: JSONValue? { notification?.contentJSON(previews: previews) }
    public var provisional = false
    /// The id of the already delivered notification this one replaces (collapse).
    public var replaces: String?
    public var timeSensitiveIntro = false
    public var items: [DeliveryItem] = []
    /// For `queued`: the instant of the summary it will be part of.
    public var summaryAt: Instant?
    /// For `held` and `focusDigest`: the Focus in question.
    public var focus: String?
    /// For a decision made when a snooze ran out.
    public var snoozed = false
    /// For a summary or Focus digest split over several lines (SPEC §5's 64 KiB): this
    /// part's number from 1, and how many parts there are; 0 and 0 for one that fits a line.
    public var part: Int32 = 0
    public var parts: Int32 = 0
    /// The rules evaluated, in order (compact form; `trace` expands it).
    public var ruleTrace = RuleTrace()
    /// The rules evaluated, in order, with their outcomes.
    public var trace: [RuleStep] { ruleTrace.steps }
    public var rulesVersion: String
    /// Seq of the event that caused this delivery (for timers: the seq of the event that armed them).
    public var causeSeq: Int64

    /// The delivery as canonical JSON per SPEC §5's delivery line, without `op` and `cursor`
    /// (the runtime adds those). Optional members are omitted when absent or false:
    /// `app`, `notification`, `presentation`, `content`, `provisional`, `replaces`,
    /// `timeSensitiveIntro`, `items`, `summaryAt`, `focus`, `snoozed`, `part` and `parts`. Always present:
    /// `kind`, `user`, `at`, `reason`, `rulesVersion`, `causeSeq`. The trace is separate
    /// (`traceJSON`): it goes to the deliveries table, not to consumers.
    public var body: JSONValue {
        var o: [String: JSONValue] = [
            "kind": .string(kind.rawValue), "user": .string(user), "at": .string(at.rfc3339),
            "reason": .string(reason), "rulesVersion": .string(rulesVersion), "causeSeq": .int(causeSeq),
        ]
        if let app { o["app"] = .string(app) }
        if let notificationId { o["notification"] = .string(notificationId) }
        if let presentation { o["presentation"] = presentation.json }
        if let notification { o["content"] = notification.contentJSON(previews: previews) }
        if provisional { o["provisional"] = .bool(true) }
        if let replaces { o["replaces"] = .string(replaces) }
        if timeSensitiveIntro { o["timeSensitiveIntro"] = .bool(true) }
        if kind == .summary || kind == .focusDigest { o["items"] = .array(items.map(\.json)) }
        if let summaryAt { o["summaryAt"] = .string(summaryAt.rfc3339) }
        if let focus { o["focus"] = .string(focus) }
        if snoozed { o["snoozed"] = .bool(true) }
        if parts > 0 {
            o["part"] = .int(Int64(part))
            o["parts"] = .int(Int64(parts))
        }
        return .object(o)
    }

    /// The ordered rule trace as stored: `["withdrawn",…,"normal:decided"]` (`RuleStep.storedText`).
    public var traceJSON: JSONValue { .array(trace.map(\.json)) }
}

extension Delivery {
    /// Creates one from its fields.
    public init(kind: DeliveryKind, user: String, app: String?, notificationId: String?, at: Instant,
                reason: String, rulesVersion: String, causeSeq: Int64) {
        self.init(kind: kind, user: user, app: app, notificationId: notificationId, at: at, reason: reason,
                  presentation: nil, rulesVersion: rulesVersion, causeSeq: causeSeq)  // the memberwise one
    }
}
