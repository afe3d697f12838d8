// Builds an event log, and the deliveries its fold implies, without the service: the service's own admission and fold, written by COPY.
import HeraldCore
import HeraldStore

/// A history loader for benchmarks at scales the TCP path cannot load in time (millions of
/// events at ~9k submits/s). It stores exactly what `herald serve` would have stored for the
/// same requests at the same engine time:
///
/// - every request goes through `Engine.admit` (the door), and its events are stored as the
///   service stores them: canonical body, notification id only on submits, one engine time;
/// - every event is folded by `Engine.apply` into its user's state, and the deliveries that
///   produces are stored with the service's per-user ordinals and cursors;
/// - positions are consecutive from the current heads, and the heads are moved at the end.
///
/// Start-up then folds this log (HeraldService+Restore) to the same state and finds every
/// delivery it derives already stored, as after a clean shutdown. Users are independent, so
/// requests are generated user by user and only one user's state is held at a time.
/// Rows go through COPY: deliveries straight into `deliveries`; events into an unlogged staging
/// table and then into `events` (bodies validated as JSON by the cast, as `herald import` does).
public final class SyntheticHistory {
    public let connection: PGConnection
    /// Decides by the log's rules versions, this build's from the first synthetic event on.
    public let engine = Engine()
    public private(set) var apps = AppRegistry()
    /// The last position given to an event / a delivery.
    public private(set) var seq: Int64
    public private(set) var cursor: Int64
    public private(set) var eventsWritten = 0
    public private(set) var deliveriesWritten = 0
    /// Called after each flushed batch with (events, deliveries) written so far.
    public var progress: (Int, Int) -> Void = { _, _ in }
    /// Seconds spent in COPY, and in `finish` (staging → events, heads, ANALYZE); the rest of the
    /// build is admission, fold and row formatting in Swift.
    public private(set) var copySeconds = 0.0
    public private(set) var finishSeconds = 0.0
    /// Rows buffered before a COPY.
    public var batchRows = 50_000
    /// Deliveries the last `user(_:_:at:)` call derived (that user's delivery ordinal).
    public private(set) var lastUserDeliveries: Int64 = 0

    private var events: [UInt8] = []
    private var deliveries: [UInt8] = []
    private var pendingEvents = 0
    private var pendingDeliveries = 0
    private var staged = false

    /// A request the door refused: the generator built a request the service would not accept.
    public struct Refused: Error, CustomStringConvertible {
        public var op: String
        public var error: RequestError
        public var description: String { "the door refused a generated \(op): \(error.title). \(error.detail)" }
    }

    public init(databaseURL: String) throws {
        connection = try PGConnection.connect(databaseURL)
        seq = try EventReader.head(connection)
        cursor = try EventReader.deliveryHead(connection)
        // Decided by this build's rules, as the service records at its start-up.
        engine.book.adopt(try RulesVersionStore.takeOver(connection, at: .epoch).history)
        try connection.execute("SET client_min_messages = warning")
        try connection.execute("DROP TABLE IF EXISTS herald_synthetic_events")
        try connection.execute("""
            CREATE UNLOGGED TABLE herald_synthetic_events (seq bigint, user_id text, type text, app text,
                notification_id text, body text, engine_time timestamptz)
            """)
        events.reserveCapacity(batchRows * 400)
    }

    /// A global request (registerApp), admitted and folded as the service does.
    public func global(_ op: String, _ request: JSONValue, at: Instant) throws {
        let accepted = try admit(op, request, at: at)
        for draft in accepted.events {
            seq += 1
            addEvent(draft, at: at)
            var scratch = UserState(user: "")
            _ = engine.apply(StoredEvent(draft, seq: seq, at: at), to: &scratch, apps: &apps)
        }
        try flushIfFull()
    }

    /// One user's requests, in order, all at engine time `at` (a manual clock standing still).
    /// Returns the user's state after them (tests compare it; benchmarks drop it).
    @discardableResult
    public func user(_ user: String, _ requests: [(op: String, body: JSONValue)], at: Instant) throws -> UserState {
        var state = UserState(user: user)
        var ordinal: Int64 = 0
        for (op, body) in requests {
            let accepted = try admit(op, body, at: at)
            for draft in accepted.events {
                seq += 1
                addEvent(draft, at: at)
                let outcome = engine.apply(StoredEvent(draft, seq: seq, at: at), to: &state, apps: &apps)
                for d in outcome.deliveries {
                    ordinal += 1
                    cursor += 1
                    addDelivery(d, index: ordinal)
                }
            }
        }
        try flushIfFull()
        lastUserDeliveries = ordinal
        return state
    }

    /// Writes what is buffered, moves `events` rows out of staging, moves the heads, analyzes.
    public func finish() throws {
        try flush()
        let clock = ContinuousClock(), t0 = clock.now
        defer { finishSeconds = Self.seconds(clock.now - t0) }
        try connection.execute("""
            INSERT INTO events (partition, seq, user_id, type, app, notification_id, body, engine_time)
            SELECT 0, seq, user_id, type, app, notification_id, body::json, engine_time
            FROM herald_synthetic_events ORDER BY seq
            """)
        try connection.execute("DROP TABLE herald_synthetic_events")
        try connection.execute("UPDATE partitions SET seq = $1 WHERE partition = 0", [String(seq)])
        try connection.execute("UPDATE delivery_heads SET cursor = $1 WHERE partition = 0", [String(cursor)])
        try connection.execute("ANALYZE events")
        try connection.execute("ANALYZE deliveries")
    }

    private func admit(_ op: String, _ request: JSONValue, at: Instant) throws -> AcceptedRequest {
        switch engine.admit(op: op, request: request, apps: apps, now: at) {
        case .accepted(let a): return a
        case .rejected(let e): throw Refused(op: op, error: e)
        }
    }

    /// One `events` row as `HeraldService.append` builds it.
    private func addEvent(_ draft: EventDraft, at: Instant) {
        StoreRowsText.decimal(seq, to: &events); events.append(9)
        StoreRowsText.field(draft.user, to: &events); events.append(9)
        StoreRowsText.field(draft.type, to: &events); events.append(9)
        StoreRowsText.field(draft.app, to: &events); events.append(9)
        StoreRowsText.field(draft.type == "submit" ? draft.notificationId : nil, to: &events); events.append(9)
        StoreRowsText.field(String(decoding: draft.storedBody, as: UTF8.self), to: &events); events.append(9)
        StoreRowsText.field(at.rfc3339, to: &events); events.append(10)
        pendingEvents += 1
        eventsWritten += 1
    }

    /// One `deliveries` row as `HeraldService.row(_:index:)` builds it.
    private func addDelivery(_ d: Delivery, index: Int64) {
        StoreRowsText.decimal(cursor, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.user, to: &deliveries); deliveries.append(9)
        StoreRowsText.decimal(index, to: &deliveries); deliveries.append(9)
        StoreRowsText.decimal(d.causeSeq, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.kind.rawValue, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.app, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.notificationId, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.reason, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.at.rfc3339, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.rulesVersion, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(d.traceJSON.canonicalString, to: &deliveries); deliveries.append(9)
        StoreRowsText.field(String(decoding: d.bodyBytes, as: UTF8.self), to: &deliveries); deliveries.append(9)
        deliveries.append(UInt8(ascii: "0")); deliveries.append(10)  // partition: a synthetic history has one
        pendingDeliveries += 1
        deliveriesWritten += 1
    }

    private func flushIfFull() throws {
        if pendingEvents >= batchRows || pendingDeliveries >= batchRows { try flush() }
    }

    static func seconds(_ d: Swift.Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    private func flush() throws {
        let clock = ContinuousClock(), t0 = clock.now
        defer { copySeconds += Self.seconds(clock.now - t0) }
        if pendingEvents > 0 {
            try connection.copyIn("COPY herald_synthetic_events FROM STDIN", chunks: [events])
            events.removeAll(keepingCapacity: true)
            pendingEvents = 0
        }
        if pendingDeliveries > 0 {
            try connection.copyIn("""
                COPY deliveries (cursor, user_id, user_index, cause_seq, kind, app, notification_id, reason, at,
                                 rules_version, trace, body, partition) FROM STDIN
                """, chunks: [deliveries])
            deliveries.removeAll(keepingCapacity: true)
            pendingDeliveries = 0
        }
        progress(eventsWritten, deliveriesWritten)
    }
}

/// COPY text formatting at the byte level (the same rules as the store benchmark's baseline).
enum StoreRowsText {
    static func field(_ value: String?, to buffer: inout [UInt8]) {
        StoreBenchmark.appendCopyField(value, to: &buffer)
    }

    static func decimal(_ value: Int64, to buffer: inout [UInt8]) {
        StoreBenchmark.appendDecimal(value, to: &buffer)
    }
}
