// Scheduled Focus: overnight windows, chosen weekdays, DST changes, merging, and consistency.
import Testing
import HeraldCore
import HeraldTestSupport

private func focus(_ windows: [([Int], String, String)], _ zone: String) throws(CalendarError) -> FocusCalendar {
    try FocusCalendar(windows: windows.map { FocusWindow(days: $0.0, start: localTime($0.1), end: localTime($0.2)) }, timeZone: zone)
}

private let everyDay = [1, 2, 3, 4, 5, 6, 7]

@Suite struct FocusCalendarTests {
    @Test func overnightWindowRunsAcrossMidnight() throws {
        let cal = try focus([(everyDay, "22:00", "07:00")], "Europe/Berlin")  // CEST in June
        #expect(!cal.isActive(at: instantAt("2026-06-10T19:59:59.999Z")))
        #expect(cal.isActive(at: instantAt("2026-06-10T20:00:00Z")))
        #expect(cal.isActive(at: instantAt("2026-06-10T23:00:00Z")))
        #expect(cal.isActive(at: instantAt("2026-06-11T04:59:59.999Z")))
        #expect(!cal.isActive(at: instantAt("2026-06-11T05:00:00Z")))
        #expect(cal.activeUntil(instantAt("2026-06-10T20:00:00Z")) == instantAt("2026-06-11T05:00:00Z"))
        #expect(cal.activeUntil(instantAt("2026-06-10T12:00:00Z")) == nil)
        #expect(cal.nextTransition(after: instantAt("2026-06-10T12:00:00Z")) == instantAt("2026-06-10T20:00:00Z"))
        #expect(cal.nextTransition(after: instantAt("2026-06-10T20:00:00Z")) == instantAt("2026-06-11T05:00:00Z"))
    }

    /// `nextWindowStart`: where a Focus turned off by hand comes back when its schedule covers
    /// the whole week — the next start of any window, across DST and with windows that touch.
    @Test func nextWindowStartFindsTheNextOccurrenceEvenWhenTheWeekIsCovered() throws {
        let allDay = try focus([(everyDay, "00:00", "00:00")], "Europe/Berlin")
        #expect(allDay.activeUntil(instantAt("2026-06-10T12:00:00Z")) == Instant.latestRepresentable)
        #expect(allDay.nextWindowStart(after: instantAt("2026-06-10T12:00:00Z")) == instantAt("2026-06-10T22:00:00Z"))
        #expect(allDay.nextWindowStart(after: instantAt("2026-06-10T22:00:00Z")) == instantAt("2026-06-11T22:00:00Z"), "strictly after")
        // Berlin springs forward on 2026-03-29: Sunday's midnight is still 23:00Z on Saturday.
        #expect(allDay.nextWindowStart(after: instantAt("2026-03-28T12:00:00Z")) == instantAt("2026-03-28T23:00:00Z"))
        #expect(allDay.nextWindowStart(after: instantAt("2026-03-29T12:00:00Z")) == instantAt("2026-03-29T22:00:00Z"))
        // Touching windows covering the week: day (08:00–20:00) and night (20:00–08:00).
        let twoShifts = try focus([(everyDay, "08:00", "20:00"), (everyDay, "20:00", "08:00")], "UTC")
        #expect(twoShifts.nextWindowStart(after: instantAt("2026-06-10T12:00:00Z")) == instantAt("2026-06-10T20:00:00Z"))
        // One window a week: up to seven days on.
        let sundays = try focus([([7], "10:00", "11:00")], "UTC")
        #expect(sundays.nextWindowStart(after: instantAt("2026-06-14T10:30:00Z")) == instantAt("2026-06-21T10:00:00Z"))
        #expect(try focus([], "UTC").nextWindowStart(after: instantAt("2026-06-10T12:00:00Z")) == nil)
    }

    @Test func windowsStartOnlyOnChosenWeekdays() throws {
        // Starts Monday to Friday night; 2026-06-12 is a Friday.
        let cal = try focus([([1, 2, 3, 4, 5], "22:00", "07:00")], "Europe/Berlin")
        #expect(cal.isActive(at: instantAt("2026-06-12T21:00:00Z")))   // Fri 23:00
        #expect(cal.isActive(at: instantAt("2026-06-13T04:00:00Z")))   // Sat 06:00, Friday's window
        #expect(!cal.isActive(at: instantAt("2026-06-13T21:00:00Z")))  // Sat 23:00
        #expect(!cal.isActive(at: instantAt("2026-06-14T21:00:00Z")))  // Sun 23:00
        #expect(cal.isActive(at: instantAt("2026-06-15T21:00:00Z")))   // Mon 23:00
        #expect(cal.nextTransition(after: instantAt("2026-06-13T06:00:00Z")) == instantAt("2026-06-15T20:00:00Z"))
    }

    @Test func overnightWindowAcrossSpringForwardIsAnHourShorter() throws {
        let berlin = try focus([(everyDay, "22:00", "07:00")], "Europe/Berlin")
        // 22:00 CET Saturday → 07:00 CEST Sunday 2026-03-29: 8 hours.
        #expect(berlin.nextTransition(after: instantAt("2026-03-28T12:00:00Z")) == instantAt("2026-03-28T21:00:00Z"))
        #expect(berlin.activeUntil(instantAt("2026-03-28T21:00:00Z")) == instantAt("2026-03-29T05:00:00Z"))
        let newYork = try focus([(everyDay, "22:00", "07:00")], "America/New_York")
        #expect(newYork.activeUntil(instantAt("2026-03-08T03:00:00Z")) == instantAt("2026-03-08T11:00:00Z"))
    }

    @Test func overnightWindowAcrossFallBackIsAnHourLonger() throws {
        let berlin = try focus([(everyDay, "22:00", "07:00")], "Europe/Berlin")
        // 22:00 CEST Saturday → 07:00 CET Sunday 2026-10-25: 10 hours.
        #expect(berlin.nextTransition(after: instantAt("2026-10-24T12:00:00Z")) == instantAt("2026-10-24T20:00:00Z"))
        #expect(berlin.activeUntil(instantAt("2026-10-24T20:00:00Z")) == instantAt("2026-10-25T06:00:00Z"))
        #expect(berlin.isActive(at: instantAt("2026-10-25T01:30:00Z")))  // inside the repeated hour
    }

    @Test func windowStartInsideTheSkippedHourBeginsAtTheJump() throws {
        // Sunday 02:30–04:00 on 2026-03-29 in Berlin: 02:30 does not exist; starts at 03:00 CEST.
        let cal = try focus([([7], "02:30", "04:00")], "Europe/Berlin")
        #expect(!cal.isActive(at: instantAt("2026-03-29T00:59:59Z")))
        #expect(cal.isActive(at: instantAt("2026-03-29T01:00:00Z")))
        #expect(cal.activeUntil(instantAt("2026-03-29T01:00:00Z")) == instantAt("2026-03-29T02:00:00Z"))
    }

    @Test func windowEntirelyInsideTheSkippedHourDoesNotHappenThatDay() throws {
        let cal = try focus([([7], "02:10", "02:40")], "Europe/Berlin")
        #expect(cal.nextTransition(after: instantAt("2026-03-28T12:00:00Z")) == instantAt("2026-04-05T00:10:00Z"))
    }

    @Test func windowEndingAtAnAmbiguousTimeEndsAtItsFirstOccurrence() throws {
        // Sunday 00:00–02:30 on 2026-10-25 in Berlin: 02:30 first happens at 00:30Z (CEST).
        let cal = try focus([([7], "00:00", "02:30")], "Europe/Berlin")
        #expect(cal.activeUntil(instantAt("2026-10-24T22:00:00Z")) == instantAt("2026-10-25T00:30:00Z"))
        #expect(!cal.isActive(at: instantAt("2026-10-25T01:15:00Z")))  // second pass through 02:15
    }

    @Test func overlappingWindowsMergeIntoOnePeriod() throws {
        let cal = try focus([(everyDay, "20:00", "23:00"), (everyDay, "22:00", "01:00")], "UTC")
        #expect(cal.activeUntil(instantAt("2026-06-10T20:30:00Z")) == instantAt("2026-06-11T01:00:00Z"))
        #expect(cal.nextTransition(after: instantAt("2026-06-10T20:30:00Z")) == instantAt("2026-06-11T01:00:00Z"))
        #expect(cal.isActive(at: instantAt("2026-06-10T23:00:00Z")))
    }

    @Test func touchingWindowsMergeIntoOnePeriod() throws {
        let cal = try focus([([3], "08:00", "12:00"), ([3], "12:00", "14:00")], "UTC")  // Wednesdays
        #expect(cal.activeUntil(instantAt("2026-06-10T09:00:00Z")) == instantAt("2026-06-10T14:00:00Z"))
        #expect(cal.nextTransition(after: instantAt("2026-06-10T11:59:00Z")) == instantAt("2026-06-10T14:00:00Z"))
        #expect(cal.nextTransition(after: instantAt("2026-06-10T14:00:00Z")) == instantAt("2026-06-17T08:00:00Z"))
    }

    @Test func equalStartAndEndMeansTwentyFourHours() throws {
        let cal = try focus([([1], "09:00", "09:00")], "UTC")  // 2026-06-15 is a Monday
        #expect(cal.activeUntil(instantAt("2026-06-15T09:00:00Z")) == instantAt("2026-06-16T09:00:00Z"))
    }

    @Test func scheduleCoveringTheWholeWeekIsAlwaysActiveAndNeverChanges() throws {
        let always = try focus([(everyDay, "00:00", "00:00")], "Europe/Berlin")
        #expect(always.isActive(at: instantAt("2026-03-29T01:30:00Z")))
        #expect(always.nextTransition(after: instantAt("2026-03-29T01:30:00Z")) == nil)
        #expect(always.activeUntil(instantAt("2026-03-29T01:30:00Z")) == Instant.latestRepresentable)
        let pieces = try focus([(everyDay, "07:00", "22:00"), (everyDay, "22:00", "07:00")], "UTC")
        #expect(pieces.nextTransition(after: instantAt("2026-06-10T12:00:00Z")) == nil)
    }

    @Test func noWindowsIsNeverActive() throws {
        let none = try FocusCalendar(windows: [], timeZone: "UTC")
        #expect(!none.isActive(at: instantAt("2026-06-10T12:00:00Z")))
        #expect(none.activeUntil(instantAt("2026-06-10T12:00:00Z")) == nil)
        #expect(none.nextTransition(after: instantAt("2026-06-10T12:00:00Z")) == nil)
    }

    @Test func activeStateFlipsExactlyAtTransitions() throws {
        // Seeded random schedules and instants: between two consecutive transitions the
        // state is constant; at each transition it flips; activeUntil is the next transition.
        let seed: UInt64 = 0xF0C5
        var rng = SeededRandom(seed: seed)
        let zones = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham", "UTC"]
        for round in 0..<60 {
            var windows: [FocusWindow] = []
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let days = everyDay.filter { _ in rng.next() % 2 == 0 }
                let s = Int(rng.next() % 96) * 15, e = Int(rng.next() % 96) * 15
                windows.append(FocusWindow(days: days.isEmpty ? [Int(rng.next() % 7) + 1] : days,
                                           start: LocalTime(hour: s / 60, minute: s % 60)!,
                                           end: LocalTime(hour: e / 60, minute: e % 60)!))
            }
            let zone = zones[Int(rng.next() % UInt64(zones.count))]
            let cal = try FocusCalendar(windows: windows, timeZone: zone)
            // Start near a DST change half of the time.
            let anchors: [Int64] = [1_774_746_000_000, 1_792_890_000_000, 1_772_953_200_000, 1_793_512_800_000, 1_781_000_000_000]
            var u = anchors[Int(rng.next() % UInt64(anchors.count))] - Int64(rng.next() % (3 * 86_400_000))
            for _ in 0..<20 {
                let here = Instant(millisecondsSinceEpoch: u)
                guard let next = cal.nextTransition(after: here) else { break }
                let context = "seed \(seed) round \(round) \(zone) \(windows) after \(here)"
                #expect(next > here, "\(context)")
                let before = cal.isActive(at: Instant(millisecondsSinceEpoch: next.millisecondsSinceEpoch - 1))
                #expect(cal.isActive(at: next) != before, "\(context): no flip at \(next)")
                // Constant in between: probe a few points.
                let stateAfter = cal.isActive(at: Instant(millisecondsSinceEpoch: u + 1))
                for _ in 0..<4 {
                    let span = next.millisecondsSinceEpoch - u - 1
                    guard span > 0 else { break }
                    let probe = u + 1 + Int64(rng.next() % UInt64(span))
                    #expect(cal.isActive(at: Instant(millisecondsSinceEpoch: probe)) == stateAfter, "\(context): changed at \(Instant(millisecondsSinceEpoch: probe)) before \(next)")
                }
                if cal.isActive(at: here) {
                    #expect(cal.activeUntil(here) == next, "\(context)")
                } else {
                    #expect(cal.activeUntil(here) == nil, "\(context)")
                }
                u = next.millisecondsSinceEpoch
            }
        }
    }

    @Test func invalidSchedulesAreRefusedWithAnAlert() {
        #expect(throws: CalendarError(code: "invalid_focus_day", title: "Focus window 1 (22:00–07:00) lists day 8",
                                      detail: "Days are ISO weekdays from 1 (Monday) to 7 (Sunday).")) {
            try focus([([1, 8], "22:00", "07:00")], "UTC")
        }
        #expect(throws: CalendarError.self) { try focus([([0], "22:00", "07:00")], "UTC") }
        #expect(throws: CalendarError(code: "duplicate_focus_day", title: "Focus window 2 (09:00–10:00) lists day 3 twice",
                                      detail: "Each day may appear once per window; remove the duplicate.")) {
            try focus([([1], "22:00", "07:00"), ([3, 3], "09:00", "10:00")], "UTC")
        }
        #expect(throws: CalendarError(code: "focus_window_without_days", title: "Focus window 1 (22:00–07:00) has no days",
                                      detail: "List the ISO weekdays on which it starts, 1 = Monday … 7 = Sunday, e.g. [1,2,3,4,5].")) {
            try focus([([], "22:00", "07:00")], "UTC")
        }
        do {
            _ = try focus([(everyDay, "22:00", "07:00")], "Europe/Berln")
            Issue.record("unknown zone accepted")
        } catch {
            #expect(error.code == "unknown_time_zone")
        }
    }
}
