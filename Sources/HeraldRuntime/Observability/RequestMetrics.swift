// Dispatched requests counted on the loop in plain integers: replies by op, errors by op and code, durations from dispatch to reply.
import Glibc
import HeraldCore

/// What the service's replies count (`Reply` reports each one here). Plain integers on the loop
/// thread: `/metrics` reads them when scraped (`ServiceObservability`). Durations are timed only
/// while `timing` is on (`--http`), so a service without metrics reads no clock for them; they go
/// into a histogram of plain counts per op, not into the Prometheus registry's (a lock and
/// `Duration` arithmetic a sample: about twice the cost, `herald bench metrics-cost`). The
/// counts skip run-time exclusivity checks: only this class touches them, on the loop thread.
final class RequestMetrics {
    /// Replies sent, by op (index: `Op.rawValue`), errors included.
    @exclusivity(unchecked) private(set) var replies = [Int](repeating: 0, count: Op.allCases.count)
    /// Error replies by op and code.
    private(set) var errors: [ErrorKey: Int] = [:]
    /// Whether replies are timed (`--http`).
    var timing = false
    /// Per op, the replies whose duration is at most each bound of `bucketBounds` (not
    /// cumulative: a reply counts in its bucket only; the last one is +Inf). Index: op × (bounds + 1) + bucket.
    @exclusivity(unchecked) private(set) var durationCounts: [Int]
    /// Per op, the durations' sum in nanoseconds.
    @exclusivity(unchecked) private(set) var durationSums: [Int64]

    /// Request durations' bucket bounds, in seconds: from a fast ack (~1 ms) to a slow store.
    static let bucketBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// `bucketBounds` in nanoseconds, per instance (a static would be a lazy global: a check per read).
    private let boundsNanoseconds: [Int64] = RequestMetrics.bucketBounds.map { Int64($0 * 1e9) }
    static var buckets: Int { bucketBounds.count + 1 }

    init() {
        durationCounts = [Int](repeating: 0, count: Op.allCases.count * Self.buckets)
        durationSums = [Int64](repeating: 0, count: Op.allCases.count)
    }

    struct ErrorKey: Hashable {
        var op: Op
        var code: String
    }

    /// A dispatch's start: the monotonic clock while durations are kept, else 0 (no clock read).
    @inline(__always) func start() -> Int64 { timing ? Self.nanoseconds() : 0 }

    static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// A success reply (an ack written in place).
    @inline(__always) func succeeded(_ op: Op, startedAt: Int64) {
        let index = Int(op.rawValue)
        replies[index] &+= 1
        guard startedAt != 0 else { return }
        let nanoseconds = Self.nanoseconds() - startedAt
        durationSums[index] &+= nanoseconds
        var bucket = 0
        boundsNanoseconds.withUnsafeBufferPointer { bounds in
            while bucket < bounds.count && nanoseconds > bounds[bucket] { bucket += 1 }
        }
        durationCounts[index * Self.buckets + bucket] &+= 1
    }

    /// A reply as bytes: an error reply's code is read from its first bytes. Every error line is
    /// canonical JSON (`WireReply.error`), keys sorted, so it starts `{"error":{"code":"`.
    func replied(_ op: Op, startedAt: Int64, _ bytes: [UInt8]) {
        succeeded(op, startedAt: startedAt)
        guard let code = Self.errorCode(bytes) else { return }
        errors[ErrorKey(op: op, code: code), default: 0] += 1
    }

    static let errorPrefix = Array(#"{"error":{"code":""#.utf8)

    /// The code of an error line, nil for any other line.
    static func errorCode(_ bytes: [UInt8]) -> String? {
        guard bytes.count > errorPrefix.count, bytes.starts(with: errorPrefix) else { return nil }
        let rest = bytes[errorPrefix.count...]
        guard let end = rest.firstIndex(of: UInt8(ascii: "\"")) else { return nil }
        return String(decoding: rest[..<end], as: UTF8.self)
    }

    /// `herald_request_duration_seconds` in Prometheus' text format: one histogram per op that
    /// has replies timed.
    func durationExposition() -> String { Self.durationExposition(counts: durationCounts, sums: durationSums) }

    /// The same from counts and sums laid out as `durationCounts` and `durationSums` (a cluster
    /// member's, summed over its partitions' services).
    static func durationExposition(counts durationCounts: [Int], sums durationSums: [Int64]) -> String {
        var out = "# HELP herald_request_duration_seconds Seconds from reading a request to writing its reply, by op: for submits, the ack after COMMIT.\n"
            + "# TYPE herald_request_duration_seconds histogram\n"
        var any = false
        for op in Op.allCases {
            let base = Int(op.rawValue) * Self.buckets
            let total = durationCounts[base..<base + Self.buckets].reduce(0, +)
            guard total > 0 else { continue }
            any = true
            var cumulative = 0
            for (i, bound) in Self.bucketBounds.enumerated() {
                cumulative += durationCounts[base + i]
                out += "herald_request_duration_seconds_bucket{op=\"\(op.name)\",le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "herald_request_duration_seconds_bucket{op=\"\(op.name)\",le=\"+Inf\"} \(total)\n"
            out += "herald_request_duration_seconds_sum{op=\"\(op.name)\"} \(Double(durationSums[Int(op.rawValue)]) / 1e9)\n"
            out += "herald_request_duration_seconds_count{op=\"\(op.name)\"} \(total)\n"
        }
        return any ? out : ""
    }
}
