// RFC 3339 formatting and parsing of engine instants.
import Testing
import HeraldCore

@Suite struct InstantTests {
    @Test func formatsCanonicalUTC() {
        #expect(Instant(millisecondsSinceEpoch: 0).rfc3339 == "1970-01-01T00:00:00Z")
        #expect(Instant(millisecondsSinceEpoch: 1_774_747_800_250).rfc3339 == "2026-03-29T01:30:00.250Z")
        #expect(Instant(millisecondsSinceEpoch: -1).rfc3339 == "1969-12-31T23:59:59.999Z")
    }

    @Test func parsesOffsetsAndFractions() {
        #expect(Instant(rfc3339: "2026-03-29T03:30:00+02:00")?.rfc3339 == "2026-03-29T01:30:00Z")
        #expect(Instant(rfc3339: "2026-03-29T01:30:00.25Z")?.millisecondsSinceEpoch == 1_774_747_800_250)
        #expect(Instant(rfc3339: "2026-03-29T01:30:00.123456789Z")?.millisecondsSinceEpoch == 1_774_747_800_123)
    }

    @Test func rejectsMalformedAndOutOfRange() {
        for bad in ["", "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z",
                    "2026-01-01T00:00:00", "0000-01-01T00:00:00Z", "2026-01-01T00:00:00.Z",
                    "2026-01-01T00:00:00+2:00", "20260101T000000Z"] {
            #expect(Instant(rfc3339: bad) == nil, "\(bad) should be rejected")
        }
    }

    @Test func roundTripsAcrossCenturies() {
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<10_000 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17
            let ms = Int64(bitPattern: x % 253_402_300_799_999)
            let i = Instant(millisecondsSinceEpoch: ms)
            #expect(Instant(rfc3339: i.rfc3339) == i)
        }
    }
}
