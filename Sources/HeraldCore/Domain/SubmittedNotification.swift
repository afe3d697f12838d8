// A notification as submitted by an app for one user: content, level and timing.
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// An action button of a notification.
public struct NotificationAction: Hashable, Sendable {
    public var id: String
    public var title: String
    public var destructive: Bool
    public var icon: String?
    /// Creates one from its fields.
    public init(id: String, title: String, destructive: Bool = false, icon: String? = nil) {
        self.id = id; self.title = title; self.destructive = destructive; self.icon = icon
    }
}

/// The communication part of a notification: who sent it (decides Focus break-through).
public struct CommunicationInfo: Hashable, Sendable {
    public var sender: String
    public var group: String?
    /// Creates one from its fields.
    public init(sender: String, group: String? = nil) { self.sender = sender; self.group = group }
}

/// One notification for one user, as the engine judges it (parsed from a stored `submit` body).
///
/// A value type whose fields live in one shared, copy-on-write box: a notification is
/// copied into deliveries, pending lists and snooze records many times per decision, and a
/// copy is then one reference (measured: the inline 288-byte struct cost ~2x throughput).
public struct SubmittedNotification: Hashable, Sendable {
    /// The fields, stored once.
    struct Fields: Hashable, Sendable {
        var id: String = ""
        var app: String = ""
        var level: InterruptionLevel = .active
        /// Title, subtitle and body, as JSON string bytes (see `NotificationTexts`).
        var texts = NotificationTexts()
        var hiddenPreviewsBodyPlaceholder: String? = nil
        var threadId: String? = nil
        var collapseId: String? = nil
        var relevanceScore: Double? = nil
        var sound: String? = nil
        var actions: [NotificationAction] = []
        var communication: CommunicationInfo? = nil
        var marketing: Bool = false
        var deliverAt: Instant? = nil
        var expiresAt: Instant? = nil
        var relevantAt: Instant? = nil
        var data: JSONValue? = nil
    }

    /// Immutable once shared; mutated in place only while uniquely referenced.
    final class Storage: @unchecked Sendable {
        /// Unchecked: written only while uniquely referenced (`unique()`), so no two accesses
        /// can overlap; the run-time check cost ~1.5% of replay (four reads per decision).
        @exclusivity(unchecked) var fields: Fields
        init(_ f: consuming Fields) { fields = f }
    }

    /// Internal for the byte writers (`Delivery+Bytes.swift`).
    private(set) var storage: Storage

    /// Creates one from its fields.
    public init(id: String, app: String, level: InterruptionLevel = .active) {
        storage = Storage(Fields(id: id, app: app, level: level))
    }

    /// Around a box whose fields were written in place (`SubmitLine`: not shared yet).
    init(storage: Storage) {
        self.storage = storage
    }

    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    /// Equal when the fields are (caches excluded).
    public static func == (a: SubmittedNotification, b: SubmittedNotification) -> Bool {
        a.storage === b.storage || a.storage.fields == b.storage.fields
    }

    /// Hashes the fields that `==` compares.
    public func hash(into h: inout Hasher) { storage.fields.hash(into: &h) }

    public var id: String {
        get { storage.fields.id }
        set { unique().fields.id = newValue }
    }
    public var app: String {
        get { storage.fields.app }
        set { unique().fields.app = newValue }
    }
    /// The interruption level (default `active`).
    public var level: InterruptionLevel {
        get { storage.fields.level }
        set { unique().fields.level = newValue }
    }
    public var title: String? {
        get { storage.fields.texts.string(.title) }
        set { unique().fields.texts.set(.title, newValue) }
    }

    /// The title's last byte when it has no escape, read in place (no `String` built); nil
    /// without a title, for an empty one, or when an escape makes the bytes differ from the text.
    var titleLastUnescapedByte: UInt8? { storage.fields.texts.lastUnescapedByte(.title) }
    public var subtitle: String? {
        get { storage.fields.texts.string(.subtitle) }
        set { unique().fields.texts.set(.subtitle, newValue) }
    }
    public var body: String? {
        get { storage.fields.texts.string(.body) }
        set { unique().fields.texts.set(.body, newValue) }
    }
    public var hiddenPreviewsBodyPlaceholder: String? {
        get { storage.fields.hiddenPreviewsBodyPlaceholder }
        set { unique().fields.hiddenPreviewsBodyPlaceholder = newValue }
    }
    public var threadId: String? {
        get { storage.fields.threadId }
        set { unique().fields.threadId = newValue }
    }
    public var collapseId: String? {
        get { storage.fields.collapseId }
        set { unique().fields.collapseId = newValue }
    }
    /// 0…1; absent counts as 0 when ordering a summary.
    public var relevanceScore: Double? {
        get { storage.fields.relevanceScore }
        set { unique().fields.relevanceScore = newValue }
    }
    public var sound: String? {
        get { storage.fields.sound }
        set { unique().fields.sound = newValue }
    }
    public var actions: [NotificationAction] {
        get { storage.fields.actions }
        set { unique().fields.actions = newValue }
    }
    public var communication: CommunicationInfo? {
        get { storage.fields.communication }
        set { unique().fields.communication = newValue }
    }
    public var marketing: Bool {
        get { storage.fields.marketing }
        set { unique().fields.marketing = newValue }
    }
    public var deliverAt: Instant? {
        get { storage.fields.deliverAt }
        set { unique().fields.deliverAt = newValue }
    }
    public var expiresAt: Instant? {
        get { storage.fields.expiresAt }
        set { unique().fields.expiresAt = newValue }
    }
    public var relevantAt: Instant? {
        get { storage.fields.relevantAt }
        set { unique().fields.relevantAt = newValue }
    }
    /// Opaque app data, passed through.
    public var data: JSONValue? {
        get { storage.fields.data }
        set { unique().fields.data = newValue }
    }
}

extension SubmittedNotification {
    /// Reads a normalized `submit` body (as produced by `Engine.admit`). Lenient: the body
    /// was checked at the door, so a field of the wrong type is simply ignored here (a fold
    /// never fails — the event already happened).
    public init(body: JSONValue) {
        var f = Fields()
        if case .object(let o) = body {
            for (key, v) in o { Self.assign(key, v, to: &f) }
        }
        storage = Storage(f)
    }

    /// Decodes a stored submit body (canonical JSON bytes) without building the top-level
    /// object: equal to `init(body: JSONValue.parse(bytes))`, with an unreadable body decoding
    /// as an empty one. Start-up and replay decode every stored submit this way.
    /// With `interner`, repeated long strings (app ids, placeholders) are shared, not rebuilt.
    public init(canonicalBody bytes: UnsafeRawBufferPointer, interner: StringInterner? = nil) {
        var f = Fields()
        let canonical = JSONValue.visitCanonicalObject(bytes, { key, v in Self.assign(key, v, to: &f) },
                                                       plainString: { key, raw in Self.assign(key, plain: raw, to: &f, interner: interner) })
        if !canonical {
            f = Fields()
            if case .object(let o)? = try? JSONValue.parse(bytes) {
                for (key, v) in o { Self.assign(key, v, to: &f) }
            }
        }
        storage = Storage(f)
    }

    /// Sets the field a body member names; unknown members are ignored. Dispatches on the
    /// key's length first (cheaper than a hash lookup per known field or a chain of string
    /// comparisons), into a local Fields value boxed once at the end.
    private static func assign(_ key: String, _ v: JSONValue, to f: inout Fields) {
        key.withUTF8Bytes { assign(UnsafeRawBufferPointer($0), v, to: &f) }
    }

    /// A member whose value is a string without escapes, as its bytes: the texts are kept as
    /// they are; any other member is assigned as the string the bytes spell.
    private static func assign(_ key: UnsafeRawBufferPointer, plain raw: UnsafeRawBufferPointer, to f: inout Fields,
                               interner: StringInterner?) {
        func named(_ name: StaticString) -> Bool {
            name.utf8CodeUnitCount == key.count && memcmp(name.utf8Start, key.baseAddress!, key.count) == 0
        }
        func text() -> String { String(decoding: raw, as: UTF8.self) }
        func shared() -> String { interner?.string(raw) ?? text() }
        switch key.count {
        case 2 where named("id"): f.id = text()
        case 3 where named("app"): f.app = shared()
        case 4 where named("body"): f.texts.setEscaped(.body, raw)
        case 4 where named("user"): break  // the event's partition key, not the notification's
        case 5 where named("title"): f.texts.setEscaped(.title, raw)
        case 5 where named("sound"): f.sound = shared()
        case 8 where named("subtitle"): f.texts.setEscaped(.subtitle, raw)
        case 8 where named("threadId"): f.threadId = shared()
        case 10 where named("collapseId"): f.collapseId = text()
        case 17 where named("interruptionLevel"):
            if let level = InterruptionLevel(utf8: raw) { f.level = level }
        case 29 where named("hiddenPreviewsBodyPlaceholder"): f.hiddenPreviewsBodyPlaceholder = shared()
        default: assign(key, .string(text()), to: &f)
        }
    }

    private static func assign(_ key: UnsafeRawBufferPointer, _ v: JSONValue, to f: inout Fields) {
        func named(_ name: StaticString) -> Bool {
            name.utf8CodeUnitCount == key.count && memcmp(name.utf8Start, key.baseAddress!, key.count) == 0
        }
        switch key.count {
        case 2: if named("id") { f.id = v.stringValue ?? "" }
        case 3: if named("app") { f.app = v.stringValue ?? "" }
        case 4:
            if named("body") { f.texts.set(.body, v.stringValue) } else if named("data") { f.data = v }
        case 5:
            if named("title") { f.texts.set(.title, v.stringValue) } else if named("sound") { f.sound = v.stringValue }
        case 7: if named("actions") { f.actions = Self.actions(v) }
        case 8:
            if named("threadId") { f.threadId = v.stringValue } else if named("subtitle") { f.texts.set(.subtitle, v.stringValue) }
        case 9:
            if named("deliverAt") { f.deliverAt = v.stringValue.flatMap(Instant.init(rfc3339:)) }
            else if named("expiresAt") { f.expiresAt = v.stringValue.flatMap(Instant.init(rfc3339:)) }
            else if named("marketing") { f.marketing = v.boolValue ?? false }
        case 10:
            if named("collapseId") { f.collapseId = v.stringValue }
            else if named("relevantAt") { f.relevantAt = v.stringValue.flatMap(Instant.init(rfc3339:)) }
        case 12:
            // An erased body's sender (ContentSeal): its digest, for Focus allowed people.
            if named("senderDigest"), let digest = v.stringValue { f.communication = CommunicationInfo(sender: ContentSeal.senderDigestPrefix + digest) }
        case 13:
            if named("communication"), let sender = v["sender"]?.stringValue {
                f.communication = CommunicationInfo(sender: sender, group: v["group"]?.stringValue)
            }
        case 14: if named("relevanceScore") { f.relevanceScore = v.doubleValue }
        case 17:
            if named("interruptionLevel"), let l = v.stringValue, let level = InterruptionLevel(rawValue: l) { f.level = level }
        case 29: if named("hiddenPreviewsBodyPlaceholder") { f.hiddenPreviewsBodyPlaceholder = v.stringValue }
        default: break
        }
    }

    private static func actions(_ v: JSONValue) -> [NotificationAction] {
        (v.arrayValue ?? []).map {
            NotificationAction(id: $0["id"]?.stringValue ?? "", title: $0["title"]?.stringValue ?? "",
                               destructive: $0["destructive"]?.boolValue ?? false, icon: $0["icon"]?.stringValue)
        }
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
