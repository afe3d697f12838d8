// When a scheduled Focus is on: weekly local-time windows in an IANA zone, merged, DST-correct.

/// One weekly Focus window: days are ISO weekdays 1 = Monday … 7 = Sunday, on which the
/// window STARTS; end <= start means it ends the next day (so `22:00`–`07:00` runs
/// overnight, `22:00`–`00:00` until midnight, and equal start and end make 24 hours).
public struct FocusWindow: Hashable, Sendable {
    /// ISO weekdays (1 = Monday … 7 = Sunday) on which the window starts.
    public var days: [Int]
    /// Local start time.
    public var start: LocalTime
    /// Local end time; at or before `start` means the next day.
    public var end: LocalTime

    /// A window from its parts (validated by `FocusCalendar.init`).
    public init(days: [Int], start: LocalTime, end: LocalTime) {
        self.days = days
        self.start = start
        self.end = end
    }
}

/// A Focus schedule: the union of weekly windows in one IANA zone.
///
/// Each occurrence of a window runs from its start to its end, both resolved by the rule
/// of `docs/calendars.md` (the first instant the wall clock shows that time or later), so
/// a start inside a skipped hour begins at the jump and an ambiguous end ends at its first
/// occurrence. Overlapping or touching occurrences form one active period. Instants
/// outside years 0001…9999 are first moved to the nearest end of that range.
public struct FocusCalendar: Hashable, Sendable {
    /// The windows as given.
    public let windows: [FocusWindow]
    /// The IANA zone name as given.
    public let timeZone: String
    /// For each ISO weekday 1…7 (index 0…6): occurrences starting that day, as
    /// (start, end) in minutes from that day's local midnight (end may exceed 1440).
    private let byWeekday: [[(start: Int64, end: Int64)]]
    /// Every minute of the week is covered: always active, never a transition.
    private let coversWholeWeek: Bool
    private let rules: ZoneRules

    /// A Focus schedule. No windows is allowed (never active). Throws
    /// `unknown_time_zone`, `focus_window_without_days`, `invalid_focus_day`,
    /// `duplicate_focus_day` or `invalid_local_time`.
    public init(windows: [FocusWindow], timeZone: String) throws(CalendarError) {
        var byWeekday = [[(start: Int64, end: Int64)]](repeating: [], count: 7)
        var covered = [Bool](repeating: false, count: 7 * 1440)
        for (n, w) in windows.enumerated() {
            let which = "Focus window \(n + 1) (\(w.start.text)–\(w.end.text))"
            guard !w.days.isEmpty else {
                throw CalendarError(code: "focus_window_without_days", title: "\(which) has no days",
                                    detail: "List the ISO weekdays on which it starts, 1 = Monday … 7 = Sunday, e.g. [1,2,3,4,5].")
            }
            if !w.start.isValid { throw CalendarError.invalidTime(w.start, field: "The start of \(which)") }
            if !w.end.isValid { throw CalendarError.invalidTime(w.end, field: "The end of \(which)") }
            var seen = Set<Int>()
            for d in w.days {
                guard (1...7).contains(d) else {
                    throw CalendarError(code: "invalid_focus_day", title: "\(which) lists day \(d)",
                                        detail: "Days are ISO weekdays from 1 (Monday) to 7 (Sunday).")
                }
                guard seen.insert(d).inserted else {
                    throw CalendarError(code: "duplicate_focus_day", title: "\(which) lists day \(d) twice",
                                        detail: "Each day may appear once per window; remove the duplicate.")
                }
                let s = Int64(w.start.minuteOfDay)
                let e = Int64(w.end.minuteOfDay) + (w.end <= w.start ? 1440 : 0)
                byWeekday[d - 1].append((s, e))
                for m in s..<e { covered[Int((Int64(d - 1) * 1440 + m) % (7 * 1440))] = true }
            }
        }
        self.rules = try ZoneRules.require(timeZone)
        self.windows = windows
        self.timeZone = timeZone
        self.byWeekday = byWeekday
        self.coversWholeWeek = !windows.isEmpty && !covered.contains(false)
    }

    /// Whether the schedule is active at `instant`.
    public func isActive(at instant: Instant) -> Bool {
        if coversWholeWeek { return true }
        if windows.isEmpty { return false }
        let u = ZoneRules.clamp(instant)
        let day = floorDiv(rules.local(u), dayMs)
        // Occurrences that started two days earlier have ended; one starting tomorrow can
        // only have begun after a backward jump across midnight.
        var active = false
        forEachOccurrence(fromDay: day - 2, throughDay: day + 1) { start, end in
            if start <= u, u < end { active = true }
        }
        return active
    }

    /// If active at `instant`: when the (merged, possibly overlapping) active period ends.
    /// Nil if not active. A schedule covering every minute of the week never ends and
    /// returns `Instant.latestRepresentable`.
    public func activeUntil(_ instant: Instant) -> Instant? {
        if coversWholeWeek { return Instant.latestRepresentable }
        if windows.isEmpty { return nil }
        let u = ZoneRules.clamp(instant)
        for period in periods(around: u) where period.start <= u {
            if u < period.end { return Instant(millisecondsSinceEpoch: period.end) }
        }
        return nil
    }

    /// The next instant strictly after `instant` at which the active state changes (start
    /// or end), nil if never (no windows, or every minute of the week covered).
    public func nextTransition(after instant: Instant) -> Instant? {
        if coversWholeWeek || windows.isEmpty { return nil }
        let u = ZoneRules.clamp(instant)
        for period in periods(around: u) {
            if period.start > u { return Instant(millisecondsSinceEpoch: period.start) }
            if period.end > u { return Instant(millisecondsSinceEpoch: period.end) }
        }
        // Unreachable for a schedule with an uncovered minute: every week has a start.
        return nil
    }

    /// The first start of one of the schedule's windows strictly after `instant`, nil without
    /// windows. Every window recurs weekly, so one starts within eight days. Where a Focus turned
    /// off by hand comes back when its schedule covers the whole week (`activeUntil` never ends).
    public func nextWindowStart(after instant: Instant) -> Instant? {
        if windows.isEmpty { return nil }
        let u = ZoneRules.clamp(instant)
        let day = floorDiv(rules.local(u), dayMs)
        var best: Int64?
        forEachOccurrence(fromDay: day - 2, throughDay: day + 8) { start, _ in
            if start > u && (best == nil || start < best!) { best = start }
        }
        return best.map(Instant.init(millisecondsSinceEpoch:))
    }

    /// The merged active periods (instants, ms) of occurrences starting from two days
    /// before the local day of `u` to 16 days after, ascending and disjoint. A schedule
    /// that does not cover the whole week has a gap in every week, so the period holding
    /// `u` and the next one both end inside this horizon.
    private func periods(around u: Int64) -> [(start: Int64, end: Int64)] {
        let day = floorDiv(rules.local(u), dayMs)
        var occurrences: [(start: Int64, end: Int64)] = []
        occurrences.reserveCapacity(32)
        forEachOccurrence(fromDay: day - 2, throughDay: day + 16) { occurrences.append(($0, $1)) }
        occurrences.sort { $0.start < $1.start }
        var merged: [(start: Int64, end: Int64)] = []
        merged.reserveCapacity(occurrences.count)
        for o in occurrences {
            if let last = merged.last, o.start <= last.end {
                merged[merged.count - 1].end = max(last.end, o.end)
            } else {
                merged.append(o)
            }
        }
        return merged
    }

    /// Calls `body(start, end)` (instants, ms) for every non-empty occurrence starting on
    /// a local day in `fromDay...throughDay` (days since 1970-01-01 in local time).
    private func forEachOccurrence(fromDay: Int64, throughDay: Int64, _ body: (Int64, Int64) -> Void) {
        for day in fromDay...throughDay {
            let weekdayIndex = Int(((day % 7) + 7 + 3) % 7)  // 1970-01-01 was a Thursday (ISO 4)
            for w in byWeekday[weekdayIndex] {
                let start = rules.instant(atOrAfterLocal: day * dayMs + w.start * minuteMs)
                let end = rules.instant(atOrAfterLocal: day * dayMs + w.end * minuteMs)
                if start < end { body(start, end) }  // both inside one skipped hour: nothing
            }
        }
    }

    public static func == (a: FocusCalendar, b: FocusCalendar) -> Bool {
        a.windows == b.windows && a.timeZone == b.timeZone
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(windows)
        hasher.combine(timeZone)
    }
}
