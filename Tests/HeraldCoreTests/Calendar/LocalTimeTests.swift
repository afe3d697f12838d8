// LocalTime: the strict HH:MM text form, ordering and round trips.
import Testing
import HeraldCore

@Suite struct LocalTimeTests {
    @Test func parsesTwoDigitHoursAndMinutes() {
        #expect(LocalTime("08:00") == LocalTime(hour: 8, minute: 0))
        #expect(LocalTime("00:00")?.minuteOfDay == 0)
        #expect(LocalTime("23:59")?.minuteOfDay == 1439)
        #expect(LocalTime("18:30")?.text == "18:30")
        #expect(LocalTime(hour: 7, minute: 5)?.text == "07:05")
    }

    @Test func rejectsAnythingButHHMMInRange() {
        for bad in ["", "8:00", "24:00", "23:60", "08:00:00", "08h00", "0800", " 08:00", "-1:00", "+8:00", "０８:００"] {
            #expect(LocalTime(bad) == nil, "\(bad) should be rejected")
        }
        #expect(LocalTime(hour: 24, minute: 0) == nil)
        #expect(LocalTime(hour: 0, minute: -1) == nil)
    }

    @Test func ordersByTimeOfDay() {
        #expect(localTime("07:59") < localTime("08:00"))
        #expect([localTime("18:00"), localTime("08:00"), localTime("00:00")].sorted().map(\.text) == ["00:00", "08:00", "18:00"])
    }

    @Test func textRoundTripsForEveryMinute() {
        for m in 0..<1440 {
            let t = LocalTime(hour: m / 60, minute: m % 60)!
            #expect(LocalTime(t.text) == t)
        }
    }
}
