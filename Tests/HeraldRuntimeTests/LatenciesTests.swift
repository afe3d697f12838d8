// The benches' latency histogram: its percentiles are the exact ones to within its precision.
import Foundation
import HeraldTestSupport
import Testing

@Suite struct LatenciesTests {
    /// Exact rank percentiles of a sorted array, as the benches computed them before.
    static func exact(_ sorted: [Double], _ p: Double) -> Double {
        sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
    }

    /// 100,000 latencies spread over five decades (10 µs to 1 s): p50, p99, p99.9 and the maximum
    /// are within 0.1% of the exact ones, and the count is every value.
    @Test func percentilesAreTheExactOnesToThreeSignificantDigits() {
        var random = SeededRandom(seed: 7)
        let values = (0..<100_000).map { _ in 0.01 * pow(10, Double(random.next() % 5_000) / 1_000) }
        let latencies = Latencies(values)
        let sorted = values.sorted()
        #expect(latencies.count == values.count)
        for p in [0.5, 0.9, 0.99, 0.999] {
            let exact = Self.exact(sorted, p)
            #expect(abs(latencies.percentile(p) - exact) <= exact * 0.001 + 0.001, "p\(p): \(latencies.percentile(p)) against \(exact)")
        }
        #expect(abs(latencies.maximumMs - sorted.last!) <= 0.001)
        #expect(latencies.minimumMs == sorted.first)
    }

    /// Producers' histograms added together equal one histogram of every value.
    @Test func addedHistogramsEqualOneOfEveryValue() {
        let a = (1...500).map { Double($0) / 7 }, b = (1...300).map { Double($0) * 3.3 }
        var merged = Latencies(a)
        merged.add(Latencies(b))
        let whole = Latencies(a + b)
        #expect(merged.count == 800)
        for p in [0.0, 0.25, 0.5, 0.99, 1.0] { #expect(merged.percentile(p) == whole.percentile(p)) }
        #expect(merged.minimumMs == whole.minimumMs && merged.maximumMs == whole.maximumMs)
    }

    /// Nothing recorded reads as zero; a value a hair below zero (a wall-clock sample just before
    /// its due time) counts as 0 while the minimum keeps it; one beyond an hour counts as an hour.
    @Test func edgesAreKept() {
        var latencies = Latencies()
        #expect(latencies.count == 0 && latencies.percentile(0.99) == 0 && latencies.maximumMs == 0 && latencies.minimumMs == nil)
        latencies.record(milliseconds: -0.4)
        latencies.record(from: 5_000_000, to: 7_500_000)   // 2.5 ms
        latencies.record(milliseconds: 5 * 3_600_000)
        #expect(latencies.count == 3)
        #expect(latencies.minimumMs == -0.4)
        #expect(latencies.percentile(0.1) == 0)
        #expect(abs(latencies.percentile(0.5) - 2.5) <= 0.003)
        #expect(abs(latencies.maximumMs - 3_600_000) <= 3_600)
    }
}
