// Why a summary schedule or Focus schedule was refused, written like a good alert.

/// A refused calendar definition. `code` is stable snake_case for programs; `title` says
/// what happened, specifically; `detail` says why and what to change.
public struct CalendarError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Stable machine-readable code, e.g. `unknown_time_zone`.
    public var code: String
    /// What happened, e.g. `Unknown time zone "Europe/Berln"`.
    public var title: String
    /// Why, and what to change.
    public var detail: String

    /// An error from its three parts.
    public init(code: String, title: String, detail: String) {
        self.code = code
        self.title = title
        self.detail = detail
    }

    public var description: String { "\(code): \(title). \(detail)" }

    /// A time of day that is not `HH:MM` (for callers that parse `LocalTime` from the wire).
    public static func invalidLocalTime(_ text: String, field: String) -> CalendarError {
        CalendarError(code: "invalid_local_time",
                      title: "\(field) \(quote(text)) is not a time of day",
                      detail: "Write times as HH:MM on a 24-hour clock, from 00:00 to 23:59, e.g. \"08:00\" or \"18:30\".")
    }

    static func unknownTimeZone(_ id: String) -> CalendarError {
        CalendarError(code: "unknown_time_zone",
                      title: "Unknown time zone \(quote(id))",
                      detail: "Use an IANA time zone name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\" (names are case-sensitive).")
    }

    static func offsetStyleTimeZone(_ id: String) -> CalendarError {
        CalendarError(code: "unknown_time_zone",
                      title: "Time zone \(quote(id)) is an offset, not an IANA zone name",
                      detail: "Offsets like \"GMT+5\" do not follow daylight saving time and their sign is read differently by different systems. Use the user's IANA zone, e.g. \"Asia/Karachi\"; for a fixed offset use \"Etc/GMT-5\" (UTC+5; the Etc sign is inverted).")
    }

    static func invalidTime(_ t: LocalTime, field: String) -> CalendarError {
        CalendarError(code: "invalid_local_time",
                      title: "\(field) has hour \(t.hour) and minute \(t.minute), which is not a time of day",
                      detail: "Hours run from 0 to 23 and minutes from 0 to 59.")
    }
}
