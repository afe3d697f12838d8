// Replay: re-derive every delivery from the stored events and compare, byte for byte, with what was stored.
import HeraldCore

/// Folds the event log through the engine exactly as `herald serve` does — events in seq
/// order at their recorded engine times, each user's timers fired before any later event —
/// and compares each derived delivery with the stored one of the same (user, ordinal).
public struct Replayer {
    /// Where replay stops: after this seq, or at this engine time (events after it are not folded,
    /// timers are fired up to it).
    public enum Limit: Sendable, Equatable {
        case everything
        case seq(Int64)
        case time(Instant)
    }

    /// One delivery that did not match.
    public struct Difference: Sendable, Equatable {
        public var user: String
        public var userIndex: Int64
        public var notification: String?
        /// nil when the side has no such delivery.
        public var stored: String?
        public var derived: String?
    }

    /// A what-if change: a request folded into history at an instant, as if the user had sent it then.
    public struct Injection: Sendable {
        public var at: Instant
        public var draft: EventDraft
        public init(at: Instant, draft: EventDraft) { self.at = at; self.draft = draft }
    }

    /// Under a what-if: one notification (or summary/digest instant) whose decisions would change.
    public struct Change: Sendable, Equatable {
        public var user: String
        public var subject: String
        public var stored: [String]
        public var derived: [String]
    }

    public struct Report: Sendable {
        /// The rules versions the replay decided by (the log's, or the one a what-if named).
        public var rules = RulesHistory()
        /// What-if mode: decisions per notification that would differ (empty without injections).
        public var changes: [Change] = []
        public var eventsRead = 0
        public var deliveriesCompared = 0
        public var differences: [Difference] = []
        public var seconds = 0.0
        /// On a partition whose start `herald retain` dropped: the snapshot the replay started from.
        public var startedFrom: (snapshot: Int64, throughSeq: Int64)?
        public var eventsPerSecond: Double { seconds > 0 ? Double(eventsRead) / seconds : 0 }
    }

    public var limit: Limit = .everything
    public var users: Set<String>?
    /// What-if: decide every event and timer by this rules version instead of the ones the log
    /// records (`rules_versions`); `changes` then lists the decisions that would differ.
    public var rulesVersion: String?
    public var progress: (Int, Int64) -> Void = { _, _ in }
    /// What-if changes, in time order. With any, `changes` lists the differing decisions.
    public var injections: [Injection] = []
    /// The partition replayed: each partition's log decides its users alone (SPEC §9).
    public var partition = 0

    public init() {}

    /// Whether the run lists changed decisions (an injection or another rules version).
    var isWhatIf: Bool { !injections.isEmpty || rulesVersion != nil }

    /// Runs the replay against the database behind `connection` (reads only). The log and the
    /// stored deliveries arrive as one stream in position order (`LogStream`); each derived
    /// delivery is compared with its stored twin as soon as both are seen, so memory holds only
    /// the users' states and the deliveries still waiting for their counterpart.
    public func run(_ connection: PGConnection, clock: () -> Double) throws(StoreError) -> Report {
        let started = clock()
        var report = Report()
        let head = try EventReader.head(connection, partition: partition)
        let through: Int64
        // The instant the replayed prefix ends: what the log had decided by then is compared —
        // stored deliveries later than it are left out, and derived timers fire up to it.
        var until: Instant?
        switch limit {
        case .everything: through = head
        case .seq(let s):
            through = min(s, head)
            // Up to seq s means: before event s + 1 was folded. Timers due by its instant had fired
            // (a timer due at an event's instant fires before it); later ones had not, even those
            // armed by events up to s (a deferred submit's decision, a summary).
            until = try LogStream.engineTime(ofSeq: through + 1, partition: partition, connection)
        case .time(let t):
            through = try LogStream.lastSeq(before: t, partition: partition, connection)
            until = t
        }

        // Each event and timer by the rules version that decided it live (`RulesHistory`).
        let rules = try RulesVersionStore.deciding(connection, partition: partition, only: rulesVersion)
        let engine = Engine(rules: rules)
        report.rules = rules
        var run = Run(engine: engine, users: users, recordsDecisions: isWhatIf, connection: connection)
        // Sealed content is opened with the keys that exist; an erased user's is compared by decision.
        run.keys = try KeyRing.load(connection)
        defer { run.contentConnection?.close() }
        var horizon = Instant.epoch
        var lastSeq: Int64 = 0
        // A partition whose start `herald retain` dropped is replayed from the snapshot its horizon
        // was set by: every user's state and delivery count then, and the events after it.
        let start = try RetainedSnapshot.horizonStart(connection, partition: partition)
        if let start {
            let before = "is before partition \(partition)'s retention horizon (snapshot \(start.snapshotId), through seq \(start.throughSeq), "
                + "\(start.capturedAt.rfc3339)): the events before it are archived; replay the whole log from herald export --archive imported into a fresh database"
            switch limit {
            case .seq(let s) where s < start.throughSeq: throw .configuration("--until \(s) \(before)")
            case .time(let t) where t < start.capturedAt: throw .configuration("--until \(t.rfc3339) \(before)")
            default: break
            }
            if let early = injections.first(where: { $0.at < start.capturedAt }) {
                throw .configuration("a what-if at \(early.at == .earliestRepresentable ? "the log's start" : early.at.rfc3339) \(before)")
            }
            try run.start(from: start, partition: partition)
            horizon = start.capturedAt
            lastSeq = start.throughSeq
            report.startedFrom = (start.snapshotId, start.throughSeq)
        }
        var pendingInjections = injections.sorted { $0.at < $1.at }[...]
        func inject(upTo t: Instant, seq: Int64) throws(StoreError) {
            while let next = pendingInjections.first, next.at <= t {
                pendingInjections.removeFirst()
                guard let user = next.draft.user else { continue }
                let event = StoredEvent(seq: seq, user: user, type: next.draft.type, body: next.draft.body, at: next.at)
                // Decided by the rules a request sent then would have met (a take-over right after
                // the event before it included), not by the seq it borrows.
                try run.fold(event, user: run.ordinal(user), decidedBy: rules.version(forInjectionAfter: seq, at: next.at))
            }
        }

        let stream = try LogStream(connection, partition: partition, after: start?.throughSeq ?? 0, through: through, deliveries: true,
                                   deliveriesAfterCursor: start?.droppedThroughCursor)
        stream.keys = run.keys
        while let record = try stream.next() {
            switch record {
            case .delivery(let d):
                let o = run.ordinal(d.userBytes)
                if !run.included[o] || d.userIndex <= run.replicas[o].inSnapshot { continue }
                if let until, d.at > until { continue }
                horizon = max(horizon, d.at)
                run.matcher.stored(d, user: run.names.names[o])
            case .event(let e):
                if !pendingInjections.isEmpty { try inject(upTo: e.engineTime, seq: lastSeq) }
                lastSeq = e.seq
                report.eventsRead += 1
                if report.eventsRead % 16_384 == 0 { progress(report.eventsRead, head) }
                horizon = max(horizon, e.engineTime)
                if e.kind == .clock { continue }
                guard let userBytes = e.userBytes else {
                    var scratch = UserState(user: "")
                    _ = engine.apply(e.storedEvent(user: nil), to: &scratch, apps: &run.apps)
                    continue
                }
                let o = run.ordinal(userBytes)
                if !run.included[o] { continue }
                // Captured after this event (a later slice of the snapshot): already in the state.
                if start != nil && e.seq <= run.replicas[o].state.lastSeq { continue }
                try run.fold(e.storedEvent(user: run.names.names[o]), user: o)
            }
        }
        progress(report.eventsRead, head)
        // Timers that fired after each user's last event, up to the replay's horizon.
        if let until { horizon = until }
        try inject(upTo: horizon, seq: lastSeq)
        for o in run.replicas.indices.sorted(by: { run.names.names[$0] < run.names.names[$1] }) where run.included[o] {
            run.advance(user: o, to: horizon)
        }

        run.matcher.finish()
        report.deliveriesCompared = run.matcher.compared
        report.differences = run.matcher.differences
        if isWhatIf {
            report.changes = Self.changes(stored: run.matcher.storedDecisions, derived: run.matcher.derivedDecisions)
        }
        report.seconds = clock() - started
        return report
    }

    /// One run's state: every user's replica, found by the ordinal of its stored id. A struct with
    /// mutating methods rather than locals captured by nested functions: captured locals are
    /// boxed and every access to them is checked for exclusivity at run time (~3% of replay).
    struct Run {
        /// A user's folded state and how many deliveries it has produced (the next ordinal).
        struct Replica {
            var state: UserState
            var delivered: Int64 = 0
            /// The deliveries the starting snapshot counted (compared no further: they decided before it).
            var inSnapshot: Int64 = 0
        }
        let engine: Engine
        let users: Set<String>?
        /// By user ordinal (`names`): one cheap lookup of the stored bytes per record.
        var replicas: [Replica] = []
        var names = NameTable()
        /// Per ordinal: whether `users` (if given) includes the user.
        var included: [Bool] = []
        var apps = AppRegistry()
        var matcher: DeliveryMatcher
        /// The replay's connection (streaming the log) and a second one, opened when a fold first
        /// needs content read back (`EventContent`).
        let connection: PGConnection
        var contentConnection: PGConnection?
        /// The content keys (`KeyRing`).
        var keys = KeyRing()

        init(engine: Engine, users: Set<String>?, recordsDecisions: Bool, connection: PGConnection) {
            self.engine = engine
            self.users = users
            self.connection = connection
            matcher = DeliveryMatcher(recordsDecisions: recordsDecisions)
        }

        /// The ordinal of the user whose id is `bytes`; a new user gets a fresh replica.
        mutating func ordinal(_ bytes: UnsafeRawBufferPointer) -> Int {
            let o = names.ordinal(of: bytes)
            if o == replicas.count {
                replicas.append(Replica(state: UserState(user: names.names[o])))
                included.append(users.map { $0.contains(names.names[o]) } ?? true)
            }
            return o
        }

        mutating func ordinal(_ user: String) -> Int {
            return user.withUTF8Bytes { ordinal(UnsafeRawBufferPointer($0)) }
        }

        /// Starts every user of the snapshot `start` names from its state and delivery count there,
        /// with the content its state refers to, and the apps registered then.
        mutating func start(from start: RetainedSnapshot.HorizonStart, partition: Int) throws(StoreError) {
            apps = start.apps
            var owner: [Int64: Int] = [:]
            do {
                try RetainedSnapshot.forEachState(connection, id: start.snapshotId) { state, delivered in
                    let o = ordinal(state.user)
                    replicas[o] = Replica(state: state, delivered: delivered, inSnapshot: delivered)
                    state.forEachContentNeededAfterSnapshot(keepUntil: .latestRepresentable) { owner[$0] = o }
                    return true
                }
            } catch let error as StoreError {
                throw error
            } catch {
                throw .configuration("snapshot \(start.snapshotId) of partition \(partition) cannot be read: \(error)")
            }
            var found = 0
            try SnapshotStore.readBodies(connection, partition: partition, seqs: Array(owner.keys), keys: keys) { seq, body in
                guard let o = owner[seq] else { return }
                replicas[o].state.supplySnapshotContent(SubmittedNotification(canonicalBody: body), seq: seq)
                found += 1
            }
            guard found == owner.count else {
                throw .configuration("\(owner.count - found) notifications snapshot \(start.snapshotId) refers to are neither in events nor retained")
            }
        }

        /// Applies `event` to user `o`'s replica in place (a copy mutated and stored back would
        /// copy the state's buffers every event) and hands what it derives to the matcher.
        /// Folds one event; `decidedBy`: a what-if's injected request, decided by that version.
        mutating func fold(_ event: StoredEvent, user o: Int, decidedBy version: String? = nil) throws(StoreError) {
            if event.kind == .snooze {
                var opened = contentConnection
                try EventContent.supply(toApply: event, to: &replicas[o].state, keys: keys) { () throws(StoreError) -> PGConnection in
                    if opened == nil { opened = try connection.duplicate() }
                    return opened!
                }
                contentConnection = opened
            }
            let outcome = if let version { engine.apply(event, decidedBy: version, to: &replicas[o].state, apps: &apps) }
                else { engine.apply(event, to: &replicas[o].state, apps: &apps) }
            take(outcome, user: o)
        }

        /// Fires user `o`'s timers due by `t`.
        mutating func advance(user o: Int, to t: Instant) {
            let outcome = engine.advance(&replicas[o].state, to: t, apps: apps)
            take(outcome, user: o)
        }

        private mutating func take(_ outcome: Outcome, user o: Int) {
            // Borrowed from the buffer: `for d in deliveries` copied each (retaining its strings).
            outcome.deliveries.withUnsafeBufferPointer { deliveries in
                for i in deliveries.indices {
                    replicas[o].delivered += 1
                    matcher.derived(deliveries.baseAddress! + i, index: replicas[o].delivered)
                }
            }
        }
    }

    /// Groups decisions by subject — (app, notification), or the instant of a summary/digest — and
    /// lists the subjects whose sequence of decisions differs. Ordinals are not compared: a change
    /// that adds a summary shifts every later ordinal without changing those decisions.
    static func changes(stored: [String: [Int64: DeliveryMatcher.Decision]],
                        derived: [String: [Int64: DeliveryMatcher.Decision]]) -> [Change] {
        func grouped(_ side: [Int64: DeliveryMatcher.Decision]) -> [String: [String]] {
            var out: [String: [String]] = [:]
            for index in side.keys.sorted() {
                let (notification, at, app, kind, reason) = side[index]!
                let subject = notification.map { "\(app ?? "-") \($0)" } ?? "\(kind) at \(at.rfc3339)"
                out[subject, default: []].append("\(kind)(\(reason))")
            }
            return out
        }
        var changes: [Change] = []
        for user in Set(stored.keys).union(derived.keys).sorted() {
            let a = grouped(stored[user] ?? [:]), b = grouped(derived[user] ?? [:])
            for subject in Set(a.keys).union(b.keys).sorted() where a[subject] != b[subject] {
                changes.append(Change(user: user, subject: subject, stored: a[subject] ?? [], derived: b[subject] ?? []))
            }
        }
        return changes
    }
}
