// Scheduled Summary firing times: ordinary days, DST gaps and repeats, odd offsets, errors.
import Foundation
import Testing
import HeraldCore
import HeraldTestSupport

@Suite struct SummaryCalendarTests {
    // MARK: Ordinary days

    @Test func firesAtEachLocalTimeOnOrdinaryDays() throws {
        let cal = try summaryCalendar(["18:00", "08:00"], "Europe/Berlin")  // CEST, UTC+2 in June
        #expect(summaryFirings(cal, after: "2026-06-10T05:00:00Z", count: 4) == [
            "2026-06-10T06:00:00Z", "2026-06-10T16:00:00Z", "2026-06-11T06:00:00Z", "2026-06-11T16:00:00Z",
        ])
        #expect(cal.times.map(\.text) == ["08:00", "18:00"])
    }

    @Test func nextFiringIsStrictlyAfterTheGivenInstant() throws {
        let cal = try summaryCalendar(["08:00"], "UTC")
        #expect(cal.nextFiring(after: instantAt("2026-06-10T08:00:00Z")).rfc3339 == "2026-06-11T08:00:00Z")
        #expect(cal.nextFiring(after: instantAt("2026-06-10T07:59:59.999Z")).rfc3339 == "2026-06-10T08:00:00Z")
    }

    @Test func midnightFiresAtTheStartOfEachLocalDay() throws {
        let berlin = try summaryCalendar(["00:00"], "Europe/Berlin")
        #expect(summaryFirings(berlin, after: "2026-06-10T21:59:00Z", count: 2) == ["2026-06-10T22:00:00Z", "2026-06-11T22:00:00Z"])
        let kolkata = try summaryCalendar(["00:00"], "Asia/Kolkata")
        #expect(summaryFirings(kolkata, after: "2026-06-10T12:00:00Z", count: 1) == ["2026-06-10T18:30:00Z"])
    }

    @Test func twelveTimesADayFireTwelveTimesADay() throws {
        let times = stride(from: 0, to: 24, by: 2).map { $0 < 10 ? "0\($0):00" : "\($0):00" }
        let utc = try summaryCalendar(times, "UTC")
        let fs = summaryFirings(utc, after: "2026-06-09T23:00:00Z", count: 13)
        #expect(fs.first == "2026-06-10T00:00:00Z")
        #expect(fs[11] == "2026-06-10T22:00:00Z")
        #expect(fs.last == "2026-06-11T00:00:00Z")
        // On Berlin's spring-forward day 02:00 does not exist: it fires at the jump
        // (03:00 CEST), still twelve distinct firings that local day.
        let berlin = try summaryCalendar(times, "Europe/Berlin")
        let day = summaryFirings(berlin, after: "2026-03-28T22:59:00Z", count: 12)
        #expect(day.prefix(3) == ["2026-03-28T23:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"])
        #expect(day.last == "2026-03-29T20:00:00Z")
    }

    @Test func halfHourOffsetZoneKolkata() throws {
        let cal = try summaryCalendar(["08:00"], "Asia/Kolkata")  // UTC+05:30, no DST
        #expect(summaryFirings(cal, after: "2026-03-29T00:00:00Z", count: 2) == ["2026-03-29T02:30:00Z", "2026-03-30T02:30:00Z"])
    }

    // MARK: Spring forward: a time that does not exist fires at the jump

    @Test func springForwardSkippedTimeFiresAtTheJumpBerlin() throws {
        // 2026-03-29 02:00 CET → 03:00 CEST at 01:00Z: 02:30 fires at 03:00 CEST.
        let cal = try summaryCalendar(["02:30"], "Europe/Berlin")
        #expect(summaryFirings(cal, after: "2026-03-27T12:00:00Z", count: 3) == [
            "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z",
        ])
        // An hour before the jump, the skipped 02:30 is still ahead.
        #expect(cal.nextFiring(after: instantAt("2026-03-29T00:59:59Z")).rfc3339 == "2026-03-29T01:00:00Z")
    }

    @Test func springForwardSkippedTimeFiresAtTheJumpNewYork() throws {
        // 2026-03-08 02:00 EST → 03:00 EDT at 07:00Z.
        let cal = try summaryCalendar(["02:30"], "America/New_York")
        #expect(summaryFirings(cal, after: "2026-03-06T12:00:00Z", count: 3) == [
            "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z",
        ])
    }

    @Test func twoTimesInsideTheSkippedHourFireOnce() throws {
        // 02:15, 02:45 and 03:00 all map to 03:00 CEST on 2026-03-29: one firing.
        let cal = try summaryCalendar(["02:15", "02:45", "03:00"], "Europe/Berlin")
        #expect(summaryFirings(cal, after: "2026-03-28T23:00:00Z", count: 4) == [
            "2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z", "2026-03-30T00:45:00Z", "2026-03-30T01:00:00Z",
        ])
    }

    // MARK: Fall back: an ambiguous time fires once, at its first occurrence

    @Test func fallBackRepeatedTimeFiresOnceAtFirstOccurrenceBerlin() throws {
        // 2026-10-25 03:00 CEST → 02:00 CET at 01:00Z: 02:30 happens at 00:30Z and 01:30Z.
        let cal = try summaryCalendar(["02:30"], "Europe/Berlin")
        #expect(summaryFirings(cal, after: "2026-10-24T12:00:00Z", count: 2) == ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"])
    }

    @Test func fallBackRestartInsideTheRepeatedHourDoesNotFireTheSecondOccurrence() throws {
        // Asked again at 02:10 CET (second pass), the second 02:30 (01:30Z) is not a firing.
        let cal = try summaryCalendar(["02:30"], "Europe/Berlin")
        #expect(cal.nextFiring(after: instantAt("2026-10-25T01:10:00Z")).rfc3339 == "2026-10-26T01:30:00Z")
        // …but a time not yet reached in the first pass (02:59 was shown, 03:00 not) still fires.
        let later = try summaryCalendar(["03:00"], "Europe/Berlin")
        #expect(later.nextFiring(after: instantAt("2026-10-25T01:10:00Z")).rfc3339 == "2026-10-25T02:00:00Z")
    }

    @Test func fallBackNewYorkRepeatsOneOClockNotTwoThirty() throws {
        // 2026-11-01 02:00 EDT → 01:00 EST at 06:00Z: 01:00–01:59 repeats; 02:30 is ordinary.
        let two = try summaryCalendar(["02:30"], "America/New_York")
        #expect(summaryFirings(two, after: "2026-10-31T00:00:00Z", count: 2) == ["2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z"])
        let oneThirty = try summaryCalendar(["01:30"], "America/New_York")
        #expect(summaryFirings(oneThirty, after: "2026-10-31T12:00:00Z", count: 2) == ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"])
    }

    // MARK: Unusual offsets and DST sizes

    @Test func lordHoweHalfHourDaylightSaving() throws {
        // Australia/Lord_Howe: +10:30 ↔ +11. 2026-10-04 02:00 → 02:30 (at 2026-10-03T15:30Z);
        // 2027-04-04 02:00 → 01:30 (at 2027-04-03T15:00Z).
        let spring = try summaryCalendar(["02:15"], "Australia/Lord_Howe")
        #expect(summaryFirings(spring, after: "2026-10-02T12:00:00Z", count: 3) == ["2026-10-02T15:45:00Z", "2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"])
        let fall = try summaryCalendar(["01:45"], "Australia/Lord_Howe")
        #expect(summaryFirings(fall, after: "2027-04-02T12:00:00Z", count: 3) == ["2027-04-02T14:45:00Z", "2027-04-03T14:45:00Z", "2027-04-04T15:15:00Z"])
    }

    @Test func chathamQuarterHourOffset() throws {
        // Pacific/Chatham: +12:45 ↔ +13:45; 2026-09-27 02:45 → 03:45 at 2026-09-26T14:00Z.
        let cal = try summaryCalendar(["03:00"], "Pacific/Chatham")
        #expect(summaryFirings(cal, after: "2026-09-24T12:00:00Z", count: 4) == [
            "2026-09-24T14:15:00Z", "2026-09-25T14:15:00Z", "2026-09-26T14:00:00Z", "2026-09-27T13:15:00Z",
        ])
    }

    @Test func samoaSkippedDayFiresAtTheJump() throws {
        // Pacific/Apia skipped 2011-12-30 entirely (−10 → +14 at 2011-12-30T10:00Z).
        let cal = try summaryCalendar(["12:00"], "Pacific/Apia")
        // 12:00 on the missing 30th fires at the jump, whose wall clock shows 31st 00:00.
        #expect(summaryFirings(cal, after: "2011-12-28T12:00:00Z", count: 4) == [
            "2011-12-28T22:00:00Z", "2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z",
        ])
    }

    @Test func datesOutsideThePrecomputedTableUseTheSameRules() throws {
        let cal = try summaryCalendar(["02:30"], "Europe/Berlin")
        #expect(cal.nextFiring(after: instantAt("2300-06-01T00:00:00Z")).rfc3339 == "2300-06-01T00:30:00Z")  // CEST
        #expect(cal.nextFiring(after: instantAt("2300-12-01T00:00:00Z")).rfc3339 == "2300-12-01T01:30:00Z")  // CET
        #expect(cal.nextFiring(after: instantAt("1850-06-01T00:00:00Z")).rfc3339 == "1850-06-01T01:36:32Z")  // LMT +0:53:28
    }

    @Test func instantsOutsideYearsOneToNineThousandNineHundredNinetyNineDoNotTrap() throws {
        let cal = try summaryCalendar(["08:00"], "Europe/Berlin")
        #expect(cal.nextFiring(after: Instant(millisecondsSinceEpoch: .max)) > Instant.latestRepresentable)
        #expect(cal.nextFiring(after: Instant(millisecondsSinceEpoch: .min)) > Instant.earliestRepresentable)
        let focus = try FocusCalendar(windows: [FocusWindow(days: [1], start: localTime("22:00"), end: localTime("07:00"))], timeZone: "Europe/Berlin")
        _ = focus.isActive(at: Instant(millisecondsSinceEpoch: .max))
        #expect(focus.nextTransition(after: Instant(millisecondsSinceEpoch: .min)) != nil)
    }

    // MARK: Properties

    @Test func everyLocalDayFiresEachTimeOnceMatchingFoundation() throws {
        // Over a year in zones with DST, each local day fires each configured time exactly
        // once (02:30 included), and every firing shows the configured time on the wall
        // clock, or is the instant of a forward jump over it (checked with Foundation).
        for zone in ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "America/Santiago"] {
            let cal = try summaryCalendar(["02:30", "08:00", "23:59"], zone)
            let tz = TimeZone(identifier: zone)!
            var gregorian = Calendar(identifier: .gregorian)
            gregorian.timeZone = tz
            var t = instantAt("2026-01-01T12:00:00Z")
            var previous = t
            var count = 0
            while true {
                t = cal.nextFiring(after: t)
                guard t < instantAt("2027-01-01T12:00:00Z") else { break }
                #expect(t > previous)
                previous = t
                count += 1
                let date = Date(timeIntervalSince1970: Double(t.millisecondsSinceEpoch) / 1000)
                let c = gregorian.dateComponents([.hour, .minute], from: date)
                let shown = String(format: "%02d:%02d", c.hour!, c.minute!)
                if !["02:30", "08:00", "23:59"].contains(shown) {
                    let jumped = tz.secondsFromGMT(for: date.addingTimeInterval(-1)) < tz.secondsFromGMT(for: date)
                    #expect(jumped, "\(zone): fired at \(t) showing \(shown)")
                }
            }
            #expect(count == 3 * 365, "\(zone)")
        }
    }

    @Test func agreesWithFoundationNextTimePolicyOnRandomInstants() throws {
        // Foundation's Calendar with .nextTime and .first is an independent oracle, except
        // right after a fall-back, where it returns the second occurrence (ARCHITECTURE traps).
        var rng = SeededRandom(seed: 20_260_329)
        var compared = 0
        for zone in ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"] {
            let tz = TimeZone(identifier: zone)!
            var gregorian = Calendar(identifier: .gregorian)
            gregorian.timeZone = tz
            for _ in 0..<300 {
                let minute = Int(rng.next() % 1440)
                let time = LocalTime(hour: minute / 60, minute: minute % 60)!
                let cal = try SummaryCalendar(times: [time], timeZone: zone)
                let ms = 1_767_225_600_000 + Int64(rng.next() % (366 * 86_400_000))  // during 2026
                let start = Instant(millisecondsSinceEpoch: ms)
                let date = Date(timeIntervalSince1970: Double(ms) / 1000)
                let lastTransition = tz.nextDaylightSavingTimeTransition(after: date.addingTimeInterval(-3 * 3600))
                if let tr = lastTransition, tr <= date, tz.secondsFromGMT(for: tr) < tz.secondsFromGMT(for: tr.addingTimeInterval(-1)) {
                    continue  // inside the 3 h after a fall-back: Foundation differs by design
                }
                let expected = gregorian.nextDate(after: date, matching: DateComponents(hour: time.hour, minute: time.minute, second: 0),
                                                  matchingPolicy: .nextTime, repeatedTimePolicy: .first, direction: .forward)!
                let got = cal.nextFiring(after: start)
                compared += 1
                #expect(got.millisecondsSinceEpoch == Int64(expected.timeIntervalSince1970 * 1000),
                        "\(zone) \(time.text) after \(start): got \(got), Foundation \(expected)")
            }
        }
        #expect(compared > 1_100)
    }

    // MARK: Errors and equality

    @Test func unknownTimeZoneIsRefusedWithAnAlert() {
        #expect(throws: CalendarError(code: "unknown_time_zone", title: "Unknown time zone \"Europe/Berln\"",
                                      detail: "Use an IANA time zone name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\" (names are case-sensitive).")) {
            try summaryCalendar(["08:00"], "Europe/Berln")
        }
        for bad in ["", "europe/berlin", "Mars/Olympus"] {
            #expect(throws: CalendarError.self) { try summaryCalendar(["08:00"], bad) }
        }
        do {
            _ = try summaryCalendar(["08:00"], "GMT+5")
            Issue.record("GMT+5 accepted")
        } catch {
            #expect(error.code == "unknown_time_zone")
            #expect(error.title == "Time zone \"GMT+5\" is an offset, not an IANA zone name")
        }
        #expect((try? summaryCalendar(["08:00"], "UTC")) != nil)
        #expect((try? summaryCalendar(["08:00"], "GMT+0")) != nil)  // an IANA link, unlike GMT+5
        #expect((try? summaryCalendar(["08:00"], "Etc/GMT-5")) != nil)
    }

    @Test func zeroOrMoreThanTwelveOrDuplicateTimesAreRefused() {
        #expect(throws: CalendarError(code: "no_summary_times", title: "The summary schedule has no times",
                                      detail: "Give between 1 and 12 times of day, e.g. [\"08:00\", \"18:00\"].")) {
            try summaryCalendar([], "UTC")
        }
        let thirteen = (0..<13).map { $0 < 10 ? "0\($0):00" : "\($0):00" }
        #expect(throws: CalendarError(code: "too_many_summary_times", title: "The summary schedule has 13 times",
                                      detail: "A Scheduled Summary can be delivered at most 12 times a day; remove 1.")) {
            try summaryCalendar(thirteen, "UTC")
        }
        #expect(throws: CalendarError(code: "duplicate_summary_time", title: "The summary time 08:00 is listed twice",
                                      detail: "Each summary time may appear once; remove the duplicate.")) {
            try summaryCalendar(["08:00", "18:00", "08:00"], "UTC")
        }
        var broken = localTime("08:00")
        broken.hour = 25
        #expect(throws: CalendarError.self) { try SummaryCalendar(times: [broken], timeZone: "UTC") }
    }

    @Test func defaultScheduleIsEightAndEighteenUTC() {
        #expect(SummaryCalendar.defaultSchedule.times.map(\.text) == ["08:00", "18:00"])
        #expect(SummaryCalendar.defaultSchedule.timeZone == "UTC")
        #expect(SummaryCalendar.defaultSchedule.nextFiring(after: instantAt("2026-03-29T12:00:00Z")).rfc3339 == "2026-03-29T18:00:00Z")
    }

    @Test func equalSchedulesAreEqualWhateverTheOrderGiven() throws {
        #expect(try summaryCalendar(["18:00", "08:00"], "UTC") == summaryCalendar(["08:00", "18:00"], "UTC"))
        #expect(try summaryCalendar(["08:00"], "UTC") != summaryCalendar(["08:00"], "Etc/UTC"))
    }

    // MARK: Speed (printed, not asserted)

    @Test func nextFiringThroughputIsPrinted() throws {
        let cal = try summaryCalendar(["08:00", "12:30", "18:00"], "Europe/Berlin")
        let base = instantAt("2026-01-01T00:00:00Z").millisecondsSinceEpoch
        var t = Instant.epoch
        let n = 100_000
        let elapsed = ContinuousClock().measure {
            for k in 0..<n {  // instants spread over 2026, DST changes included
                t = cal.nextFiring(after: Instant(millisecondsSinceEpoch: base + Int64(k) * 315_569))
            }
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        #if DEBUG
        let build = "debug build, unoptimised"
        #else
        let build = "optimised build"
        #endif
        print("SummaryCalendar.nextFiring: \(Int(Double(n) / seconds)) calls/s (\(build)); last \(t)")
    }
}
