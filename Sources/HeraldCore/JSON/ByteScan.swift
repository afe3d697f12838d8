// Eight-byte-at-a-time tests shared by the JSON parser and the canonical writer.

/// SWAR ("SIMD within a register") tests on eight bytes loaded as one `UInt64`.
enum ByteScan {
    static let ones: UInt64 = 0x0101_0101_0101_0101
    static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Non-zero when some byte of `x` is '"', '\\' or below 0x20 — what a JSON string must
    /// escape. (Classic has-zero-byte / has-less-than tests; bytes at or above 0x80 never match.)
    @inline(__always)
    static func quoteBackslashOrControl(_ x: UInt64) -> UInt64 {
        let q = x ^ (ones &* 0x22)
        let b = x ^ (ones &* 0x5C)
        let hasQuote = (q &- ones) & ~q
        let hasBackslash = (b &- ones) & ~b
        let hasControl = (x &- (ones &* 0x20)) & ~x
        return (hasQuote | hasBackslash | hasControl) & highs
    }

    /// Non-zero when some byte of `x` is at or above 0x80 (part of a multi-byte character).
    @inline(__always)
    static func nonASCII(_ x: UInt64) -> UInt64 { x & highs }
}
