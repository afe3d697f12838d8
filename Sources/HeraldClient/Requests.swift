// Typed requests of every op (docs/protocol.md): each writes its own members, so users never build JSON by hand.

/// A request of one op. `writeMembers` writes the op's members (not `op` nor `rid`).
public protocol HeraldRequest: Sendable {
    static var op: String { get }
    /// The user whose partition this request belongs to, for routing (nil: any instance will do).
    var routingUser: String? { get }
    func writeMembers(_ w: inout JSONWriter)
}

extension HeraldRequest {
    public var routingUser: String? { nil }
}

public enum InterruptionLevel: String, Sendable { case passive, active, timeSensitive, critical }
public enum AuthorizationStatus: String, Sendable { case notDetermined, denied, authorized, provisional }
public enum AuthorizationOption: String, Sendable { case alert, sound, badge, criticalAlert }
public enum DeliveryMode: String, Sendable { case immediate, summary }
public enum ShowPreviews: String, Sendable { case always, whenUnlocked, never }
public enum Entitlement: String, Sendable { case communication, critical, government }

public struct Action: Sendable, Hashable {
    public var id: String, title: String, destructive: Bool?, icon: String?
    public init(id: String, title: String, destructive: Bool? = nil, icon: String? = nil) {
        self.id = id; self.title = title; self.destructive = destructive; self.icon = icon
    }
    var json: HeraldJSON {
        var o: [String: HeraldJSON] = ["id": .string(id), "title": .string(title)]
        if let destructive { o["destructive"] = .bool(destructive) }
        if let icon { o["icon"] = .string(icon) }
        return .object(o)
    }
}

public struct Communication: Sendable, Hashable {
    public var sender: String, group: String?
    public init(sender: String, group: String? = nil) { self.sender = sender; self.group = group }
    var json: HeraldJSON { group.map { ["sender": .string(sender), "group": .string($0)] } ?? ["sender": .string(sender)] }
}

/// One window of a Focus schedule: days 1–7 (Monday is 1), local "HH:MM" start and end.
public struct FocusWindow: Sendable, Hashable {
    public var days: [Int], start: String, end: String
    public init(days: [Int], start: String, end: String) { self.days = days; self.start = start; self.end = end }
    var json: HeraldJSON { ["days": .array(days.map { .int(Int64($0)) }), "start": .string(start), "end": .string(end)] }
}

/// One notification to one `user`, or to several `users` (a fan-out). (app, id) is the idempotency key.
/// Instants are RFC 3339 strings with a zone ("2026-03-29T08:30:00Z").
public struct Submit: HeraldRequest, Hashable {
    public static let op = "submit"
    public var id: String
    public var app: String
    public var user: String?
    public var users: [String]?
    public var interruptionLevel: InterruptionLevel?
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var hiddenPreviewsBodyPlaceholder: String?
    public var threadId: String?
    public var collapseId: String?
    public var relevanceScore: Double?
    public var sound: String?
    public var actions: [Action]?
    public var communication: Communication?
    public var marketing: Bool?
    public var deliverAt: String?
    public var expiresAt: String?
    public var relevantAt: String?
    /// Opaque to Herald, handed back in the delivery's content.
    public var data: [String: HeraldJSON]?

    public init(id: String, app: String, user: String? = nil, users: [String]? = nil,
                interruptionLevel: InterruptionLevel? = nil, title: String? = nil, subtitle: String? = nil,
                body: String? = nil, hiddenPreviewsBodyPlaceholder: String? = nil, threadId: String? = nil,
                collapseId: String? = nil, relevanceScore: Double? = nil, sound: String? = nil,
                actions: [Action]? = nil, communication: Communication? = nil, marketing: Bool? = nil,
                deliverAt: String? = nil, expiresAt: String? = nil, relevantAt: String? = nil,
                data: [String: HeraldJSON]? = nil) {
        self.id = id; self.app = app; self.user = user; self.users = users
        self.interruptionLevel = interruptionLevel; self.title = title; self.subtitle = subtitle; self.body = body
        self.hiddenPreviewsBodyPlaceholder = hiddenPreviewsBodyPlaceholder; self.threadId = threadId
        self.collapseId = collapseId; self.relevanceScore = relevanceScore; self.sound = sound
        self.actions = actions; self.communication = communication; self.marketing = marketing
        self.deliverAt = deliverAt; self.expiresAt = expiresAt; self.relevantAt = relevantAt; self.data = data
    }

    public var routingUser: String? { user }

    public func writeMembers(_ w: inout JSONWriter) {
        w.member("id", id)
        w.member("app", app)
        w.member("user", user)
        w.member("users", users)
        w.member("interruptionLevel", interruptionLevel?.rawValue)
        w.member("title", title)
        w.member("subtitle", subtitle)
        w.member("body", body)
        w.member("hiddenPreviewsBodyPlaceholder", hiddenPreviewsBodyPlaceholder)
        w.member("threadId", threadId)
        w.member("collapseId", collapseId)
        w.member("relevanceScore", relevanceScore)
        w.member("sound", sound)
        w.member("actions", actions.map { HeraldJSON.array($0.map(\.json)) })
        w.member("communication", communication?.json)
        w.member("marketing", marketing)
        w.member("deliverAt", deliverAt)
        w.member("expiresAt", expiresAt)
        w.member("relevantAt", relevantAt)
        w.member("data", data.map(HeraldJSON.object))
    }
}

public struct Withdraw: HeraldRequest, Hashable {
    public static let op = "withdraw"
    public var app: String, id: String, user: String?
    public init(app: String, id: String, user: String? = nil) { self.app = app; self.id = id; self.user = user }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("app", app); w.member("id", id); w.member("user", user) }
}

public struct Authorization: HeraldRequest, Hashable {
    public static let op = "authorization"
    public var user: String, app: String, status: AuthorizationStatus, options: [AuthorizationOption]?
    public init(user: String, app: String, status: AuthorizationStatus, options: [AuthorizationOption]? = nil) {
        self.user = user; self.app = app; self.status = status; self.options = options
    }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) {
        w.member("user", user); w.member("app", app); w.member("status", status.rawValue)
        w.member("options", options?.map(\.rawValue))
    }
}

/// Per-app settings (with `app`) or the global ones (`allowNotifications`, `showPreviews`,
/// `attentionBudget`, without `app`). Settings left nil are not changed.
public struct Settings: HeraldRequest, Hashable {
    public static let op = "settings"
    public enum AttentionBudget: Sendable, Hashable { case unlimited, perDay(Int) }
    public var user: String, app: String?
    public var alert: Bool?, sound: Bool?, badge: Bool?, lockScreen: Bool?, notificationCenter: Bool?
    public var timeSensitive: Bool?, marketingConsent: Bool?, delivery: DeliveryMode?
    public var allowNotifications: Bool?, showPreviews: ShowPreviews?, attentionBudget: AttentionBudget?
    public init(user: String, app: String? = nil, alert: Bool? = nil, sound: Bool? = nil, badge: Bool? = nil,
                lockScreen: Bool? = nil, notificationCenter: Bool? = nil, timeSensitive: Bool? = nil,
                marketingConsent: Bool? = nil, delivery: DeliveryMode? = nil, allowNotifications: Bool? = nil,
                showPreviews: ShowPreviews? = nil, attentionBudget: AttentionBudget? = nil) {
        self.user = user; self.app = app; self.alert = alert; self.sound = sound; self.badge = badge
        self.lockScreen = lockScreen; self.notificationCenter = notificationCenter; self.timeSensitive = timeSensitive
        self.marketingConsent = marketingConsent; self.delivery = delivery; self.allowNotifications = allowNotifications
        self.showPreviews = showPreviews; self.attentionBudget = attentionBudget
    }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) {
        w.member("user", user); w.member("app", app)
        w.member("alert", alert); w.member("sound", sound); w.member("badge", badge)
        w.member("lockScreen", lockScreen); w.member("notificationCenter", notificationCenter)
        w.member("timeSensitive", timeSensitive); w.member("marketingConsent", marketingConsent)
        w.member("delivery", delivery?.rawValue); w.member("allowNotifications", allowNotifications)
        w.member("showPreviews", showPreviews?.rawValue)
        switch attentionBudget {
        case .none: break
        case .unlimited: w.member("attentionBudget", HeraldJSON.null)
        case .perDay(let n): w.member("attentionBudget", n)
        }
    }
}

public struct ProvisionalKeep: HeraldRequest, Hashable {
    public static let op = "provisionalKeep"
    public var user: String, app: String, delivery: DeliveryMode?
    public init(user: String, app: String, delivery: DeliveryMode? = nil) { self.user = user; self.app = app; self.delivery = delivery }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("app", app); w.member("delivery", delivery?.rawValue) }
}

public struct ProvisionalTurnOff: HeraldRequest, Hashable {
    public static let op = "provisionalTurnOff"
    public var user: String, app: String
    public init(user: String, app: String) { self.user = user; self.app = app }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("app", app) }
}

public struct SummarySchedule: HeraldRequest, Hashable {
    public static let op = "summarySchedule"
    public var user: String, times: [String], timeZone: String
    public init(user: String, times: [String], timeZone: String) { self.user = user; self.times = times; self.timeZone = timeZone }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("times", times); w.member("timeZone", timeZone) }
}

public struct FocusDefine: HeraldRequest, Hashable {
    public static let op = "focusDefine"
    public var user: String, focus: String
    public var allowedPeople: [String]?, allowedApps: [String]?, allowTimeSensitive: Bool?
    public var schedule: [FocusWindow]?, timeZone: String?
    public init(user: String, focus: String, allowedPeople: [String]? = nil, allowedApps: [String]? = nil,
                allowTimeSensitive: Bool? = nil, schedule: [FocusWindow]? = nil, timeZone: String? = nil) {
        self.user = user; self.focus = focus; self.allowedPeople = allowedPeople; self.allowedApps = allowedApps
        self.allowTimeSensitive = allowTimeSensitive; self.schedule = schedule; self.timeZone = timeZone
    }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) {
        w.member("user", user); w.member("focus", focus); w.member("allowedPeople", allowedPeople)
        w.member("allowedApps", allowedApps); w.member("allowTimeSensitive", allowTimeSensitive)
        w.member("schedule", schedule.map { HeraldJSON.array($0.map(\.json)) }); w.member("timeZone", timeZone)
    }
}

public struct FocusOn: HeraldRequest, Hashable {
    public static let op = "focusOn"
    public var user: String, focus: String, until: String?
    public init(user: String, focus: String, until: String? = nil) { self.user = user; self.focus = focus; self.until = until }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("focus", focus); w.member("until", until) }
}

public struct FocusOff: HeraldRequest, Hashable {
    public static let op = "focusOff"
    public var user: String, focus: String
    public init(user: String, focus: String) { self.user = user; self.focus = focus }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("focus", focus) }
}

public struct Mute: HeraldRequest, Hashable {
    public static let op = "mute"
    public var user: String, app: String, until: String
    public init(user: String, app: String, until: String) { self.user = user; self.app = app; self.until = until }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("app", app); w.member("until", until) }
}

public struct Snooze: HeraldRequest, Hashable {
    public static let op = "snooze"
    public var user: String, app: String, id: String, until: String
    public init(user: String, app: String, id: String, until: String) { self.user = user; self.app = app; self.id = id; self.until = until }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) {
        w.member("user", user); w.member("app", app); w.member("id", id); w.member("until", until)
    }
}

public struct Opened: HeraldRequest, Hashable {
    public static let op = "opened"
    public var user: String, app: String, id: String?
    public init(user: String, app: String, id: String? = nil) { self.user = user; self.app = app; self.id = id }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("app", app); w.member("id", id) }
}

public struct BadgeClear: HeraldRequest, Hashable {
    public static let op = "badgeClear"
    public var user: String, app: String
    public init(user: String, app: String) { self.user = user; self.app = app }
    public var routingUser: String? { user }
    public func writeMembers(_ w: inout JSONWriter) { w.member("user", user); w.member("app", app) }
}

public struct RegisterApp: HeraldRequest, Hashable {
    public static let op = "registerApp"
    public var app: String, entitlements: [Entitlement]
    public init(app: String, entitlements: [Entitlement] = []) { self.app = app; self.entitlements = entitlements }
    public func writeMembers(_ w: inout JSONWriter) { w.member("app", app); w.member("entitlements", entitlements.map(\.rawValue)) }
}

/// Manual-clock mode only: fires every timer due up to `advanceTo`, then replies.
public struct Clock: HeraldRequest, Hashable {
    public static let op = "clock"
    public var advanceTo: String
    public init(advanceTo: String) { self.advanceTo = advanceTo }
    public func writeMembers(_ w: inout JSONWriter) { w.member("advanceTo", advanceTo) }
}

/// Any op by name with its members: for ops this version of the client does not model.
public struct AnyRequest: HeraldRequest, Hashable {
    public static let op = ""
    public var name: String
    public var members: [String: HeraldJSON]
    public init(op: String, members: [String: HeraldJSON] = [:]) { self.name = op; self.members = members }
    public var routingUser: String? { members["user"]?.stringValue }
    public func writeMembers(_ w: inout JSONWriter) { for k in members.keys.sorted() { w.member(k, members[k]) } }
}

extension HeraldRequest {
    var opName: String { (self as? AnyRequest)?.name ?? Self.op }

    /// The request's line after its opening brace (`"op":…}` and the newline): the pipeline puts
    /// `{"rid":N,` in front once it numbers the request.
    func lineBody() -> [UInt8] {
        var w = JSONWriter(capacity: 320)
        w.member("op", opName)
        writeMembers(&w)
        w.endObject()
        w.bytes.append(0x0A)
        return w.bytes
    }
}
