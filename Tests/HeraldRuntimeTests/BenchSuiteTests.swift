// `herald bench suite`'s arithmetic: medians of each scenario's runs judged against their targets.
import HeraldCore
import HeraldTestSupport
import Testing

@Suite struct BenchSuiteTests {
    @Test func theMedianOfOddAndEvenCountsAndOfNone() {
        #expect(BenchSuite.median([3, 1, 2]) == 2)
        #expect(BenchSuite.median([4, 1, 3, 2]) == 2.5)
        #expect(BenchSuite.median([7]) == 7)
        #expect(BenchSuite.median([]) == nil)
    }

    /// Only the scenarios that ran get rows; each row keeps its runs' values in order, judges the
    /// median (a bound reached exactly is met), and says nothing when no run printed its key.
    @Test func eachTargetIsJudgedByTheMedianOfItsRuns() throws {
        let ingest = try [#"{"ratio":0.25,"walSyncsPer1000":2.4,"roundTripsPerEvent":0.0053,"loopCPUMicrosecondsPerEvent":8.1}"#,
                          #"{"ratio":0.61,"walSyncsPer1000":5,"roundTripsPerEvent":0.02,"loopCPUMicrosecondsPerEvent":4}"#,
                          #"{"ratio":0.6,"walSyncsPer1000":6,"roundTripsPerEvent":0.0051}"#].map { try JSONValue.parse(Array($0.utf8)) }
        let peer = try [#"{"enqueueRatio":2.5,"latencyRatio":10.65}"#, #"{"enqueueRatio":2.4,"latencyRatio":9.96}"#]
            .map { try JSONValue.parse(Array($0.utf8)) }
        let rows = BenchSuite.evaluate(["ingest": ingest, "peer": peer])
        #expect(Set(rows.map(\.target.scenario)) == ["ingest", "peer"])
        func row(_ key: String) -> BenchSuite.Row? { rows.first { $0.target.key == key } }

        #expect(row("ratio")?.values == [0.25, 0.61, 0.6])
        #expect(row("ratio")?.median == 0.6)
        #expect(row("ratio")?.met == true, "0.6 reaches ≥ 0.6")
        #expect(row("walSyncsPer1000")?.median == 5)
        #expect(row("walSyncsPer1000")?.met == true, "5 reaches ≤ 5")
        #expect(row("roundTripsPerEvent")?.met == true)
        #expect(row("loopCPUMicrosecondsPerEvent")?.values == [8.1, 4], "a run without the key adds no value")
        #expect(row("loopCPUMicrosecondsPerEvent")?.median == 6.05)
        #expect(row("loopCPUMicrosecondsPerEvent")?.met == false)
        #expect(row("enqueueRatio")?.met == false)
        #expect(row("latencyRatio")?.median == (10.65 + 9.96) / 2)
        #expect(row("latencyRatio")?.met == true)

        let none = BenchSuite.evaluate(["replay": [try JSONValue.parse(Array(#"{"differences":0}"#.utf8))]])
        #expect(none.count == 1 && none[0].values.isEmpty && none[0].median == nil && none[0].met == nil)
    }

    /// Every target names a scenario the suite runs; the full restart builds its history once.
    @Test func targetsAndArgumentsFitTheScenarios() {
        for t in BenchSuite.targets { #expect(BenchSuite.scenarios.contains(t.scenario), "\(t.key)") }
        for s in BenchSuite.scenarios { #expect(BenchSuite.targets.contains { $0.scenario == s }, "\(s) has a target") }
        #expect(!BenchSuite.arguments("restart", quick: false, run: 1).contains("--reuse"))
        #expect(BenchSuite.arguments("restart", quick: false, run: 2).contains("--reuse"))
        #expect(BenchSuite.arguments("restart", quick: false, run: 1, reuse: true).contains("--reuse"))
        #expect(!BenchSuite.arguments("restart", quick: true, run: 2).contains("--reuse"))
        #expect(BenchSuite.arguments("storm", quick: false) == ["--users", "1000000", "--reuse"])
    }

    /// References carry no bound: each keeps its runs' values, and only the scenarios that ran have one.
    @Test func referencesKeepTheirRunsValuesWithoutAVerdict() throws {
        let ingest = try [#"{"ratio":0.29,"ratioCeiling":0.67,"ceilingOverPlainCopy":0.45}"#, #"{"ratio":0.31,"ratioCeiling":0.6}"#]
            .map { try JSONValue.parse(Array($0.utf8)) }
        let refs = BenchSuite.evaluateReferences(["ingest": ingest])
        #expect(refs.map(\.reference.key) == ["ratioCeiling", "ceilingOverPlainCopy"])
        #expect(refs[0].values == [0.67, 0.6])
        #expect(refs[1].values == [0.45], "a run without the key adds no value")
        #expect(BenchSuite.evaluateReferences(["replay": []]).isEmpty, "a scenario without references has none")
        let peer = BenchSuite.evaluateReferences(["peer": [try JSONValue.parse(Array(#"{"ceilingEnqueueRatio":3.8}"#.utf8))]])
        #expect(peer.map(\.reference.key) == ["ceilingEnqueueRatio"] && peer[0].values == [3.8])
        let latency = BenchSuite.evaluateReferences(["latency": [try JSONValue.parse(Array(#"{"ackP99Ms":7.1,"referenceAckP99Ms":6.4}"#.utf8))]])
        #expect(latency.map(\.reference.key) == ["referenceAckP99Ms"] && latency[0].values == [6.4])
    }
}
