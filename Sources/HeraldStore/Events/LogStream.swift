// The whole log streamed in position order: events, optionally with the deliveries each caused.
import HeraldCore

/// Reads `events` (and, for replay, `deliveries`) with one binary COPY, in position order: each
/// event is followed by the stored deliveries whose `cause_seq` is that event (a merge of the
/// two tables' indexes, no sort). Start-up and replay fold the log this way; a timer's stored
/// delivery arrives after the event that scheduled it, before the replay fires that timer.
public final class LogStream {
    /// One record; its byte fields are valid until the next `next()`.
    public enum Record {
        case event(Event)
        case delivery(Delivery)
    }

    public struct Event {
        public var seq: Int64
        /// The user's id as stored (nil for a global event), valid until the next `next()`.
        public var userBytes: UnsafeRawBufferPointer?
        public var user: String? { userBytes.map { String(decoding: $0, as: UTF8.self) } }
        /// The stored `type` (a literal for the kinds this build folds).
        public var type: String { kind == .other ? String(decoding: typeBytes, as: UTF8.self) : kind.typeName }
        /// `type`, decoded.
        public var kind: EventKind
        var typeBytes: UnsafeRawBufferPointer
        /// Read only when asked for (the fold does not need them): valid until the next `next()`.
        var appBytes: UnsafeRawBufferPointer?
        var notificationIdBytes: UnsafeRawBufferPointer?
        public var app: String? { appBytes.map { String(decoding: $0, as: UTF8.self) } }
        public var notificationId: String? { notificationIdBytes.map { String(decoding: $0, as: UTF8.self) } }
        /// The stored canonical JSON, valid until the next `next()`.
        public var body: UnsafeRawBufferPointer
        public var engineTime: Instant
        /// The stream's cache of repeated long strings (app ids…), shared by its decoded submits.
        /// The stream's interner. Unowned and unsafe, so that a record holds no reference and costs
        /// nothing to destroy (a `String` and this reference made every `Record?` go through
        /// Optional's generic destroy, ~120 instructions a record); the stream outlives its records.
        unowned(unsafe) var interner: StringInterner

        /// The event as the engine folds it (the body read straight from the COPY buffer). A
        /// submit arrives decoded, its `body` left null: the engine folds the decoded notification
        /// and reads nothing else of a submit. An unreadable body (only possible by editing the
        /// table by hand) folds as an empty object.
        public var storedEvent: StoredEvent { storedEvent(user: user) }

        /// `storedEvent` with the user's id given as a string the caller already holds (replay
        /// keeps one per user: no string built per event).
        public func storedEvent(user: String?) -> StoredEvent {
            if kind == .submit {
                return StoredEvent(seq: seq, user: user, kind: kind, type: type, body: .null, at: engineTime,
                                   decoded: SubmittedNotification(canonicalBody: body, interner: interner))
            }
            if kind == .withdraw || kind == .opened, let target = NotificationTarget(canonicalBody: body, interner: interner) {
                return StoredEvent(seq: seq, user: user, kind: kind, type: type, body: .null, at: engineTime, target: target)
            }
            return StoredEvent(seq: seq, user: user, kind: kind, type: type,
                               body: (try? JSONValue.parse(body, interner: interner)) ?? .object([:]), at: engineTime)
        }

        public var row: StoredEventRow {
            StoredEventRow(seq: seq, row: EventRow(user: user, type: type, app: app, notificationId: notificationId,
                                                   body: String(decoding: body, as: UTF8.self), engineTime: engineTime))
        }
    }

    public struct Delivery {
        /// The user's id as stored, valid until the next `next()`.
        public var userBytes: UnsafeRawBufferPointer
        public var user: String { String(decoding: userBytes, as: UTF8.self) }
        public var userIndex: Int64
        public var causeSeq: Int64
        public var at: Instant
        /// Read only when asked for (a comparison needs only the body): valid until the next `next()`.
        var row: PGCopyRow
        public var kind: String { row.string(2) ?? "" }
        public var app: String? { row.string(3) }
        public var notificationId: String? { row.string(4) }
        public var reason: String { row.string(8) ?? "" }
        /// The stored delivery line (without op and cursor), valid until the next `next()`.
        public var body: UnsafeRawBufferPointer
    }

    private let copy: PGCopyOut
    private let interner = StringInterner()

    /// Streams events with `after < seq <= through` (and, with `deliveries`, the stored deliveries
    /// caused by them) in position order. Start-up passes a snapshot's position as `after`.
    public init(_ connection: PGConnection, after: Int64 = 0, through: Int64 = .max, deliveries: Bool) throws(StoreError) {
        let events = "SELECT seq, user_id, type, app, notification_id, body, engine_time, NULL::bigint, NULL::text FROM events"
        // The range is applied to the union, not inside it: with the bounds on each branch
        // PostgreSQL 15 plans no Merge Append of the two indexes but a sort of every row
        // (measured on the 1M-event bench log: 6.0 s against 3.4 s for the whole stream).
        let sql = deliveries
            ? """
              COPY (SELECT * FROM (\(events)
                                   UNION ALL
                                   SELECT cause_seq, user_id, kind, app, notification_id, body, at, user_index, reason
                                   FROM deliveries) AS log
                    WHERE seq > \(after) AND seq <= \(through)
                    ORDER BY 1) TO STDOUT (FORMAT binary)
              """
            : "COPY (\(events) WHERE seq > \(after) AND seq <= \(through) ORDER BY seq) TO STDOUT (FORMAT binary)"
        copy = try PGCopyOut(connection, sql: sql)
    }

    /// The next record in position order; nil at the end.
    public func next() throws(StoreError) -> Record? {
        guard let r = try copy.next() else { return nil }
        let position = r.int64(0) ?? 0
        let time = Instant(millisecondsSinceEpoch: r.timestampMilliseconds(6) ?? 0)
        let body = r.bytes(5) ?? UnsafeRawBufferPointer(start: nil, count: 0)
        if let userIndex = r.int64(7) {
            return .delivery(Delivery(userBytes: r.bytes(1) ?? UnsafeRawBufferPointer(start: nil, count: 0), userIndex: userIndex, causeSeq: position,
                                      at: time, row: r, body: body))
        }
        let typeBytes = r.bytes(2) ?? UnsafeRawBufferPointer(start: nil, count: 0)
        let kind = EventKind(utf8: typeBytes)
        return .event(Event(seq: position, userBytes: r.bytes(1), kind: kind, typeBytes: typeBytes, appBytes: r.bytes(3),
                            notificationIdBytes: r.bytes(4), body: body, engineTime: time, interner: interner))
    }

    /// The last seq to read for a limit given as an engine time: every event before the first
    /// one later than `time` (events are folded in seq order, and replay stops at the first).
    public static func lastSeq(before time: Instant, _ connection: PGConnection) throws(StoreError) -> Int64 {
        let r = try connection.execute(
            "SELECT coalesce((SELECT min(seq) - 1 FROM events WHERE engine_time > 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'), (SELECT seq FROM event_head))",
            [String(time.millisecondsSinceEpoch)])
        return r.int64(0, 0) ?? 0
    }
}
