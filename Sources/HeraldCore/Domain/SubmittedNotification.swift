// A notification as submitted by an app for one user: content, level and timing.

/// An action button of a notification.
public struct NotificationAction: Hashable, Sendable {
    public var id: String
    public var title: String
    public var destructive: Bool
    public var icon: String?
    public init(id: String, title: String, destructive: Bool = false, icon: String? = nil) {
        self.id = id; self.title = title; self.destructive = destructive; self.icon = icon
    }
}

/// The communication part of a notification: who sent it (decides Focus break-through).
public struct CommunicationInfo: Hashable, Sendable {
    public var sender: String
    public var group: String?
    public init(sender: String, group: String? = nil) { self.sender = sender; self.group = group }
}

/// One notification for one user, as the engine judges it (parsed from a stored `submit` body).
public struct SubmittedNotification: Hashable, Sendable {
    public var id: String
    public var app: String
    public var level: InterruptionLevel = .active
    public var title: String?
    public var subtitle: String?
    public var body: String?
    public var hiddenPreviewsBodyPlaceholder: String?
    public var threadId: String?
    public var collapseId: String?
    /// 0…1; absent counts as 0 when ordering a summary.
    public var relevanceScore: Double?
    public var sound: String?
    public var actions: [NotificationAction] = []
    public var communication: CommunicationInfo?
    public var marketing: Bool = false
    public var deliverAt: Instant?
    public var expiresAt: Instant?
    public var relevantAt: Instant?
    /// Opaque app data, passed through.
    public var data: JSONValue?

    public init(id: String, app: String, level: InterruptionLevel = .active) {
        self.id = id; self.app = app; self.level = level
    }
}

extension SubmittedNotification {
    /// Reads a normalized `submit` body (as produced by `Engine.admit`). Lenient: the body
    /// was checked at the door, so a field of the wrong type is simply ignored here (a fold
    /// never fails — the event already happened).
    public init(body: JSONValue) {
        self.init(id: body["id"]?.stringValue ?? "", app: body["app"]?.stringValue ?? "")
        guard case .object(let o) = body else { return }
        if let l = o["interruptionLevel"]?.stringValue, let level = InterruptionLevel(rawValue: l) { self.level = level }
        title = o["title"]?.stringValue
        subtitle = o["subtitle"]?.stringValue
        self.body = o["body"]?.stringValue
        hiddenPreviewsBodyPlaceholder = o["hiddenPreviewsBodyPlaceholder"]?.stringValue
        threadId = o["threadId"]?.stringValue
        collapseId = o["collapseId"]?.stringValue
        relevanceScore = o["relevanceScore"]?.doubleValue
        sound = o["sound"]?.stringValue
        if let acts = o["actions"]?.arrayValue {
            actions = acts.map {
                NotificationAction(id: $0["id"]?.stringValue ?? "", title: $0["title"]?.stringValue ?? "",
                                   destructive: $0["destructive"]?.boolValue ?? false, icon: $0["icon"]?.stringValue)
            }
        }
        if let c = o["communication"], let sender = c["sender"]?.stringValue {
            communication = CommunicationInfo(sender: sender, group: c["group"]?.stringValue)
        }
        marketing = o["marketing"]?.boolValue ?? false
        deliverAt = o["deliverAt"]?.stringValue.flatMap(Instant.init(rfc3339:))
        expiresAt = o["expiresAt"]?.stringValue.flatMap(Instant.init(rfc3339:))
        relevantAt = o["relevantAt"]?.stringValue.flatMap(Instant.init(rfc3339:))
        data = o["data"]
    }

    /// The content object of a delivery, as the user's `showPreviews` allows (SPEC §3
    /// "Hidden previews"): `always` → full content; `never` → title-less placeholder
    /// (or "Notification"); `whenUnlocked` → full content plus the placeholder.
    public func contentJSON(previews: ShowPreviews) -> JSONValue {
        var c: [String: JSONValue] = [:]
        let placeholder = hiddenPreviewsBodyPlaceholder ?? "Notification"
        c["interruptionLevel"] = .string(level.rawValue)
        if let threadId { c["threadId"] = .string(threadId) }
        if let data { c["data"] = data }
        if !actions.isEmpty {
            c["actions"] = .array(actions.map { a in
                var o: [String: JSONValue] = ["id": .string(a.id), "title": .string(a.title), "destructive": .bool(a.destructive)]
                if let icon = a.icon { o["icon"] = .string(icon) }
                return .object(o)
            })
        }
        if let sound { c["sound"] = .string(sound) }
        if previews == .never {
            c["body"] = .string(placeholder)
            return .object(c)
        }
        if let title { c["title"] = .string(title) }
        if let subtitle { c["subtitle"] = .string(subtitle) }
        if let body { c["body"] = .string(body) }
        if let relevanceScore { c["relevanceScore"] = .double(relevanceScore) }
        if let communication {
            var o: [String: JSONValue] = ["sender": .string(communication.sender)]
            if let g = communication.group { o["group"] = .string(g) }
            c["communication"] = .object(o)
        }
        if previews == .whenUnlocked { c["hiddenPreviewsBodyPlaceholder"] = .string(placeholder) }
        return .object(c)
    }
}
