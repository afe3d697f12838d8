// A wall-clock time of day ("08:00") as written in summary schedules and Focus windows.

/// A time of day on a wall clock, to the minute, with no date and no zone.
/// The text form is exactly `HH:MM`, 24-hour, `00:00`…`23:59`. There is no `24:00`:
/// a Focus window that should run until midnight ends at `00:00` (an end at or before
/// the start means the next day).
public struct LocalTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// 0…23.
    public var hour: Int
    /// 0…59.
    public var minute: Int

    /// A time from its parts; nil unless hour is 0…23 and minute 0…59.
    public init?(hour: Int, minute: Int) {
        guard (0...23).contains(hour), (0...59).contains(minute) else { return nil }
        self.hour = hour
        self.minute = minute
    }

    /// Parses exactly `HH:MM` (two digits each, e.g. `08:00`, `23:59`); nil otherwise
    /// (`8:00`, `24:00`, `08:00:00` and `08h00` are all rejected).
    public init?(_ text: String) {
        let b = Array(text.utf8)
        guard b.count == 5, b[2] == 0x3A else { return nil }
        func digit(_ c: UInt8) -> Int? { c >= 0x30 && c <= 0x39 ? Int(c - 0x30) : nil }
        guard let h1 = digit(b[0]), let h2 = digit(b[1]), let m1 = digit(b[3]), let m2 = digit(b[4]) else { return nil }
        self.init(hour: h1 * 10 + h2, minute: m1 * 10 + m2)
    }

    /// The canonical text, `HH:MM` (e.g. `08:00`).
    public var text: String {
        let h = hour < 10 ? "0\(hour)" : "\(hour)"
        let m = minute < 10 ? "0\(minute)" : "\(minute)"
        return h + ":" + m
    }

    public var description: String { text }

    /// Minutes since local midnight, 0…1439 for a valid time.
    public var minuteOfDay: Int { hour * 60 + minute }

    /// True when the fields are in range (they are public `var`s, so they can be changed).
    var isValid: Bool { (0...23).contains(hour) && (0...59).contains(minute) }

    public static func < (a: LocalTime, b: LocalTime) -> Bool { a.minuteOfDay < b.minuteOfDay }
}
