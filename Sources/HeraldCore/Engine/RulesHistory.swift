// Which rules version decided what, across a log written by several builds: replay of an old log under its own rules.

/// The rules versions a log was decided under, and where each took over.
///
/// A build implements every rules version it knows (`Engine.knownRulesVersions`); the one in
/// force at a decision depends on where the log was when a newer build first served it. The
/// service records that point at start-up (table `rules_versions`: from seq, engine time,
/// version) whenever its version differs from the log's latest, and replay, `herald state` and
/// `explain` read the same records, so an old log replays byte for byte under a newer build.
///
/// - An event at seq `s` is decided by the version of the last change with `fromSeq <= s`.
/// - A timer that fires as an event folds (due at or before the event's time, armed by it) is
///   decided by that event's version. Any other timer due at `t` is decided by the last change
///   recorded before `t` (`at < t`): timers due at or before a start-up were owed by the build
///   that stopped, whenever they are fired. A change recorded on an empty log (`fromSeq == 1`)
///   governs every timer.
/// - Before any change: `initial`. A build records its version at its first start-up on a log
///   (from seq 1 when none is recorded yet), so only a log no build has served — events written by
///   a tool — has none: it is decided by the version of the build folding it.
public struct RulesHistory: Sendable, Equatable {
    /// One start-up at which a build with another rules version took over the log.
    public struct Change: Sendable, Equatable {
        /// The first event seq decided by `version`.
        public var fromSeq: Int64
        /// The engine time at that start-up: timers due after it are decided by `version`.
        public var at: Instant
        public var version: String
        public init(fromSeq: Int64, at: Instant, version: String) {
            self.fromSeq = fromSeq; self.at = at; self.version = version
        }
    }

    /// The version of everything before the first change.
    public private(set) var initial: String
    /// In `fromSeq` order.
    public private(set) var changes: [Change]

    /// A history from its stored changes in recording order (sorted here by `fromSeq`; changes
    /// with one `fromSeq`, recorded with no event between them, keep their order: the last decides).
    public init(initial: String = Engine.currentRulesVersion, changes: [Change] = []) {
        self.initial = initial
        self.changes = changes.enumerated()
            .sorted { ($0.element.fromSeq, $0.offset) < ($1.element.fromSeq, $1.offset) }.map(\.element)
    }

    /// One version for every decision: a build's own tests and tools without a store, and a
    /// what-if replay under another version (`herald replay --rules-version`).
    public static func only(_ version: String) -> RulesHistory { RulesHistory(initial: version) }

    /// The version of the newest decisions.
    public var latest: String { changes.last?.version ?? initial }

    /// The versions it names that this build cannot decide by (`Engine.knownRulesVersions`):
    /// a newer build served the log.
    public var unknownVersions: [String] {
        ([initial] + changes.map(\.version)).filter { !Engine.knownRulesVersions.contains($0) }
    }

    /// Appends the change a start-up records.
    public mutating func append(_ change: Change) {
        precondition(changes.last.map { $0.fromSeq <= change.fromSeq } ?? true, "rules changes are recorded in log order")
        changes.append(change)
    }

    /// Which rules decided which part of the log, for people: "1 for seq 1–41, 2 from seq 42
    /// (timers due after …)", "1 throughout", "1 throughout (none recorded)".
    public var summary: String {
        typealias Segment = (version: String, fromSeq: Int64, at: Instant?)
        var segments: [Segment] = []
        var current: Segment = (initial, 1, nil)
        for c in changes {
            if c.fromSeq == current.fromSeq {
                // No event between the two: the later decides.
                current = (c.version, c.fromSeq, c.at)
                if let previous = segments.last, previous.version == current.version { current = segments.removeLast() }
            } else if c.version != current.version {
                segments.append(current)
                current = (c.version, c.fromSeq, c.at)
            }
        }
        if segments.isEmpty { return "\(current.version) throughout" + (changes.isEmpty ? " (none recorded)" : "") }
        var parts = segments.indices.map { i in
            "\(segments[i].version) for seq \(segments[i].fromSeq)–\((i + 1 < segments.count ? segments[i + 1].fromSeq : current.fromSeq) - 1)"
        }
        parts.append("\(current.version) from seq \(current.fromSeq)" + (current.at.map { " (timers due after \($0.rfc3339))" } ?? ""))
        return parts.joined(separator: ", ")
    }

    /// The version that decides the event at `seq`.
    public func version(forEventAt seq: Int64) -> String {
        // The common case first: an event after the newest change.
        guard let last = changes.last else { return initial }
        if seq >= last.fromSeq { return last.version }
        return changes.last(where: { $0.fromSeq <= seq })?.version ?? initial
    }

    /// The version that decides a request that is not in the log, injected at `t` right after the
    /// event at `seq` (a what-if's change, `herald replay --what-if`): the event's version, unless
    /// a build took over right after that event (`fromSeq == seq + 1`) at or before `t` — a request
    /// sent then would have met the new build, as the next event in the log did. A change recorded
    /// on the empty log (`fromSeq == 1`) governs a request injected before the first event too
    /// (`--what-if` without "at"), as it governs every timer.
    public func version(forInjectionAfter seq: Int64, at t: Instant) -> String {
        changes.last(where: { $0.fromSeq <= seq || ($0.fromSeq == seq + 1 && ($0.at <= t || $0.fromSeq == 1)) })?.version ?? initial
    }

    /// The version that decides a timer due at `t`.
    public func version(forTimerDueAt t: Instant) -> String {
        guard let last = changes.last else { return initial }
        if last.at < t || last.fromSeq == 1 { return last.version }
        return changes.last(where: { $0.at < t || $0.fromSeq == 1 })?.version ?? initial
    }
}

/// The `RulesHistory` an `Engine` decides by, held by reference: engines copy cheaply, and the
/// service adopts the log's history at start-up without replacing its engine. Adopted only
/// before the engine decides anything (start-up, before serving; tools build a new one), never
/// while deciding: that is what makes sharing it across copies safe (`@unchecked Sendable`).
public final class RulesBook: @unchecked Sendable {
    public private(set) var history: RulesHistory
    /// `history.latest`, kept for the label of every delivery.
    public private(set) var latest: String
    /// The first seq the latest version decides, and the instant after which it decides timers
    /// (milliseconds; `Int64.min`: all): the per-event check compares two integers.
    private var latestFromSeq = Int64.min
    private var latestAfterMilliseconds = Int64.min

    init(_ history: RulesHistory) {
        self.history = history
        latest = history.latest
        adopt(history)
    }

    /// Decides by `history` from now on. Fails on a version this build does not know (a
    /// newer build wrote the log: the store refuses it first with a clear error).
    public func adopt(_ history: RulesHistory) {
        precondition(history.unknownVersions.isEmpty, "a log decided by rules this build does not know (\(history)): run a newer build")
        self.history = history
        latest = history.latest
        if let last = history.changes.last {
            latestFromSeq = last.fromSeq
            latestAfterMilliseconds = last.fromSeq == 1 ? .min : last.at.millisecondsSinceEpoch
        } else {
            latestFromSeq = .min
            latestAfterMilliseconds = .min
        }
    }

    /// Whether the latest version decides the event at `seq` (the common case, without a look-up).
    @inline(__always)
    func latestDecides(eventAt seq: Int64) -> Bool { seq >= latestFromSeq }

    /// Whether the latest version decides a timer due at `t`.
    @inline(__always)
    func latestDecides(timerDueAt t: Instant) -> Bool { t.millisecondsSinceEpoch > latestAfterMilliseconds }
}
