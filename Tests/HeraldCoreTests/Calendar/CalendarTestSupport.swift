// Small helpers shared by the calendar tests: instants from text, times from text.
import HeraldCore

/// An instant from RFC 3339 text (tests only: crashes on bad text).
func instantAt(_ text: String) -> Instant {
    guard let i = Instant(rfc3339: text) else { fatalError("bad test instant \(text)") }
    return i
}

/// A local time from `HH:MM` (tests only).
func localTime(_ text: String) -> LocalTime {
    guard let t = LocalTime(text) else { fatalError("bad test time \(text)") }
    return t
}

/// A summary calendar (tests only).
func summaryCalendar(_ times: [String], _ zone: String) throws(CalendarError) -> SummaryCalendar {
    try SummaryCalendar(times: times.map(localTime), timeZone: zone)
}

/// The first `count` firings after `start`, as RFC 3339 text.
func summaryFirings(_ cal: SummaryCalendar, after start: String, count: Int) -> [String] {
    var out: [String] = []
    var t = instantAt(start)
    for _ in 0..<count {
        t = cal.nextFiring(after: t)
        out.append(t.rfc3339)
    }
    return out
}
