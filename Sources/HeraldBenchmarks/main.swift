// Micro-benchmarks of the pure core, each printed side by side with its baseline.
//
// Usage: swift run -c release HeraldBenchmarks <benchmark> [options]
//   wheel [--timers 1000000,10000000] [--burst 1000000] [--seed 1] [--repeat 1] [--wall]
//         timing wheel vs indexed heap
//   engine [--users N] [--decisions N] [--immediate-only] [--storm USERS]
//         decisions per second and bytes per idle user
//   snapshot [--users N] [--repeat N]
//         a snapshot capture's CPU per user, beside reading it back and copying its bytes
//   seal [--n N]
//         sealing a submit's and a delivery's content, beside the cipher alone

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "wheel":
    runWheelBenchmark(arguments: Array(arguments.dropFirst()))
case "engine":
    runEngineBenchmark(arguments: Array(arguments.dropFirst()))
case "snapshot":
    runSnapshotBenchmark(arguments: Array(arguments.dropFirst()))
case "seal":
    runSealBenchmark(arguments: Array(arguments.dropFirst()))
default:
    print("""
        usage: HeraldBenchmarks <benchmark> [options]
          wheel [--timers 1000000,10000000] [--burst 1000000] [--seed 1] [--repeat 1] [--wall]
                timing wheel vs indexed binary heap: schedule, cancel, bulk load,
                fire-all over a week, same-tick burst drain, bytes per live timer
          engine [--users N] [--decisions N] [--immediate-only] [--storm USERS]
                decisions per second on one core, bytes per idle user;
                --storm: only the 08:00 storm's summaries, in the engine alone
          snapshot [--users N] [--repeat N]
                a snapshot capture's CPU per user (encoding every user's state), beside
                reading the records back and copying the encoded bytes
          seal [--n N]
                sealing a submit's and a delivery's content (ContentSeal) per row, beside
                the cipher alone, opening, and parsing and encoding the body
        """)
}
