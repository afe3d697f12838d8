// What `herald bench suite` checks: each scenario's `--json` numbers, medians of N runs, against its targets.
import HeraldCore

/// The performance targets as data (BENCHMARKS.md), and the arithmetic of a suite run: the medians of each scenario's
/// runs and whether each meets its target. Pure (the command runs the scenarios), so it is tested.
public enum BenchSuite {
    /// The scenarios, in the order the suite runs them.
    public static let scenarios = ["ingest", "latency", "storm", "restart", "replay", "peer"]

    /// One number a scenario prints, and the bound it should meet.
    public struct Target: Sendable {
        public let scenario: String
        /// What it is, for the table.
        public let label: String
        /// The key in the scenario's JSON line.
        public let key: String
        /// True: the number should be at least `bound`; false: at most.
        public let atLeast: Bool
        public let bound: Double
        /// Unit or suffix for the table (e.g. "×", "ms").
        public let unit: String
    }

    public static let targets: [Target] = [
        Target(scenario: "ingest", label: "submits/s ÷ plain COPY", key: "ratio", atLeast: true, bound: 0.6, unit: "×"),
        Target(scenario: "ingest", label: "WAL fsyncs per 1,000 events", key: "walSyncsPer1000", atLeast: false, bound: 5, unit: ""),
        Target(scenario: "ingest", label: "round trips per event", key: "roundTripsPerEvent", atLeast: false, bound: 0.01, unit: ""),
        Target(scenario: "ingest", label: "Herald CPU per event (loop)", key: "loopCPUMicrosecondsPerEvent", atLeast: false, bound: 5, unit: " µs"),
        Target(scenario: "latency", label: "ack p99 at half load", key: "ackP99Ms", atLeast: false, bound: 5, unit: " ms"),
        Target(scenario: "latency", label: "submit → consumer p99 at half load", key: "p99Ms", atLeast: false, bound: 10, unit: " ms"),
        // The storm's rate against 1M in 20 s, extrapolated linearly at smaller sizes.
        Target(scenario: "storm", label: "summaries out ÷ (1M in 20 s)", key: "targetRatio", atLeast: true, bound: 1, unit: "×"),
        Target(scenario: "restart", label: "process start → serving", key: "servingSeconds", atLeast: false, bound: 15, unit: " s"),
        Target(scenario: "restart", label: "RSS after (KiB)", key: "rssKiB", atLeast: false, bound: 2 * 1024 * 1024, unit: ""),
        Target(scenario: "replay", label: "events replayed per second", key: "eventsPerSecond", atLeast: true, bound: 200_000, unit: ""),
        Target(scenario: "peer", label: "enqueue, Herald ÷ PgQueuer", key: "enqueueRatio", atLeast: true, bound: 5, unit: "×"),
        Target(scenario: "peer", label: "due → processed p99, PgQueuer ÷ Herald", key: "latencyRatio", atLeast: true, bound: 10, unit: "×"),
    ]

    /// A number printed under the targets with no bound of its own: what a target's value is
    /// measured against on the machine (e.g. what PostgreSQL alone reaches for the same rows).
    public struct Reference: Sendable {
        public let scenario: String
        public let label: String
        public let key: String
        public let unit: String
    }

    public static let references: [Reference] = [
        Reference(scenario: "ingest", label: "submits/s ÷ its rows by PostgreSQL alone", key: "ratioCeiling", unit: "×"),
        Reference(scenario: "ingest", label: "its rows by PostgreSQL alone ÷ plain COPY", key: "ceilingOverPlainCopy", unit: "×"),
        Reference(scenario: "peer", label: "its jobs by PostgreSQL alone ÷ PgQueuer", key: "ceilingEnqueueRatio", unit: "×"),
        Reference(scenario: "latency", label: "ack p99 of its rows by PostgreSQL alone", key: "referenceAckP99Ms", unit: " ms"),
    ]

    /// Each reference of the scenarios that ran, with its runs' values in run order.
    public static func evaluateReferences(_ runs: [String: [JSONValue]]) -> [(reference: Reference, values: [Double])] {
        references.compactMap { r in
            guard let lines = runs[r.scenario] else { return nil }
            return (r, lines.compactMap { $0[r.key]?.doubleValue })
        }
    }

    /// A target with the values of its runs.
    public struct Row: Sendable {
        public let target: Target
        /// One per run that printed the key, in run order.
        public let values: [Double]
        /// Nil when no run printed it.
        public var median: Double? { BenchSuite.median(values) }
        /// Nil when there is nothing to judge.
        public var met: Bool? {
            guard let m = median else { return nil }
            return target.atLeast ? m >= target.bound : m <= target.bound
        }
    }

    /// The rows of the scenarios that ran (`runs`: each scenario's JSON lines, one per run).
    public static func evaluate(_ runs: [String: [JSONValue]]) -> [Row] {
        targets.compactMap { t in
            guard let lines = runs[t.scenario] else { return nil }
            return Row(target: t, values: lines.compactMap { $0[t.key]?.doubleValue })
        }
    }

    /// The median (the mean of the middle two for an even count), or nil for none.
    public static func median(_ xs: [Double]) -> Double? {
        guard !xs.isEmpty else { return nil }
        let s = xs.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    /// Each scenario's arguments for its `run`-th run (from 1): the targets' sizes, or `quick` ones
    /// for a smoke run of a few minutes. The full restart builds its 1M-user, 10M-timer history
    /// once and reuses it (`--reuse`) after; the full storm keeps its history as a template.
    /// `reuse`: the full restart reuses a history a previous run left from its first run on.
    public static func arguments(_ scenario: String, quick: Bool, run: Int = 1, reuse: Bool = false) -> [String] {
        if scenario == "restart", !quick, run > 1 || reuse { return ["--runs", "1", "--reuse"] }
        switch (scenario, quick) {
        case ("ingest", false): return ["--events", "100000"]
        case ("ingest", true): return ["--events", "20000"]
        case ("latency", false): return ["--events", "100000"]
        case ("latency", true): return ["--events", "20000"]
        case ("storm", false): return ["--users", "1000000", "--reuse"]
        case ("storm", true): return ["--users", "20000"]
        case ("restart", false): return ["--runs", "1"]
        case ("restart", true): return ["--users", "10000", "--timers", "100000", "--runs", "1", "--scratch", "herald_bench_restart_quick"]
        case ("replay", false): return ["--events", "1000000", "--runs", "1"]
        case ("replay", true): return ["--events", "100000", "--runs", "1"]
        case ("peer", false): return []
        case ("peer", true): return ["--jobs", "5000", "--lead-seconds", "5"]
        default: return []
        }
    }
}
