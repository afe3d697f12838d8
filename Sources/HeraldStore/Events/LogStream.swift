// The whole log streamed in position order: events, optionally with the deliveries each caused.
import HeraldCore

/// Reads `events` (and, for replay, `deliveries`) by binary COPY, in position order: each stored
/// delivery comes after the event that caused it, each table read along its primary key (no
/// sort). Start-up and replay fold the log this way.
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
        /// Optional's generic destroy); the stream outlives its records.
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
                                                   bodyBytes: Array(body), engineTime: engineTime))
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
    /// With deliveries: their own COPY, in cursor order, on a second connection (which it keeps).
    private let deliveryCopy: PGCopyOut?
    /// The next delivery, read and not yet returned (its bytes stay valid until `deliveryCopy` is read again).
    private var heldDelivery: PGCopyRow?
    private var deliveriesDone = false
    private var eventsDone = false
    /// The seq of the last event returned.
    private var lastEventSeq: Int64
    private let interner = StringInterner()
    /// The content keys sealed bodies are opened with (`ContentSeal`): with them a record's body is
    /// the original, or the erased form once the key is gone; without, bodies are as stored.
    public var keys: KeyRing?
    /// The opened body of the record last returned (its `body` points here until the next `next()`).
    private var openedBody = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    deinit { openedBody.deallocate() }

    /// Streams events with `after < seq <= through` (and, with `deliveries`, the stored deliveries
    /// caused by them) in position order. Start-up passes a snapshot's position as `after`.
    /// `deliveriesAfterCursor`: the deliveries read are those after this cursor instead of those
    /// caused after `after` (a replay from a snapshot, whose users' timers fire deliveries caused
    /// by events before it).
    ///
    /// Deliveries are read in `cursor` order (commit order, the primary key) by a second COPY on a
    /// second connection, and each is handed out once the event that caused it has been: so
    /// every delivery follows its causing event, and a timer's delivery comes about where it
    /// committed. (One COPY merging the two tables by position would need an index on
    /// `deliveries (cause_seq)`, which every delivery insert would pay for.)
    public init(_ connection: PGConnection, partition: Int = 0, after: Int64 = 0, through: Int64 = .max, deliveries: Bool,
                deliveriesAfterCursor: Int64? = nil) throws(StoreError) {
        lastEventSeq = after
        copy = try PGCopyOut(connection, sql: """
            COPY (SELECT seq, user_id, type, app, notification_id, body, engine_time FROM events
                  WHERE partition = \(partition) AND seq > \(after) AND seq <= \(through) ORDER BY seq) TO STDOUT (FORMAT binary)
            """)
        if deliveries {
            deliveryCopy = try PGCopyOut(connection.duplicate(), sql: """
                COPY (SELECT cause_seq, user_id, kind, app, notification_id, body, at, user_index, reason FROM deliveries
                      WHERE partition = \(partition) AND \(deliveriesAfterCursor.map { "cursor > \($0)" } ?? "cause_seq > \(after)")
                        AND cause_seq <= \(through) ORDER BY cursor) TO STDOUT (FORMAT binary)
                """)
        } else {
            deliveryCopy = nil
        }
    }

    /// The next record in position order; nil at the end.
    public func next() throws(StoreError) -> Record? {
        if let deliveryCopy {
            if heldDelivery == nil && !deliveriesDone {
                heldDelivery = try deliveryCopy.next()
                deliveriesDone = heldDelivery == nil
            }
            if let d = heldDelivery, eventsDone || (d.int64(0) ?? 0) <= lastEventSeq {
                heldDelivery = nil
                return delivery(d)
            }
        }
        if !eventsDone, let r = try copy.next() {
            let e = event(r)
            lastEventSeq = e.seq
            return .event(e)
        }
        eventsDone = true
        if let d = heldDelivery {
            heldDelivery = nil
            return delivery(d)
        }
        return nil
    }

    private func event(_ r: PGCopyRow) -> Event {
        let typeBytes = r.bytes(2) ?? UnsafeRawBufferPointer(start: nil, count: 0)
        let kind = EventKind(utf8: typeBytes)
        var body = r.bytes(5) ?? UnsafeRawBufferPointer(start: nil, count: 0)
        if kind == .submit, let keys { body = opened(body, user: r.bytes(1), keys) }
        return Event(seq: r.int64(0) ?? 0, userBytes: r.bytes(1), kind: kind, typeBytes: typeBytes,
                     appBytes: r.bytes(3), notificationIdBytes: r.bytes(4),
                     body: body,
                     engineTime: Instant(millisecondsSinceEpoch: r.timestampMilliseconds(6) ?? 0), interner: interner)
    }

    private func delivery(_ r: PGCopyRow) -> Record {
        var body = r.bytes(5) ?? UnsafeRawBufferPointer(start: nil, count: 0)
        if let keys { body = opened(body, user: r.bytes(1), keys) }
        return .delivery(Delivery(userBytes: r.bytes(1) ?? UnsafeRawBufferPointer(start: nil, count: 0), userIndex: r.int64(7) ?? 0,
                                  causeSeq: r.int64(0) ?? 0, at: Instant(millisecondsSinceEpoch: r.timestampMilliseconds(6) ?? 0),
                                  row: r, body: body))
    }

    /// `body` opened with `keys` (pointing into `openedBody`), or `body` itself when not sealed.
    private func opened(_ body: UnsafeRawBufferPointer, user: UnsafeRawBufferPointer?, _ keys: KeyRing) -> UnsafeRawBufferPointer {
        guard ContentSeal.mayBeSealed(body), let user else { return body }
        switch keys.open(body, user: String(decoding: user, as: UTF8.self)) {
        case .clear: return body
        case .opened(let b), .erased(let b):
            if openedBody.count < b.count {
                openedBody.deallocate()
                openedBody = .allocate(byteCount: max(b.count, 4096), alignment: 1)
            }
            b.withUnsafeBytes { openedBody.copyMemory(from: $0) }
            return UnsafeRawBufferPointer(rebasing: openedBody[..<b.count])
        }
    }

    /// The engine time of the event at `seq` (nil when there is none: past the head).
    public static func engineTime(ofSeq seq: Int64, partition: Int = 0, _ connection: PGConnection) throws(StoreError) -> Instant? {
        let r = try connection.execute(
            "SELECT (extract(epoch FROM engine_time) * 1000)::bigint FROM events WHERE partition = $2 AND seq = $1::bigint", [String(seq), String(partition)])
        return r.rowCount == 0 ? nil : r.int64(0, 0).map(Instant.init(millisecondsSinceEpoch:))
    }

    /// The last seq to read for a limit given as an engine time: every event before the first
    /// one later than `time` (events are folded in seq order, and replay stops at the first).
    public static func lastSeq(before time: Instant, partition: Int = 0, _ connection: PGConnection) throws(StoreError) -> Int64 {
        let r = try connection.execute(
            "SELECT coalesce((SELECT min(seq) - 1 FROM events WHERE partition = $2 AND engine_time > 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'), (SELECT seq FROM partitions WHERE partition = $2))",
            [String(time.millisecondsSinceEpoch), String(partition)])
        return r.int64(0, 0) ?? 0
    }
}
