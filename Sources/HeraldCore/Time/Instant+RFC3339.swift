// RFC 3339 text for instants: one canonical output form, a tolerant but strict input parser.

extension Instant {
    /// Earliest instant accepted from the wire: 0001-01-01T00:00:00Z.
    public static let earliestRepresentable = Instant(millisecondsSinceEpoch: -62_135_596_800_000)
    /// Latest instant accepted from the wire: 9999-12-31T23:59:59.999Z.
    public static let latestRepresentable = Instant(millisecondsSinceEpoch: 253_402_300_799_999)

    /// The canonical text: UTC, `Z`, milliseconds only when not zero
    /// (`2026-03-29T01:30:00Z`, `2026-03-29T01:30:00.250Z`). Deterministic, so stored
    /// deliveries compare byte for byte on replay.
    public var rfc3339: String {
        var sink = ByteSink(capacity: 32)
        defer { sink.deallocate() }
        writeRFC3339(to: &sink)
        return String(decoding: sink.bytes, as: UTF8.self)
    }

    /// Appends `"` + `rfc3339` + `"` (a JSON string) to `out` without building a `String`.
    public func writeRFC3339String(to out: inout ByteSink) {
        out.append(0x22)
        writeRFC3339(to: &out)
        out.append(0x22)
    }

    /// Appends the `rfc3339` text's bytes.
    private func writeRFC3339(to out: inout ByteSink) {
        let ms = millisecondsSinceEpoch
        let totalSeconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        let millis = Int(ms - totalSeconds * 1000)
        let days = totalSeconds >= 0 ? totalSeconds / 86_400 : -((-totalSeconds + 86_399) / 86_400)
        let secondOfDay = Int(totalSeconds - days * 86_400)
        let (y, m, d) = CivilDate.fromDaysSinceEpoch(days)
        guard (0...9999).contains(y) else {
            var text = String(y) + "-" + pad(m) + "-" + pad(d) + "T" + pad(secondOfDay / 3600) + ":"
            text += pad(secondOfDay / 60 % 60) + ":" + pad(secondOfDay % 60)
            if millis != 0 { text += "." + String(String(millis + 1000).dropFirst()) }
            text += "Z"
            text.withUTF8 { out.append(UnsafeRawBufferPointer($0)) }
            return
        }
        // YYYY-MM-DDTHH:MM:SS[.mmm]Z written in place: this runs twice per delivery line.
        out.appendInPlace(maximum: 24) { p in
            @inline(__always) func two(_ v: Int, _ at: Int) {
                p[at] = UInt8(truncatingIfNeeded: v / 10) &+ 0x30
                p[at + 1] = UInt8(truncatingIfNeeded: v % 10) &+ 0x30
            }
            let year = Int(y)
            two(year / 100, 0); two(year % 100, 2)
            p[4] = 0x2D; two(m, 5); p[7] = 0x2D; two(d, 8)
            p[10] = 0x54; two(secondOfDay / 3600, 11); p[13] = 0x3A; two(secondOfDay / 60 % 60, 14)
            p[16] = 0x3A; two(secondOfDay % 60, 17)
            guard millis != 0 else { p[19] = 0x5A; return 20 }
            p[19] = 0x2E
            p[20] = UInt8(truncatingIfNeeded: millis / 100) &+ 0x30
            two(millis % 100, 21)
            p[23] = 0x5A
            return 24
        }
    }

    private func pad(_ v: Int) -> String { v < 10 ? "0\(v)" : String(v) }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`. `t`/`z` and a space for `T` are
    /// accepted; digits past milliseconds are truncated. Leap seconds (`:60`) are rejected.
    /// Returns nil when the text is not such a timestamp or lies outside years 1…9999.
    public init?(rfc3339 text: String) {
        var bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func num(_ at: Int, _ len: Int) -> Int? {
            var v = 0
            for i in at..<(at + len) {
                let c = bytes[i]
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        guard let year = num(0, 4), bytes[4] == 45, let month = num(5, 2), bytes[7] == 45,
              let day = num(8, 2), [84, 116, 32].contains(bytes[10]),
              let hour = num(11, 2), bytes[13] == 58, let minute = num(14, 2), bytes[16] == 58,
              let second = num(17, 2)
        else { return nil }
        guard year >= 1, (1...12).contains(month), day >= 1,
              day <= CivilDate.daysInMonth(year: year, month: month),
              hour < 24, minute < 60, second < 60
        else { return nil }
        var i = 19
        var millis = 0
        if bytes[i] == 46 {  // '.'
            i += 1
            var digits = 0
            while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57 {
                if digits < 3 { millis = millis * 10 + Int(bytes[i] - 48) }
                digits += 1; i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { millis *= 10 } }
        }
        guard i < bytes.count else { return nil }
        var offsetSeconds = 0
        if bytes[i] == 90 || bytes[i] == 122 {  // Z z
            i += 1
        } else if bytes[i] == 43 || bytes[i] == 45 {  // + -
            let sign = bytes[i] == 45 ? -1 : 1
            guard i + 6 == bytes.count, bytes[i + 3] == 58,
                  let oh = num(i + 1, 2), let om = num(i + 4, 2), oh < 24, om < 60
            else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
            i += 6
        } else {
            return nil
        }
        guard i == bytes.count else { return nil }
        bytes.removeAll()
        let days = CivilDate.daysSinceEpoch(year: Int64(year), month: month, day: day)
        let seconds = days * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        let value = Instant(millisecondsSinceEpoch: seconds * 1000 + Int64(millis))
        guard value >= Instant.earliestRepresentable, value <= Instant.latestRepresentable else { return nil }
        self = value
    }
}

/// Proleptic Gregorian calendar arithmetic (Howard Hinnant's days-from-civil algorithms).
public enum CivilDate {
    /// Days since 1970-01-01 of a civil date.
    public static func daysSinceEpoch(year: Int64, month: Int, day: Int) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = Int64((month + 9) % 12)
        let doy = (153 * mp + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The civil date of a day count since 1970-01-01.
    public static func fromDaysSinceEpoch(_ days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = Int(doy - (153 * mp + 2) / 5 + 1)
        let m = Int(mp < 10 ? mp + 3 : mp - 9)
        return (m <= 2 ? y + 1 : y, m, d)
    }

    public static func isLeapYear(_ year: Int) -> Bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeapYear(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
