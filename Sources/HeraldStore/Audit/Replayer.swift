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
        /// What-if mode: decisions per notification that would differ (empty without injections).
        public var changes: [Change] = []
        public var eventsRead = 0
        public var deliveriesCompared = 0
        public var differences: [Difference] = []
        public var seconds = 0.0
        public var eventsPerSecond: Double { seconds > 0 ? Double(eventsRead) / seconds : 0 }
    }

    public var limit: Limit = .everything
    public var users: Set<String>?
    public var engine = Engine()
    public var progress: (Int, Int64) -> Void = { _, _ in }
    /// What-if changes, in time order. With any, `changes` lists the differing decisions.
    public var injections: [Injection] = []

    public init() {}

    /// Runs the replay against the database behind `connection` (reads only). The log and the
    /// stored deliveries arrive as one stream in position order (`LogStream`); each derived
    /// delivery is compared with its stored twin as soon as both are seen, so memory holds only
    /// the users' states and the deliveries still waiting for their counterpart.
    public func run(_ connection: PGConnection, clock: () -> Double) throws(StoreError) -> Report {
        let started = clock()
        var report = Report()
        let head = try EventReader.head(connection)
        let through: Int64
        switch limit {
        case .everything: through = head
        case .seq(let s): through = min(s, head)
        case .time(let t): through = try LogStream.lastSeq(before: t, connection)
        }

        /// A user's folded state and how many deliveries it has produced (the next ordinal).
        struct Replica {
            var state: UserState
            var delivered: Int64 = 0
        }
        var replicas: [String: Replica] = [:]
        var apps = AppRegistry()
        var matcher = DeliveryMatcher(recordsDecisions: !injections.isEmpty)
        var horizon = Instant.epoch
        var lastSeq: Int64 = 0

        func fold(_ event: StoredEvent, into replica: inout Replica) {
            // In place: a copy mutated and stored back would copy the state's buffers every event.
            let outcome = engine.apply(event, to: &replica.state, apps: &apps)
            take(outcome, into: &replica)
        }
        func take(_ outcome: Outcome, into replica: inout Replica) {
            for d in outcome.deliveries {
                replica.delivered += 1
                matcher.derived(d, index: replica.delivered)
            }
        }
        var pendingInjections = injections.sorted { $0.at < $1.at }[...]
        func inject(upTo t: Instant, seq: Int64) {
            while let next = pendingInjections.first, next.at <= t {
                pendingInjections.removeFirst()
                guard let user = next.draft.user else { continue }
                let event = StoredEvent(seq: seq, user: user, type: next.draft.type, body: next.draft.body, at: next.at)
                fold(event, into: &replicas[user, default: Replica(state: UserState(user: user))])
            }
        }

        let stream = try LogStream(connection, through: through, deliveries: true)
        while let record = try stream.next() {
            switch record {
            case .delivery(let d):
                if let users, !users.contains(d.user) { continue }
                if case .time(let t) = limit, d.at > t { continue }
                horizon = max(horizon, d.at)
                matcher.stored(d)
            case .event(let e):
                inject(upTo: e.engineTime, seq: lastSeq)
                lastSeq = e.seq
                report.eventsRead += 1
                if report.eventsRead % 16_384 == 0 { progress(report.eventsRead, head) }
                horizon = max(horizon, e.engineTime)
                if e.kind == .clock { continue }
                guard let user = e.user else {
                    var scratch = UserState(user: "")
                    _ = engine.apply(e.storedEvent, to: &scratch, apps: &apps)
                    continue
                }
                if let users, !users.contains(user) { continue }
                fold(e.storedEvent, into: &replicas[user, default: Replica(state: UserState(user: user))])
            }
        }
        progress(report.eventsRead, head)
        // Timers that fired after each user's last event, up to the replay's horizon.
        if case .time(let t) = limit { horizon = t }
        inject(upTo: horizon, seq: lastSeq)
        for user in replicas.keys.sorted() {
            let outcome = engine.advance(&replicas[user]!.state, to: horizon, apps: apps)
            take(outcome, into: &replicas[user]!)
        }

        matcher.finish()
        report.deliveriesCompared = matcher.compared
        report.differences = matcher.differences
        if !injections.isEmpty {
            report.changes = Self.changes(stored: matcher.storedDecisions, derived: matcher.derivedDecisions)
        }
        report.seconds = clock() - started
        return report
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
