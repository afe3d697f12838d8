// When a user's Scheduled Summary fires: 1–12 local times a day in an IANA zone, DST-correct.

/// A Scheduled Summary: 1–12 local times a day in an IANA zone.
///
/// Each day, each time fires at the first instant at which the zone's wall clock shows it
/// or later (see `docs/calendars.md`): a time skipped by a spring-forward jump fires at
/// the jump (02:30 → the instant the clock shows 03:00); a time repeated by a fall-back
/// fires once, at its first occurrence; times that land on the same instant fire once.
public struct SummaryCalendar: Hashable, Sendable {
    /// The times of day, sorted ascending (the order given does not matter).
    public let times: [LocalTime]
    /// The IANA zone name as given.
    public let timeZone: String
    /// Minutes of the day of `times`, ascending.
    private let minutes: [Int64]
    private let rules: ZoneRules

    /// A schedule of 1–12 distinct times in the zone `timeZone`. Throws
    /// `unknown_time_zone`, `no_summary_times`, `too_many_summary_times`,
    /// `duplicate_summary_time` or `invalid_local_time`.
    public init(times: [LocalTime], timeZone: String) throws(CalendarError) {
        guard !times.isEmpty else {
            throw CalendarError(code: "no_summary_times", title: "The summary schedule has no times",
                                detail: "Give between 1 and 12 times of day, e.g. [\"08:00\", \"18:00\"].")
        }
        guard times.count <= 12 else {
            throw CalendarError(code: "too_many_summary_times", title: "The summary schedule has \(times.count) times",
                                detail: "A Scheduled Summary can be delivered at most 12 times a day; remove \(times.count - 12).")
        }
        for t in times where !t.isValid { throw CalendarError.invalidTime(t, field: "A summary time") }
        let sorted = times.sorted()
        for k in 1..<sorted.count where sorted[k] == sorted[k - 1] {
            throw CalendarError(code: "duplicate_summary_time", title: "The summary time \(sorted[k].text) is listed twice",
                                detail: "Each summary time may appear once; remove the duplicate.")
        }
        self.rules = try ZoneRules.require(timeZone)
        self.times = sorted
        self.timeZone = timeZone
        self.minutes = sorted.map { Int64($0.minuteOfDay) }
    }

    /// SPEC §3's schedule for an app set to summary delivery when the user has none:
    /// 08:00 and 18:00 in UTC.
    public static let defaultSchedule: SummaryCalendar = {
        do {
            return try SummaryCalendar(times: [LocalTime(hour: 8, minute: 0)!, LocalTime(hour: 18, minute: 0)!], timeZone: "UTC")
        } catch {
            fatalError("the default summary schedule is valid: \(error)")
        }
    }()

    /// The first firing strictly after `instant` (an instant outside years 0001…9999 is
    /// first moved to the nearest end of that range).
    public func nextFiring(after instant: Instant) -> Instant {
        let u = ZoneRules.clamp(instant)
        // A slot (wall time L) fires after u exactly when the clock has not yet shown L by
        // u; the clock has shown at least local(u), so only later slots can qualify. Slots
        // up to the latest wall time already shown (after a fall-back) map to instants <= u
        // and are skipped by the loop.
        let local = rules.local(u)
        var day = floorDiv(local, dayMs)
        var k = firstIndex(afterMinuteMs: local - day * dayMs)
        if k == minutes.count { day += 1; k = 0 }
        while true {
            let slot = day * dayMs + minutes[k] * minuteMs
            let fire = rules.instant(atOrAfterLocal: slot)
            if fire > u { return Instant(millisecondsSinceEpoch: fire) }
            k += 1
            if k == minutes.count { day += 1; k = 0 }
        }
    }

    /// Index of the first time strictly later than `msOfDay` in the day, or `minutes.count`.
    private func firstIndex(afterMinuteMs msOfDay: Int64) -> Int {
        var k = 0
        while k < minutes.count, minutes[k] * minuteMs <= msOfDay { k += 1 }
        return k
    }

    public static func == (a: SummaryCalendar, b: SummaryCalendar) -> Bool {
        a.times == b.times && a.timeZone == b.timeZone
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(times)
        hasher.combine(timeZone)
    }
}

let minuteMs: Int64 = 60_000
let dayMs: Int64 = 86_400_000

/// Division rounding toward negative infinity (local days before 1970 are negative).
@inline(__always)
func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}
