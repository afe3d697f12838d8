// The rows the store appends and reads: events, deliveries, and what an append reports back.
import HeraldCore

/// An event to append. Its body is canonical JSON, kept as the UTF-8 bytes the door wrote
/// (`bodyBytes`, shared with the request's draft, never copied into a `String` on the hot path;
/// the store keeps the bytes exactly). `body` reads and writes them as text.
public struct EventRow: Sendable, Hashable {
    public var user: String?
    public var type: String
    public var app: String?
    public var notificationId: String?
    public var bodyBytes: [UInt8]
    public var engineTime: Instant
    /// The row's place among its submit's recipients: 0 for a single-user submit, 0 … n-1 for a
    /// fan-out, whose rows are appended together in one call ((app, notification id,
    /// recipient index) is unique, so a used (app, id) collides on its first row whoever the user).
    public var recipientIndex: Int32 = 0
    /// No size: the public initializers build the row in place through the memberwise one (`InPlace`).
    var inPlace = InPlace()

    /// The body as text (decoded from `bodyBytes`; tools, tests and reads).
    public var body: String {
        get { String(decoding: bodyBytes, as: UTF8.self) }
        set { bodyBytes = Array(newValue.utf8) }
    }
}

extension EventRow {
    public init(user: String?, type: String, app: String? = nil, notificationId: String? = nil, body: String, engineTime: Instant,
                recipientIndex: Int32 = 0) {
        self.init(user: user, type: type, app: app, notificationId: notificationId, bodyBytes: Array(body.utf8), engineTime: engineTime,
                  recipientIndex: recipientIndex)
    }

    /// One whose body is already canonical JSON bytes (the service: the draft's `storedBody`).
    public init(user: String?, type: String, app: String? = nil, notificationId: String? = nil, bodyBytes: [UInt8], engineTime: Instant,
                recipientIndex: Int32 = 0) {
        self.init(user: user, type: type, app: app, notificationId: notificationId, bodyBytes: bodyBytes,
                  engineTime: engineTime, recipientIndex: recipientIndex, inPlace: InPlace())
    }
}

/// An event as stored, with its global position.
public struct StoredEventRow: Sendable, Hashable {
    public var seq: Int64
    public var row: EventRow

    /// The event as the engine folds it. The body was canonical JSON when stored; an unreadable
    /// one (only possible by editing the table by hand) folds as an empty object.
    public var storedEvent: StoredEvent {
        StoredEvent(seq: seq, user: row.user, type: row.type,
                    body: (try? JSONValue.parse(row.bodyBytes)) ?? .object([:]), at: row.engineTime)
    }
}

/// What happened to one appended event once its transaction committed.
public enum AppendOutcome: Sendable, Hashable {
    /// Stored at this global position.
    case appended(seq: Int64)
    /// A submit whose (app, notification id) was already stored by a request with the same rows
    /// (same recipients, same bodies): its original row's position.
    case duplicate(seq: Int64)
    /// The (app, notification id) was already stored with a *different* body or other
    /// recipients: nothing stored; the position of the stored request's first row.
    case conflict(seq: Int64)

    public var seq: Int64 {
        switch self {
        case .appended(let s), .duplicate(let s), .conflict(let s): return s
        }
    }
}

/// A delivery decision to append. `userIndex` is its ordinal in the user's own delivery stream.
/// The stored trace and body are canonical JSON kept as bytes: written once at decision time,
/// copied into the writer's parameters and into the consumers' wire line without any `String`.
public struct DeliveryRow: Sendable, Hashable {
    public var user: String
    public var userIndex: Int64
    public var causeSeq: Int64
    public var kind: String
    public var app: String?
    public var notificationId: String?
    public var reason: String
    public var at: Instant
    public var rulesVersion: String
    /// The stored trace's UTF-8 bytes.
    public var traceBytes: [UInt8]
    /// The stored body's UTF-8 bytes (the delivery line without `op` and `cursor`).
    public var bodyBytes: [UInt8]
    /// No size: the public initializers build the row in place through the memberwise one (`InPlace`).
    var inPlace = InPlace()
    /// The body live consumers get when the stored one is sealed (`ContentSeal`): its content in clear.
    public var liveBody: [UInt8]? = nil

    /// The stored trace as text (tools and tests).
    public var trace: String { String(decoding: traceBytes, as: UTF8.self) }
    /// The stored body as text (tools and tests).
    public var body: String { String(decoding: bodyBytes, as: UTF8.self) }
}

extension DeliveryRow {
    public init(user: String, userIndex: Int64, causeSeq: Int64, kind: String, app: String?, notificationId: String?,
                reason: String, at: Instant, rulesVersion: String, traceBytes: [UInt8], bodyBytes: [UInt8]) {
        self.init(user: user, userIndex: userIndex, causeSeq: causeSeq, kind: kind, app: app, notificationId: notificationId,
                  reason: reason, at: at, rulesVersion: rulesVersion, traceBytes: traceBytes, bodyBytes: bodyBytes,
                  inPlace: InPlace())
    }

    public init(user: String, userIndex: Int64, causeSeq: Int64, kind: String, app: String?, notificationId: String?,
                reason: String, at: Instant, rulesVersion: String, trace: String, body: String) {
        self.init(user: user, userIndex: userIndex, causeSeq: causeSeq, kind: kind, app: app, notificationId: notificationId,
                  reason: reason, at: at, rulesVersion: rulesVersion, traceBytes: Array(trace.utf8), bodyBytes: Array(body.utf8))
    }
}

/// A delivery as stored, with its consumer cursor.
public struct StoredDeliveryRow: Sendable, Hashable {
    public var cursor: Int64
    public var row: DeliveryRow
}
