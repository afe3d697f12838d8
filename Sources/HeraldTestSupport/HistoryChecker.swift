// Judges a recorded history — sent, acknowledged, stored, decided, received — against Herald's promise.
import HeraldCore

/// A pure judge of one experiment's history. Give it what producers sent, what the service
/// acknowledged, what PostgreSQL holds and what each consumer received; `check()` classifies
/// every item and lists every violation of the promise:
///
/// - an acknowledged request is never lost (`lost`: acked but not stored, or stored at another seq);
/// - (app, id, user) is stored once (`duplicated`), and each decision is made once (`duplicated`);
/// - every stored submit is decided (`lost`: stored but never decided);
/// - nothing is stored or delivered that nobody sent (`unexpected`);
/// - a deferred decision happens at its `deliverAt`, not after (`late`) nor before (`early`);
/// - every committed delivery reaches every durable consumer at least once (`lost`), in cursor
///   order, never behind its acknowledged cursor (order violations).
///
/// Requests never acknowledged may or may not be stored: both are fine (a retry settles them).
/// A checker that never fails proves nothing: `HistoryCheckerTests` feeds it one hand-made
/// history per class, and the negative controls in `ReliabilityExperimentTests` make it fail.
public struct HistoryChecker: Sendable {
    /// The idempotency key of a submit: (app, notification id, user).
    public struct Key: Hashable, Comparable, Sendable, CustomStringConvertible {
        public var app: String, id: String, user: String
        public init(app: String, id: String, user: String) { self.app = app; self.id = id; self.user = user }
        public static func < (a: Key, b: Key) -> Bool { (a.app, a.id, a.user) < (b.app, b.id, b.user) }
        public var description: String { "\(app)/\(id)@\(user)" }
    }

    /// A submit a producer sent (perhaps several times). `payload` is what identifies its content
    /// (the experiments use the notification's `body`); `deliverAt` makes its decision deferred.
    public struct Sent: Sendable {
        public var key: Key, payload: String, deliverAt: Instant?
        public init(key: Key, payload: String, deliverAt: Instant? = nil) { self.key = key; self.payload = payload; self.deliverAt = deliverAt }
    }

    /// A success reply. `seq` ≤ 0 means the reply carried no seq (the ack-before-commit control).
    public struct Ack: Sendable {
        public var key: Key, seq: Int64, duplicate: Bool
        public init(key: Key, seq: Int64, duplicate: Bool = false) { self.key = key; self.seq = seq; self.duplicate = duplicate }
    }

    /// A submit row of `events`.
    public struct StoredEvent: Sendable {
        public var seq: Int64, key: Key, payload: String
        public init(seq: Int64, key: Key, payload: String) { self.seq = seq; self.key = key; self.payload = payload }
    }

    /// A row of `deliveries`.
    public struct StoredDelivery: Sendable {
        public var cursor: Int64, user: String, userIndex: Int64, causeSeq: Int64, kind: String
        public var app: String?, notification: String?, at: Instant
        public init(cursor: Int64, user: String, userIndex: Int64, causeSeq: Int64, kind: String,
                    app: String?, notification: String?, at: Instant) {
            self.cursor = cursor; self.user = user; self.userIndex = userIndex; self.causeSeq = causeSeq
            self.kind = kind; self.app = app; self.notification = notification; self.at = at
        }
    }

    /// A delivery line a consumer read, on its `session`-th connection (what the line says it is).
    public struct Received: Sendable {
        public var consumer: String, session: Int, cursor: Int64, user: String, notification: String?, causeSeq: Int64
        public init(consumer: String, session: Int, cursor: Int64, user: String, notification: String?, causeSeq: Int64) {
            self.consumer = consumer; self.session = session; self.cursor = cursor; self.user = user
            self.notification = notification; self.causeSeq = causeSeq
        }
    }

    /// One connection of a durable consumer: the cursor it had acknowledged (confirmed by a reply)
    /// before subscribing, and the highest it had sent an ack for (perhaps committed, unconfirmed).
    /// Resuming "from committed" must start after the first and no later than just after the second.
    public struct Session: Sendable {
        public var consumer: String, session: Int, ackedBefore: Int64, ackSentBefore: Int64
        public init(consumer: String, session: Int, ackedBefore: Int64, ackSentBefore: Int64? = nil) {
            self.consumer = consumer; self.session = session; self.ackedBefore = ackedBefore
            self.ackSentBefore = max(ackedBefore, ackSentBefore ?? ackedBefore)
        }
    }

    public var sent: [Sent] = []
    public var acks: [Ack] = []
    public var storedEvents: [StoredEvent] = []
    public var storedDeliveries: [StoredDelivery] = []
    public var received: [Received] = []
    public var sessions: [Session] = []
    /// Durable consumers that must have received every stored delivery.
    public var consumers: [String] = []
    /// Every stored submit must have at least one decision (true for the experiments' loads).
    public var expectDecisionPerSubmit = true

    public init() {}

    public enum Verdict: String, Sendable, CaseIterable { case ok, lost, duplicated, unexpected, late, early }

    /// One item judged, with a sentence saying why.
    public struct Finding: Sendable, CustomStringConvertible {
        public var verdict: Verdict, subject: String, detail: String
        public var description: String { "\(verdict.rawValue.uppercased()) \(subject): \(detail)" }
    }

    public struct Report: Sendable, CustomStringConvertible {
        public var sent = 0, acked = 0, stored = 0, decided = 0
        /// Distinct cursors received, per consumer.
        public var delivered: [String: Int] = [:]
        public var okItems = 0
        /// Every finding that is not `ok`.
        public var findings: [Finding] = []
        /// Cursor order: a stream went backwards, skipped, or resumed behind its acknowledged cursor.
        public var orderViolations: [String] = []

        public func count(_ v: Verdict) -> Int { findings.filter { $0.verdict == v }.count }
        public var lost: Int { count(.lost) }
        public var duplicated: Int { count(.duplicated) }
        public var unexpected: Int { count(.unexpected) }
        public var passed: Bool { findings.isEmpty && orderViolations.isEmpty }

        /// One line: verdict and counts.
        public var summary: String {
            let d = delivered.keys.sorted().map { "\(delivered[$0]!) to \($0)" }.joined(separator: ", ")
            return "\(passed ? "PASS" : "FAIL"): sent \(sent), acked \(acked), stored \(stored), decided \(decided), "
                + "delivered \(d.isEmpty ? "-" : d); lost \(lost), duplicated \(duplicated), unexpected \(unexpected), "
                + "late \(count(.late)), early \(count(.early)), order violations \(orderViolations.count)"
        }

        /// The summary and the first `limit` problems.
        public func text(limit: Int = 20) -> String {
            var lines = [summary]
            lines += findings.prefix(limit).map { "  \($0)" }
            lines += orderViolations.prefix(limit).map { "  ORDER \($0)" }
            let more = max(0, findings.count - limit) + max(0, orderViolations.count - limit)
            if more > 0 { lines.append("  … and \(more) more") }
            return lines.joined(separator: "\n")
        }
        public var description: String { text() }
    }

    public func check() -> Report {
        var report = Report()
        func flag(_ v: Verdict, _ subject: String, _ detail: String) {
            report.findings.append(Finding(verdict: v, subject: subject, detail: detail))
        }

        // Requests and events.
        var sentByKey: [Key: [Sent]] = [:]
        for s in sent { sentByKey[s.key, default: []].append(s) }
        var acksByKey: [Key: [Ack]] = [:]
        for a in acks { acksByKey[a.key, default: []].append(a) }
        var rowsByKey: [Key: [StoredEvent]] = [:]
        for e in storedEvents { rowsByKey[e.key, default: []].append(e) }
        report.sent = sentByKey.count
        report.acked = acksByKey.count

        var decisionsByKey: [Key: [StoredDelivery]] = [:]
        for d in storedDeliveries {
            guard let app = d.app, let id = d.notification else { continue }
            decisionsByKey[Key(app: app, id: id, user: d.user), default: []].append(d)
        }

        for key in sentByKey.keys.sorted() {
            let subject = "event \(key)"
            let rows = rowsByKey[key] ?? []
            let acked = acksByKey[key] ?? []
            var ok = true
            if !rows.isEmpty { report.stored += 1 }
            if rows.count > 1 {
                flag(.duplicated, subject, "stored \(rows.count) times, at seq \(rows.map { String($0.seq) }.joined(separator: ", "))")
                ok = false
            }
            if let a = acked.first, rows.isEmpty {
                flag(.lost, subject, "acknowledged\(a.seq > 0 ? " at seq \(a.seq)" : "") but not stored")
                ok = false
            } else if let row = rows.first, let wrong = acked.first(where: { $0.seq > 0 && $0.seq != row.seq }) {
                flag(.lost, subject, "acknowledged at seq \(wrong.seq) but stored at seq \(row.seq): the acknowledged commit is not the one stored")
                ok = false
            }
            if let row = rows.first, !(sentByKey[key] ?? []).contains(where: { $0.payload == row.payload }) {
                flag(.unexpected, subject, "stored with a payload no producer sent")
                ok = false
            }
            if let row = rows.first, expectDecisionPerSubmit, decisionsByKey[key] == nil {
                flag(.lost, subject, "stored at seq \(row.seq) but never decided (no delivery row)")
                ok = false
            }
            if let deliverAt = sentByKey[key]?.compactMap(\.deliverAt).first, let first = decisionsByKey[key]?.min(by: { $0.cursor < $1.cursor }) {
                if first.at > deliverAt {
                    flag(.late, subject, "decided at \(first.at.rfc3339), after its deliverAt \(deliverAt.rfc3339)"); ok = false
                } else if first.at < deliverAt {
                    flag(.early, subject, "decided at \(first.at.rfc3339), before its deliverAt \(deliverAt.rfc3339)"); ok = false
                }
            }
            if ok { report.okItems += 1 }
        }
        for key in rowsByKey.keys.sorted() where sentByKey[key] == nil {
            flag(.unexpected, "event \(key)", "stored at seq \(rowsByKey[key]!.map { String($0.seq) }.joined(separator: ", ")) but never sent")
        }

        // Decisions.
        report.decided = storedDeliveries.count
        var byOrdinal: [String: [Int64]] = [:]
        var byDecision: [String: [Int64]] = [:]
        for d in storedDeliveries {
            byOrdinal["\(d.user)#\(d.userIndex)", default: []].append(d.cursor)
            byDecision["\(d.kind) of \(d.app ?? "-")/\(d.notification ?? "-")@\(d.user) at \(d.at.rfc3339) caused by seq \(d.causeSeq)", default: []].append(d.cursor)
            if let app = d.app, let id = d.notification, sentByKey[Key(app: app, id: id, user: d.user)] == nil {
                flag(.unexpected, "delivery #\(d.cursor)", "\(d.kind) of \(app)/\(id)@\(d.user), which no producer sent")
            }
        }
        for (ordinal, cursors) in byOrdinal.sorted(by: { $0.key < $1.key }) where cursors.count > 1 {
            flag(.duplicated, "decision \(ordinal)", "stored \(cursors.count) times, at cursors \(cursors.sorted().map(String.init).joined(separator: ", "))")
        }
        for (decision, cursors) in byDecision.sorted(by: { $0.key < $1.key }) where cursors.count > 1 {
            flag(.duplicated, "decision \(decision)", "made \(cursors.count) times, at cursors \(cursors.sorted().map(String.init).joined(separator: ", "))")
        }

        // Consumers.
        let storedByCursor = Dictionary(storedDeliveries.map { ($0.cursor, $0) }, uniquingKeysWith: { a, _ in a })
        var receivedBy: [String: [Received]] = [:]
        for r in received { receivedBy[r.consumer, default: []].append(r) }
        let names = Set(consumers).union(receivedBy.keys).sorted()
        for name in names {
            let lines = receivedBy[name] ?? []
            var seen = Set<Int64>()
            for r in lines {
                seen.insert(r.cursor)
                if let d = storedByCursor[r.cursor] {
                    if d.user != r.user || d.notification != r.notification || d.causeSeq != r.causeSeq {
                        flag(.unexpected, "delivery #\(r.cursor) at \(name)",
                             "received as \(r.notification ?? "-")@\(r.user) from seq \(r.causeSeq), stored as \(d.notification ?? "-")@\(d.user) from seq \(d.causeSeq)")
                    }
                } else {
                    flag(.unexpected, "delivery #\(r.cursor) at \(name)", "received but not stored")
                }
            }
            report.delivered[name] = seen.count
            if consumers.contains(name) {
                let missing = storedDeliveries.map(\.cursor).filter { !seen.contains($0) }.sorted()
                for c in missing { flag(.lost, "delivery #\(c) at \(name)", "committed but never received") }
            }
            // Order within each connection, and where each connection resumed.
            var bySession: [Int: [Int64]] = [:]
            for r in lines { bySession[r.session, default: []].append(r.cursor) }
            let started = Dictionary(sessions.filter { $0.consumer == name }.map { ($0.session, $0) }, uniquingKeysWith: { a, _ in a })
            for (session, cursors) in bySession.sorted(by: { $0.key < $1.key }) {
                if let s = started[session], let first = cursors.first {
                    if first <= s.ackedBefore {
                        report.orderViolations.append("\(name) connection \(session) resumed at #\(first), behind its acknowledged cursor #\(s.ackedBefore)")
                    } else if first > s.ackSentBefore + 1 {
                        report.orderViolations.append("\(name) connection \(session) resumed at #\(first), skipping #\(s.ackSentBefore + 1)… after its last ack #\(s.ackSentBefore)")
                    }
                }
                for (a, b) in zip(cursors, cursors.dropFirst()) where b != a + 1 {
                    report.orderViolations.append(b <= a
                        ? "\(name) connection \(session) went backwards from #\(a) to #\(b)"
                        : "\(name) connection \(session) skipped from #\(a) to #\(b)")
                }
            }
        }
        return report
    }
}
