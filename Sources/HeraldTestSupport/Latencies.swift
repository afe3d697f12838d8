// The benches' latency percentiles: an HdrHistogram of microseconds.
import Histogram

/// Latencies a bench recorded, kept in an HdrHistogram (`hdrhistogram-swift`): constant memory
/// however long the run (a million acks would be a sorted 8 MB array), each value kept to three
/// significant digits (within 0.1%), from 1 µs to an hour. A percentile is the histogram's: the
/// smallest recorded value (to that precision) at or below which that share of the values lie.
/// Values below zero (a wall-clock sample a hair before its due time) are recorded as zero; the
/// smallest value as given is kept apart (`minimumMs`).
public struct Latencies: Sendable {
    private var histogram = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: Self.highestMicroseconds,
                                              numberOfSignificantValueDigits: .three)
    /// The smallest value recorded, as given (nil before the first).
    public private(set) var minimumMs: Double?
    /// The longest latency kept apart from the others: an hour (longer ones are recorded as an hour).
    static let highestMicroseconds: UInt64 = 3_600_000_000

    public init() {}

    /// Every value of `milliseconds`, as `record` would.
    public init(_ milliseconds: some Sequence<Double>) {
        for ms in milliseconds { record(milliseconds: ms) }
    }

    /// Records one latency.
    public mutating func record(milliseconds ms: Double) {
        minimumMs = Swift.min(minimumMs ?? ms, ms)
        let us = (ms * 1000).rounded()
        _ = histogram.record(us <= 0 ? 0 : us >= Double(Self.highestMicroseconds) ? Self.highestMicroseconds : UInt64(us))
    }

    /// Records one latency given as the nanoseconds from `start` to `end` (monotonic clock).
    public mutating func record(from start: UInt64, to end: UInt64) {
        record(milliseconds: end >= start ? Double(end - start) / 1e6 : -Double(start - end) / 1e6)
    }

    /// Adds every latency `other` recorded (producers' histograms merged into the run's).
    public mutating func add(_ other: Latencies) {
        histogram.add(other.histogram)
        if let m = other.minimumMs { minimumMs = Swift.min(minimumMs ?? m, m) }
    }

    /// How many latencies were recorded.
    public var count: Int { Int(histogram.totalCount) }

    /// The `p`-quantile (0 ≤ p ≤ 1) in milliseconds; 0 when nothing was recorded.
    public func percentile(_ p: Double) -> Double {
        count == 0 ? 0 : Double(histogram.valueAtPercentile(p * 100)) / 1000
    }

    /// The largest latency recorded, in milliseconds (0 when none).
    public var maximumMs: Double { Double(histogram.maxRecorded) / 1000 }
}
