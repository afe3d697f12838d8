// `herald bench suite`: every scenario N times, each in a child process, medians against the performance targets (BENCHMARKS.md).
import ArgumentParser
import HeraldCommandLine
import Foundation
import HeraldCore
import HeraldTestSupport

struct SuiteBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suite",
        abstract: "Every scenario N times (each a child process, its JSON line kept), then the medians against the performance targets (BENCHMARKS.md).",
        discussion: """
            Runs `herald bench <scenario> --json` for ingest, latency, storm, restart, replay and peer \
            (or those named with --only), --runs times each, in that order, and prints one table: each \
            target's value in every run, the median, the bound and whether the median meets it. \
            --quick uses small sizes (under a minute on a 2-core machine; the storm's and restart's \
            numbers are then extrapolated or smaller than the issue's 1M users / 10M timers). The \
            issue's sizes took ~15 minutes for 3 runs there with --reuse (the restart's history built \
            once before; building it adds ~4 minutes). Each scenario's progress goes to stderr.
            """)

    @OptionGroup var database: DatabaseOptions
    @Option(help: "Runs of each scenario (the median is judged).") var runs = 3
    @Flag(help: "Small sizes: a smoke run of the whole suite (under a minute on a 2-core machine).") var quick = false
    @Flag(help: "Full sizes: the restart reuses the 1M-user history a previous `bench restart` left (else its first run builds it).") var reuse = false
    @Option(parsing: .upToNextOption, help: "Only these scenarios (ingest latency storm restart replay peer).") var only: [String] = []
    @Flag(help: "Print JSON instead of a table.") var json = false

    func validate() throws {
        if runs < 1 { throw ValidationError("--runs must be at least 1") }
        for s in only where !BenchSuite.scenarios.contains(s) {
            throw ValidationError("unknown scenario “\(s)”: choose from \(BenchSuite.scenarios.joined(separator: ", "))")
        }
    }

    func run() throws {
        let chosen = only.isEmpty ? BenchSuite.scenarios : BenchSuite.scenarios.filter(only.contains)
        var lines: [String: [JSONValue]] = [:]
        var failures: [String] = []
        for scenario in chosen {
            for r in 1...runs {
                Log.info("suite: \(scenario), run \(r) of \(runs)")
                do {
                    let arguments = [scenario, "--json"] + BenchSuite.arguments(scenario, quick: quick, run: r, reuse: reuse)
                        + databaseArguments
                    lines[scenario, default: []].append(try BenchMachine.lastJSONLine(running: BenchMachine.executablePath(), arguments))
                } catch {
                    failures.append("\(scenario) run \(r): \(error)")
                    Log.info("suite: \(scenario) run \(r) failed: \(error)")
                }
            }
        }
        let rows = BenchSuite.evaluate(lines)
        if json {
            print(JSONValue.object([
                "runs": .int(Int64(runs)), "quick": .bool(quick),
                "scenarios": .object(lines.mapValues { .array($0) }),
                "targets": .array(rows.map { row in
                    .object(["scenario": .string(row.target.scenario), "key": .string(row.target.key),
                             "values": .array(row.values.map(JSONValue.double)), "median": row.median.map(JSONValue.double) ?? .null,
                             "bound": .double(row.target.bound), "atLeast": .bool(row.target.atLeast),
                             "met": row.met.map(JSONValue.bool) ?? .null])
                }),
                "references": .array(BenchSuite.evaluateReferences(lines).map { r in
                    .object(["scenario": .string(r.reference.scenario), "key": .string(r.reference.key),
                             "values": .array(r.values.map(JSONValue.double)),
                             "median": BenchSuite.median(r.values).map(JSONValue.double) ?? .null])
                }),
                "failures": .array(failures.map(JSONValue.string)),
            ]).canonicalString)
        } else {
            print("bench suite: \(runs) run(s) of each scenario\(quick ? ", quick sizes" : ", the issue's sizes"); load \(BenchMachine.loadAverage())")
            for row in rows {
                let values = row.values.map { Self.format($0) }.joined(separator: " / ")
                let median = row.median.map { Self.format($0) + row.target.unit } ?? "—"
                let bound = (row.target.atLeast ? "≥ " : "≤ ") + Self.format(row.target.bound) + row.target.unit
                let verdict = row.met.map { $0 ? "met" : "not met" } ?? "no value"
                print("  " + "\(row.target.scenario): \(row.target.label)".padding(toLength: 52, withPad: " ", startingAt: 0)
                      + median.padding(toLength: 14, withPad: " ", startingAt: 0) + bound.padding(toLength: 16, withPad: " ", startingAt: 0)
                      + verdict.padding(toLength: 9, withPad: " ", startingAt: 0) + "(\(values))")
            }
            for (reference, values) in BenchSuite.evaluateReferences(lines) where !values.isEmpty {
                let median = BenchSuite.median(values).map { Self.format($0) + reference.unit } ?? "—"
                print("  " + "\(reference.scenario): \(reference.label)".padding(toLength: 52, withPad: " ", startingAt: 0)
                      + median.padding(toLength: 14, withPad: " ", startingAt: 0) + "(reference)".padding(toLength: 25, withPad: " ", startingAt: 0)
                      + "(\(values.map { Self.format($0) }.joined(separator: " / ")))")
            }
            // What each scenario measured, as it says itself (sizes differ with --quick or a reused history).
            for scenario in chosen {
                if let said = lines[scenario]?.first?["scenario"]?.stringValue { print("  " + said) }
            }
            for f in failures { print("  failed: \(f)") }
        }
        if !failures.isEmpty { throw ExitCode.error }
    }

    /// The database flags, passed on to each scenario as given.
    private var databaseArguments: [String] {
        (database.databaseURL.map { ["--database-url", $0] } ?? []) + ["--private-database", database.privateDatabase]
    }

    /// Numbers as the table shows them: integers with separators, small ones with up to 3 decimals.
    private static func format(_ x: Double) -> String {
        if abs(x) >= 1000 { return Int(x.rounded()).formatted(.number.grouping(.automatic)) }
        if x == x.rounded() { return String(Int(x)) }
        return String(format: abs(x) < 0.1 ? "%.4f" : "%.2f", x)
    }
}
