// `herald-bench` (also run as `herald bench`): load generators that print their numbers beside a
// baseline measured in the same run. A separate executable, so the shipped `herald` does not link
// the test support these need.
import ArgumentParser
import HeraldCommandLine

@main
struct HeraldBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald-bench",
        abstract: "Benchmarks, each beside its baseline in the same run.",
        subcommands: [StoreBench.self, IngestBench.self, LatencyBench.self, StormBench.self, RestartBench.self,
                      ReplayBench.self, PeerBench.self, SuiteBench.self, ClientBench.self, MetricsCostBench.self, ConsumerBench.self, BridgeBench.self, ClusterBench.self])

    static func main() { runCommandLine(HeraldBench.self) }
}
