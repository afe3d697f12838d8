// The door's verdict on one wire request: the events to store and the warnings, or an error.

/// The result of `Engine.admit`: store these events, or reject with this error.
public enum Admission: Hashable, Sendable {
    case accepted(AcceptedRequest)
    case rejected(RequestError)
}

/// An accepted request: one or more events to append (fan-out gives one per user) and the
/// warnings to list in the ack.
public struct AcceptedRequest: Hashable, Sendable {
    public var events: [EventDraft]
    public var warnings: [RequestWarning]
    /// A submit with `users` (SPEC §10 fan-out), even of one user: its reply counts the events.
    public var fanOut = false
    /// Creates one from its fields.
    public init(events: [EventDraft], warnings: [RequestWarning], fanOut: Bool = false) {
        self.events = events; self.warnings = warnings; self.fanOut = fanOut
    }
}

/// An event to append: the store gives it a seq and the engine time, and hands it back
/// as a `StoredEvent`.
public struct EventDraft: Hashable, Sendable {
    /// The user (partition key); nil for `registerApp` (global) and for a `withdraw`
    /// without `user` (the runtime resolves the users from the original submit — see
    /// docs/engine.md — and stores one event per user with `withUser`).
    public var user: String?
    /// The op.
    public var type: String
    public var app: String?
    /// For `submit`: with `app`, the idempotency key. Also set for withdraw/snooze/opened.
    public var notificationId: String?
    /// The normalized request: known fields only, canonical forms (timestamps in canonical
    /// RFC 3339), no `op`/`rid`/`token`/`users`; a per-user event has its own `user`.
    /// A submit from the door holds only its canonical bytes (and `decoded`): the value is
    /// parsed from them when asked for — the runtime never asks, and building the dictionary
    /// for every submit would be a large share of a submit's cost.
    public var body: JSONValue {
        get { builtBody ?? canonicalBody.flatMap { try? JSONValue.parse($0) } ?? .null }
        set { builtBody = newValue; canonicalBody = nil }
    }
    private var builtBody: JSONValue?
    /// Whether `body` is held as a value (false: it would be parsed from `canonicalBody`).
    public var holdsBodyValue: Bool { builtBody != nil }
    /// For `submit`: the notification as the door decoded it (equal to
    /// `SubmittedNotification(body: body)`). Pass it on through `StoredEvent(_:seq:at:)` so
    /// `apply` need not parse the body again; not stored, ignored by `==`.
    public var decoded: SubmittedNotification?
    /// `body.canonicalBytes` when the door already wrote them (submits), so the runtime stores
    /// them without encoding the body again; nil otherwise. Not stored separately, ignored by `==`.
    public var canonicalBody: [UInt8]?

    /// The body's canonical bytes: the door's if it wrote them, else encoded now.
    public var storedBody: [UInt8] { canonicalBody ?? body.canonicalBytes }

    /// Equal when the fields are (caches excluded).
    public static func == (a: EventDraft, b: EventDraft) -> Bool {
        a.user == b.user && a.type == b.type && a.app == b.app && a.notificationId == b.notificationId && a.body == b.body
    }

    /// Hashes the fields that `==` compares.
    public func hash(into h: inout Hasher) {
        h.combine(user); h.combine(type); h.combine(app); h.combine(notificationId); h.combine(body)
    }

    /// This draft addressed to `user` (sets `user` and the body's `"user"`).
    public func withUser(_ user: String) -> EventDraft {
        var d = self
        d.user = user
        if case .object(var o) = body { o["user"] = .string(user); d.body = .object(o) }  // (clears canonicalBody)
        return d
    }
}

extension EventDraft {
    /// Creates one from its fields.
    public init(user: String?, type: String, app: String?, notificationId: String?, body: JSONValue,
                decoded: SubmittedNotification? = nil, canonicalBody: [UInt8]? = nil) {
        self.init(user: user, type: type, app: app, notificationId: notificationId, builtBody: body, decoded: decoded,
                  canonicalBody: canonicalBody)  // the memberwise one: builds in place (see `InPlace`)
    }

    /// A submit as the door admits it: its body is `canonicalBody` (see `body`), decoded as `decoded`.
    public init(submitFor user: String, app: String, notificationId: String, decoded: SubmittedNotification,
                canonicalBody: [UInt8]) {
        self.init(user: user, type: "submit", app: app, notificationId: notificationId, builtBody: nil, decoded: decoded,
                  canonicalBody: canonicalBody)
    }
}

/// Why a request was rejected, written like a good alert: `title` says what happened,
/// specifically; `detail` says why and what to change. `code` is stable snake_case.
public struct RequestError: Error, Hashable, Sendable {
    public var code: String
    public var title: String
    public var detail: String
    /// Creates one from its fields.
    public init(code: String, title: String, detail: String) { self.code = code; self.title = title; self.detail = detail }

    /// `{"code":…,"title":…,"detail":…}` for the failure reply.
    public var json: JSONValue {
        .object(["code": .string(code), "title": .string(title), "detail": .string(detail)])
    }
}

/// Something accepted but worth fixing; listed in the ack's `warnings`, shaped like an error:
/// `title` says what was noticed, specifically, `detail` what it means and what to change.
public struct RequestWarning: Hashable, Sendable {
    public var code: String
    public var title: String
    public var detail: String
    /// Creates one from its fields.
    public init(code: String, title: String, detail: String) { self.code = code; self.title = title; self.detail = detail }

    /// The detail of every `unknown_field` warning.
    static let unknownFieldDetail = "It was ignored (not stored). Check its spelling against the op's fields (docs/protocol.md), or leave it out."

    /// `{"code":…,"detail":…,"title":…}` for the ack.
    public var json: JSONValue {
        .object(["code": .string(code), "title": .string(title), "detail": .string(detail)])
    }
}
