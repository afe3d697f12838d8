// Doubles written by the fast path (at most three decimals, below a million) are Swift's `description`, byte for byte.
import Testing
import HeraldCore
import HeraldTestSupport

@Suite struct DoubleCanonicalTests {
    /// Every value m / 10^k for k ≤ 3 in 0…20 (and its negative), the thousandths up to 1,000 and
    /// values near the fast path's edges: the same text as `description` (the canonical form's
    /// definition, which the fast path must match).
    @Test func shortDecimalsMatchDescription() {
        var values: [Double] = [0, -0.0, 1e6, -1e6, 999_999.999, 999_999.5, 1e6 - 1, 0.0005, 0.0001, 1e-5, 123.456, 0.30000000000000004,
                                Double.ulpOfOne, 1 + Double.ulpOfOne, 0.1 + 0.2, 1.0 / 3, 2.0 / 3, 1e15, 1e16, Double.leastNonzeroMagnitude]
        for k in 0...3 {
            var p = 1.0
            for _ in 0..<k { p *= 10 }
            for m in 0...Int(20 * p) { values.append(Double(m) / p); values.append(-Double(m) / p) }
        }
        for m in 0...1_000_000 where m % 7 == 0 { values.append(Double(m) / 1000) }
        for d in values {
            #expect(JSONValue.double(d).canonicalString == d.description, "\(d)")
        }
    }

    /// Random doubles of every magnitude (most take the `description` path; some short ones the fast one).
    @Test func randomDoublesMatchDescription() {
        var rng = SeededRandom(seed: 7)
        for _ in 0..<20_000 {
            let bits = rng.next()
            let d = Double(bitPattern: bits)
            guard d.isFinite else { continue }
            #expect(JSONValue.double(d).canonicalString == d.description, "\(d)")
            let short = (Double(Int(bits % 2_000_001)) - 1_000_000) / [1, 10, 100, 1000, 10_000][Int(bits >> 60) % 5]
            #expect(JSONValue.double(short).canonicalString == short.description, "\(short)")
        }
    }
}
