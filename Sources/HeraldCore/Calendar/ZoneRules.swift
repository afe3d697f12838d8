// A zone's UTC-offset history as constant-offset segments, and the wall-clock → instant rule.
import Foundation

/// The offset history of one IANA zone, read once from the system time-zone database
/// through Foundation (`TimeZone.secondsFromGMT(for:)` and
/// `nextDaylightSavingTimeTransition(after:)`, which reports every offset change, not
/// only DST ones), then shared by every calendar in that zone. Pure: a fixed function of
/// the zone name and the installed tz database.
///
/// The one rule every calendar uses (`instant(atOrAfterLocal:)`): a wall-clock time L
/// happens at **the first instant at which the zone's wall clock shows L or later**.
/// - an ordinary time: the instant it is shown;
/// - a time skipped by a forward jump (02:30 on a spring-forward day): the instant of the
///   jump, whose wall clock shows the first valid time after it (03:00);
/// - a time shown twice after a backward jump (fall back): its first occurrence only.
/// The rule is monotone (a later wall time never maps to an earlier instant), so sorted
/// schedules stay sorted and two times inside one skipped hour map to one instant.
final class ZoneRules: Sendable {
    /// The identifier as given (e.g. `Europe/Berlin`).
    let identifier: String
    let zone: TimeZone
    /// Offsets for instants in 1900…2200, precomputed; outside it, `table(around:)` builds
    /// a small table on demand.
    let table: OffsetTable

    static let tableFrom: Int64 = -2_208_988_800_000  // 1900-01-01T00:00:00Z
    static let tableThrough: Int64 = 7_258_118_400_000  // 2200-01-01T00:00:00Z
    /// Margin that keeps every lookup well inside a table's range: more than the largest
    /// UTC offset (±15 h) plus the largest wall-clock jump (a day, Samoa 2011).
    static let margin: Int64 = 3 * 86_400_000

    fileprivate init(identifier: String, zone: TimeZone) {
        self.identifier = identifier
        self.zone = zone
        self.table = OffsetTable(zone: zone, from: ZoneRules.tableFrom, through: ZoneRules.tableThrough)
    }

    /// The rules of an IANA zone, shared per process; nil when Foundation does not know it.
    static func named(_ identifier: String) -> ZoneRules? {
        ZoneRegistry.shared.rules(identifier)
    }

    /// Resolves a zone name or explains why it cannot be used.
    static func require(_ identifier: String) throws(CalendarError) -> ZoneRules {
        // Foundation also accepts offset spellings ("GMT+5", "UTC-03:00") that are not IANA
        // names and whose sign is the opposite of IANA's Etc/GMT±N; refuse them.
        // "GMT+0" and "GMT-0" are genuine IANA links to GMT.
        for prefix in ["GMT+", "GMT-", "UTC+", "UTC-"] where identifier.hasPrefix(prefix) && identifier != "GMT+0" && identifier != "GMT-0" {
            throw CalendarError.offsetStyleTimeZone(identifier)
        }
        guard let rules = named(identifier) else { throw CalendarError.unknownTimeZone(identifier) }
        return rules
    }

    /// A table valid for lookups near `instant` (ms): the shared one, or a small one built
    /// now for instants outside 1900…2200.
    @inline(__always)
    func table(around instant: Int64) -> OffsetTable {
        if instant > ZoneRules.tableFrom + ZoneRules.margin, instant < ZoneRules.tableThrough - ZoneRules.margin {
            return table
        }
        return OffsetTable(zone: zone, from: instant - 2 * ZoneRules.margin, through: instant + 2 * ZoneRules.margin)
    }

    /// `instant` (ms) moved into years 0001…9999, the range `Instant` accepts from the wire,
    /// so that offset arithmetic can never overflow on a nonsensical argument.
    static func clamp(_ instant: Instant) -> Int64 {
        min(max(instant.millisecondsSinceEpoch, Instant.earliestRepresentable.millisecondsSinceEpoch),
            Instant.latestRepresentable.millisecondsSinceEpoch)
    }

    /// The wall-clock reading at `instant`, as milliseconds of a UTC-based "local epoch".
    func local(_ instant: Int64) -> Int64 {
        instant + table(around: instant).offset(at: instant)
    }

    /// The first instant at which the wall clock shows `local` or later (see the type's doc).
    func instant(atOrAfterLocal local: Int64) -> Int64 {
        table(around: local).instant(atOrAfterLocal: local)
    }
}

/// Constant-offset segments: segment k covers `[transitions[k-1], transitions[k])` (open
/// at the ends) with UTC offset `offsets[k]`; all values in milliseconds. Only valid for
/// lookups inside the range it was built for (callers keep `ZoneRules.margin` away from
/// its ends).
struct OffsetTable: Sendable {
    var transitions: [Int64]
    var offsets: [Int64]

    init(zone: TimeZone, from: Int64, through: Int64) {
        func offsetMs(_ ms: Int64) -> Int64 {
            Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(ms) / 1000))) * 1000
        }
        var transitions: [Int64] = []
        var offsets: [Int64] = [offsetMs(from)]
        var cursor = from
        while let next = zone.nextDaylightSavingTimeTransition(after: Date(timeIntervalSince1970: Double(cursor) / 1000)) {
            let t = Int64((next.timeIntervalSince1970 * 1000).rounded())
            guard t < through else { break }
            guard t > cursor else { cursor += 1000; continue }  // defensive: never loop in place
            let o = offsetMs(t)
            if o != offsets[offsets.count - 1] {  // ignore changes of the DST flag alone
                transitions.append(t)
                offsets.append(o)
            }
            cursor = t
        }
        self.transitions = transitions
        self.offsets = offsets
    }

    /// Index of the segment containing `instant`: the number of transitions at or before it.
    @inline(__always)
    func segment(containing instant: Int64) -> Int {
        var lo = 0, hi = transitions.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if transitions[mid] <= instant { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The UTC offset (ms) in force at `instant`.
    @inline(__always)
    func offset(at instant: Int64) -> Int64 { offsets[segment(containing: instant)] }

    /// The first instant whose wall clock shows `local` or later.
    ///
    /// Walks the segments from one that certainly lies before the answer. In segment k
    /// (start s, end e, offset o) the wall clock runs over [s + o, e + o); `highWater` is
    /// the latest wall time already shown by earlier segments (exclusive). The answer is in
    /// the first segment where `local` has not been shown yet and is shown before the
    /// segment ends: at `local - o`, or at `s` if `local` fell into a forward jump.
    func instant(atOrAfterLocal local: Int64) -> Int64 {
        // Any instant whose wall clock shows `local` is within a day of it; starting two
        // days early keeps every wall time of earlier segments below `local`.
        var k = segment(containing: local - 2 * 86_400_000)
        var highWater = Int64.min
        while true {
            let o = offsets[k]
            if k == transitions.count { return Swift.max(k == 0 ? Int64.min : transitions[k - 1], local - o) }
            let end = transitions[k]
            if local >= highWater, local < end + o {
                return Swift.max(k == 0 ? Int64.min : transitions[k - 1], local - o)
            }
            highWater = Swift.max(highWater, end + o)
            k += 1
        }
    }
}

/// Process-wide cache of `ZoneRules` by identifier: building one reads a few hundred
/// transitions from ICU (under a millisecond), and millions of users share a few zones.
private final class ZoneRegistry: @unchecked Sendable {
    // Why @unchecked Sendable: `rules` is only touched while holding `lock`.
    static let shared = ZoneRegistry()
    private let lock = NSLock()
    private var rules: [String: ZoneRules] = [:]
    private var unknown: Set<String> = []

    func rules(_ identifier: String) -> ZoneRules? {
        lock.lock()
        defer { lock.unlock() }
        if let r = rules[identifier] { return r }
        if unknown.contains(identifier) { return nil }
        guard !identifier.isEmpty, let zone = TimeZone(identifier: identifier) else {
            if unknown.count < 1000 { unknown.insert(identifier) }
            return nil
        }
        let r = ZoneRules(identifier: identifier, zone: zone)
        rules[identifier] = r
        return r
    }
}
