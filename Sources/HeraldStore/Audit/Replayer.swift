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

    /// Runs the replay against the database behind `connection` (reads only).
    public func run(_ connection: PGConnection, clock: () -> Double) throws(StoreError) -> Report {
        let started = clock()
        var report = Report()
        let head = try EventReader.head(connection)

        // Stored deliveries per user, by ordinal.
        var stored: [String: [Int64: (body: String, notification: String?, at: Instant, app: String?, kind: String, reason: String)]] = [:]
        var after: Int64 = 0
        var horizon = Instant.epoch
        while true {
            let page = try EventReader.deliveries(connection, after: after, limit: 20_000)
            if page.isEmpty { break }
            for d in page {
                after = d.cursor
                if let users, !users.contains(d.row.user) { continue }
                if !within(d.row.at, seq: d.row.causeSeq) { continue }
                stored[d.row.user, default: [:]][d.row.userIndex] = (d.row.body, d.row.notificationId, d.row.at, d.row.app, d.row.kind, d.row.reason)
                horizon = max(horizon, d.row.at)
            }
        }

        var states: [String: UserState] = [:]
        var counts: [String: Int64] = [:]
        var apps = AppRegistry()
        var derived: [String: [Int64: (body: String, notification: String?, at: Instant, app: String?, kind: String, reason: String)]] = [:]
        func take(_ outcome: Outcome, user: String) {
            for d in outcome.deliveries {
                counts[user, default: 0] += 1
                derived[user, default: [:]][counts[user]!] = (String(decoding: d.bodyBytes, as: UTF8.self), d.notificationId, d.at, d.app, d.kind.rawValue, d.reason)
            }
        }
        var pendingInjections = injections.sorted { $0.at < $1.at }[...]
        func inject(upTo t: Instant, seq: Int64) {
            while let next = pendingInjections.first, next.at <= t {
                pendingInjections.removeFirst()
                guard let user = next.draft.user else { continue }
                let event = StoredEvent(seq: seq, user: user, type: next.draft.type, body: next.draft.body, at: next.at)
                take(engine.apply(event, to: &states[user, default: UserState(user: user)], apps: &apps), user: user)
            }
        }
        after = 0
        scan: while true {
            let page = try EventReader.events(connection, after: after, limit: 10_000)
            if page.isEmpty { break }
            for e in page {
                if case .seq(let s) = limit, e.seq > s { break scan }
                if case .time(let t) = limit, e.row.engineTime > t { break scan }
                inject(upTo: e.row.engineTime, seq: after)
                after = e.seq
                report.eventsRead += 1
                horizon = max(horizon, e.row.engineTime)
                if e.row.type == "clock" { continue }
                let event = e.storedEvent
                guard let user = e.row.user else {
                    var scratch = UserState(user: "")
                    _ = engine.apply(event, to: &scratch, apps: &apps)
                    continue
                }
                if let users, !users.contains(user) { continue }
                // In place: a copy mutated and stored back would copy the state's buffers every event.
                take(engine.apply(event, to: &states[user, default: UserState(user: user)], apps: &apps), user: user)
            }
            progress(report.eventsRead, head)
        }
        // Timers that fired after each user's last event, up to the replay's horizon.
        if case .time(let t) = limit { horizon = t }
        inject(upTo: horizon, seq: after)
        for user in states.keys.sorted() {
            take(engine.advance(&states[user]!, to: horizon, apps: apps), user: user)
        }

        // Compare, user by user, ordinal by ordinal.
        for user in Set(stored.keys).union(derived.keys).sorted() {
            let s = stored[user] ?? [:], d = derived[user] ?? [:]
            for index in Set(s.keys).union(d.keys).sorted() {
                report.deliveriesCompared += 1
                let a = s[index], b = d[index]
                if a?.body != b?.body {
                    report.differences.append(Difference(user: user, userIndex: index, notification: a?.notification ?? b?.notification,
                                                         stored: a?.body, derived: b?.body))
                }
            }
        }
        if !injections.isEmpty {
            report.changes = Self.changes(stored: stored.mapValues { $0.mapValues { ($0.notification, $0.at, $0.app, $0.kind, $0.reason) } },
                                          derived: derived.mapValues { $0.mapValues { ($0.notification, $0.at, $0.app, $0.kind, $0.reason) } })
        }
        report.seconds = clock() - started
        return report
    }

    /// Groups decisions by subject — (app, notification), or the instant of a summary/digest — and
    /// lists the subjects whose sequence of decisions differs. Ordinals are not compared: a change
    /// that adds a summary shifts every later ordinal without changing those decisions.
    static func changes(stored: [String: [Int64: (String?, Instant, String?, String, String)]],
                        derived: [String: [Int64: (String?, Instant, String?, String, String)]]) -> [Change] {
        func grouped(_ side: [Int64: (String?, Instant, String?, String, String)]) -> [String: [String]] {
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

    private func within(_ at: Instant, seq: Int64) -> Bool {
        switch limit {
        case .everything: return true
        case .seq(let s): return seq <= s
        case .time(let t): return at <= t
        }
    }
}
